"""Per-channel ops of image batches: lrn (local response normalisation across channels)
and affine_channel (a per-channel scale and shift).

``lrn``  X [N, C, H, W] (``data_format`` NCHW; NHWC puts C last) -> Out, MidOut.
MidOut = k + alpha * (the sum of X^2 over the n channels c - (n-1)//2 ... c + n - 1 -
(n-1)//2, those outside [0, C) left out); Out = X * MidOut^-beta. Paddle's alpha
multiplies the sum (PyTorch's local_response_norm divides it by n first).

``affine_channel``  X [N, C, ...] (``data_layout`` NCHW; NHWC puts C last), Scale, Bias
[C] -> Out = X * Scale + Bias, per channel.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir.records import FLOAT_DTYPES
from ..ir.text import format_shape as fmt
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


def _channel_axis(ctx: Any, attr: str, rank: int) -> int:
    layout = ctx.attrs[attr]
    if layout not in ("NCHW", "NHWC"):
        ctx.fail(f"{attr} must be 'NCHW' or 'NHWC', got {layout!r}")
    return rank - 1 if layout == "NHWC" and rank > 2 else 1


def _float_x(ctx: InferContext) -> Any:
    x = ctx.input("X")
    if x.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"X must be float16/32/64, got {x.dtype}{fmt(x.shape)}")
    return x


# --- lrn -----------------------------------------------------------------------------------------

_LRN_ATTRS = {"n": 5, "k": 2.0, "alpha": 1e-4, "beta": 0.75, "data_format": "NCHW"}


def _lrn_infer(ctx: InferContext) -> None:
    x = _float_x(ctx)
    if x.rank != 4:
        ctx.fail(f"X must be a 4-D image batch, got {fmt(x.shape)}")
    n = ctx.attrs["n"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        ctx.fail(f"n (the channels a window spans) must be a positive int, got {n!r}")
    _channel_axis(ctx, "data_format", 4)
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_output("MidOut", x.shape, x.dtype)


def window_sum(xp: Any, a: Any, axis: int, lo: int, hi: int, out: Any) -> Any:
    """out[c] = sum of a[c + o] for o in [lo, hi] along ``axis`` (zero beyond the ends):
    one slice add per offset."""
    size = a.shape[axis]
    out.fill(0)
    for o in range(lo, hi + 1):
        first, stop = max(0, -o), min(size, size - o)
        if first >= stop:
            continue
        dst: list[Any] = [slice(None)] * a.ndim
        src: list[Any] = [slice(None)] * a.ndim
        dst[axis], src[axis] = slice(first, stop), slice(first + o, stop + o)
        view = out[tuple(dst)]
        xp.add(view, a[tuple(src)], out=view)
    return out


def _lrn_window(ctx: Any) -> tuple[int, int]:
    """The channel offsets [lo, hi] of a window."""
    n = int(ctx.attrs["n"])
    lo = -((n - 1) // 2)
    return lo, lo + n - 1


def _lrn_kernel(ctx: KernelContext) -> Callable:
    xp, x = ctx.xp, ctx.input("X")
    axis = _channel_axis(ctx, "data_format", 4)
    lo, hi = _lrn_window(ctx)
    k, alpha, beta = (float(ctx.attrs[a]) for a in ("k", "alpha", "beta"))
    out_buf, mid_buf = ctx.buffer("Out"), ctx.buffer("MidOut")
    sq = xp.empty(x.shape, x.dtype)

    def lrn(a: Any) -> tuple[Any, Any]:
        mid = mid_buf if mid_buf is not None else xp.empty(x.shape, x.dtype)
        out = out_buf if out_buf is not None else xp.empty(x.shape, x.dtype)
        window_sum(xp, xp.multiply(a, a, out=sq), axis, lo, hi, mid)
        xp.multiply(mid, alpha, out=mid)
        xp.add(mid, k, out=mid)
        xp.power(mid, -beta, out=out)
        xp.multiply(out, a, out=out)
        return out, mid
    return lrn


def _lrn_grad_kernel(ctx: KernelContext) -> Callable:
    """dX = dOut * Mid^-beta - 2 alpha beta X * (the sum, over the windows holding each
    channel, of dOut * Out / Mid)."""
    xp, x = ctx.xp, ctx.input("X")
    axis = _channel_axis(ctx, "data_format", 4)
    lo, hi = _lrn_window(ctx)
    alpha, beta = float(ctx.attrs["alpha"]), float(ctx.attrs["beta"])
    dx_buf = ctx.buffer("X@GRAD")
    held = xp.empty(x.shape, x.dtype)

    def lrn_grad(a: Any, out: Any, mid: Any, g: Any) -> Any:
        dx = dx_buf if dx_buf is not None else xp.empty(x.shape, x.dtype)
        share = g * out / mid
        window_sum(xp, share, axis, -hi, -lo, held)
        xp.multiply(held, a, out=held)
        xp.power(mid, -beta, out=dx)
        xp.multiply(dx, g, out=dx)
        xp.subtract(dx, held * (2.0 * alpha * beta), out=dx)
        return dx
    return lrn_grad


def _lrn_grad(g: GradContext) -> None:
    emit_default_grad(g, ("X", "Out", "MidOut"), "lrn_grad", ("X",), ("Out",))


register(OpSpec("lrn", slots("X"), slots("Out", "MidOut"), _lrn_infer, _lrn_kernel,
                _lrn_grad, attrs=_LRN_ATTRS,
                doc="Local response normalisation across channels: MidOut = k + alpha * sum "
                    "of X^2 over a window of n channels around each, Out = X * "
                    "MidOut^-beta."))
register(OpSpec("lrn_grad", slots("X", "Out", "MidOut", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "X"}), _lrn_grad_kernel, attrs=_LRN_ATTRS))


# --- affine_channel ------------------------------------------------------------------------------

def _affine_infer(ctx: InferContext) -> None:
    x = _float_x(ctx)
    if x.rank < 2:
        ctx.fail(f"X must have a batch and a channel dim, got {fmt(x.shape)}")
    c = x.shape[_channel_axis(ctx, "data_layout", x.rank)]
    for slot in ("Scale", "Bias"):
        t = ctx.input(slot)
        if t.rank != 1 or (c >= 0 and t.shape[0] >= 0 and t.shape[0] != c):
            ctx.fail(f"{slot} {fmt(t.shape)} must be [C] = [{c}] for X {fmt(x.shape)}")
        if t.dtype != x.dtype:
            ctx.fail_dtype(f"{slot} is {t.dtype} but X is {x.dtype}")
    ctx.set_output("Out", x.shape, x.dtype)


def _param_shape(ctx: Any, rank: int, c: int) -> tuple[int, ...]:
    """A [C] vector's shape that broadcasts against X along its channel axis."""
    axis = _channel_axis(ctx, "data_layout", rank)
    return (c,) + (1,) * (rank - 1 - axis)


def _affine_kernel(ctx: KernelContext) -> Callable:
    xp, x = ctx.xp, ctx.input("X")
    shape = _param_shape(ctx, x.rank, ctx.input("Scale").shape[0])
    out_buf = ctx.buffer("Out")

    def affine_channel(a: Any, scale: Any, bias: Any) -> Any:
        out = out_buf if out_buf is not None else xp.empty(x.shape, x.dtype)
        xp.multiply(a, scale.reshape(shape), out=out)
        return xp.add(out, bias.reshape(shape), out=out)
    return affine_channel


def _affine_grad_kernel(ctx: KernelContext) -> Callable:
    xp, x = ctx.xp, ctx.input("X")
    axis = _channel_axis(ctx, "data_layout", x.rank)
    shape = _param_shape(ctx, x.rank, ctx.input("Scale").shape[0])
    others = tuple(i for i in range(x.rank) if i != axis)
    wanted = [s for s in ("X@GRAD", "Scale@GRAD", "Bias@GRAD") if ctx.has_output(s)]

    def affine_channel_grad(a: Any, scale: Any, g: Any) -> Any:
        got = {"X@GRAD": lambda: g * scale.reshape(shape),
               "Scale@GRAD": lambda: xp.sum(g * a, axis=others),
               "Bias@GRAD": lambda: xp.sum(g, axis=others)}
        out = tuple(got[s]() for s in wanted)
        return out[0] if len(out) == 1 else out
    return affine_channel_grad


def _affine_grad(g: GradContext) -> None:
    emit_default_grad(g, ("X", "Scale"), "affine_channel_grad", ("X", "Scale", "Bias"))


def _affine_grad_infer(ctx: InferContext) -> None:
    infer_like({"X@GRAD": "X", "Scale@GRAD": "Scale"})(ctx)
    if ctx.has_output("Bias@GRAD"):
        t = ctx.input("Scale")
        ctx.set_output("Bias@GRAD", t.shape, t.dtype)


_AFFINE_ATTRS = {"data_layout": "NCHW"}
register(OpSpec("affine_channel", slots("X", "Scale", "Bias"), slots("Out"), _affine_infer,
                _affine_kernel, _affine_grad, attrs=_AFFINE_ATTRS,
                doc="Out = X * Scale + Bias per channel (axis 1, or the last with "
                    "data_layout NHWC)."))
register(OpSpec("affine_channel_grad", slots("X", "Scale", "Out@GRAD"),
                slots("X@GRAD?", "Scale@GRAD?", "Bias@GRAD?"), _affine_grad_infer,
                _affine_grad_kernel, attrs=_AFFINE_ATTRS))
