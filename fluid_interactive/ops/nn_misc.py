"""Other neural-network ops: dropout, one_hot, gelu, elu, swish,
flatten, pad.

``dropout``      Out, Mask (uint8 0/1) = X with elements zeroed with probability
                 ``dropout_prob``. 'downgrade_in_infer' (Paddle's default): training keeps
                 X * Mask, inference scales X by (1 - p); 'upscale_in_train': training
                 gives X * Mask / (1 - p), inference is the identity. Test mode: the
                 ``is_test`` attr when set, else the block's mode. ``fix_seed``/``seed``
                 give the op its own reproducible generator.
``one_hot``      X int [..., 1] -> Out float32 [..., depth] (no gradient).
``gelu``         X * Phi(X) (``approximate``: the tanh form).
``elu``          X if X > 0 else alpha * (exp(X) - 1).
``swish``        X * sigmoid(beta * X).
``flatten``      X -> [prod(dims before axis), prod(dims from axis)] (a view).
``pad``          X padded by ``paddings`` [before_0, after_0, before_1, ...] with
                 ``pad_value``.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from math import prod
from typing import Any

import numpy as np

from ..ir.records import FLOAT_DTYPES, INT_DTYPES, canonical_dtype
from ..ir.text import format_shape as _fmt
from .registry import register
from .spec import (
    GradContext,
    InferContext,
    KernelContext,
    OpSpec,
    emit_default_grad,
    infer_like,
    slots,
)


def _check_float(ctx: InferContext, slot: str = "X") -> None:
    t = ctx.input(slot)
    if t.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"{slot} must be float16/32/64, got {t.dtype}{_fmt(t.shape)}")


def _is_test(ctx: KernelContext) -> bool:
    flag = ctx.attrs.get("is_test")
    return bool(ctx.is_test) if flag is None else bool(flag)


# --- dropout ---------------------------------------------------------------------------------

_DROPOUT_ATTRS = {"dropout_prob": 0.5, "is_test": None, "fix_seed": False, "seed": 0,
                  "dropout_implementation": "downgrade_in_infer"}
_IMPLEMENTATIONS = ("downgrade_in_infer", "upscale_in_train")


def _dropout_infer(ctx: InferContext) -> None:
    _check_float(ctx)
    p = ctx.attrs["dropout_prob"]
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        ctx.fail(f"dropout_prob must be a number in [0, 1], got {p!r}")
    if ctx.attrs["dropout_implementation"] not in _IMPLEMENTATIONS:
        ctx.fail(f"dropout_implementation must be one of {', '.join(_IMPLEMENTATIONS)}, got "
                 f"{ctx.attrs['dropout_implementation']!r}")
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_output("Mask", x.shape, "uint8")


def _dropout_kernel(ctx: KernelContext):
    xp = ctx.xp
    x = ctx.input("X")
    p = float(ctx.attrs["dropout_prob"])
    upscale = ctx.attrs["dropout_implementation"] == "upscale_in_train"
    out_buf, mask_buf = ctx.buffer("Out"), ctx.buffer("Mask")
    want_mask = ctx.has_output("Mask")

    def outputs(out: Any, mask: Any) -> Any:
        return (out, mask) if want_mask else out

    def ones_mask() -> Any:
        if not want_mask:
            return None
        m = mask_buf if mask_buf is not None else xp.empty(x.shape, "uint8")
        m.fill(1)
        return m

    if _is_test(ctx):
        factor = 1.0 if upscale else 1.0 - p

        def infer(a):
            out = out_buf if out_buf is not None else xp.empty(x.shape, x.dtype)
            if factor == 1.0:
                xp.copyto(out, a)
            else:
                xp.multiply(a, factor, out=out)
            return outputs(out, ones_mask())
        return infer

    rng = np.random.default_rng(int(ctx.attrs["seed"])) if ctx.attrs["fix_seed"] else ctx.rng
    scale = (1.0 / (1.0 - p)) if (upscale and p < 1.0) else 1.0
    if xp is np:
        draws = np.empty(x.shape, np.float32)

        def draw():
            return rng.random(out=draws, dtype=np.float32)
    else:   # draw on the device, from a generator the host generator seeds once
        device_rng = xp.random.default_rng(int(rng.integers(2 ** 63)))

        def draw():
            return device_rng.random(x.shape, dtype=xp.float32)

    def train(a):
        keep = draw() >= p
        mask = mask_buf if mask_buf is not None else xp.empty(x.shape, "uint8")
        xp.copyto(mask, keep)
        out = out_buf if out_buf is not None else xp.empty(x.shape, x.dtype)
        xp.multiply(a, keep, out=out)
        if scale != 1.0:
            xp.multiply(out, scale, out=out)
        return outputs(out, mask)
    return train


def _dropout_grad(g: GradContext) -> None:
    emit_default_grad(g, uses=("Mask",), grad_type="dropout_grad", in_slots=("X",))


def _dropout_grad_kernel(ctx: KernelContext):
    xp = ctx.xp
    p = float(ctx.attrs["dropout_prob"])
    upscale = ctx.attrs["dropout_implementation"] == "upscale_in_train"
    out = ctx.buffer("X@GRAD")
    if _is_test(ctx):
        factor = 1.0 if upscale else 1.0 - p
        return lambda mask, g: xp.multiply(g, factor, out=out)
    scale = (1.0 / (1.0 - p)) if (upscale and p < 1.0) else 1.0
    if scale == 1.0:
        return lambda mask, g: xp.multiply(g, mask, out=out)

    def grad(mask, g):
        r = xp.multiply(g, mask, out=out)
        return xp.multiply(r, scale, out=r)
    return grad


register(OpSpec("dropout", slots("X"), slots("Out", "Mask"), _dropout_infer, _dropout_kernel,
                _dropout_grad, attrs=_DROPOUT_ATTRS, random=True, inert_in_test=True,
                doc="Zeroes elements with probability dropout_prob (Mask: 1 where kept). "
                    "downgrade_in_infer: train X*Mask, infer X*(1-p); upscale_in_train: "
                    "train X*Mask/(1-p), infer X."))
register(OpSpec("dropout_grad", slots("Mask", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "Out@GRAD"}), _dropout_grad_kernel,
                attrs=_DROPOUT_ATTRS))


# --- one_hot -----------------------------------------------------------------------------------

_ONE_HOT_ATTRS = {"depth": 1, "dtype": "float32", "allow_out_of_range": False}


def _one_hot_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    depth = ctx.attrs["depth"]
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        ctx.fail(f"depth must be a positive int, got {depth!r}")
    if x.dtype not in INT_DTYPES:
        ctx.fail_dtype(f"X must be integer class indices, got {x.dtype}{_fmt(x.shape)}")
    if x.rank < 1 or x.shape[-1] not in (1, -1):
        ctx.fail(f"X {_fmt(x.shape)} must have a last dim of 1 (shape [..., 1])")
    ctx.set_output("Out", tuple(x.shape[:-1]) + (depth,), canonical_dtype(ctx.attrs["dtype"]))


def _one_hot_kernel(ctx: KernelContext):
    xp = ctx.xp
    x, o = ctx.input("X"), ctx.output("Out")
    depth = ctx.attrs["depth"]
    allow = bool(ctx.attrs["allow_out_of_range"])
    k = prod(x.shape[:-1])
    out = ctx.buffer("Out")
    rows = xp.arange(k)

    def one_hot(ids):
        flat = ids.reshape(k)
        inside = (flat >= 0) & (flat < depth)
        if not allow and xp is np and not bool(inside.all()):
            bad = int(flat[~inside][0])
            raise IndexError(f"one_hot: index {bad} is outside [0, {depth}); pass "
                             f"allow_out_of_range=True to get a zero row instead")
        dst = out if out is not None else xp.empty(o.shape, o.dtype)
        d2 = dst.reshape(k, depth)
        d2.fill(0)
        if allow:
            d2[rows[inside], flat[inside]] = 1
        else:
            d2[rows, flat] = 1
        return dst
    return one_hot


register(OpSpec("one_hot", slots("X"), slots("Out"), _one_hot_infer, _one_hot_kernel, None,
                attrs=_ONE_HOT_ATTRS,
                doc="Out[..., k] = 1 where k == X[..., 0], else 0 (no gradient)."))


# --- elementwise activations: gelu, elu, swish -------------------------------------------------

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
# erfc by a Chebyshev-fitted rational form (Numerical Recipes' erfcc); relative error below
# 1.2e-7 everywhere, so it is exact at float32 precision.
_ERFC_COEFFS = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
                -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def erfc_nonneg(xp: Any, z: Any) -> Any:
    """erfc(z) for z >= 0, elementwise."""
    t = 1.0 / (1.0 + 0.5 * z)
    poly = xp.full_like(t, _ERFC_COEFFS[-1])
    for c in _ERFC_COEFFS[-2::-1]:
        poly *= t
        poly += c
    return t * xp.exp(poly - z * z)


def normal_cdf(xp: Any, x: Any) -> Any:
    """Phi(x) = P(N(0, 1) <= x), accurate in both tails."""
    half = 0.5 * erfc_nonneg(xp, xp.abs(x) * _SQRT_HALF)
    return xp.where(x < 0, half, 1.0 - half).astype(x.dtype, copy=False)


def _gelu(xp, x, o, a):
    if a["approximate"]:
        inner = xp.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))
        return xp.multiply(x * 0.5, 1.0 + inner, out=o)
    return xp.multiply(x, normal_cdf(xp, x), out=o)


def _gelu_grad(xp, x, y, g, o, a):
    if a["approximate"]:
        u = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
        t = xp.tanh(u)
        du = _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x * x)
        d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du
    else:
        d = normal_cdf(xp, x) + x * xp.exp(-0.5 * x * x) * _INV_SQRT_2PI
    return xp.multiply(g, d, out=o)


def _elu(xp, x, o, a):
    out = xp.expm1(xp.minimum(x, 0.0), out=o)
    xp.multiply(out, a["alpha"], out=out)
    xp.copyto(out, x, where=x > 0)
    return out


def _elu_grad(xp, x, y, g, o, a):
    # d/dx = 1 for x > 0, alpha * exp(x) = y + alpha otherwise
    d = xp.where(x > 0, 1.0, y + a["alpha"]).astype(g.dtype, copy=False)
    return xp.multiply(g, d, out=o)


def _sigmoid(xp, z):
    return 0.5 * (xp.tanh(0.5 * z) + 1.0)     # overflow-free


def _swish(xp, x, o, a):
    return xp.multiply(x, _sigmoid(xp, a["beta"] * x), out=o)


def _swish_grad(xp, x, y, g, o, a):
    beta = a["beta"]
    s = _sigmoid(xp, beta * x)
    # d/dx x*s(bx) = s + b*x*s*(1-s) = s + b*y*(1-s)
    d = s + beta * y * (1.0 - s)
    return xp.multiply(g, d.astype(g.dtype, copy=False), out=o)


def _define_activation(name: str, forward: Callable, grad: Callable, attrs: Mapping[str, Any],
                       doc: str) -> None:
    """One elementwise op and its gradient (which reads X, Out and dOut)."""
    def infer(ctx: InferContext) -> None:
        _check_float(ctx)
        x = ctx.input("X")
        ctx.set_output("Out", x.shape, x.dtype)

    def kernel(ctx: KernelContext):
        xp, out, a = ctx.xp, ctx.buffer("Out"), ctx.attrs
        return lambda x: forward(xp, x, out, a)

    def maker(g: GradContext) -> None:
        emit_default_grad(g, ("X", "Out"), name + "_grad", ("X",))

    def grad_kernel(ctx: KernelContext):
        xp, out, a = ctx.xp, ctx.buffer("X@GRAD"), ctx.attrs
        return lambda x, y, g: grad(xp, x, y, g, out, a)

    register(OpSpec(name, slots("X"), slots("Out"), infer, kernel, maker, attrs=attrs,
                    doc=doc))
    register(OpSpec(name + "_grad", slots("X", "Out", "Out@GRAD"), slots("X@GRAD"),
                    infer_like({"X@GRAD": "X"}), grad_kernel, attrs=attrs))


_define_activation("gelu", _gelu, _gelu_grad, {"approximate": False},
                   "Out = X * Phi(X) (Phi the standard normal CDF); approximate: "
                   "0.5 X (1 + tanh(sqrt(2/pi) (X + 0.044715 X^3)))")
_define_activation("elu", _elu, _elu_grad, {"alpha": 1.0},
                   "Out = X if X > 0 else alpha * (exp(X) - 1)")
_define_activation("swish", _swish, _swish_grad, {"beta": 1.0},
                   "Out = X * sigmoid(beta * X)")


# --- flatten -----------------------------------------------------------------------------------

def _flatten_shape(ctx: Any, shape: Sequence[int]) -> tuple[int, int]:
    axis = ctx.attrs["axis"]
    if isinstance(axis, bool) or not isinstance(axis, int) or not 0 <= axis <= len(shape):
        ctx.fail(f"axis={axis!r} must be an int in [0, {len(shape)}] for X {_fmt(shape)}")

    def size(dims):
        return -1 if any(d < 0 for d in dims) else prod(dims)
    return size(shape[:axis]), size(shape[axis:])


def _flatten_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.set_output("Out", _flatten_shape(ctx, x.shape), x.dtype)


def _flatten_kernel(ctx: KernelContext):
    shape = ctx.output("Out").shape
    return lambda a: a.reshape(shape)


def _flatten_grad_kernel(ctx: KernelContext):
    shape = ctx.input("X").shape
    return lambda x, g: g.reshape(shape)


register(OpSpec("flatten", slots("X"), slots("Out"), _flatten_infer, _flatten_kernel,
                lambda g: emit_default_grad(g, ("X",), "flatten_grad", ("X",)),
                attrs={"axis": 1}, aliases=True,
                doc="Out = X as a matrix [prod(X.shape[:axis]), prod(X.shape[axis:])]."))
register(OpSpec("flatten_grad", slots("X", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "X"}), _flatten_grad_kernel, attrs={"axis": 1},
                aliases=True, shape_only=("X",)))


# --- pad ---------------------------------------------------------------------------------------

def _pad_pairs(ctx: Any, rank: int) -> list[tuple[int, int]]:
    pads = list(ctx.attrs["paddings"])
    if len(pads) != 2 * rank or not all(isinstance(p, int) and not isinstance(p, bool) and
                                        p >= 0 for p in pads):
        ctx.fail(f"paddings must hold 2 * rank = {2 * rank} non-negative ints [before_0, "
                 f"after_0, before_1, ...], got {pads!r}")
    return [(pads[2 * i], pads[2 * i + 1]) for i in range(rank)]


def _pad_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    pairs = _pad_pairs(ctx, x.rank)
    ctx.set_output("Out", tuple(d if d < 0 else d + a + b for d, (a, b) in zip(x.shape, pairs)),
                   x.dtype)


def _interior(pairs: Sequence[tuple[int, int]], shape: Sequence[int]) -> tuple:
    return tuple(slice(a, a + d) for (a, _), d in zip(pairs, shape))


def _pad_kernel(ctx: KernelContext):
    xp = ctx.xp
    x, o = ctx.input("X"), ctx.output("Out")
    inner = _interior(_pad_pairs(ctx, x.rank), x.shape)
    value = ctx.attrs["pad_value"]
    out = ctx.buffer("Out")

    def pad(a):
        dst = out if out is not None else xp.empty(o.shape, o.dtype)
        dst.fill(value)
        dst[inner] = a
        return dst
    return pad


def _pad_grad_kernel(ctx: KernelContext):
    x = ctx.input("X")
    inner = _interior(_pad_pairs(ctx, x.rank), x.shape)
    return lambda _x, g: g[inner]


register(OpSpec("pad", slots("X"), slots("Out"), _pad_infer, _pad_kernel,
                lambda g: emit_default_grad(g, ("X",), "pad_grad", ("X",)),
                attrs={"paddings": [], "pad_value": 0.0},
                doc="Out = X padded with pad_value: paddings [before_0, after_0, before_1, "
                    "after_1, ...] per dim."))
register(OpSpec("pad_grad", slots("X", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "X"}), _pad_grad_kernel,
                attrs={"paddings": [], "pad_value": 0.0}, aliases=True, shape_only=("X",)))
