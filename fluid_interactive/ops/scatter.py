"""Scattering updates into a copy of a tensor, by integer indices.

``scatter``         Out = X with its rows Ids (int [N]) replaced by Updates [N, ...]. With
                    ``overwrite`` (Paddle's default) a row listed twice takes its last
                    update; without, the listed rows are zeroed and every update to them
                    added
``scatter_nd_add``  Out = X with Updates added at the positions Index [..., k] addresses
                    (as in ``gather_nd``); Updates is Index.shape[:-1] + X.shape[k:] and
                    repeated positions add up

Gradients are exact: X's gradient is dOut except in the rows ``scatter`` replaced; an
update's gradient is dOut at its position (zero for an update a later one overwrote).
"""
from __future__ import annotations

from typing import Any

from ..ir.text import format_shape as _fmt
from .gather import NdIndex, check_bounds, index_vector, last_occurrences, nd_depth
from .registry import register
from .spec import (
    GradContext,
    InferContext,
    KernelContext,
    OpSpec,
    emit_default_grad,
    slots,
)


def _copy_of(xp: Any, out: Any, x: Any) -> Any:
    if out is None:
        return x.copy()
    xp.copyto(out, x)
    return out


def _same_dtype(ctx: InferContext, op: str) -> None:
    x, updates = ctx.input("X"), ctx.input("Updates")
    if x.dtype != updates.dtype:
        ctx.fail_dtype(f"{op}: Updates ({updates.dtype}) must have X's dtype ({x.dtype})")


def _wants(ctx: KernelContext) -> tuple[bool, bool]:
    return ctx.has_output("X@GRAD"), ctx.has_output("Updates@GRAD")


def _pair(wants: tuple[bool, bool], dx: Any, du: Any) -> Any:
    got = [g for w, g in zip(wants, (dx, du)) if w]
    return got[0] if len(got) == 1 else tuple(got)


# --- scatter ----------------------------------------------------------------------------------

def _scatter_infer(ctx: InferContext) -> None:
    x, ids, updates = ctx.input("X"), ctx.input("Ids"), ctx.input("Updates")
    n = index_vector(ctx, ids, "scatter: Ids")
    _same_dtype(ctx, "scatter")
    if x.rank == 0 or updates.rank != x.rank or any(
            a >= 0 and b >= 0 and a != b for a, b in zip(updates.shape[1:], x.shape[1:])) \
            or (n >= 0 and updates.shape[0] >= 0 and n != updates.shape[0]):
        ctx.fail(f"scatter: Updates {_fmt(updates.shape)} must be [N] + X.shape[1:] for X "
                 f"{_fmt(x.shape)} and N = {n if n >= 0 else '?'} ids")
    ctx.set_output("Out", x.shape, x.dtype)


def _scatter_kernel(ctx: KernelContext):
    xp, rows = ctx.xp, ctx.input("X").shape[0]
    out, overwrite = ctx.buffer("Out"), bool(ctx.attrs["overwrite"])

    def scatter(x: Any, ids: Any, updates: Any) -> Any:
        idx = ids.reshape(-1)
        check_bounds(xp, idx, rows, "scatter: id")
        o = _copy_of(xp, out, x)
        if overwrite:   # in order, as Paddle: the last update of a row stays
            targets, last = last_occurrences(xp, idx, rows)
            if targets.shape[0] == idx.shape[0]:   # no row twice: any order will do
                o[idx] = updates
            else:
                o[targets] = updates[last]
        else:
            o[idx] = 0
            xp.add.at(o, idx, updates)
        return o
    return scatter


def _scatter_grad_kernel(ctx: KernelContext):
    xp, overwrite = ctx.xp, bool(ctx.attrs["overwrite"])
    rows = ctx.input("Out@GRAD").shape[0]
    wants = _wants(ctx)
    dx_buf = ctx.buffer("X@GRAD")

    def grad(ids: Any, dout: Any) -> Any:
        idx = ids.reshape(-1)
        dx = du = None
        if wants[0]:   # the replaced rows of X reach nothing
            dx = _copy_of(xp, dx_buf, dout)
            dx[idx] = 0
        if wants[1]:
            du = xp.take(dout, idx, axis=0)
            if overwrite:   # an update a later one replaced reaches nothing
                kept = xp.zeros(idx.shape, bool)
                kept[last_occurrences(xp, idx, rows)[1]] = True
                du[~kept] = 0
        return _pair(wants, dx, du)
    return grad


def _scatter_grad_infer(ctx: InferContext) -> None:
    dout, ids = ctx.input("Out@GRAD"), ctx.input("Ids")
    ctx.set_output("X@GRAD", dout.shape, dout.dtype)
    ctx.set_output("Updates@GRAD", (ids.shape[0],) + dout.shape[1:], dout.dtype)


def _scatter_grad(g: GradContext) -> None:
    emit_default_grad(g, ("Ids",), "scatter_grad", ("X", "Updates"))


_SCATTER = {"overwrite": True}
register(OpSpec("scatter", slots("X", "Ids", "Updates"), slots("Out"), _scatter_infer,
                _scatter_kernel, _scatter_grad, attrs=_SCATTER,
                doc="Out = X with rows Ids replaced by Updates (overwrite: the last of "
                    "repeated ids wins), or zeroed and the updates added (overwrite=False)."))
register(OpSpec("scatter_grad", slots("Ids", "Out@GRAD"), slots("X@GRAD?", "Updates@GRAD?"),
                _scatter_grad_infer, _scatter_grad_kernel, attrs=_SCATTER,
                doc="X@GRAD = dOut with the rows Ids zeroed; Updates@GRAD = dOut[Ids] (zero "
                    "for an overwritten update)."))


# --- scatter_nd_add ---------------------------------------------------------------------------

def _scatter_nd_add_infer(ctx: InferContext) -> None:
    x, index, updates = ctx.input("X"), ctx.input("Index"), ctx.input("Updates")
    k = nd_depth(ctx, x, index, "scatter_nd_add")
    _same_dtype(ctx, "scatter_nd_add")
    want = index.shape[:-1] + x.shape[k:]
    if updates.rank != len(want) or any(a >= 0 and b >= 0 and a != b
                                        for a, b in zip(updates.shape, want)):
        ctx.fail(f"scatter_nd_add: Updates {_fmt(updates.shape)} must be Index.shape[:-1] + "
                 f"X.shape[{k}:] = {_fmt(want)} (X {_fmt(x.shape)}, Index "
                 f"{_fmt(index.shape)})")
    ctx.set_output("Out", x.shape, x.dtype)


def _scatter_nd_add_kernel(ctx: KernelContext):
    xp, x = ctx.xp, ctx.input("X")
    nd = NdIndex(xp, x.shape, ctx.input("Index").shape, "scatter_nd_add: index")
    out = ctx.buffer("Out")

    def scatter_nd_add(a: Any, index: Any, updates: Any) -> Any:
        o = _copy_of(xp, out, a)
        xp.add.at(o.reshape(nd.flat_shape), nd.positions(index),
                  updates.reshape((nd.rows,) + nd.rest))
        return o
    return scatter_nd_add


def _scatter_nd_add_grad_kernel(ctx: KernelContext):
    xp, x = ctx.xp, ctx.input("Out@GRAD")
    nd = NdIndex(xp, x.shape, ctx.input("Index").shape, "scatter_nd_add: index")
    wants, u_shape = _wants(ctx), ctx.inputs("Updates")[0].shape

    def grad(index: Any, _updates: Any, dout: Any) -> Any:
        du = None
        if wants[1]:
            du = xp.take(dout.reshape(nd.flat_shape), nd.positions(index), axis=0)
            du = du.reshape(u_shape)
        return _pair(wants, dout, du)
    return grad


def _scatter_nd_add_grad_infer(ctx: InferContext) -> None:
    dout, updates = ctx.input("Out@GRAD"), ctx.input("Updates")
    ctx.set_output("X@GRAD", dout.shape, dout.dtype)
    ctx.set_output("Updates@GRAD", updates.shape, dout.dtype)


register(OpSpec("scatter_nd_add", slots("X", "Index", "Updates"), slots("Out"),
                _scatter_nd_add_infer, _scatter_nd_add_kernel,
                lambda g: emit_default_grad(g, ("Index", "Updates"), "scatter_nd_add_grad",
                                            ("X", "Updates")),
                doc="Out = X with Updates added at the positions Index [..., k] addresses; "
                    "repeated positions add up."))
register(OpSpec("scatter_nd_add_grad", slots("Index", "Updates", "Out@GRAD"),
                slots("X@GRAD?", "Updates@GRAD?"), _scatter_nd_add_grad_infer,
                _scatter_nd_add_grad_kernel, aliases=True, shape_only=("Updates",),
                doc="X@GRAD = dOut (the same array); Updates@GRAD = dOut at the positions "
                    "Index addresses."))
