"""``prog.summary()`` counts a model's layers and parameters; ``prog.watch(...)`` keeps the
values of named vars after each call, and watching nothing leaves a method's code as it
was."""
import threading

import numpy as np
import pytest

import fluid
from tests.render.models import MLP3


class Frozen(fluid.Program):
    """Conv + batch norm under nested scopes, one frozen parameter, no optimizer."""

    @fluid.network("image")
    def infer(self, image):
        image = fluid.layers.data(name="image", shape=[1, 8, 8], dtype="float32")
        with fluid.var_scope("cnn"):
            h = fluid.layers.conv2d(image, num_filters=8, filter_size=3, padding=1)
            h = fluid.layers.batch_norm(h, act="relu")
            with fluid.var_scope("head"):
                return fluid.layers.fc(input=h, size=10,
                                       param_attr=fluid.ParamAttr(trainable=False))


@pytest.fixture
def mlp():
    return MLP3().Compile(seed=0)


def batch(n=16, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, 64)).astype("float32"),
            rng.integers(0, 10, (n, 1)).astype("int64"))


# --- summary -------------------------------------------------------------------------------

def test_summary_counts_layers_and_parameters(mlp):
    s = mlp.summary()
    assert [r.layer for r in s.rows][:3] == ["mlp/fc_0", "mlp/fc_1", "mlp/fc_2"]
    assert [r.total for r in s.rows][:3] == [64 * 128 + 128, 128 * 64 + 64, 64 * 10 + 10]
    assert [r.output for r in s.rows][:3] == ["[?, 128]", "[?, 64]", "[?, 10]"]
    assert s.total == s.trainable == sum(p.size for p in mlp.parameters().values())
    assert s.non_trainable == 0
    # Adam keeps two moments per parameter and two scalars per parameter
    assert s.optimizer_state == 2 * s.total + 2 * 6
    assert s.inputs == [("x", "[?, 64]"), ("y", "[?, 1]")]
    text = repr(s)
    assert text.splitlines()[0] == "MLP3: train_step, infer"
    assert "mlp/" in text and "17,226" in text and "trainable: 17,226" in text
    assert "optimizer state (not part of the model): 34,464 values" in text
    page = s._repr_html_()
    assert page.startswith('<table class="fluid-table">') and "font-weight:bold" in page


def test_summary_of_scopes_frozen_parameters_and_running_statistics():
    prog = Frozen().Compile(seed=0)
    s = prog.summary()
    rows = {r.layer: r for r in s.rows}
    assert rows["cnn/conv2d_0"].trainable == 8 * 1 * 3 * 3 + 8
    bn = rows["cnn/batch_norm_0"]
    assert (bn.trainable, bn.non_trainable) == (16, 16)      # scale, bias; mean, variance
    fc = rows["cnn/head/fc_0"]
    assert fc.trainable == 10 and fc.non_trainable == 8 * 8 * 8 * 10   # frozen weight
    assert s.total == sum(v.size for v in map(prog.get_var, prog.var_names()))
    text = repr(s)
    assert "cnn/" in text and "\n  head/" in text and "\n    fc_0" in text
    assert s.optimizer_state == 0 and "optimizer state" not in text


class StepLSTMish(fluid.Program):
    """A StaticRNN in a scope, its step a hand-written cell: fc, then the update."""

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[-1, -1, 2], dtype="float32",
                              append_batch_size=False)
        with fluid.var_scope("rnn"):
            rnn = fluid.layers.StaticRNN()
            with rnn.step():
                x_t = rnn.step_input(x)
                h_prev = rnn.memory(shape=[-1, 4], batch_ref=x_t)
                gates = fluid.layers.fc(input=[x_t, h_prev], size=8)
                a, b = fluid.layers.split(gates, 2, dim=1)
                h = fluid.layers.sigmoid(a) * fluid.layers.tanh(b)
                rnn.update_memory(h_prev, h)
                rnn.step_output(h)
            return fluid.layers.fc(input=rnn()[-1], size=1)


def _lines(summary):
    """The table's rows: (layer column as printed, type, parameters)."""
    text = repr(summary).splitlines()
    widths = [len(c) for c in text[2].split("  ")]
    out = []
    for line in text[3:text.index(next(t for t in text if t.startswith("===")))]:
        name, rest = line[:widths[0]].rstrip(), line[widths[0]:].split()
        out.append((name, rest[0], rest[-1]))
    return out


def test_summary_nests_a_loops_body_under_the_loop():
    """The StaticRNN is a row (its op, its body's parameters) with the step's layers
    indented under it, not listed flat beside the method's own."""
    s = StepLSTMish().Compile(seed=0).summary()
    lines = _lines(s)
    body = (2 + 4) * 8 + 8
    at = [n for n, _, _ in lines].index("  static_rnn_0")
    assert lines[at] == ("  static_rnn_0", "recurrent", f"{body}")
    assert lines[at + 1:at + 6] == [("    fc_0", "fc", f"{body}"),
                                    ("    split_0", "split", "0"),
                                    ("    sigmoid_0", "sigmoid", "0"),
                                    ("    tanh_0", "tanh", "0"),
                                    ("    elementwise_mul_0", "elementwise_mul", "0")]
    assert ("  fc_1", "fc", "5") in lines[at + 6:]            # after the loop, one level up
    assert lines[[n for n, _, _ in lines].index("rnn/")] == ("rnn/", "scope", f"{body + 5}")
    rows = {r.layer: r for r in s.rows}
    assert rows["rnn/fc_0"].loop == "rnn/static_rnn_0" and rows["rnn/fc_1"].loop == ""
    assert s.trainable == body + 5


def test_summary_nests_loops_in_loops():
    from tests.render.loops import NestedLoops
    lines = _lines(NestedLoops().Compile(seed=0).summary())
    names = [n for n, _, _ in lines]
    outer, inner = names.index("while_0"), names.index("  while_1")
    assert lines[outer] == ("while_0", "while", "9") and lines[inner][2] == "9"
    assert outer < inner and names[inner + 1] == "    matmul_0"
    assert names.index("mean_0") > inner


def test_summary_of_one_method_and_a_shared_layer(mlp):
    assert [r.layer for r in mlp.summary("infer").rows] == ["mlp/fc_0", "mlp/fc_1",
                                                          "mlp/fc_2"]
    with pytest.raises(KeyError, match="no method block named 'nope'"):
        mlp.summary("nope")


# --- watching values -------------------------------------------------------------------------

def test_watch_keeps_activations_and_gradients_of_a_scope(mlp):
    x, y = batch()
    kept = mlp.watch("mlp")
    assert set(kept) == {"train_step", "infer"}
    assert "mlp/fc_0.tmp_2" in kept["train_step"] and "mlp/fc_0.w_0@GRAD" in kept["train_step"]
    assert not any("@GRAD" in n for n in kept["infer"])
    before = mlp.parameters()
    loss = mlp.train_step(x, y)
    w = mlp.watched
    assert w.method == "train_step" and w.call == 1 and isinstance(loss, float)
    # the kept values are the step's: recompute the first layer by hand
    h = np.maximum(x @ before["mlp/fc_0.w_0"] + before["mlp/fc_0.b_0"], 0)
    np.testing.assert_allclose(w["mlp/fc_0.tmp_2"], h, rtol=1e-5, atol=1e-6)
    # and the gradient is the one the optimizer used: dW = x^T dH1 for fc_0
    np.testing.assert_allclose(w["mlp/fc_0.w_0@GRAD"], x.T @ w["mlp/fc_0.tmp_0@GRAD"],
                               rtol=1e-4, atol=1e-6)
    assert mlp.infer(x).shape == (16, 10)
    assert mlp.watched.method == "infer" and mlp.train_step.watched.call == 1
    with pytest.raises(KeyError, match="was not watched in the last call of infer"):
        mlp.watched["mlp/fc_0.w_0@GRAD"]


def test_a_watched_step_trains_exactly_like_an_unwatched_one(mlp):
    other = MLP3().Compile(seed=0)
    mlp.watch("*@GRAD", "mlp/fc_1")
    for step in range(3):
        x, y = batch(seed=step)
        assert mlp.train_step(x, y) == other.train_step(x, y)
        assert mlp.train_step.watched.call == step + 1
    for name, value in other.parameters().items():
        np.testing.assert_array_equal(mlp.parameters()[name], value)


def test_watching_nothing_runs_the_plain_entry_and_unwatch_restores_it(mlp):
    plain = type(mlp.train_step).__call__
    mlp.watch("mlp/fc_0", methods="train_step")
    assert type(mlp.train_step).__call__ is not plain
    assert type(mlp.infer).__call__ is not plain       # each method has its own entry
    infer_plain = type(mlp.infer).__call__
    assert mlp.watch("mlp/fc_1", methods="train_step")["train_step"]
    assert type(mlp.infer).__call__ is infer_plain
    mlp.unwatch()
    assert type(mlp.train_step).__call__ is plain
    x, y = batch()
    mlp.train_step(x, y)
    assert len(mlp.watched) == 0 and mlp.watched.call == 0


def test_keyword_and_converted_arguments_go_through_the_watching_call(mlp):
    x, y = batch()
    mlp.watch("mlp/fc_2")
    mlp.train_step(x=x.tolist(), y=y)          # the general path of the entry
    assert mlp.watched["mlp/fc_2.tmp_1"].shape == (16, 10)


def test_a_failed_call_keeps_nothing_and_changes_nothing(mlp):
    x, y = batch()
    mlp.watch("mlp")
    mlp.train_step(x, y)
    first = mlp.watched
    before = mlp.parameters()
    with pytest.raises(fluid.FluidError):
        mlp.train_step(x, np.full_like(y, 99))         # a label out of range
    assert mlp.watched is first
    for name, value in before.items():
        np.testing.assert_array_equal(mlp.parameters()[name], value)


def test_watch_names_must_name_something(mlp):
    with pytest.raises(KeyError, match="'mlpp' names no var of any method"):
        mlp.watch("mlpp")
    with pytest.raises(KeyError, match="no method 'nope'"):
        mlp.watch("mlp", methods="nope")
    assert not mlp.watch()                     # nothing named, nothing watched


def test_concurrent_watched_calls_each_keep_a_whole_call(mlp):
    mlp.watch("mlp", methods="infer")
    xs = [batch(seed=k)[0] for k in range(4)]
    errors = []

    def work(x):
        try:
            for _ in range(20):
                mlp.infer(x)
                kept = mlp.infer.watched
                assert kept["mlp/fc_0.tmp_2"].shape == (16, 128)
        except Exception as e:        # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(x,)) for x in xs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and mlp.infer.watched.call == 80


def test_watch_names_are_reserved():
    with pytest.raises(fluid.ProgramDefinitionError, match="'watch' is part of its own API"):
        class Clash(fluid.Program):
            @fluid.network()
            def watch(self):
                pass
