"""Sequence ops that index into a padded batch: X [B, T, ...] plus int Lengths [B].

``sequence_enumerate``  Out [B, T, win_size]: the ids X[b, t], ..., X[b, t + win_size - 1],
                        pad_value for a position at or past the row's length
``sequence_reshape``    Out [B, T', new_dim]: each row's valid values (flattened) in rows of
                        new_dim; OutLengths = Lengths * D / new_dim (must divide)
``sequence_scatter``    Out = X [B, D] plus Updates[b, t] added at X[b, Ids[b, t]] for the
                        valid positions t of row b
"""
from __future__ import annotations

from typing import Any

from ..ir.records import FLOAT_DTYPES, INT_DTYPES
from ..ir.text import format_shape as _fmt
from .registry import register
from .rnn import Unpack, new_or
from .sequence_edit import (
    batch_with_lengths,
    check_len_slot,
    masked,
    on_host,
    one_or_tuple,
    padded_input,
    row_lengths,
    time_mask,
    wanted,
)
from .spec import (
    InferContext,
    KernelContext,
    OpSpec,
    dims_compatible,
    emit_default_grad,
    infer_like,
    slots,
)


def _ids_input(ctx: InferContext, slot: str, what: str):
    """Ids [B, T] (or [B, T, 1]) of an int dtype."""
    t = padded_input(ctx, what, slot)
    if t.dtype not in INT_DTYPES:
        ctx.fail_dtype(f"{what}: {slot} must hold int ids, got {t.dtype}")
    if t.rank > 3 or (t.rank == 3 and t.shape[2] not in (1, -1)):
        ctx.fail(f"{what}: {slot} must be [B, T] (or [B, T, 1]), got {_fmt(t.shape)}")
    return t


# --- sequence_enumerate --------------------------------------------------------------------------

def _enumerate_infer(ctx: InferContext) -> None:
    x = _ids_input(ctx, "X", "sequence_enumerate")
    check_len_slot(ctx, "Lengths", x.shape[0], "sequence_enumerate")
    win = int(ctx.attrs["win_size"])
    if win < 1:
        ctx.fail(f"sequence_enumerate: win_size must be >= 1, got {win}")
    ctx.set_output("Out", (x.shape[0], x.shape[1], win), x.dtype)


def _enumerate_kernel(ctx: KernelContext):
    xp, x, out = ctx.xp, ctx.input("X"), ctx.buffer("Out")
    win, pad = int(ctx.attrs["win_size"]), int(ctx.attrs["pad_value"])
    batch, time = x.shape[0], x.shape[1]
    at = xp.arange(time).reshape(1, time, 1) + xp.arange(win).reshape(1, 1, win)
    rows = xp.arange(batch).reshape(-1, 1, 1)
    t = ctx.output("Out")

    def enumerate_(a, lengths=None):
        n = row_lengths(xp, lengths, batch, time)
        inside = at < n.reshape(-1, 1, 1)
        ids = a.reshape(batch, time)[rows, xp.where(inside, at, 0)]
        return masked(xp, new_or(out, xp, t.shape, t.dtype), ids, inside, pad)
    return enumerate_


register(OpSpec("sequence_enumerate", slots("X", "Lengths?"), slots("Out"), _enumerate_infer,
                _enumerate_kernel, attrs={"win_size": 2, "pad_value": 0},
                doc="Out[b, t, k] = X[b, t + k] for t + k < Lengths[b], else pad_value: every "
                    "window of win_size ids"))


# --- sequence_reshape ----------------------------------------------------------------------------

def _reshape_infer(ctx: InferContext) -> None:
    x = batch_with_lengths(ctx, "sequence_reshape")
    new_dim = int(ctx.attrs["new_dim"])
    if x.rank != 3 or x.shape[2] < 1:
        ctx.fail(f"sequence_reshape: X must be [B, T, D] with D known, got {_fmt(x.shape)}")
    if new_dim < 1:
        ctx.fail(f"sequence_reshape: new_dim must be >= 1, got {new_dim}")
    d, t = x.shape[2], x.shape[1]
    if t >= 0 and not ctx.has_input("Lengths") and (t * d) % new_dim:
        ctx.fail(f"sequence_reshape: rows of {t} steps of {d} values cannot be cut into rows "
                 f"of new_dim={new_dim}; each sequence's length * {d} must divide by it")
    steps = -1 if t < 0 else -(-t * d // new_dim)
    ctx.set_output("Out", (x.shape[0], steps, new_dim), x.dtype)
    ctx.set_output("OutLengths", (x.shape[0],), "int64")


def _reshape_masks(ctx: KernelContext):
    """fn(lengths) -> (mask over the first T * D flat values of each row, new lengths)."""
    xp, x = ctx.xp, ctx.input("X")
    batch, time, d = x.shape
    new_dim = int(ctx.attrs["new_dim"])
    flat_row = xp.arange(time * d).reshape(1, -1)

    def masks(lengths):
        n = row_lengths(xp, lengths, batch, time)
        if on_host(xp) and batch and ((n * d) % new_dim).any():
            raise ValueError(f"sequence_reshape: a sequence of length L holds L * {d} values, "
                             f"which must divide by new_dim={new_dim}; lengths "
                             f"{n.tolist()} do not all")
        return flat_row < (n * d).reshape(-1, 1), (n * d) // new_dim
    return masks


def _reshape_kernel(ctx: KernelContext):
    xp, x, t = ctx.xp, ctx.input("X"), ctx.output("Out")
    masks, batch, size = _reshape_masks(ctx), x.shape[0], x.shape[1] * x.shape[2]

    def reshape(a, lengths=None):
        m, n_out = masks(lengths)
        out = xp.zeros(t.shape, t.dtype)
        masked(xp, out.reshape(batch, -1)[:, :size], a.reshape(batch, size), m)
        return out, n_out.astype("int64")
    return reshape


def _reshape_grad_kernel(ctx: KernelContext):
    xp, x = ctx.xp, ctx.input("X")
    masks, batch, size = _reshape_masks(ctx), x.shape[0], x.shape[1] * x.shape[2]
    out = ctx.buffer("X@GRAD")

    def reshape_grad(*args):   # X (its shape), Lengths?, dOut
        m, _ = masks(args[1] if len(args) == 3 else None)
        dx = new_or(out, xp, x.shape, x.dtype)
        masked(xp, dx.reshape(batch, size), args[-1].reshape(batch, -1)[:, :size], m)
        return dx
    return reshape_grad


register(OpSpec("sequence_reshape", slots("X", "Lengths?"), slots("Out", "OutLengths"),
                _reshape_infer, _reshape_kernel,
                lambda g: emit_default_grad(g, ("X", "Lengths"), "sequence_reshape_grad",
                                            ("X",)),
                attrs={"new_dim": 1}, host_access="reads",
                doc="Each row's valid values of X [B, T, D] in rows of new_dim: Out "
                    "[B, ceil(T * D / new_dim), new_dim], OutLengths = Lengths * D / new_dim"))
register(OpSpec("sequence_reshape_grad", slots("X", "Lengths?", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "X"}), _reshape_grad_kernel, attrs={"new_dim": 1},
                shape_only=("X",), host_access="reads"))


# --- sequence_scatter ----------------------------------------------------------------------------

def _scatter_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    ids = _ids_input(ctx, "Ids", "sequence_scatter")
    upd = ctx.input("Updates")
    if x.rank != 2 or x.dtype not in FLOAT_DTYPES:
        ctx.fail(f"sequence_scatter: X must be float [B, D], got {x.dtype}{_fmt(x.shape)}")
    if upd.dtype != x.dtype or upd.rank != ids.rank or not all(
            dims_compatible(a, b) for a, b in zip(upd.shape, ids.shape)):
        ctx.fail(f"sequence_scatter: Updates {upd.dtype}{_fmt(upd.shape)} must match Ids "
                 f"{_fmt(ids.shape)} in shape and X ({x.dtype}) in dtype")
    if not dims_compatible(ids.shape[0], x.shape[0]):
        ctx.fail(f"sequence_scatter: Ids {_fmt(ids.shape)} need one row per row of X "
                 f"{_fmt(x.shape)}")
    check_len_slot(ctx, "Lengths", x.shape[0], "sequence_scatter")
    ctx.set_output("Out", x.shape, x.dtype)


def _scatter_places(ctx: KernelContext, x_slot: str = "X"):
    """fn(ids, lengths) -> (flat positions in X [B, T], mask [B, T]), bounds checked."""
    xp, x, ids_t = ctx.xp, ctx.input(x_slot), ctx.input("Ids")
    batch, width, time = x.shape[0], x.shape[1], ids_t.shape[1]
    base = (xp.arange(batch) * width).reshape(-1, 1)

    def places(ids: Any, lengths: Any):
        n = row_lengths(xp, lengths, batch, time)
        m = time_mask(xp, n, time, 2)
        ids = ids.reshape(batch, time)
        if on_host(xp) and (((ids < 0) | (ids >= width)) & m).any():
            lo, hi = int(ids[m].min()), int(ids[m].max())
            raise IndexError(f"sequence_scatter: ids must lie in [0, {width}) (X's width), "
                             f"got ids from {lo} to {hi}")
        return xp.where(m, base + ids, 0), m
    return places


def _scatter_kernel(ctx: KernelContext):
    xp, x = ctx.xp, ctx.input("X")
    places, out = _scatter_places(ctx), ctx.buffer("Out")
    size = x.shape[0] * x.shape[1]

    def scatter(a, ids, updates, lengths=None):
        at, m = places(ids, lengths)
        w = xp.where(m, updates.reshape(m.shape), 0)
        added = xp.bincount(at.reshape(-1), weights=w.reshape(-1), minlength=size)
        return xp.add(a, added.reshape(x.shape), out=new_or(out, xp, x.shape, x.dtype),
                      casting="unsafe")
    return scatter


def _scatter_grad_kernel(ctx: KernelContext):
    """dX = dOut; dUpdates[b, t] = dOut[b, Ids[b, t]] at valid positions, else 0."""
    xp, upd = ctx.xp, ctx.input("Updates")
    places = _scatter_places(ctx, "Out@GRAD")
    unpack = Unpack(ctx, ("Ids", "Updates", "Lengths", "Out@GRAD"))
    wants = wanted(ctx, ("X@GRAD", "Updates@GRAD"))

    def scatter_grad(*args):
        a = unpack(args)
        dout, got = a["Out@GRAD"], []
        if "X@GRAD" in wants:
            got.append(dout.copy())
        if "Updates@GRAD" in wants:
            at, m = places(a["Ids"], a.get("Lengths"))
            got.append(xp.where(m, dout.reshape(-1)[at], 0).reshape(upd.shape))
        return one_or_tuple(got)
    return scatter_grad


register(OpSpec("sequence_scatter", slots("X", "Ids", "Updates", "Lengths?"), slots("Out"),
                _scatter_infer, _scatter_kernel,
                lambda g: emit_default_grad(g, ("Ids", "Updates", "Lengths"),
                                            "sequence_scatter_grad", ("X", "Updates")),
                host_access="reads",
                doc="Out = X [B, D] with Updates[b, t] added at column Ids[b, t] of row b, "
                    "for each valid position t"))
register(OpSpec("sequence_scatter_grad", slots("Ids", "Updates", "Lengths?", "Out@GRAD"),
                slots("X@GRAD?", "Updates@GRAD?"),
                infer_like({"X@GRAD": "Out@GRAD", "Updates@GRAD": "Updates"}),
                _scatter_grad_kernel, shape_only=("Updates",), host_access="reads"))
