"""The classification layers end to end: training small classifiers with
softmax_with_cross_entropy / cross_entropy / sigmoid_cross_entropy_with_logits, the
metric layers, and the trace-time errors for bad labels."""
import numpy as np
import pytest

import fluid


def three_blobs(n=90, seed=0):
    """A separable 3-class problem in 4-D: three well-apart Gaussian blobs."""
    rng = np.random.default_rng(seed)
    centers = np.array([[3, 0, 0, 1], [0, 3, 0, -1], [0, 0, 3, 0]], np.float32)
    y = rng.permutation(np.arange(n) % 3).astype(np.int64).reshape(n, 1)
    x = centers[y[:, 0]] + rng.normal(0, 0.7, (n, 4)).astype(np.float32)
    return x.astype(np.float32), y


class SoftmaxClassifier(fluid.Program):
    learning_rate = 0.5

    def model(self, x):
        with fluid.var_scope("model"):
            return fluid.layers.fc(input=x, size=3)

    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        logits = self.model(x)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.SGD(learning_rate=self.learning_rate).minimize(loss)
        return loss, fluid.layers.accuracy(fluid.layers.softmax(logits), y)

    @fluid.network("x")
    def predict(self, x):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        return fluid.layers.argmax(self.model(x), axis=1)


def train_for(prog, x, y, steps):
    history = [prog.train(x, y) for _ in range(steps)]
    return [h[0] for h in history], [h[1] for h in history]


def test_softmax_with_cross_entropy_trains_a_classifier():
    x, y = three_blobs()
    prog = SoftmaxClassifier().Compile(seed=0)
    losses, accs = train_for(prog, x, y, 40)
    assert all(isinstance(v, float) for v in losses + accs)
    assert losses[-1] < 0.5 * losses[0]
    assert losses[-1] < 0.2
    assert accs[-1] >= 0.95 > 1 / 3 + 0.3
    # predict shares the trained parameters; argmax gives int64 class indices
    pred = prog.predict(x)
    assert pred.dtype == np.int64 and pred.shape == (len(x),)
    assert (pred == y[:, 0]).mean() >= 0.95


def test_batch_of_one_and_new_batch_sizes():
    x, y = three_blobs(30, seed=1)
    prog = SoftmaxClassifier(learning_rate=0.2).Compile(seed=1)
    for i in range(30):
        loss, acc = prog.train(x[i:i + 1], y[i:i + 1])
        assert np.isfinite(loss) and acc in (0.0, 1.0)
    loss, acc = prog.train(x, y)
    assert acc > 0.8


class ProbabilityClassifier(fluid.Program):
    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        hidden = fluid.layers.fc(input=x, size=8, act="tanh")
        prob = fluid.layers.fc(input=hidden, size=3, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(input=prob, label=y))
        fluid.optimizer.SGD(learning_rate=0.5).minimize(loss)
        return loss, fluid.layers.accuracy(input=prob, label=y, k=1), \
            fluid.layers.accuracy(input=prob, label=y, k=3)


def test_cross_entropy_of_softmax_trains_a_classifier():
    x, y = three_blobs(seed=2)
    prog = ProbabilityClassifier().Compile(seed=0)
    history = [prog.train(x, y) for _ in range(60)]
    assert history[-1][0] < 0.5 * history[0][0]
    assert history[-1][1] >= 0.95
    assert all(h[2] == 1.0 for h in history)     # top-3 of 3 classes: always right


class SoftLabels(fluid.Program):
    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        y = fluid.layers.data(name="y", shape=[3], dtype="float32")
        logits = fluid.layers.fc(input=x, size=3)
        loss, prob = fluid.layers.softmax_with_cross_entropy(logits, y, soft_label=True,
                                                            return_softmax=True)
        ce = fluid.layers.cross_entropy(prob, y, soft_label=True)
        fluid.optimizer.SGD(learning_rate=0.5).minimize(fluid.layers.mean(loss))
        return fluid.layers.mean(loss), fluid.layers.mean(ce), prob


def test_soft_labels_and_return_softmax():
    x, y = three_blobs(seed=3)
    onehot = np.eye(3, dtype=np.float32)[y[:, 0]] * 0.9 + 0.1 / 3
    prog = SoftLabels().Compile(seed=0)
    first = prog.train(x, onehot)
    for _ in range(30):
        last = prog.train(x, onehot)
    loss, ce, prob = last
    assert loss < first[0]
    assert ce == pytest.approx(loss, rel=1e-4)    # both losses agree on the same softmax
    np.testing.assert_allclose(prob.sum(axis=1), 1.0, rtol=1e-5)
    assert (prob.argmax(axis=1) == y[:, 0]).mean() >= 0.95


class IgnoredLabels(fluid.Program):
    @fluid.network("x", "y")
    def losses(self, x, y):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        a = fluid.layers.softmax_with_cross_entropy(x, y, ignore_index=-1)
        b = fluid.layers.cross_entropy(fluid.layers.softmax(x), y, ignore_index=-1)
        return a, b


def test_ignore_index_in_layers():
    prog = IgnoredLabels().Compile(seed=0)
    x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [3.0, 1.0, 0.0]], np.float32)
    a, b = prog.losses(x, np.array([[2], [-1], [0]]))
    assert a.shape == (3, 1) and a[1, 0] == 0.0 and b[1, 0] == 0.0
    np.testing.assert_allclose(a, b, rtol=1e-5)
    z = x - x.max(axis=1, keepdims=True)
    expected = -(z - np.log(np.exp(z).sum(axis=1, keepdims=True)))[[0, 2], [2, 0]]
    np.testing.assert_allclose(a[[0, 2], 0], expected, rtol=1e-5)


class Binary(fluid.Program):
    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        y = fluid.layers.data(name="y", shape=[3], dtype="float32")
        logits = fluid.layers.fc(input=x, size=3)
        loss = fluid.layers.mean(fluid.layers.sigmoid_cross_entropy_with_logits(logits, y))
        fluid.optimizer.SGD(learning_rate=1.0).minimize(loss)
        return loss


def test_sigmoid_cross_entropy_trains_multilabel_targets():
    x, y = three_blobs(seed=4)
    targets = np.eye(3, dtype=np.float32)[y[:, 0]]
    prog = Binary().Compile(seed=0)
    losses = [prog.train(x, targets) for _ in range(40)]
    assert losses[-1] < 0.4 * losses[0]


# --- trace-time errors ---------------------------------------------------------------------------

def compile_with(body, label_shape=(1,), label_dtype="int64", in_shape=(3,)):
    class P(fluid.Program):
        @fluid.network("x", "y")
        def step(self, x, y):
            x = fluid.layers.data(name="x", shape=list(in_shape), dtype="float32")
            y = fluid.layers.data(name="y", shape=list(label_shape), dtype=label_dtype)
            return body(x, y)
    return P().Compile()


L = fluid.layers


@pytest.mark.parametrize("layer", [
    lambda x, y: L.cross_entropy(L.softmax(x), y),
    lambda x, y: L.softmax_with_cross_entropy(x, y),
])
def test_hard_label_must_be_an_integer(layer):
    with pytest.raises(fluid.DTypeError, match=r"dtype='int64'") as e:
        compile_with(layer, label_dtype="float32")
    assert "test_loss_layers.py:" in str(e.value) and "soft_label=True" in str(e.value)


@pytest.mark.parametrize("layer", [
    lambda x, y: L.cross_entropy(L.softmax(x), y),
    lambda x, y: L.softmax_with_cross_entropy(x, y),
    lambda x, y: L.accuracy(x, y),
])
def test_label_of_the_wrong_rank(layer):
    with pytest.raises(fluid.ShapeError, match=r"shape=\[1\]") as e:
        compile_with(layer, label_shape=())      # [N] instead of [N, 1]
    assert "[?, 1]" in str(e.value) and "test_loss_layers.py:" in str(e.value)
    with pytest.raises(fluid.ShapeError, match=r"\[\?, 3, 1\]"):
        compile_with(lambda x, y: layer(x, y), label_shape=(3, 1))


@pytest.mark.parametrize("layer", [
    lambda x, y: L.cross_entropy(L.softmax(x), y, soft_label=True),
    lambda x, y: L.softmax_with_cross_entropy(x, y, soft_label=True),
])
def test_soft_label_must_match_the_input(layer):
    with pytest.raises(fluid.ShapeError, match="must match") as e:
        compile_with(layer, label_shape=(4,), label_dtype="float32")
    assert "[?, 4]" in str(e.value) and "[?, 3]" in str(e.value)
    with pytest.raises(fluid.DTypeError, match="soft labels are float"):
        compile_with(layer, label_shape=(3,), label_dtype="int64")


def test_other_layer_argument_errors():
    with pytest.raises(fluid.ShapeError, match="must match"):
        compile_with(lambda x, y: L.sigmoid_cross_entropy_with_logits(x, y),
                     label_shape=(4,), label_dtype="float32")
    with pytest.raises(fluid.DTypeError, match="dtype='float32'"):
        compile_with(lambda x, y: L.sigmoid_cross_entropy_with_logits(x, y),
                     label_shape=(3,), label_dtype="int64")
    with pytest.raises(fluid.OpArgumentError, match="axis=2"):
        compile_with(lambda x, y: L.softmax_with_cross_entropy(x, y, axis=2))
    with pytest.raises(fluid.OpArgumentError, match="k must be a positive int"):
        compile_with(lambda x, y: L.accuracy(x, y, k=0))
    with pytest.raises(fluid.OpArgumentError, match="axis=3"):
        compile_with(lambda x, y: L.argmax(x, axis=3))
    with pytest.raises(fluid.DTypeError, match="int64"):
        compile_with(lambda x, y: L.accuracy(x, y), label_dtype="float32")


def test_softmax_layer_with_axis():
    class P(fluid.Program):
        @fluid.network("x")
        def step(self, x):
            x = fluid.layers.data(name="x", shape=[3, 5], dtype="float32")
            return fluid.layers.softmax(x, axis=1), fluid.layers.argmax(x, axis=2)
    x = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32)
    s, a = P().Compile().step(x)
    np.testing.assert_allclose(s.sum(axis=1), 1.0, rtol=1e-5)
    assert a.tolist() == x.argmax(axis=2).tolist()


def test_layers_are_exported():
    for name in ("cross_entropy", "softmax_with_cross_entropy",
                 "sigmoid_cross_entropy_with_logits", "argmax", "accuracy", "softmax"):
        assert name in fluid.layers.__all__
