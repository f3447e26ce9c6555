"""Device selection, and the same program on CuPy (skipped where no GPU is usable)."""
import numpy as np
import pytest

import fluid
from fluid_interactive import backend


def test_cpu_is_numpy():
    assert backend.array_module_for("cpu") is np


def test_unknown_device_is_a_clear_error():
    with pytest.raises(ValueError, match="device must be one of"):
        fluid.set_device("tpu")


def test_auto_falls_back_to_numpy_with_a_notice(monkeypatch):
    monkeypatch.setattr(backend, "_cupy_with_gpu", lambda: None)
    monkeypatch.setitem(backend._state, "notified", False)
    previous = fluid.get_device()
    try:
        with pytest.warns(RuntimeWarning, match="running on NumPy"):
            assert fluid.set_device("auto") == "cpu"
    finally:
        fluid.set_device(previous)


def test_gpu_without_cupy_says_how_to_fix(monkeypatch):
    monkeypatch.setattr(backend, "_cupy_with_gpu", lambda: None)
    with pytest.raises(RuntimeError, match="gpu"):
        fluid.set_device("gpu")


class Net(fluid.Program):
    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[8], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        h = fluid.layers.fc(input=x, size=16, act="relu")
        logits = fluid.layers.fc(input=h, size=3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
        return loss


def test_same_results_on_gpu_and_cpu():
    if backend._cupy_with_gpu() is None:
        pytest.skip("CuPy with a GPU is not available here")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 8)).astype(np.float32)
    y = rng.integers(0, 3, (32, 1)).astype(np.int64)
    cpu, gpu = Net().Compile(seed=0, device="cpu"), Net().Compile(seed=0, device="gpu")
    for _ in range(5):
        lc, lg = cpu.train(x, y), gpu.train(x, y)
        assert lg == pytest.approx(lc, rel=1e-4)
    for k, v in cpu.parameters().items():
        np.testing.assert_allclose(gpu.parameters()[k], v, rtol=1e-4, atol=1e-5)
