"""Whole programs on a device array module, without a GPU: the CuPy stand-in of
tests/device_standin.py takes CuPy's place, so `fluid.set_device('gpu')` and
`Compile(device=...)` run the engine's device paths. A training step may cross between
host and device only at its feeds (to the device) and its fetches (to the host)."""
import numpy as np
import pytest
from device_standin import DeviceArray, counting
from device_standin import module as standin

import fluid
from fluid_interactive import backend


@pytest.fixture
def gpu(monkeypatch):
    """'gpu' means the stand-in for the duration of a test."""
    monkeypatch.setattr(backend, "_cupy_with_gpu", lambda: standin)
    previous = fluid.get_device()
    yield standin
    fluid.set_device(previous if previous != "gpu" else "cpu")


class FitALine(fluid.Program):
    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[13], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        with fluid.var_scope("p"):
            pred = fluid.layers.fc(input=x, size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)
        return loss

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[13], dtype="float32")
        with fluid.var_scope("p"):
            return fluid.layers.fc(input=x, size=1)


class Classifier(fluid.Program):
    """conv, batch_norm, pooling, dropout, fc, softmax cross-entropy, accuracy, Adam."""
    @fluid.network("image", "label")
    def train(self, image, label):
        image = fluid.layers.data(name="image", shape=[1, 8, 8], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        h = fluid.layers.conv2d(image, num_filters=4, filter_size=3, padding=1)
        h = fluid.layers.batch_norm(h, act="relu")
        h = fluid.layers.pool2d(h, pool_size=2, pool_stride=2)
        h = fluid.layers.dropout(h, dropout_prob=0.25)
        logits = fluid.layers.fc(h, size=3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        acc = fluid.layers.accuracy(fluid.layers.softmax(logits), label)
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
        return loss, acc


def _fit_data(rng, n=32):
    x = rng.standard_normal((n, 13)).astype(np.float32)
    return x, (x @ np.arange(13, dtype=np.float32)[:, None] / 13).astype(np.float32)


def test_set_device_gpu_compiles_onto_the_device(gpu, rng):
    assert fluid.set_device("gpu") == "gpu"
    prog = FitALine().Compile(seed=0)
    assert prog.device == "gpu"
    assert all(isinstance(v, DeviceArray) for k, v in prog.scope.values.items())
    x, y = _fit_data(rng)
    assert isinstance(prog.train(x, y), float)
    assert isinstance(prog.parameters()["p/fc_0.w_0"], np.ndarray)   # fetched to the host


@pytest.mark.parametrize("device", ["gpu", "auto"])
def test_compile_device_argument(gpu, device):
    fluid.set_device("cpu")
    assert FitALine().Compile(seed=0, device=device).device == "gpu"
    assert FitALine().Compile(seed=0).device == "cpu"


def test_compile_auto_without_a_gpu_is_cpu(monkeypatch):
    monkeypatch.setattr(backend, "_cupy_with_gpu", lambda: None)
    monkeypatch.setitem(backend._state, "notified", True)   # the notice is tested elsewhere
    assert FitALine().Compile(seed=0, device="auto").device == "cpu"


def test_a_step_crosses_only_at_feeds_and_fetches(gpu, rng):
    prog = FitALine().Compile(seed=0, device="gpu")
    x, y = _fit_data(rng)
    prog.train(x, y)                       # the first call plans (and may move constants)
    for _ in range(3):
        with counting() as moved:
            loss = prog.train(x, y)
        assert dict(+moved) == {"to_device": 2, "sync": 1}, moved   # x, y in; loss out
        assert isinstance(loss, float)
    prog.infer(x)
    with counting() as moved:
        out = prog.infer(x)
    assert dict(+moved) == {"to_device": 1, "to_host": 1}
    assert isinstance(out, np.ndarray) and out.shape == (32, 1)


class FitALineAdam(fluid.Program):
    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[13], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        with fluid.var_scope("p"):
            pred = fluid.layers.fc(input=fluid.layers.fc(input=x, size=4), size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
        return loss


@pytest.mark.parametrize("cls", [FitALine, FitALineAdam])
def test_same_training_on_the_device_as_on_the_host(gpu, rng, cls):
    cpu, dev = cls().Compile(seed=0, device="cpu"), cls().Compile(seed=0, device="gpu")
    x, y = _fit_data(rng)
    for step in range(6):
        assert dev.train(x, y) == pytest.approx(cpu.train(x, y), rel=1e-5)
        if step == 2:   # values set from outside: the device reads them where they are
            halved = {k: v * 0.5 for k, v in cpu.parameters().items()}
            cpu.set_parameters(halved)
            dev.set_parameters(halved)
    for name, value in cpu.parameters().items():
        np.testing.assert_allclose(dev.parameters()[name], value, rtol=1e-5, atol=1e-7)


def test_conv_net_with_adam_stays_on_the_device(gpu, rng):
    prog = Classifier().Compile(seed=0, device="gpu")
    image = rng.random((16, 1, 8, 8)).astype(np.float32)
    label = rng.integers(0, 3, (16, 1)).astype(np.int64)
    first, _ = prog.train(image, label)
    for _ in range(3):
        with counting() as moved:
            loss, acc = prog.train(image, label)
        assert dict(+moved) == {"to_device": 2, "sync": 2}, moved   # image, label; 2 fetches
    later = [prog.train(image, label)[0] for _ in range(30)]
    assert np.mean(later[-5:]) < 0.7 * first


def test_reader_batches_move_once(gpu, rng):
    x, y = _fit_data(rng, 64)

    class FromMemory(fluid.Program):
        @fluid.network()
        def train(self):
            reader = fluid.batch_reader(data=(x, y), batch_size=16, epochs=None)
            xv, yv = reader.next_item()
            with fluid.var_scope("p"):
                pred = fluid.layers.fc(input=xv, size=1)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, yv))
            fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)
            return loss

    prog = FromMemory().Compile(seed=0, device="gpu")
    prog.train()
    with counting() as moved:
        prog.train()
    assert dict(+moved) == {"to_device": 2, "sync": 1}
