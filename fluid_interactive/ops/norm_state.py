"""Normalisations that read persistable state: data_norm (normalises by accumulated
batch statistics, which training updates) and spectral_norm (divides a weight by its
largest singular value, estimated by power iteration from persistable vectors).

``data_norm``  X [N, C], BatchSize, BatchSum, BatchSquareSum [C], optional scale_w, bias
[C] -> Y, Means, Scales [C], BatchSizeOut, BatchSumOut, BatchSquareSumOut [C].
Means = BatchSum / BatchSize, Scales = sqrt(BatchSize / BatchSquareSum); Y = (X - Means)
* Scales (then * scale_w + bias with ``enable_scale_and_shift``). With ``slot_dim`` > 0
the C columns are slots of slot_dim values whose first is the "show" count: a slot whose
show is 0 (|x| < 1e-7) gives zeros and adds nothing to the statistics. Training adds the
batch's statistics, as Paddle's data-norm table does with what the gradient op reports:
stat_out = summary_decay_rate * stat + (N, the column sums, the sums of squared
deviations from Means + N * epsilon); with slot_dim the shown rows' counts, and sums and
squares divided by them (+ count * epsilon), the count then counting 1. Inference leaves
them as they are.

``spectral_norm``  Weight (2-5 dims), U [h], V [w] -> Out = Weight / sigma. The weight is
seen as a matrix [h, w] with dim ``dim`` first; ``power_iters`` rounds of v = W^T u / (|W^T
u| + eps), u = W v / (|W v| + eps) start from copies of U and V (which stay as they are,
as in Paddle 1.8), and sigma = u^T W v. The gradient takes u and v as constants:
dW = dOut / sigma - sum(dOut * W) / sigma^2 * u v^T (exact once the iteration converged).
"""
from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import Any

from ..ir.records import FLOAT_DTYPES
from ..ir.text import format_shape as fmt
from .registry import register
from .spec import (
    GradContext,
    InferContext,
    KernelContext,
    OpSpec,
    dims_compatible,
    emit_default_grad,
    slots,
)

_SHOWN = 1e-7   # a show count below this (in magnitude) is zero

_STATS = ("BatchSize", "BatchSum", "BatchSquareSum")
_DN_ATTRS = {"epsilon": 1e-5, "slot_dim": -1, "summary_decay_rate": 0.9999999,
             "enable_scale_and_shift": False, "data_layout": "NCHW", "sync_stats": False,
             "is_test": None}


def _dn_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"X must be float16/32/64, got {x.dtype}{fmt(x.shape)}")
    if x.rank != 2:
        ctx.fail(f"X must be 2-D [N, C], got {fmt(x.shape)}")
    c = x.shape[1]
    slot_dim = int(ctx.attrs["slot_dim"])
    if slot_dim > 0 and c >= 0 and c % slot_dim:
        ctx.fail(f"slot_dim={slot_dim} must divide the {c} columns of X {fmt(x.shape)}")
    scaled = bool(ctx.attrs["enable_scale_and_shift"])
    for slot in _STATS + (("scale_w", "bias") if scaled else ()):
        if not ctx.has_input(slot):
            ctx.fail(f"{slot} is missing (enable_scale_and_shift needs scale_w and bias)")
        t = ctx.input(slot)
        if t.rank != 1 or not dims_compatible(t.shape[0], c):
            ctx.fail(f"{slot} {fmt(t.shape)} must be [C] = [{c}] for X {fmt(x.shape)}")
    ctx.set_output("Y", x.shape, x.dtype)
    for slot in ("Means", "Scales") + tuple(s + "Out" for s in _STATS):
        ctx.set_output(slot, (c,), x.dtype)


def _is_test(ctx: KernelContext) -> bool:
    flag = ctx.attrs.get("is_test")
    return bool(ctx.is_test) if flag is None else bool(flag)


def _shown(xp: Any, a: Any, slot_dim: int) -> Any:
    """1.0 where a value's slot is shown, else 0.0, shaped like X [N, C]."""
    n, c = a.shape
    show = xp.abs(a.reshape(n, c // slot_dim, slot_dim)[:, :, :1]) >= _SHOWN
    return xp.broadcast_to(show, (n, c // slot_dim, slot_dim)).reshape(n, c).astype(a.dtype)


def _batch_stats(xp: Any, a: Any, means: Any, shown: Any, eps: float) -> tuple:
    """What a batch adds to (BatchSize, BatchSum, BatchSquareSum) (see the module doc)."""
    dev = a - means
    if shown is None:
        n = a.shape[0]
        return (xp.full(means.shape, n, a.dtype), a.sum(axis=0),
                (dev * dev).sum(axis=0) + n * eps)
    count = shown.sum(axis=0)
    total, square = (a * shown).sum(axis=0), (dev * dev * shown).sum(axis=0)
    seen = count >= 1
    safe = xp.maximum(count, 1)
    return (xp.where(seen, 1.0, count).astype(a.dtype), xp.where(seen, total / safe, total),
            xp.where(seen, square / safe + count * eps, square))


def _dn_kernel(ctx: KernelContext) -> Callable:
    xp = ctx.xp
    eps, decay = float(ctx.attrs["epsilon"]), float(ctx.attrs["summary_decay_rate"])
    slot_dim = int(ctx.attrs["slot_dim"])
    scaled = bool(ctx.attrs["enable_scale_and_shift"])
    frozen = _is_test(ctx)

    def data_norm(a: Any, size: Any, total: Any, square: Any, *affine: Any) -> tuple:
        means = total / size
        scales = xp.sqrt(size / square)
        y = (a - means) * scales
        if scaled:
            y = y * affine[0] + affine[1]
        shown = _shown(xp, a, slot_dim) if slot_dim > 0 else None
        if shown is not None:
            y = y * shown
        if frozen:
            return y, means, scales, size.copy(), total.copy(), square.copy()
        added = _batch_stats(xp, a, means, shown, eps)
        new = [decay * old + more for old, more in zip((size, total, square), added)]
        return (y, means, scales, *new)
    return data_norm


def _dn_grad(g: GradContext) -> None:
    emit_default_grad(g, ("X", "Means", "Scales", "scale_w"), "data_norm_grad",
                      ("X", "scale_w", "bias"), ("Y",))


def _dn_grad_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.set_output("X@GRAD", x.shape, x.dtype)
    for slot in ("scale_w@GRAD", "bias@GRAD"):
        ctx.set_output(slot, (x.shape[1],), x.dtype)


def _dn_grad_kernel(ctx: KernelContext) -> Callable:
    """dX = dY * Scales (* scale_w), zero where a slot is not shown; dscale_w = sum of dY *
    (X - Means) * Scales, dbias = sum of dY."""
    xp = ctx.xp
    slot_dim = int(ctx.attrs["slot_dim"])
    wanted = [s for s in ("X@GRAD", "scale_w@GRAD", "bias@GRAD") if ctx.has_output(s)]

    def data_norm_grad(a: Any, means: Any, scales: Any, *rest: Any) -> Any:
        *scale_w, dy = rest
        if slot_dim > 0:
            dy = dy * _shown(xp, a, slot_dim)
        got = {"X@GRAD": lambda: dy * scales * (scale_w[0] if scale_w else 1.0),
               "scale_w@GRAD": lambda: (dy * (a - means) * scales).sum(axis=0),
               "bias@GRAD": lambda: dy.sum(axis=0)}
        out = tuple(got[s]() for s in wanted)
        return out[0] if len(out) == 1 else out
    return data_norm_grad


register(OpSpec("data_norm", slots("X", *_STATS, "scale_w?", "bias?"),
                slots("Y", "Means", "Scales", *(s + "Out" for s in _STATS)), _dn_infer,
                _dn_kernel, _dn_grad, attrs=_DN_ATTRS, inert_in_test=True,
                doc="Normalises X [N, C] by accumulated statistics: (X - BatchSum / "
                    "BatchSize) * sqrt(BatchSize / BatchSquareSum); training adds the "
                    "batch's statistics to them (summary_decay_rate times the old)."))
register(OpSpec("data_norm_grad", slots("X", "Means", "Scales", "scale_w?", "Y@GRAD"),
                slots("X@GRAD?", "scale_w@GRAD?", "bias@GRAD?"), _dn_grad_infer,
                _dn_grad_kernel, attrs=_DN_ATTRS))


# --- spectral_norm -------------------------------------------------------------------------------

_SN_ATTRS = {"dim": 0, "power_iters": 1, "eps": 1e-12}


def _sn_dim(ctx: Any, rank: int) -> int:
    dim = ctx.attrs["dim"]
    if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < rank:
        ctx.fail(f"dim must be an int in [0, {rank - 1}], got {dim!r}")
    return dim


def _sn_infer(ctx: InferContext) -> None:
    w = ctx.input("Weight")
    if w.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"Weight must be float, got {w.dtype}{fmt(w.shape)}")
    if not 2 <= w.rank <= 5:
        ctx.fail(f"Weight must have 2 to 5 dims, got {fmt(w.shape)}")
    dim = _sn_dim(ctx, w.rank)
    h = w.shape[dim]
    rest = -1 if any(d < 0 for d in w.shape) else prod(w.shape) // max(h, 1)
    for slot, size in (("U", h), ("V", rest)):
        t = ctx.input(slot)
        if t.rank != 1 or not dims_compatible(t.shape[0], size):
            ctx.fail(f"{slot} {fmt(t.shape)} must be [{size}] for Weight {fmt(w.shape)} and "
                     f"dim={dim}")
    iters = ctx.attrs["power_iters"]
    if isinstance(iters, bool) or not isinstance(iters, int) or iters < 0:
        ctx.fail(f"power_iters must be a non-negative int, got {iters!r}")
    ctx.set_output("Out", w.shape, w.dtype)


class _Matrix:
    """The weight as a matrix [h, w] with ``dim`` first, and back."""

    def __init__(self, ctx: KernelContext):
        shape = ctx.input("Weight").shape
        self.dim = _sn_dim(ctx, len(shape))
        self.moved = (shape[self.dim],) + shape[:self.dim] + shape[self.dim + 1:]
        self.h = shape[self.dim]
        self.w = prod(shape) // self.h
        self.eps, self.iters = float(ctx.attrs["eps"]), int(ctx.attrs["power_iters"])

    def of(self, xp: Any, a: Any) -> Any:
        return xp.moveaxis(a, self.dim, 0).reshape(self.h, self.w)

    def back(self, xp: Any, m: Any) -> Any:
        return xp.ascontiguousarray(xp.moveaxis(m.reshape(self.moved), 0, self.dim))

    def sigma(self, xp: Any, m: Any, u0: Any, v0: Any) -> tuple[Any, Any, Any]:
        """(sigma, u, v) after the power iterations from U and V."""
        u, v = u0, v0
        for _ in range(self.iters):   # a few rounds: each is two matrix-vector products
            v = m.T @ u
            v = v / (xp.sqrt((v * v).sum()) + self.eps)
            u = m @ v
            u = u / (xp.sqrt((u * u).sum()) + self.eps)
        return u @ (m @ v), u, v


def _sn_kernel(ctx: KernelContext) -> Callable:
    xp, mat = ctx.xp, _Matrix(ctx)

    def spectral_norm(w: Any, u: Any, v: Any) -> Any:
        m = mat.of(xp, w)
        sigma, _, _ = mat.sigma(xp, m, u, v)
        return mat.back(xp, m / sigma)
    return spectral_norm


def _sn_grad_kernel(ctx: KernelContext) -> Callable:
    xp, mat = ctx.xp, _Matrix(ctx)

    def spectral_norm_grad(w: Any, u0: Any, v0: Any, g: Any) -> Any:
        m, gm = mat.of(xp, w), mat.of(xp, g)
        sigma, u, v = mat.sigma(xp, m, u0, v0)
        dm = gm / sigma - ((gm * m).sum() / (sigma * sigma)) * xp.outer(u, v)
        return mat.back(xp, dm)
    return spectral_norm_grad


def _sn_grad(g: GradContext) -> None:
    emit_default_grad(g, ("Weight", "U", "V"), "spectral_norm_grad", ("Weight",))


def _sn_grad_infer(ctx: InferContext) -> None:
    w = ctx.input("Weight")
    ctx.set_output("Weight@GRAD", w.shape, w.dtype)


register(OpSpec("spectral_norm", slots("Weight", "U", "V"), slots("Out"), _sn_infer,
                _sn_kernel, _sn_grad, attrs=_SN_ATTRS,
                doc="Weight divided by its largest singular value, estimated by power_iters "
                    "rounds of power iteration from U [h] and V [w] (dim first)."))
register(OpSpec("spectral_norm_grad", slots("Weight", "U", "V", "Out@GRAD"),
                slots("Weight@GRAD"), _sn_grad_infer, _sn_grad_kernel, attrs=_SN_ATTRS))
