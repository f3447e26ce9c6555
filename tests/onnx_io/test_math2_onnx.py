"""Paddle 1.8's further math exported to ONNX: each program's file passes onnx.checker,
runs in onnxruntime with the values of the compiled method (batches of 1 and 5), and
imports back to a program with the same values; the ops exported as one node come back
as themselves. similarity_focus has no ONNX form and says so."""
from __future__ import annotations

import numpy as np
import pytest

import fluid
from fluid_interactive.errors import OnnxError
from tests.onnx_io.helpers import canonical_ops, check_export, one_method

L = fluid.layers
F32 = "float32"


def _unary(x):
    a = L.tanh(x) * 0.5    # attrs a float32 holds exactly, so the ops come back the same
    return (L.sin(x), L.cos(x), L.atan(x), L.asin(a), L.acos(a), L.ceil(x), L.floor(x),
            L.reciprocal(x), L.erf(x), L.softplus(x), L.softsign(x), L.selu(x, 1.25, 1.5),
            L.thresholded_relu(x, 0.25), L.hard_sigmoid(x, 0.25, 0.375),
            L.softshrink(x, 0.25), L.hard_shrink(x, 0.375))


def _composite(x):
    return (L.logsigmoid(x), L.tanh_shrink(x), L.rsqrt(L.abs(x) + 0.5),
            L.log1p(L.abs(x)), L.round(x * 3), L.hard_swish(x * 4), L.relu6(x * 8),
            L.brelu(x, -0.5, 0.8), L.soft_relu(x * 3, 2.0), L.stanh(x), L.mish(x), L.sign(x))


def _image(x):
    return (L.prelu(x, "all"), L.prelu(x, "channel"), L.prelu(x, "element"),
            L.maxout(x, 2), L.maxout(L.transpose(x, [0, 2, 3, 1]), 2, axis=3),
            L.fsp_matrix(x, x), L.l2_normalize(x, axis=1))


def _reductions(x):
    return (L.cumsum(x, axis=1), L.cumsum(x, axis=2, exclusive=True, reverse=True),
            L.reduce_prod(x, dim=1), L.reduce_prod(x * 0.5 + 1, keep_dim=True),
            L.logsumexp(x, dim=[1, 2]), L.reduce_all(x > -1, dim=[2]),
            L.reduce_any(x > 1, dim=[1], keep_dim=True), L.clip_by_norm(x, 2.0))


def _products(x, y):
    m = L.reshape(x, [-1, 12])
    n = L.reshape(y, [-1, 12])
    c = L.create_parameter([1, 4], F32, name="bias_in")
    w = L.create_parameter([12, 4], F32, name="w")
    return (L.dot(m, n), L.bmm(x, L.transpose(y, [0, 2, 1])),
            L.addmm(c, m, w, alpha=0.5, beta=2.0), L.cos_sim(m, n), L.cos_sim(x, y),
            L.dist(x, y, p=2), L.dist(x, y, p=3), L.dist(x, y, p=float("inf")),
            L.dist(x, y, p=0), L.bilinear_tensor_product(m, n, 3),
            L.bilinear_tensor_product(m, n, 2, bias_attr=False),
            L.cross(L.reshape(x, [-1, 3, 4]), L.reshape(y, [-1, 3, 4])),
            L.cross(L.reshape(x, [-1, 4, 3]), L.reshape(y, [-1, 4, 3]), dim=2))


def _tensor_attrs(x, y):
    s = L.reduce_mean(y)
    s1 = L.reshape(s, [1])
    k = L.cast(L.floor(L.abs(x) * 10), "int64")
    three = L.fill_constant([1], "int64", -3)
    return (L.scale(x, scale=s1, bias=0.5), L.scale(x, scale=s1, bias_after_scale=False),
            L.pow(L.abs(x) + 1, factor=L.reshape(L.abs(s), [1])),
            L.clamp(x, min=L.reshape(s - 0.5, [1]), max=0.3),
            L.elementwise_floordiv(k, three), L.elementwise_floordiv(k - 5, L.abs(three)))


CASES = {
    "unary": (_unary, {"x": ((3, 4), F32)}),
    "composite": (_composite, {"x": ((3, 4), F32)}),
    "image": (_image, {"x": ((4, 3, 3), F32)}),
    "reductions": (_reductions, {"x": ((3, 4), F32)}),
    "products": (_products, {"x": ((3, 4), F32), "y": ((3, 4), F32)}),
    "tensor_attrs": (_tensor_attrs, {"x": ((3, 4), F32), "y": ((3, 4), F32)}),
}
#: cases whose ops all come back as themselves
EXACT = {"unary"}


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("case", sorted(CASES))
def test_export_runs_in_onnxruntime_and_imports_back(case, opset, tmp_path):
    build, spec = CASES[case]
    net = one_method(build, spec, name=case.title())().Compile(seed=3)
    rng = np.random.default_rng(1)
    back = check_export(net, str(tmp_path / f"{case}.onnx"),
                        lambda batch: {n: rng.standard_normal((batch,) + s).astype(d)
                                       for n, (s, d) in spec.items()},
                        (1, 5), opset=opset, rtol=2e-5, atol=2e-5, import_atol=2e-6)
    if case in EXACT:
        assert canonical_ops(back) == canonical_ops(net)


@pytest.mark.parametrize("build,what", [
    (lambda x: L.similarity_focus(L.reshape(x, [-1, 3, 2, 2]), 1, [0]), "similarity_focus"),
])
def test_ops_without_an_onnx_form_say_so(build, what):
    net = one_method(build, {"x": ((12,), F32)})().Compile()
    with pytest.raises(OnnxError, match=what):
        fluid.export_onnx(net, None)
