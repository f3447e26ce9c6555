"""ONNX export of the creation and utility ops (fill_any_like, range, linspace, eye,
tril_triu, reverse, argmin, argsort, shape, size, a fill_constant of a Variable value):
each file passes onnx.checker, runs in onnxruntime with the outputs of ``infer`` on
batches of 1 and 5, and imports back to a program with the same outputs; the ops with a
node of their own come back as themselves."""
from __future__ import annotations

import numpy as np
import pytest

import fluid
from tests.onnx_io.helpers import canonical_ops, check_export, one_method

L = fluid.layers


def _made(x):
    return (L.full_like(x, 2.5), L.zeros_like(x), L.arange(0, 5), L.range(10, 1, -3, "int64"),
            L.eye(3, 4), L.linspace(0.0, 1.0, 5, "float32"), L.shape(x), L.size(x),
            L.fill_constant([2, 3], "float64", L.reduce_sum(x)))


def _arranged(x):
    return (L.tril(x, -1), L.triu(x, 1), L.reverse(x, [1, 2]), L.argmin(x, axis=2),
            L.argsort(x, axis=2)[0], L.argsort(x, axis=1, descending=True)[1],
            L.eye(2, 3, dtype="int64"), L.arange(0, 7, 2, "int32"), L.shape(x))


CASES = {"made": _made, "arranged": _arranged}
EXACT_ROUND_TRIP = {"arranged"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_export_runs_in_onnxruntime_and_imports_back(case, tmp_path):
    net = one_method(CASES[case], {"x": ((3, 4), "float32")}, name=case.title())().Compile(
        seed=0)
    rng = np.random.default_rng(0)
    back = check_export(net, str(tmp_path / f"{case}.onnx"),
                        lambda batch: {"x": rng.standard_normal((batch, 3, 4)).astype(
                            np.float32)}, (1, 5), rtol=1e-6, atol=0, import_atol=0)
    if case in EXACT_ROUND_TRIP:
        assert canonical_ops(back) == canonical_ops(net)


def test_ops_onnx_cannot_express_say_so():
    net = one_method(lambda x: L.linspace(L.reduce_sum(x), 1.0, 3, "float32"),
                     {"x": ((2,), "float32")})().Compile(seed=0)
    with pytest.raises(fluid.OnnxError, match="takes its bounds as inputs; ONNX has no "
                                              "linspace"):
        fluid.export_onnx(net, None)


def test_trilu_needs_opset_14():
    net = one_method(lambda x: L.tril(x), {"x": ((3, 3), "float32")})().Compile(seed=0)
    with pytest.raises(fluid.OnnxError, match="opset 14 introduced"):
        fluid.export_onnx(net, None, opset=13)
