"""Routing the rows of a batch by a mask, for `fluid.layers.IfElse`.

``split_lod_tensor``  OutTrue = the rows of X [N, ...] whose Mask [N] (or [N, 1]) is true,
                      in order; OutFalse the others. How many go each way is known only
                      when the op runs (dim 0 is -1)
``merge_lod_tensor``  Out [N, ...]: InTrue's rows where Mask is true, InFalse's where it is
                      false, in the order of the mask; X gives nothing but Paddle's slot

Each is the other's gradient. (Paddle's names, whose LoD level is always 0 here.)
"""
from __future__ import annotations

from typing import Any

from ..ir.text import format_shape as _fmt
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, dims_compatible, slots


def _mask(ctx: InferContext, rows: int) -> None:
    m = ctx.input("Mask")
    if m.dtype != "bool" or not (m.rank == 1 or (m.rank == 2 and m.shape[1] in (1, -1))):
        ctx.fail(f"the mask must be bool [N] or [N, 1], one value per row, got "
                 f"{m.dtype}{_fmt(m.shape)}")
    if not dims_compatible(m.shape[0], rows):
        ctx.fail(f"the mask has {m.shape[0]} rows but the batch {rows}")


def _split_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.rank < 1:
        ctx.fail("split_lod_tensor: X must have a batch dim")
    _mask(ctx, x.shape[0])
    ctx.set_output("OutTrue", (-1,) + x.shape[1:], x.dtype)
    ctx.set_output("OutFalse", (-1,) + x.shape[1:], x.dtype)


def _split_kernel(ctx: KernelContext):
    def split(x: Any, mask: Any):
        m = mask.reshape(-1)
        return x[m], x[~m]
    return split


def _split_grad(g: GradContext) -> None:
    """dX: the two sides' gradients put back in their rows (zeros for a side none reached)."""
    dx = g.in_grad("X")
    if not dx or dx[0] is None:
        return
    sides = []
    for slot in ("OutTrue", "OutFalse"):
        d = g.flowing(slot)
        if d is None:
            d = g.tmp(f"{slot}_zero_grad")
            g.emit("fill_zeros_like", {"X": g.output(slot)}, {"Out": [d]})
        sides.append(d)
    if all(g.flowing(s) is None for s in ("OutTrue", "OutFalse")):
        return
    g.emit("merge_lod_tensor", {"X": g.input("X"), "Mask": g.input("Mask"),
                                "InTrue": [sides[0]], "InFalse": [sides[1]]}, {"Out": dx})


register(OpSpec("split_lod_tensor", slots("X", "Mask"), slots("OutTrue", "OutFalse"),
                _split_infer, _split_kernel, _split_grad, attrs={"level": 0},
                host_access="reads",
                doc="OutTrue: the rows of X where Mask is true; OutFalse: the others"))


def _merge_infer(ctx: InferContext) -> None:
    t, f = ctx.input("InTrue"), ctx.input("InFalse")
    if t.dtype != f.dtype or t.shape[1:] != f.shape[1:]:
        ctx.fail(f"merge_lod_tensor: the two sides give {t.dtype}{_fmt(t.shape)} and "
                 f"{f.dtype}{_fmt(f.shape)}; each row must have one shape and dtype")
    m = ctx.input("Mask")
    _mask(ctx, m.shape[0])
    ctx.set_output("Out", (m.shape[0],) + t.shape[1:], t.dtype)


def _merge_kernel(ctx: KernelContext):
    xp = ctx.xp
    on_host = xp.__name__ == "numpy"

    def merge(x: Any, mask: Any, in_true: Any, in_false: Any):
        m = mask.reshape(-1)
        if on_host and (int(m.sum()) != len(in_true) or len(m) - int(m.sum()) != len(in_false)):
            raise ValueError(f"merge_lod_tensor: the mask routes {int(m.sum())} rows to the "
                             f"true side and {len(m) - int(m.sum())} to the false side, but "
                             f"the sides give {len(in_true)} and {len(in_false)} rows; an "
                             f"IfElse output must keep one row per input row")
        out = xp.empty((len(m),) + in_true.shape[1:], in_true.dtype)
        out[m] = in_true
        out[~m] = in_false
        return out
    return merge


def _merge_grad(g: GradContext) -> None:
    dout = g.flowing("Out")
    if dout is None or not (g.wants("InTrue") or g.wants("InFalse")):
        return
    outs = [g.in_grad(s)[0] or g.tmp(f"{s}_unused") for s in ("InTrue", "InFalse")]
    g.emit("split_lod_tensor", {"X": [dout], "Mask": g.input("Mask")},
           {"OutTrue": [outs[0]], "OutFalse": [outs[1]]})


register(OpSpec("merge_lod_tensor", slots("X", "Mask", "InTrue", "InFalse"), slots("Out"),
                _merge_infer, _merge_kernel, _merge_grad, attrs={"level": 0},
                shape_only=("X",), host_access="reads",
                doc="Out: InTrue's rows where Mask is true and InFalse's where it is false, "
                    "in the mask's order"))
