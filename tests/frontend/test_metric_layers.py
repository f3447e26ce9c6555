"""The metric layers in compiled programs: auc accumulating its counts over calls (program
state: saved with the program and taken back by rewind), and accuracy's correct/total
vars. Plus their trace-time errors."""
import numpy as np
import pytest

import fluid
from fluid_interactive.errors import DTypeError, OpArgumentError
from fluid_interactive.frontend.tracing import current_trace
from fluid_interactive.ir.records import VarDesc

L = fluid.layers


def auc_reference(prob, labels, nt=4095):
    """Paddle's bucketed ROC area of every prediction so far."""
    bins = (prob * nt).astype(int)
    pos = np.bincount(bins[labels == 1], minlength=nt + 1)[::-1]
    neg = np.bincount(bins[labels == 0], minlength=nt + 1)[::-1]
    tp = np.cumsum(pos)
    return (neg * (2 * tp - pos)).sum() / 2 / (pos.sum() * neg.sum())


class Scorer(fluid.Program):
    @fluid.network("prob", "label")
    def evaluate(self, prob, label):
        prob = L.data("prob", shape=[2], dtype="float32")
        label = L.data("label", shape=[1], dtype="int64")
        auc, batch_auc, stats = L.auc(prob, label, slide_steps=1)
        return auc, batch_auc


def batch(rng, n=50):
    p = rng.random(n).astype("float32")
    return np.stack([1 - p, p], 1), (rng.random(n) < p).astype("int64").reshape(n, 1)


def test_auc_accumulates_and_is_checkpointed_and_rewound(tmp_path):
    rng = np.random.default_rng(0)
    prog = Scorer().Compile(seed=0)
    prog.keep_history(True)
    batches = [batch(rng) for _ in range(4)]
    results = [prog.evaluate(*b) for b in batches[:2]]
    for k, (auc, batch_auc) in enumerate(results):
        seen = batches[:k + 1]
        probs = np.concatenate([b[0][:, 1] for b in seen])
        labels = np.concatenate([b[1][:, 0] for b in seen])
        assert isinstance(auc, float)
        np.testing.assert_allclose(auc, auc_reference(probs, labels), rtol=1e-12)
        np.testing.assert_allclose(batch_auc, auc_reference(batches[k][0][:, 1],
                                                            batches[k][1][:, 0]), rtol=1e-12)
    prog.save(str(tmp_path / "scorer"))
    after = prog.evaluate(*batches[2])
    loaded = fluid.load(str(tmp_path / "scorer"))
    assert loaded.evaluate(*batches[2]) == after            # the counts came back too
    prog.evaluate(*batches[3])
    prog.rewind(2)                                           # back to two batches seen
    assert prog.evaluate(*batches[2]) == after


def unwritten(name):
    """A declared var no op writes yet, as fluid.layers.create_tensor(dtype='int32')."""
    trace = current_trace()
    trace.declare(VarDesc(name, (1,), "int32"))
    return fluid.Variable(trace, name)


def test_accuracy_writes_correct_and_total():
    class Acc(fluid.Program):
        @fluid.network("scores", "label")
        def f(self, scores, label):
            scores = L.data("scores", shape=[3], dtype="float32")
            label = L.data("label", shape=[1], dtype="int64")
            correct, total = unwritten("correct"), unwritten("total")
            acc = L.accuracy(scores, label, k=2, correct=correct, total=total)
            return acc, correct, total
    scores = np.array([[0.1, 0.5, 0.4], [0.9, 0.05, 0.05], [0.2, 0.3, 0.5]], "float32")
    acc, correct, total = Acc().Compile().f(scores, np.array([[2], [2], [1]]))
    np.testing.assert_allclose(acc, 2 / 3, rtol=1e-6)
    assert (correct, total) == (2, 3)          # one-element results come back as numbers


@pytest.mark.parametrize("build,error,match", [
    (lambda p, i: L.auc(L.cast(i, "int32"), i), DTypeError, "input .* must be float"),
    (lambda p, i: L.auc(p, L.cast(i, "float32")), DTypeError, "label .* must be integer"),
    (lambda p, i: L.auc(p, i, curve="AP"), OpArgumentError, "curve must be one of"),
    (lambda p, i: L.auc(p, i, slide_steps=-1), OpArgumentError, "slide_steps must be an int"),
    (lambda p, i: L.accuracy(p, i, correct=L.fill_constant([1], "int32", 0)), OpArgumentError,
     "a temporary is written once"),
])
def test_metric_layer_errors(build, error, match):
    class One(fluid.Program):
        @fluid.network("p", "i")
        def f(self, p, i):
            return build(L.data("p", shape=[2], dtype="float32"),
                         L.data("i", shape=[1], dtype="int64"))
    with pytest.raises(error, match=match):
        One().Compile()
