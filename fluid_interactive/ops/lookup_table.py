"""``lookup_table`` (the embedding) and its gradient.

``lookup_table``       Out[..., :] = W[Ids[..., 0]]; Ids int [..., 1]. Ids equal to
                       ``padding_idx`` (-1: none) give zero rows.
``lookup_table_grad``  W@GRAD. Dense (``is_sparse=False``): a [vocab, dim] tensor, the
                       rows of Out@GRAD added into the rows the batch looked up. Rows only
                       (``is_sparse=True`` or ``is_distributed=True``): a var of kind
                       ``selected_rows`` whose value is a `SelectedRows` (rows: the ids in
                       batch order, an id looked up twice listed twice; values: their
                       gradient rows; height: vocab). Either way ``padding_idx`` gets no
                       gradient: the sparse form leaves its lookups out of the rows
                       (Paddle 1.x kept them, with zero values).
"""
from __future__ import annotations

from collections.abc import Mapping
from math import prod
from typing import Any

import numpy as np

from ..ir.records import FLOAT_DTYPES, INT_DTYPES, SELECTED_ROWS
from ..ir.text import format_shape as _fmt
from ..util.selected_rows import SelectedRows
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, RowLookup, present, slots

_LOOKUP_ATTRS = {"padding_idx": -1, "is_sparse": False, "is_distributed": False}


def _padding_idx(attrs: Mapping[str, Any], vocab: int) -> int | None:
    idx = attrs["padding_idx"]
    if idx is None or idx == -1:
        return None
    return idx + vocab if idx < 0 else idx


def rows_only(attrs: Mapping[str, Any]) -> bool:
    """Whether the table's gradient is rows only: ``is_sparse``, or a table kept on the
    parameter servers (``is_distributed``), whose gradient travels as rows by nature."""
    return bool(attrs.get("is_sparse")) or bool(attrs.get("is_distributed"))


def _lookup_infer(ctx: InferContext) -> None:
    w, ids = ctx.input("W"), ctx.input("Ids")
    if w.rank != 2:
        ctx.fail(f"W must be a 2-D table [vocab, dim], got {_fmt(w.shape)}")
    if w.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"W must be float, got {w.dtype}")
    if ids.dtype not in INT_DTYPES:
        ctx.fail_dtype(f"Ids must be integer (int64) indices, got {ids.dtype}{_fmt(ids.shape)}")
    if ids.rank < 1 or ids.shape[-1] not in (1, -1):
        ctx.fail(f"Ids {_fmt(ids.shape)} must have a last dim of 1 (shape [..., 1]); "
                 f"declare the ids as shape=[1] per sample")
    idx = ctx.attrs["padding_idx"]
    vocab = w.shape[0]
    if idx is not None and vocab >= 0 and not -vocab <= idx < vocab and idx != -1:
        ctx.fail(f"padding_idx={idx} is outside the table W {_fmt(w.shape)}")
    ctx.set_output("Out", tuple(ids.shape[:-1]) + (w.shape[1],), w.dtype)


def _check_ids(xp: Any, ids: Any, vocab: int) -> None:
    if xp is np and ids.size:
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= vocab:
            bad = lo if lo < 0 else hi
            raise IndexError(f"lookup_table: id {bad} is outside the table of {vocab} rows")


def _lookup_kernel(ctx: KernelContext):
    xp = ctx.xp
    w, ids = ctx.input("W"), ctx.input("Ids")
    vocab, dim = w.shape
    k = prod(ids.shape[:-1])
    out_shape = ctx.output("Out").shape
    out = ctx.buffer("Out")
    pad = _padding_idx(ctx.attrs, vocab)

    def lookup(table, idx):
        flat = idx.reshape(k)
        _check_ids(xp, flat, vocab)
        dst = out if out is not None else xp.empty(out_shape, w.dtype)
        d2 = dst.reshape(k, dim)
        xp.take(table, flat, axis=0, out=d2)
        if pad is not None:
            d2[flat == pad] = 0
        return dst
    return lookup


def _lookup_grad(g: GradContext) -> None:
    dout = g.out_grad("Out")
    if not dout or not present(dout) or not g.wants("W"):
        return
    g.emit("lookup_table_grad", {"W": g.input("W"), "Ids": g.input("Ids"), "Out@GRAD": dout},
           {"W@GRAD": [n for n in g.in_grad("W") if n]}, g.attrs)


def _lookup_grad_infer(ctx: InferContext) -> None:
    w = ctx.input("W")
    ctx.set_output("W@GRAD", w.shape, w.dtype,
                   SELECTED_ROWS if rows_only(ctx.attrs) else "tensor")


def _dense_grad_kernel(ctx: KernelContext):
    xp = ctx.xp
    w, ids = ctx.input("W"), ctx.input("Ids")
    vocab, dim = w.shape
    k = prod(ids.shape[:-1])
    out = ctx.buffer("W@GRAD")
    pad = _padding_idx(ctx.attrs, vocab)

    def grad(_table, idx, g):
        dst = out if out is not None else xp.empty((vocab, dim), w.dtype)
        dst.fill(0)
        xp.add.at(dst, idx.reshape(k), g.reshape(k, dim))
        if pad is not None:
            dst[pad] = 0
        return dst
    return grad


def _sparse_grad_kernel(ctx: KernelContext):
    """Rows only: the ids (int64, padding left out) and their gradient rows, copied out
    of the step's buffers, so the value outlives the step (a watcher keeps it)."""
    w, ids = ctx.input("W"), ctx.input("Ids")
    vocab, dim = w.shape
    k = prod(ids.shape[:-1])
    pad = _padding_idx(ctx.attrs, vocab)

    def grad(_table, idx, g):
        flat, rows_grad = idx.reshape(k), g.reshape(k, dim)
        if pad is None:
            return SelectedRows(flat.astype(np.int64), rows_grad.copy(), vocab)
        keep = flat != pad
        return SelectedRows(flat[keep].astype(np.int64, copy=False), rows_grad[keep], vocab)
    return grad


def _lookup_grad_kernel(ctx: KernelContext):
    if ctx.output("W@GRAD").kind == SELECTED_ROWS:
        return _sparse_grad_kernel(ctx)
    return _dense_grad_kernel(ctx)


register(OpSpec("lookup_table", slots("W", "Ids"), slots("Out"), _lookup_infer, _lookup_kernel,
                _lookup_grad, attrs=_LOOKUP_ATTRS, row_lookup=RowLookup(),
                doc="Embedding lookup: Out[..., :] = W[Ids[..., 0]] (Ids [..., 1] int); rows "
                    "of padding_idx are zero and get no gradient."))
register(OpSpec("lookup_table_grad", slots("W", "Ids", "Out@GRAD"), slots("W@GRAD"),
                _lookup_grad_infer, _lookup_grad_kernel, attrs=_LOOKUP_ATTRS,
                shape_only=("W",),
                row_lookup=RowLookup(out_grad="Out@GRAD", table_grad="W@GRAD"),
                doc="W@GRAD: dense, or rows only (a SelectedRows) with is_sparse or "
                    "is_distributed; padding_idx gets no gradient."))
