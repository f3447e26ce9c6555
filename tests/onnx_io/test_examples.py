"""The examples after a short training: fit_a_line, the digits MLP and the digits CNN export
to files whose onnxruntime outputs equal ``compiled.infer`` within 1e-5 on batches of 1, 7
and 64, and import back to the same ops with the same outputs."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import fluid
from tests.onnx_io.helpers import canonical_ops, onnx, ort_run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

BATCHES = (1, 7, 64)


def _with_logits(cls):
    """The example's class plus a ``logits`` method (infer returns the argmax)."""
    def logits(self, image):
        image = fluid.layers.data(name="image", shape=[1, 8, 8], dtype="float32")
        if hasattr(self, "hidden") and not hasattr(self, "channels"):
            image = fluid.layers.reshape(image, [-1, 64])
        return self.classifier(image)
    return type(cls.__name__, (cls,), {"logits": fluid.network("image")(logits)})


def _train(prog, method, steps):
    for _ in range(steps):
        try:
            getattr(prog, method)()
        except fluid.EOFException:
            prog.reset_readers()


def _check(prog, method, inputs, tmp_path):
    path = str(tmp_path / f"{method}.onnx")
    fluid.export_onnx(prog, path, method=method)
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    back = fluid.import_onnx(path)
    for n in BATCHES:
        feed = {k: v[:n] for k, v in inputs.items()}
        want = getattr(prog, method)(**feed)
        got = ort_run(path, feed)[0]
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(back.infer(**feed), want)   # the same kernels
    assert canonical_ops(back) == canonical_ops(prog, method)


def test_fit_a_line(tmp_path):
    import fit_a_line
    data = str(tmp_path / "data.recordio")
    fit_a_line.write_data(data, samples=2048)
    prog = fit_a_line.FitALine(DEFAULT_READER_FILE_PATH=data, batch_size=64, epochs=None,
                               learning_rate=0.01).Compile(seed=0)
    _train(prog, "train_step", 30)
    x = np.random.default_rng(0).standard_normal((64, 13)).astype(np.float32)
    _check(prog, "infer", {"x": x}, tmp_path)


@pytest.mark.parametrize("example", ["digits_mlp", "digits_cnn"])
def test_digits(example, tmp_path):
    pytest.importorskip("sklearn")
    module = __import__(example)
    from digits_data import load_split, write_recordio
    cls = getattr(module, "DigitsMLP" if example == "digits_mlp" else "DigitsCNN")
    train_file, test_file = write_recordio(str(tmp_path))
    options = {"epochs": 1} if "epochs" in cls.option_names() else {}
    prog = _with_logits(cls)(train_file=train_file, test_file=test_file,
                             **options).Compile(seed=0)
    _train(prog, "train", 8)
    x = load_split()[2][:64]
    _check(prog, "logits", {"image": x}, tmp_path)
    _check(prog, "infer", {"image": x}, tmp_path)
