"""Selecting by a mask, and the mask of a padded batch's time steps.

``where``               Out = X where Condition is true, else Y. Condition (bool) and Y
                        have X's rank, each dim X's or 1 (NumPy broadcasting at equal rank:
                        a [1, 1, 1] Y of zeros fills with zeros). Exact: no arithmetic mixes
                        the two sides, so a NaN or an inf on the side not taken never
                        reaches Out, nor its gradient
``sequence_step_mask``  Out [T, B, 1, ...] (``rank`` dims) = t < Lengths[b] for the T steps
                        of a padded batch X [B, T, ...], read for its shape alone: the
                        time-major mask a loop over the steps slices once per step

``fluid.layers.DynamicRNN`` is built on them: a row whose step is past its length keeps
its memory (``where(mask_t, new, memory)``) and gives a zero output.
"""
from __future__ import annotations

from typing import Any

from ..ir.text import format_shape as _fmt
from .registry import register
from .rnn import check_lengths, check_lengths_input, new_or
from .spec import (
    GradContext,
    InferContext,
    KernelContext,
    OpSpec,
    dims_compatible,
    emit_default_grad,
    slots,
)

# --- where ---------------------------------------------------------------------------------------


def _where_infer(ctx: InferContext) -> None:
    cond, x, y = ctx.input("Condition"), ctx.input("X"), ctx.input("Y")
    if cond.dtype != "bool":
        ctx.fail_dtype(f"where: Condition must be bool, got {cond.dtype}; compare first "
                       f"(fluid.layers.less_than, ...) or cast to bool")
    if x.dtype != y.dtype:
        ctx.fail_dtype(f"where: X and Y must have one dtype, got X {x.dtype} and Y {y.dtype}")
    for slot, t in (("Condition", cond), ("Y", y)):
        if t.rank != x.rank or not all(c == 1 or dims_compatible(c, d)
                                       for c, d in zip(t.shape, x.shape)):
            ctx.fail(f"where: {slot} {_fmt(t.shape)} must have X's rank with each dim X's "
                     f"or 1, to select from X {_fmt(x.shape)}")
    ctx.set_output("Out", x.shape, x.dtype)


def _where_kernel(ctx: KernelContext):
    xp, out, t = ctx.xp, ctx.buffer("Out"), ctx.output("Out")

    def where(cond: Any, x: Any, y: Any) -> Any:
        o = new_or(out, xp, t.shape, t.dtype)
        xp.copyto(o, y)
        xp.copyto(o, x, where=cond)
        return o
    return where


def _where_grad(g: GradContext) -> None:
    emit_default_grad(g, ("Condition", "Y"), "where_grad", ("X", "Y"))


def _where_grad_infer(ctx: InferContext) -> None:
    dout, y = ctx.input("Out@GRAD"), ctx.input("Y")
    ctx.set_output("X@GRAD", dout.shape, dout.dtype)
    ctx.set_output("Y@GRAD", y.shape, dout.dtype)


def _where_grad_kernel(ctx: KernelContext):
    """X@GRAD = dOut where Condition, else 0; Y@GRAD the other way round, summed over the
    dims Y was broadcast along."""
    xp, t, y = ctx.xp, ctx.input("Out@GRAD"), ctx.input("Y")
    wants_x, wants_y = ctx.has_output("X@GRAD"), ctx.has_output("Y@GRAD")
    dx_buf, dy_buf = ctx.buffer("X@GRAD"), ctx.buffer("Y@GRAD")
    spread = tuple(i for i, (a, b) in enumerate(zip(y.shape, t.shape)) if a != b)
    if spread:
        dy_buf = None   # the buffer has Y's shape; the selection needs dOut's

    def grad(cond: Any, y_value: Any, dout: Any) -> Any:
        got = []
        if wants_x:
            dx = new_or(dx_buf, xp, t.shape, t.dtype)
            dx.fill(0)
            xp.copyto(dx, dout, where=cond)
            got.append(dx)
        if wants_y:
            dy = new_or(dy_buf, xp, t.shape, t.dtype)
            xp.copyto(dy, dout)
            xp.copyto(dy, 0, where=cond)
            got.append(dy.sum(axis=spread, keepdims=True) if spread else dy)
        return got[0] if len(got) == 1 else tuple(got)
    return grad


register(OpSpec("where", slots("Condition", "X", "Y"), slots("Out"), _where_infer,
                _where_kernel, _where_grad,
                doc="Out = X where Condition else Y; Condition and Y have X's rank, each "
                    "dim X's or 1"))
register(OpSpec("where_grad", slots("Condition", "Y", "Out@GRAD"), slots("X@GRAD?", "Y@GRAD?"),
                _where_grad_infer, _where_grad_kernel, shape_only=("Y",),
                doc="X@GRAD = Out@GRAD where Condition else 0; Y@GRAD = 0 where Condition "
                    "else Out@GRAD, summed over the dims Y was broadcast along"))


# --- sequence_step_mask --------------------------------------------------------------------------

def _step_mask_infer(ctx: InferContext) -> None:
    x, rank = ctx.input("X"), int(ctx.attrs["rank"])
    if x.rank < 2:
        ctx.fail(f"sequence_step_mask: X must be a padded batch [B, T, ...], got "
                 f"{_fmt(x.shape)}")
    if rank < 2:
        ctx.fail(f"sequence_step_mask: rank must be at least 2 ([T, B]), got {rank}")
    check_lengths_input(ctx, x.shape[0], "sequence_step_mask")
    ctx.set_output("Out", (x.shape[1], x.shape[0]) + (1,) * (rank - 2), "bool")


def _step_mask_kernel(ctx: KernelContext):
    xp, t = ctx.xp, ctx.output("Out")
    steps, batch = t.shape[0], t.shape[1]
    out = ctx.buffer("Out")
    step_column = xp.arange(steps).reshape(steps, 1)
    on_host = xp.__name__ == "numpy"   # a bounds check on a device would read back

    def mask(x: Any, lengths: Any) -> Any:
        if on_host and lengths.size:
            check_lengths(lengths, steps)
        o = new_or(out, xp, t.shape, t.dtype)
        xp.less(step_column, lengths.reshape(1, batch), out=o.reshape(steps, batch))
        return o
    return mask


register(OpSpec("sequence_step_mask", slots("X", "Lengths"), slots("Out"), _step_mask_infer,
                _step_mask_kernel, attrs={"rank": 3}, shape_only=("X",),
                doc="Out[t, b] = t < Lengths[b] for the T steps of a padded batch X [B, T, "
                    "...] (its shape alone), time-major [T, B, 1, ...] with rank dims"))
