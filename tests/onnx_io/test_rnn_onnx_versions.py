"""An ONNX file written before the GRU weight took Paddle's layout (fixtures/gru_v1.onnx,
written by that code: fixtures/make_gru_v1_onnx.py) imports with today's code and gives
what that code computed: its GRU node's R and its gru_unit cell's nodes state the
computation whatever the layout of the op that wrote them."""
import pathlib

import numpy as np

import fluid

from .helpers import ort_run

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"


def test_a_file_from_before_paddles_gru_layout_imports_as_it_computed():
    path = str(FIXTURES / "gru_v1.onnx")
    want = np.load(FIXTURES / "gru_v1.npz", allow_pickle=False)
    feeds = {"x": want["x"], "n": want["n"]}
    back = fluid.import_onnx(path)
    fused, cell = back.infer(**feeds)
    np.testing.assert_allclose(fused, want["fused"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cell, want["cell"], rtol=1e-5, atol=1e-6)
    assert not np.allclose(fused, cell, atol=1e-3)   # two weights: two computations
    for got, key in zip(ort_run(path, feeds), ("fused", "cell")):
        np.testing.assert_allclose(got, want[key], rtol=1e-5, atol=1e-6)
