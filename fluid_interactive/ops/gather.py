"""Gathering rows and elements by integer indices.

``gather``        Out = X[Index] along dim 0; Index int [N] or [N, 1]. ``overwrite`` picks
                  how X's gradient treats an index listed twice: Paddle's default (True)
                  keeps the last occurrence's row of dOut, False adds them all up (the
                  true gradient)
``gather_nd``     Out[i...] = X[Index[i..., 0], ..., Index[i..., k-1]]: Index [..., k] with
                  k <= rank(X) picks elements (k = rank) or slices; Out is
                  Index.shape[:-1] + X.shape[k:]
``index_select``  Out = X with dim ``dim`` re-indexed by Index [N] (or [N, 1])
``index_sample``  Out[b, j] = X[b, Index[b, j]] for X [B, D], Index [B, K]
``multiplex``     Out[i] = X[Ids[i, 0]][i]: each row taken from the candidate Ids names

Indices must lie in [0, size): on the host a kernel checks them and fails with an
`IndexError` naming the bad one (on a device the check would read values back every call,
so it is left out there). Gradients add up the contributions of repeated indices (except
``gather`` with ``overwrite``, as Paddle does).
"""
from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any

from ..ir.text import format_shape as _fmt
from .registry import register
from .shape import normalize_axis
from .spec import (
    GradContext,
    InferContext,
    KernelContext,
    OpSpec,
    TensorType,
    emit_default_grad,
    infer_like,
    slots,
)

INDEX_DTYPES = ("int32", "int64")


def check_index_dtype(ctx: Any, t: TensorType, what: str) -> None:
    if t.dtype not in INDEX_DTYPES:
        ctx.fail_dtype(f"{what} must be int32 or int64 indices, got {t.dtype}{_fmt(t.shape)}; "
                       f"cast it with fluid.layers.cast(index, 'int64')")


def index_vector(ctx: Any, t: TensorType, what: str) -> int:
    """The length of an index that must be a vector [N] or a column [N, 1]."""
    check_index_dtype(ctx, t, what)
    if not (t.rank == 1 or (t.rank == 2 and t.shape[1] in (1, -1))):
        ctx.fail(f"{what} must be a vector [N] or a column [N, 1], got {_fmt(t.shape)}; "
                 f"reshape it with fluid.layers.reshape(index, [-1])")
    return t.shape[0]


def check_bounds(xp: Any, index: Any, size: int | Sequence[int], what: str) -> None:
    """On the host: every index lies in [0, size) (``size`` per last-axis column when a
    sequence), else an `IndexError` naming the first bad one."""
    if xp.__name__ != "numpy" or index.size == 0:
        return
    if isinstance(size, int) and index.min() >= 0 and index.max() < size:
        return   # two reductions, no temporary: the common case
    sizes = xp.asarray(size)
    bad = (index < 0) | (index >= sizes)
    if bad.any():
        at = tuple(int(i) for i in xp.argwhere(bad)[0])
        limit = int(sizes) if sizes.ndim == 0 else int(sizes[at[-1]])
        raise IndexError(f"{what} {int(index[at])} at position {list(at)} is out of range: "
                         f"indices must lie in [0, {limit})")


def _zeros(xp: Any, out: Any, shape: tuple[int, ...], dtype: str) -> Any:
    if out is None:
        return xp.zeros(shape, dtype)
    out.fill(0)
    return out


# --- gather ----------------------------------------------------------------------------------

def _gather_infer(ctx: InferContext) -> None:
    x, index = ctx.input("X"), ctx.input("Index")
    n = index_vector(ctx, index, "gather: Index")
    if x.rank == 0:
        ctx.fail("gather: X must have at least one dim, got a 0-d value")
    ctx.set_output("Out", (n,) + x.shape[1:], x.dtype)


def _gather_kernel(ctx: KernelContext):
    xp, rows = ctx.xp, ctx.input("X").shape[0]

    def gather(x: Any, index: Any) -> Any:
        idx = index.reshape(-1)
        check_bounds(xp, idx, rows, "gather: index")
        return xp.take(x, idx, axis=0)
    return gather


def last_occurrences(xp: Any, idx: Any, size: int) -> tuple[Any, Any]:
    """(each distinct index, the position of its last occurrence in ``idx``), indices in
    [0, size). On the host the latest position per index is a maximum (ufunc.at, linear);
    on a device, the positions sorted by index."""
    if xp.__name__ == "numpy":
        latest = xp.full(size, -1, dtype="int64")
        xp.maximum.at(latest, idx, xp.arange(idx.size))
        rows = xp.flatnonzero(latest >= 0)
        return rows, latest[rows]
    order = xp.argsort(idx, kind="stable")
    ordered = idx[order]
    last = xp.empty(ordered.shape, bool)
    if ordered.size:
        xp.not_equal(ordered[1:], ordered[:-1], out=last[:-1])
        last[-1] = True
    return ordered[last], order[last]


def _gather_grad_kernel(ctx: KernelContext):
    xp, x = ctx.xp, ctx.input("X")
    out, overwrite = ctx.buffer("X@GRAD"), bool(ctx.attrs["overwrite"])

    def grad(_x: Any, index: Any, dout: Any) -> Any:
        dx = _zeros(xp, out, x.shape, x.dtype)
        idx = index.reshape(-1)
        if overwrite:   # Paddle copies each row of dOut in turn: the last one stays
            rows, last = last_occurrences(xp, idx, x.shape[0])
            dx[rows] = dout[last]
        else:
            xp.add.at(dx, idx, dout)
        return dx
    return grad


_GATHER = {"overwrite": True}
register(OpSpec("gather", slots("X", "Index"), slots("Out"), _gather_infer, _gather_kernel,
                lambda g: emit_default_grad(g, ("X", "Index"), "gather_grad", ("X",)),
                attrs=_GATHER,
                doc="Out = X[Index] along dim 0 (Index int [N] or [N, 1])."))
register(OpSpec("gather_grad", slots("X", "Index", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "X"}), _gather_grad_kernel, attrs=_GATHER,
                shape_only=("X",),
                doc="X@GRAD = dOut's rows put back at Index: the last of repeated indices "
                    "with overwrite, else their sum."))


# --- gather_nd -------------------------------------------------------------------------------

def nd_depth(ctx: Any, x: TensorType, index: TensorType, op: str) -> int:
    check_index_dtype(ctx, index, f"{op}: Index")
    if index.rank == 0:
        ctx.fail(f"{op}: Index must have at least one dim [..., k], got a 0-d value")
    k = index.shape[-1]
    if k < 0:
        ctx.fail(f"{op}: the last dim of Index {_fmt(index.shape)} (how many leading dims "
                 f"of X each index row addresses) must be known while tracing")
    if k > x.rank:
        ctx.fail(f"{op}: Index {_fmt(index.shape)} addresses {k} dims, but X "
                 f"{_fmt(x.shape)} has only {x.rank}; Index's last dim must be <= rank(X)")
    return k


def _gather_nd_infer(ctx: InferContext) -> None:
    x, index = ctx.input("X"), ctx.input("Index")
    k = nd_depth(ctx, x, index, "gather_nd")
    ctx.set_output("Out", index.shape[:-1] + x.shape[k:], x.dtype)


class NdIndex:
    """Index [..., k] into the leading k dims of a tensor of ``shape``, as positions of the
    tensor seen as [prod(shape[:k]), rest...]."""

    def __init__(self, xp: Any, shape: tuple[int, ...], index_shape: tuple[int, ...],
                 what: str):
        self.xp, self.what = xp, what
        self.k = index_shape[-1]
        self.lead, self.rest = shape[:self.k], shape[self.k:]
        self.rows = prod(index_shape[:-1])
        self.flat_shape = (prod(self.lead),) + self.rest
        strides = [prod(self.lead[i + 1:]) for i in range(self.k)]
        self.strides = xp.asarray(strides, dtype="int64")

    def positions(self, index: Any) -> Any:
        idx = index.reshape(self.rows, self.k)
        check_bounds(self.xp, idx, list(self.lead), self.what)
        return idx.astype("int64", copy=False) @ self.strides if self.k else \
            self.xp.zeros(self.rows, "int64")


def _gather_nd_kernel(ctx: KernelContext):
    xp, x, t = ctx.xp, ctx.input("X"), ctx.output("Out")
    nd = NdIndex(xp, x.shape, ctx.input("Index").shape, "gather_nd: index")

    def gather_nd(a: Any, index: Any) -> Any:
        return xp.take(a.reshape(nd.flat_shape), nd.positions(index), axis=0).reshape(t.shape)
    return gather_nd


def _gather_nd_grad_kernel(ctx: KernelContext):
    xp, x = ctx.xp, ctx.input("X")
    nd = NdIndex(xp, x.shape, ctx.input("Index").shape, "gather_nd: index")
    out = ctx.buffer("X@GRAD")

    def grad(_x: Any, index: Any, dout: Any) -> Any:
        dx = _zeros(xp, out, x.shape, x.dtype)
        xp.add.at(dx.reshape(nd.flat_shape), nd.positions(index),
                  dout.reshape((nd.rows,) + nd.rest))
        return dx
    return grad


register(OpSpec("gather_nd", slots("X", "Index"), slots("Out"), _gather_nd_infer,
                _gather_nd_kernel,
                lambda g: emit_default_grad(g, ("X", "Index"), "gather_nd_grad", ("X",)),
                doc="Out[i...] = X[Index[i..., :]]: each row of Index [..., k] addresses the "
                    "leading k dims of X."))
register(OpSpec("gather_nd_grad", slots("X", "Index", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "X"}), _gather_nd_grad_kernel, shape_only=("X",),
                doc="X@GRAD = dOut added at the positions Index addresses."))


# --- index_select ------------------------------------------------------------------------------

def _index_select_infer(ctx: InferContext) -> None:
    x, index = ctx.input("X"), ctx.input("Index")
    n = index_vector(ctx, index, "index_select: Index")
    dim = normalize_axis(ctx, int(ctx.attrs["dim"]), x.rank, "index_select dim", x.shape)
    ctx.set_output("Out", x.shape[:dim] + (n,) + x.shape[dim + 1:], x.dtype)


def _select_dim(ctx: KernelContext) -> tuple[int, int]:
    x = ctx.input("X")
    dim = normalize_axis(ctx, int(ctx.attrs["dim"]), x.rank, "index_select dim", x.shape)
    return dim, x.shape[dim]


def _index_select_kernel(ctx: KernelContext):
    xp = ctx.xp
    dim, size = _select_dim(ctx)

    def index_select(x: Any, index: Any) -> Any:
        idx = index.reshape(-1)
        check_bounds(xp, idx, size, "index_select: index")
        return xp.take(x, idx, axis=dim)
    return index_select


def _index_select_grad_kernel(ctx: KernelContext):
    xp, x = ctx.xp, ctx.input("X")
    dim, _ = _select_dim(ctx)
    out = ctx.buffer("X@GRAD")

    def grad(_x: Any, index: Any, dout: Any) -> Any:
        dx = _zeros(xp, out, x.shape, x.dtype)
        xp.add.at(xp.moveaxis(dx, dim, 0), index.reshape(-1), xp.moveaxis(dout, dim, 0))
        return dx
    return grad


_INDEX_SELECT = {"dim": 0}
register(OpSpec("index_select", slots("X", "Index"), slots("Out"), _index_select_infer,
                _index_select_kernel,
                lambda g: emit_default_grad(g, ("X", "Index"), "index_select_grad", ("X",)),
                attrs=_INDEX_SELECT,
                doc="Out = X re-indexed along dim by Index [N] (int32/int64)."))
register(OpSpec("index_select_grad", slots("X", "Index", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "X"}), _index_select_grad_kernel,
                attrs=_INDEX_SELECT, shape_only=("X",),
                doc="X@GRAD = dOut's slices added back at Index along dim."))


# --- index_sample ------------------------------------------------------------------------------

def _index_sample_infer(ctx: InferContext) -> None:
    x, index = ctx.input("X"), ctx.input("Index")
    check_index_dtype(ctx, index, "index_sample: Index")
    if x.rank != 2 or index.rank != 2:
        ctx.fail(f"index_sample: X and Index must both be 2-D ([B, D] and [B, K]), got X "
                 f"{_fmt(x.shape)} and Index {_fmt(index.shape)}")
    if x.shape[0] >= 0 and index.shape[0] >= 0 and x.shape[0] != index.shape[0]:
        ctx.fail(f"index_sample: X {_fmt(x.shape)} and Index {_fmt(index.shape)} must have "
                 f"the same first dim (one row of indices per row of X)")
    ctx.set_output("Out", (x.shape[0], index.shape[1]), x.dtype)


def _index_sample_kernel(ctx: KernelContext):
    xp, width = ctx.xp, ctx.input("X").shape[1]

    def index_sample(x: Any, index: Any) -> Any:
        check_bounds(xp, index, width, "index_sample: index")
        return xp.take_along_axis(x, index, axis=1)
    return index_sample


def _index_sample_grad_kernel(ctx: KernelContext):
    xp, x = ctx.xp, ctx.input("X")
    batch, width = x.shape
    row_start = xp.arange(batch, dtype="int64").reshape(batch, 1) * width
    out = ctx.buffer("X@GRAD")

    def grad(_x: Any, index: Any, dout: Any) -> Any:
        dx = _zeros(xp, out, x.shape, x.dtype)
        xp.add.at(dx.reshape(-1), (row_start + index).reshape(-1), dout.reshape(-1))
        return dx
    return grad


register(OpSpec("index_sample", slots("X", "Index"), slots("Out"), _index_sample_infer,
                _index_sample_kernel,
                lambda g: emit_default_grad(g, ("X", "Index"), "index_sample_grad", ("X",)),
                doc="Out[b, j] = X[b, Index[b, j]] for X [B, D] and Index [B, K]."))
register(OpSpec("index_sample_grad", slots("X", "Index", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "X"}), _index_sample_grad_kernel, shape_only=("X",),
                doc="X@GRAD[b, Index[b, j]] += dOut[b, j]."))


# --- multiplex ---------------------------------------------------------------------------------

def _multiplex_infer(ctx: InferContext) -> None:
    xs, ids = ctx.inputs("X"), ctx.input("Ids")
    check_index_dtype(ctx, ids, "multiplex: Ids")
    if ids.rank != 2 or ids.shape[1] not in (1, -1):
        ctx.fail(f"multiplex: Ids must be a column [B, 1], got {_fmt(ids.shape)}")
    if len(xs) < 2:
        ctx.fail(f"multiplex needs at least 2 candidate inputs, got {len(xs)}")
    first = xs[0]
    if first.rank < 2:
        ctx.fail(f"multiplex: the candidates must have rank >= 2, got {_fmt(first.shape)}")
    for i, t in enumerate(xs[1:], 1):
        if t.dtype != first.dtype or t.rank != first.rank or any(
                a >= 0 and b >= 0 and a != b for a, b in zip(t.shape, first.shape)):
            ctx.fail(f"multiplex: every candidate must have one shape and dtype; input 0 is "
                     f"{first.dtype}{_fmt(first.shape)}, input {i} {t.dtype}{_fmt(t.shape)}")
    ctx.set_output("Out", first.shape, first.dtype)


def _copy_rows(xp: Any, dst: Any, src: Any, ids: Any, k: int) -> None:
    """dst's rows that chose candidate k := src's. On the host, by the rows' positions
    (copying those rows alone); on a device, masked (no row count read back)."""
    chosen = ids.reshape(-1) == k
    if xp.__name__ == "numpy":
        rows = xp.flatnonzero(chosen)
        dst[rows] = src[rows]
    else:
        xp.copyto(dst, src, where=chosen.reshape((-1,) + (1,) * (dst.ndim - 1)))


def _multiplex_kernel(ctx: KernelContext):
    xp, t, out = ctx.xp, ctx.output("Out"), ctx.buffer("Out")
    count = len(ctx.inputs("X"))

    def multiplex(*args: Any) -> Any:
        *xs, ids = args
        check_bounds(xp, ids, count, "multiplex: id")
        o = xp.empty(t.shape, t.dtype) if out is None else out
        for k, x in enumerate(xs):   # over the few candidates, every row at once
            _copy_rows(xp, o, x, ids, k)
        return o
    return multiplex


def _multiplex_grad(g: GradContext) -> None:
    dout = g.out_grad("Out")
    if not dout or dout[0] is None or not g.wants("X"):
        return
    names = [n if n is not None else g.tmp("multiplex_unused") for n in g.in_grad("X")]
    g.emit("multiplex_grad", {"Ids": g.input("Ids"), "Out@GRAD": dout}, {"X@GRAD": names})


def _multiplex_grad_infer(ctx: InferContext) -> None:
    dout = ctx.input("Out@GRAD")
    ctx.set_outputs("X@GRAD", [dout] * ctx.output_count("X@GRAD"))


def _multiplex_grad_kernel(ctx: KernelContext):
    xp, count, dout_t = ctx.xp, len(ctx.out_types), ctx.input("Out@GRAD")

    def grad(ids: Any, dout: Any) -> Any:
        parts = []
        for k in range(count):
            dx = xp.zeros(dout_t.shape, dout_t.dtype)
            _copy_rows(xp, dx, dout, ids, k)
            parts.append(dx)
        return parts[0] if count == 1 else tuple(parts)
    return grad


register(OpSpec("multiplex", slots("X*", "Ids"), slots("Out"), _multiplex_infer,
                _multiplex_kernel, _multiplex_grad,
                doc="Out[i] = X[Ids[i, 0]][i]: each row from the candidate Ids names."))
register(OpSpec("multiplex_grad", slots("Ids", "Out@GRAD"), slots("X@GRAD*"),
                _multiplex_grad_infer, _multiplex_grad_kernel,
                doc="X@GRAD[k] = dOut in the rows that chose candidate k, zeros elsewhere."))
