"""What cannot be exported is an error naming the op and the user's line, and nothing is
written."""
from __future__ import annotations

import os

import numpy as np
import pytest

import fluid
from tests.onnx_io.helpers import onnx  # noqa: F401  (skips without the onnx extra)


class Net(fluid.Program):
    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data("x", shape=[4])
        y = fluid.layers.data("y", shape=[1])
        loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(x, 1), y))
        fluid.optimizer.SGD(0.1).minimize(loss)
        return loss

    @fluid.network("x")
    def hashed(self, x):
        x = fluid.layers.data("x", shape=[4], dtype="int64")
        return fluid.layers.hash(x, 100)   # LINE_OF_HASH

    @fluid.network("x")
    def dropout_training(self, x):
        x = fluid.layers.data("x", shape=[4])
        return fluid.layers.dropout(x, 0.5, is_test=False)


def _line(marker):
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "_line" not in line)


@pytest.fixture(scope="module")
def net():
    return Net().Compile(seed=0)


def test_op_without_rule_names_op_and_line(net, tmp_path):
    path = tmp_path / "hash.onnx"
    with pytest.raises(fluid.OnnxError) as info:
        fluid.export_onnx(net, str(path), method="hashed")
    message = str(info.value)
    assert "'hash' has no ONNX mapping" in message
    assert f"test_export_errors.py:{_line('LINE_OF_HASH')}" in message
    assert not path.exists() and not list(os.listdir(tmp_path))


def test_training_method_is_refused(net, tmp_path):
    with pytest.raises(fluid.OnnxError, match="train_step\\(\\) trains"):
        fluid.export_onnx(net, str(tmp_path / "t.onnx"), method="train_step")


def test_training_mode_dropout_is_refused(net, tmp_path):
    with pytest.raises(fluid.OnnxError, match="training mode"):
        fluid.export_onnx(net, str(tmp_path / "d.onnx"), method="dropout_training")


def test_bad_arguments(net, tmp_path):
    with pytest.raises(fluid.OnnxError, match="methods are train_step, hashed"):
        fluid.export_onnx(net, str(tmp_path / "x.onnx"), method="nope")
    with pytest.raises(fluid.OnnxError, match="opset must be"):
        fluid.export_onnx(net, str(tmp_path / "x.onnx"), method="hashed", opset=7)
    with pytest.raises(TypeError, match="compiled program"):
        fluid.export_onnx(Net(), str(tmp_path / "x.onnx"))


def test_gelu_needs_opset_20(tmp_path):
    class G(fluid.Program):
        @fluid.network("x")
        def infer(self, x):
            return fluid.layers.gelu(fluid.layers.data("x", shape=[3]))
    g = G().Compile()
    with pytest.raises(fluid.OnnxError, match="opset=20"):
        fluid.export_onnx(g, None)
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    from tests.onnx_io.helpers import ort_run
    np.testing.assert_allclose(ort_run(fluid.export_onnx(g, None, opset=20), {"x": x})[0],
                               g.infer(x), rtol=1e-5, atol=1e-6)
