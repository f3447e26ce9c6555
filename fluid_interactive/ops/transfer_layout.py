"""``transfer_layout``: X [4-D, in ``src_layout``] -> Out, the same values in
``dst_layout`` (layouts.py), a contiguous array. The plan pass `passes.layout` puts one at
each end of a chain of ops it runs in another layout than NCHW; a program as written
never holds one. Where the move only relocates size-1 dims (one image, batch innermost),
Out is a view of X: the same memory order."""
from __future__ import annotations

from typing import Any

from .layouts import CHWN, NCHW, check_layout, from_layout, permutation, to_layout
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, slots

_ATTRS = {"src_layout": "NCHW", "dst_layout": "NCHW"}


def _layouts(ctx: Any) -> tuple[str, str]:
    known = (NCHW, CHWN)   # the layouts the plan pass moves images between
    return check_layout(ctx, "src_layout", known), check_layout(ctx, "dst_layout", known)


def _infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.rank != 4:
        ctx.fail(f"X must be a 4-D image batch, got rank {x.rank}")
    src, dst = _layouts(ctx)
    ctx.set_output("Out", to_layout(from_layout(x.shape, src), dst), x.dtype)


def _moves_only_ones(shape: tuple[int, ...], perm: tuple[int, ...]) -> bool:
    """Whether transposing by ``perm`` keeps the order of the dims larger than 1."""
    big = [d for d in range(len(shape)) if shape[d] != 1]
    return [d for d in perm if shape[d] != 1] == big


def _kernel(ctx: KernelContext):
    xp = ctx.xp
    src, dst = _layouts(ctx)
    perm = permutation(src, dst)
    x, shape = ctx.input("X"), ctx.output("Out").shape
    out = ctx.buffer("Out")
    if _moves_only_ones(x.shape, perm):
        def reshaped(a):
            if a.flags.c_contiguous:
                return a.reshape(shape)
            return xp.ascontiguousarray(a.transpose(perm))
        return reshaped

    def transfer(a):
        dst_array = out if out is not None else xp.empty(shape, a.dtype)
        xp.copyto(dst_array, a.transpose(perm))
        return dst_array
    return transfer


def _grad(g: GradContext) -> None:
    if not g.wants("X") or g.flowing("Out") is None:
        return
    attrs = {"src_layout": g.attrs["dst_layout"], "dst_layout": g.attrs["src_layout"]}
    g.emit("transfer_layout", {"X": [g.flowing("Out")]},
           {"Out": [n for n in g.in_grad("X") if n]}, attrs)


register(OpSpec("transfer_layout", slots("X"), slots("Out"), _infer, _kernel, _grad,
                attrs=_ATTRS, aliases=True,
                doc="Out = X moved from src_layout to dst_layout (NCHW, or CHWN: batch "
                    "innermost), a contiguous array; put in by the layout plan pass."))
