"""Selecting by value: the k largest entries, the coordinates of true elements, the
sequences a beam search kept.

``top_k``        Out, Indices (int64) = the k largest entries of each last-axis row of X,
                 largest first (equal values are not ordered, as in Paddle); k from the ``k``
                 attr, or from the int tensor K when given (then Out's last dim is known
                 only when the op runs)
``where_index``  Out int64 [N, rank(Condition)] = the coordinates of the N elements of
                 Condition that are true (non-zero), in row-major order
``unique``       Out = the distinct values of X [N] in the order they first appear,
                 Index [N] = each element's position in Out (``dtype`` int32/int64);
                 ``unique_with_counts`` adds Count = how often each appears
``gather_tree``  Out [T, B, beam] = the full id sequence of each beam of a beam search,
                 traced back from the last step through Parents (the beam each step's
                 id extended); Ids and Parents int [T, B, beam]

The outputs of ``where_index`` and ``unique`` (and of ``top_k`` with a K tensor) have a
size that depends on values: their shape rules say so with a -1 dim, which a plan keeps
(runtime/plan sizes such a step's outputs, and the steps after it, each time they run).
"""
from __future__ import annotations

from math import prod
from typing import Any

from ..ir.text import format_shape as _fmt
from .gather import INDEX_DTYPES, check_bounds
from .registry import register
from .spec import (
    InferContext,
    KernelContext,
    OpSpec,
    emit_default_grad,
    infer_like,
    slots,
)

_NUMERIC = ("float16", "float32", "float64", "int32", "int64")


# --- top_k -----------------------------------------------------------------------------------

def _top_k_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.dtype not in _NUMERIC:
        ctx.fail_dtype(f"top_k: X must be float or int32/int64, got {x.dtype}")
    if x.rank == 0:
        ctx.fail("top_k: X must have at least one dim, got a 0-d value")
    k = -1
    if ctx.has_input("K"):
        kt = ctx.input("K")
        if kt.dtype not in INDEX_DTYPES or kt.rank > 1 or kt.shape not in ((), (1,), (-1,)):
            ctx.fail(f"top_k: K must be one int32/int64 value (shape [1]), got "
                     f"{kt.dtype}{_fmt(kt.shape)}")
    else:
        k = int(ctx.attrs["k"])
        if k < 1:
            ctx.fail(f"top_k: k={k} must be at least 1")
        if 0 <= x.shape[-1] < k:
            ctx.fail(f"top_k: k={k} is larger than the last dim of X {_fmt(x.shape)}; "
                     f"choose k <= {x.shape[-1]}")
    shape = x.shape[:-1] + (k,)
    ctx.set_output("Out", shape, x.dtype)
    ctx.set_output("Indices", shape, "int64")


def top_k_indices(xp: Any, x: Any, k: int) -> Any:
    """Positions of the k largest entries of each last-axis row, largest first. Equal
    values: a full sort puts the lower index first, a partial one picks any of them."""
    n = x.shape[-1]
    if 4 * k < n:   # select the k, then sort only them
        picked = xp.argpartition(x, n - k, axis=-1)[..., n - k:]
        picked.sort(axis=-1)   # equal values keep their index order through the stable sort
        values = xp.take_along_axis(x, picked, axis=-1)
        return xp.take_along_axis(picked, xp.argsort(-values, axis=-1, kind="stable"), -1)
    return xp.argsort(-x, axis=-1, kind="stable")[..., :k]


def _top_k_kernel(ctx: KernelContext):
    xp, x = ctx.xp, ctx.input("X")
    fixed, n = int(ctx.attrs["k"]), x.shape[-1]
    negatable = x.dtype.startswith("float")

    def top_k(a: Any, *k_tensor: Any) -> tuple[Any, Any]:
        k = int(k_tensor[0].reshape(-1)[0]) if k_tensor else fixed
        if not 1 <= k <= n:
            raise ValueError(f"top_k: k={k} must lie in [1, {n}], the last dim of X "
                             f"{_fmt(x.shape)}")
        # argsort of -X is descending; ints are widened first so that -min stays in range
        keys = a if negatable else a.astype("float64")
        idx = top_k_indices(xp, keys, k)
        return xp.take_along_axis(a, idx, axis=-1), idx
    return top_k


def _top_k_grad_kernel(ctx: KernelContext):
    xp, x, out = ctx.xp, ctx.input("X"), ctx.buffer("X@GRAD")
    n = x.shape[-1]
    rows = prod(x.shape[:-1])

    def grad(_x: Any, indices: Any, dout: Any) -> Any:
        dx = xp.zeros(x.shape, x.dtype) if out is None else out
        if out is not None:
            dx.fill(0)
        k = indices.shape[-1]
        start = xp.arange(0, rows * n, n, dtype="int64").reshape(rows, 1)
        # the k positions of a row are distinct: a plain assignment puts each value once
        dx.reshape(-1)[(indices.reshape(rows, k) + start).reshape(-1)] = dout.reshape(-1)
        return dx
    return grad


_TOP_K = {"k": 1}
register(OpSpec("top_k", slots("X", "K?"), slots("Out", "Indices"), _top_k_infer,
                _top_k_kernel,
                lambda g: emit_default_grad(g, ("X", "Indices"), "top_k_grad", ("X",)),
                attrs=_TOP_K, host_access="reads",
                doc="Out, Indices = the k largest entries of each last-axis row of X, "
                    "largest first; k from K (an int tensor) when given."))
register(OpSpec("top_k_grad", slots("X", "Indices", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "X"}), _top_k_grad_kernel, attrs=_TOP_K,
                shape_only=("X",),
                doc="X@GRAD = dOut at the positions Indices names, zeros elsewhere."))


# --- where_index -----------------------------------------------------------------------------

def _where_index_infer(ctx: InferContext) -> None:
    cond = ctx.input("Condition")
    if cond.dtype not in ("bool",) + _NUMERIC:
        ctx.fail_dtype(f"where_index: Condition must be bool or numeric, got {cond.dtype}")
    ctx.set_output("Out", (-1, cond.rank), "int64")   # one row per true element


def _where_index_kernel(ctx: KernelContext):
    xp = ctx.xp
    return lambda cond: xp.argwhere(cond).astype("int64", copy=False)


register(OpSpec("where_index", slots("Condition"), slots("Out"), _where_index_infer,
                _where_index_kernel, host_access="reads",
                doc="Out int64 [N, rank] = the coordinates of Condition's N true (non-zero) "
                    "elements, in row-major order; N is known when the op runs."))


# --- gather_tree -----------------------------------------------------------------------------

def _gather_tree_infer(ctx: InferContext) -> None:
    ids, parents = ctx.input("Ids"), ctx.input("Parents")
    for slot, t in (("Ids", ids), ("Parents", parents)):
        if t.dtype not in INDEX_DTYPES:
            ctx.fail_dtype(f"gather_tree: {slot} must be int32 or int64, got {t.dtype}")
        if t.rank != 3:
            ctx.fail(f"gather_tree: {slot} must be [max_len, batch, beam], got {_fmt(t.shape)}")
    if len(ids.shape) != len(parents.shape) or any(
            a >= 0 and b >= 0 and a != b for a, b in zip(ids.shape, parents.shape)):
        ctx.fail(f"gather_tree: Ids {_fmt(ids.shape)} and Parents {_fmt(parents.shape)} must "
                 f"have one shape")
    ctx.set_output("Out", ids.shape, ids.dtype)


def _gather_tree_kernel(ctx: KernelContext):
    xp, t = ctx.xp, ctx.output("Out")
    steps, beam = t.shape[0], t.shape[2]
    out = ctx.buffer("Out")

    def gather_tree(ids: Any, parents: Any) -> Any:
        check_bounds(xp, parents, beam, "gather_tree: parent")
        o = xp.empty(t.shape, t.dtype) if out is None else out
        if steps == 0:
            return o
        o[-1] = ids[-1]
        parent = parents[-1]
        for step in range(steps - 2, -1, -1):   # back through time, every beam at once
            o[step] = xp.take_along_axis(ids[step], parent, axis=1)
            parent = xp.take_along_axis(parents[step], parent, axis=1)
        return o
    return gather_tree


register(OpSpec("gather_tree", slots("Ids", "Parents"), slots("Out"), _gather_tree_infer,
                _gather_tree_kernel, host_access="reads",
                doc="Out [T, B, beam] = each beam's full id sequence, traced back from its "
                    "last step through Parents (the beam each step came from)."))


# --- unique, unique_with_counts -------------------------------------------------------------

def _unique_infer(ctx: InferContext) -> None:
    x, dtype = ctx.input("X"), ctx.attrs["dtype"]
    op = ctx.spec.type
    if x.rank != 1:
        ctx.fail(f"{op}: X must be 1-D, got {_fmt(x.shape)}; flatten it with "
                 f"fluid.layers.reshape(x, [-1])")
    if x.dtype not in ("float32", "float64", "int32", "int64"):
        ctx.fail_dtype(f"{op}: X must be float32/64 or int32/64, got {x.dtype}")
    if dtype not in INDEX_DTYPES:
        ctx.fail_dtype(f"{op}: dtype (of Index and Count) must be int32 or int64, got {dtype}")
    ctx.set_output("Out", (-1,), x.dtype)   # as many as there are distinct values
    ctx.set_output("Index", x.shape, dtype)
    ctx.set_output("Count", (-1,), dtype)


def first_seen_unique(xp: Any, x: Any) -> tuple[Any, Any, Any]:
    """(distinct values in the order they first appear, each element's position among
    them, how often each appears): Paddle's order, not NumPy's sorted one."""
    values, first, inverse, counts = xp.unique(x, return_index=True, return_inverse=True,
                                               return_counts=True)
    order = xp.argsort(first)
    rank = xp.empty_like(order)
    rank[order] = xp.arange(order.size)
    return values[order], rank[inverse.reshape(-1)], counts[order]


def _unique_kernel(ctx: KernelContext):
    xp, dtype = ctx.xp, ctx.attrs["dtype"]
    with_counts = ctx.has_output("Count")

    def unique(x: Any) -> tuple[Any, ...]:
        values, index, counts = first_seen_unique(xp, x)
        if with_counts:
            return values, index.astype(dtype), counts.astype(dtype)
        return values, index.astype(dtype)
    return unique


_UNIQUE = {"dtype": "int32"}
register(OpSpec("unique", slots("X"), slots("Out", "Index"), _unique_infer, _unique_kernel,
                attrs=_UNIQUE, host_access="reads",
                doc="Out = X's distinct values in the order they first appear; Index[i] = "
                    "the position of X[i] in Out (in dtype)."))
register(OpSpec("unique_with_counts", slots("X"), slots("Out", "Index", "Count"),
                _unique_infer, _unique_kernel, attrs=_UNIQUE, host_access="reads",
                doc="unique's Out and Index, and Count[j] = how often Out[j] appears in X."))
