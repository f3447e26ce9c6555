"""Paddle 1.8's math, unary and activation ops against their NumPy expressions."""
from __future__ import annotations

import numpy as np

import fluid
from op_cases import OpCase, f32, i64

L = fluid.layers
X = f32(512, 512, low=-4.0, high=4.0)
POS = f32(512, 512, low=0.1, high=4.0)
UNIT = f32(512, 512, low=-0.99, high=0.99)


def _softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _erf(x):
    """erf as one writes it without SciPy: 1 - erfc by Numerical Recipes' erfc, and its
    Taylor series below 0.5, where 1 - erfc would lose a float32's digits."""
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    u = z * z
    taylor = z * (1.1283791671 + u * (-0.3761263890 + u * (0.1128379167 + u * (
        -0.0268661706 + u * (0.0052239776 - u * 0.0008548327)))))
    return np.copysign(np.where(z < 0.5, taylor, 1.0 - t * np.exp(poly - z * z)), x)


def _unary(name, layer, ref, x=X, **kw):
    return OpCase(name, inputs={"x": x}, layer=layer, numpy=ref, **kw)


_SELU = (1.0507009873554805, 1.6732632423543772)

CASES = [
    _unary("sin", L.sin, np.sin), _unary("cos", L.cos, np.cos),
    _unary("atan", L.atan, np.arctan), _unary("asin", L.asin, np.arcsin, UNIT),
    _unary("acos", L.acos, np.arccos, UNIT), _unary("ceil", L.ceil, np.ceil),
    _unary("floor", L.floor, np.floor),
    # halves away from zero, exactly (floor(|x| + 0.5) rounds 0.49999997 up in float32)
    _unary("round", L.round,
           lambda x: np.trunc(x) + np.copysign(np.abs(x - np.trunc(x)) >= 0.5, x)),
    _unary("reciprocal", L.reciprocal, np.reciprocal, POS),
    _unary("rsqrt", L.rsqrt, lambda x: 1 / np.sqrt(x), POS),
    _unary("log1p", L.log1p, np.log1p, POS),
    _unary("erf", L.erf, _erf, rtol=1e-5, atol=1e-6),
    _unary("logsigmoid", L.logsigmoid, lambda x: -_softplus(-x)),
    _unary("tanh_shrink", L.tanh_shrink, lambda x: x - np.tanh(x), atol=1e-5),
    _unary("softplus", L.softplus, _softplus),
    _unary("softsign", L.softsign, lambda x: x / (1 + np.abs(x))),
    _unary("softshrink", lambda v: L.softshrink(v, 0.5), lambda x: x - np.clip(x, -0.5, 0.5)),
    _unary("hard_shrink", L.hard_shrink, lambda x: x * (np.abs(x) > 0.5)),
    _unary("thresholded_relu", L.thresholded_relu, lambda x: x * (x > 1.0)),
    _unary("relu6", L.relu6, lambda x: np.clip(x, 0, 6)),
    _unary("brelu", lambda v: L.brelu(v, 0.0, 2.0), lambda x: np.clip(x, 0, 2)),
    _unary("hard_sigmoid", L.hard_sigmoid, lambda x: np.clip(x * 0.2 + 0.5, 0, 1)),
    _unary("hard_swish", L.hard_swish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    _unary("selu", L.selu,
           lambda x: _SELU[0] * np.where(x > 0, x, _SELU[1] * np.expm1(np.minimum(x, 0)))),
    _unary("soft_relu", L.soft_relu, lambda x: np.log1p(np.exp(np.clip(x, -40, 40)))),
    _unary("stanh", L.stanh, lambda x: 1.7159 * np.tanh(0.67 * x)),
    _unary("mish", L.mish, lambda x: x * np.tanh(_softplus(x))),
    _unary("sign", L.sign, np.sign),
    OpCase("prelu", inputs={"x": f32(64, 16, 16, 16)},
           layer=lambda v: L.prelu(v, "channel",
                                   param_attr=fluid.initializer.Constant(0.25)),
           numpy=lambda x: np.where(x > 0, x, 0.25 * x)),
    OpCase("maxout", inputs={"x": f32(64, 16, 16, 16)}, layer=lambda v: L.maxout(v, 2),
           numpy=lambda x: x.reshape(64, 8, 2, 16, 16).max(axis=2)),
    OpCase("cumsum", inputs={"x": f32(512, 512)}, layer=lambda v: L.cumsum(v, axis=1),
           numpy=lambda x: np.cumsum(x, axis=1), rtol=1e-4, atol=1e-4),
    OpCase("cumsum_exclusive_reverse", inputs={"x": f32(512, 512)},
           layer=lambda v: L.cumsum(v, axis=0, exclusive=True, reverse=True),
           numpy=lambda x: np.flip(np.cumsum(np.flip(x, 0), 0), 0) - x,
           rtol=1e-4, atol=1e-4),
    OpCase("reduce_prod", inputs={"x": f32(512, 512, low=0.9, high=1.1)},
           layer=lambda v: L.reduce_prod(v, dim=1), numpy=lambda x: np.prod(x, axis=1),
           rtol=1e-4),
    OpCase("reduce_all", inputs={"x": f32(512, 512)},
           layer=lambda v: L.reduce_all(v > -0.99, dim=1),
           numpy=lambda x: np.all(x > -0.99, axis=1)),
    OpCase("reduce_any", inputs={"x": f32(512, 512)},
           layer=lambda v: L.reduce_any(v > 0.99, dim=1),
           numpy=lambda x: np.any(x > 0.99, axis=1)),
    OpCase("logsumexp", inputs={"x": X}, layer=lambda v: L.logsumexp(v, dim=1),
           numpy=lambda x: np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1)),
    OpCase("dot", inputs={"x": X, "y": f32(512, 512, seed=1)}, layer=L.dot,
           numpy=lambda x, y: np.einsum("ij,ij->i", x, y)[:, None], rtol=1e-4, atol=1e-4),
    OpCase("bmm", inputs={"x": f32(64, 64, 64), "y": f32(64, 64, 64, seed=1)}, layer=L.bmm,
           numpy=np.matmul, rtol=1e-4, atol=1e-4),
    OpCase("addmm", inputs={"i": f32(1, 256), "x": f32(256, 256), "y": f32(256, 256, seed=1)},
           layer=lambda i, x, y: L.addmm(i, x, y, alpha=0.5, beta=2.0),
           numpy=lambda i, x, y: 2.0 * i + 0.5 * (x @ y), rtol=1e-4, atol=1e-4),
    OpCase("cross", inputs={"x": f32(65536, 3), "y": f32(65536, 3, seed=1)},
           layer=lambda x, y: L.cross(x, y, dim=1), numpy=lambda x, y: np.cross(x, y)),
    OpCase("dist", inputs={"x": X, "y": f32(512, 512, seed=1)},
           layer=lambda x, y: L.dist(x, y, p=2),
           numpy=lambda x, y: np.sqrt(np.sum(np.square(x - y))), rtol=1e-4),
    OpCase("cos_sim", inputs={"x": X, "y": f32(512, 512, seed=1)}, layer=L.cos_sim,
           numpy=lambda x, y: (np.einsum("ij,ij->i", x, y) / np.linalg.norm(x, axis=1) /
                               np.linalg.norm(y, axis=1))[:, None], rtol=1e-4, atol=1e-5),
    OpCase("l2_normalize", inputs={"x": X}, layer=lambda v: L.l2_normalize(v, axis=1),
           numpy=lambda x: x / np.sqrt(np.sum(x * x, axis=1, keepdims=True) + 1e-12),
           rtol=1e-5),
    OpCase("clip_by_norm", inputs={"x": X}, layer=lambda v: L.clip_by_norm(v, 1.0),
           numpy=lambda x: x * min(1.0, 1.0 / float(np.linalg.norm(x))), rtol=1e-4),
    OpCase("clamp", inputs={"x": X}, layer=lambda v: L.clamp(v, min=-1.0, max=1.0),
           numpy=lambda x: np.clip(x, -1, 1)),
    OpCase("fsp_matrix", inputs={"x": f32(32, 16, 16, 16), "y": f32(32, 32, 16, 16, seed=1)},
           layer=L.fsp_matrix,
           numpy=lambda x, y: np.matmul(x.reshape(32, 16, 256),
                                        y.reshape(32, 32, 256).transpose(0, 2, 1)) / 256,
           rtol=1e-4, atol=1e-5),
    OpCase("bilinear_tensor_product", inputs={"x": f32(256, 64), "y": f32(256, 64, seed=1)},
           layer=lambda x, y: L.bilinear_tensor_product(
               x, y, 32, param_attr=fluid.initializer.Constant(0.01), bias_attr=False),
           numpy=lambda x, y: np.einsum("bm,kmn,bn->bk", x, np.full((32, 64, 64), 0.01,
                                                                    np.float32), y,
                                        optimize=True), rtol=1e-4, atol=1e-5),
    OpCase("elementwise_floordiv", inputs={"x": i64(512, 512, high=100000),
                                           "y": i64(512, 512, high=99, seed=1) + 1},
           layer=L.elementwise_floordiv, numpy=np.floor_divide),
    OpCase("similarity_focus", inputs={"x": f32(32, 4, 16, 16)},
           layer=lambda v: L.similarity_focus(v, 1, [0, 1]),
           numpy=lambda x: _focus(x, [0, 1])),
    OpCase("mean_iou", inputs={"p": i64(256, 256, high=10), "t": i64(256, 256, high=10, seed=1)},
           layer=lambda p, t: L.mean_iou(p, t, 10)[0], numpy=lambda p, t: _iou(p, t, 10),
           rtol=1e-5),
]


def _focus(x, indexes):
    """The greedy pick, one step at a time over every table at once."""
    b, _, rows, cols = x.shape
    tables = x[:, indexes].copy()
    picked = np.zeros((b, rows, cols), bool)
    bi, ki = np.arange(b)[:, None], np.arange(len(indexes))[None, :]
    for _ in range(min(rows, cols)):
        best = tables.reshape(b, len(indexes), -1).argmax(axis=2)
        r, c = best // cols, best % cols
        picked[bi, r, c] = True
        tables[bi, ki, r, :] = -np.inf
        tables[bi, ki, :, c] = -np.inf
    return np.broadcast_to(picked[:, None], x.shape).astype(x.dtype)


def _iou(p, t, n):
    hit = p == t
    correct = np.bincount(p[hit], minlength=n)
    wrong = np.bincount(p[~hit], minlength=n) + np.bincount(t[~hit], minlength=n)
    total = correct + wrong
    return np.float32((correct / np.maximum(total, 1)).sum() / max((total > 0).sum(), 1))
