"""Ops that ask questions of tensors: isinf, isnan, isfinite, allclose, shape, size,
argsort, shard_index. (``hash`` has a file of its own: ops/hashing.py.)

``isinf`` / ``isnan``  Out [1] (X's dtype) = 1 if any element of X is infinite / NaN, else 0.
``isfinite``           Out [1] bool = whether every element of X is finite.
``allclose``           Out [1] bool = whether ``|Input - Other| <= atol + rtol * |Other|``
                       everywhere (NaNs equal each other only with ``equal_nan``).
``shape`` / ``size``   Out = Input's shape (int32 [rank]) / element count (int64 [1]); Input
                       is read for its type only, so both are plan-time constants.
``argsort``            Out = X sorted along ``axis`` (ascending; ``descending`` reverses),
                       Indices (int64) = where each came from. Ties keep their order when
                       ascending (a stable sort) and are reversed when descending, as
                       Paddle's reference (a flipped ascending sort) has them. Its gradient
                       puts dOut back where the values came from.
``shard_index``        Out = X mod shard_size where X's shard (X // shard_size, shard_size
                       = ceil(index_num / nshards)) is ``shard_id``, else ``ignore_value``.
                       An index outside [0, index_num) is an error.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.records import FLOAT_DTYPES, INT_DTYPES
from ..ir.text import format_shape
from .creation import constant_kernel
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, infer_like, slots

_NUMERIC = FLOAT_DTYPES | INT_DTYPES


# --- isinf / isnan / isfinite -------------------------------------------------------------------

def _overflow_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.dtype not in _NUMERIC:
        ctx.fail_dtype(f"X must be a float or int tensor, got {x.dtype}")
    ctx.set_output("Out", (1,), "bool" if ctx.spec.type == "isfinite" else x.dtype)


def _overflow_kernel(ctx: KernelContext):
    xp, x, o = ctx.xp, ctx.input("X"), ctx.output("Out")
    kind = ctx.spec.type
    if x.dtype in INT_DTYPES:   # integers are always finite
        return constant_kernel(lambda: xp.full((1,), kind == "isfinite", dtype=o.dtype))
    test, combine = {"isinf": (xp.isinf, xp.any), "isnan": (xp.isnan, xp.any),
                     "isfinite": (xp.isfinite, xp.all)}[kind]
    return lambda a: combine(test(a)).reshape(1).astype(o.dtype, copy=False)


for _kind, _what in (("isinf", "any element of X is infinite"),
                     ("isnan", "any element of X is NaN"),
                     ("isfinite", "every element of X is finite (bool)")):
    register(OpSpec(_kind, slots("X"), slots("Out"), _overflow_infer, _overflow_kernel,
                    doc=f"Out [1] = whether {_what}"))


# --- allclose -----------------------------------------------------------------------------------

def _allclose_infer(ctx: InferContext) -> None:
    a, b = ctx.input("Input"), ctx.input("Other")
    if a.dtype != b.dtype or a.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"Input and Other must share a float dtype, got {a.dtype} and {b.dtype}")
    try:
        np.broadcast_shapes(tuple(max(d, 1) for d in a.shape),
                            tuple(max(d, 1) for d in b.shape))
    except ValueError:
        ctx.fail(f"Input {format_shape(a.shape)} and Other {format_shape(b.shape)} do not "
                 f"broadcast")
    ctx.set_output("Out", (1,), "bool")


def _allclose_kernel(ctx: KernelContext):
    xp, a = ctx.xp, ctx.attrs
    rtol, atol, nan = float(a["rtol"]), float(a["atol"]), bool(a["equal_nan"])
    return lambda x, y: xp.all(xp.isclose(x, y, rtol, atol, nan)).reshape(1)


register(OpSpec("allclose", slots("Input", "Other"), slots("Out"), _allclose_infer,
                _allclose_kernel, attrs={"rtol": 1e-5, "atol": 1e-8, "equal_nan": False},
                doc="Out [1] = whether |Input - Other| <= atol + rtol * |Other| everywhere"))


# --- shape / size -------------------------------------------------------------------------------

def _shape_infer(ctx: InferContext) -> None:
    x = ctx.input("Input")
    ctx.set_output("Out", (x.rank,), "int32")


def _size_infer(ctx: InferContext) -> None:
    ctx.input("Input")
    ctx.set_output("Out", (1,), "int64")


def _shape_kernel(ctx: KernelContext):
    shape = ctx.input("Input").shape
    return constant_kernel(lambda: ctx.xp.asarray(np.array(shape, dtype="int32")))


def _size_kernel(ctx: KernelContext):
    count = int(np.prod(ctx.input("Input").shape, dtype=np.int64))
    return constant_kernel(lambda: ctx.xp.asarray(np.array([count], dtype="int64")))


register(OpSpec("shape", slots("Input"), slots("Out"), _shape_infer, _shape_kernel,
                shape_only=("Input",), doc="Out (int32 [rank]) = Input's shape"))
register(OpSpec("size", slots("Input"), slots("Out"), _size_infer, _size_kernel,
                shape_only=("Input",), doc="Out (int64 [1]) = Input's element count"))


# --- argsort ------------------------------------------------------------------------------------

def _argsort_axis(ctx: InferContext | KernelContext, rank: int) -> int:
    axis = int(ctx.attrs["axis"])
    return axis + rank if axis < 0 else axis


def _argsort_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.dtype not in _NUMERIC:
        ctx.fail_dtype(f"X must be a float or int tensor, got {x.dtype}")
    if not 0 <= _argsort_axis(ctx, x.rank) < max(x.rank, 1):
        ctx.fail(f"axis={ctx.attrs['axis']} is out of range for X {format_shape(x.shape)}")
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_output("Indices", x.shape, "int64")


def _argsort_kernel(ctx: KernelContext):
    xp = ctx.xp
    axis = _argsort_axis(ctx, ctx.input("X").rank)
    descending = bool(ctx.attrs["descending"])

    def fn(x: Any) -> Any:
        order = xp.argsort(x, axis=axis, kind="stable")
        if descending:
            order = xp.flip(order, axis)
        return xp.take_along_axis(x, order, axis), order.astype("int64", copy=False)
    return fn


def _argsort_grad_kernel(ctx: KernelContext):
    """dX = dOut put back where each sorted value came from: gathered through the inverse
    permutation of Indices."""
    xp = ctx.xp
    axis = _argsort_axis(ctx, ctx.input("Indices").rank)
    return lambda idx, g: xp.take_along_axis(g, xp.argsort(idx, axis=axis), axis)


def _argsort_grad(g: GradContext) -> None:
    dout = g.flowing("Out")
    if dout is not None and g.wants("X"):
        g.emit("argsort_grad", {"Indices": g.output("Indices"), "Out@GRAD": [dout]},
               {"X@GRAD": g.in_grad("X")}, dict(g.attrs))


_ARGSORT = {"axis": -1, "descending": False}
register(OpSpec("argsort", slots("X"), slots("Out", "Indices"), _argsort_infer, _argsort_kernel,
                _argsort_grad, attrs=_ARGSORT,
                doc="Out = X sorted along axis, Indices = where each value came from"))
register(OpSpec("argsort_grad", slots("Indices", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "Out@GRAD"}), _argsort_grad_kernel, attrs=_ARGSORT))


# --- shard_index --------------------------------------------------------------------------------

def _shard_index_infer(ctx: InferContext) -> None:
    x, a = ctx.input("X"), ctx.attrs
    if x.dtype not in ("int32", "int64"):
        ctx.fail_dtype(f"X must hold int32 or int64 indices, got {x.dtype}")
    if int(a["index_num"]) <= 0 or int(a["nshards"]) <= 0:
        ctx.fail(f"index_num={a['index_num']} and nshards={a['nshards']} must be positive")
    if not 0 <= int(a["shard_id"]) < int(a["nshards"]):
        ctx.fail(f"shard_id={a['shard_id']} must be in [0, nshards={a['nshards']})")
    ctx.set_output("Out", x.shape, x.dtype)


def _shard_index_kernel(ctx: KernelContext):
    xp, a = ctx.xp, ctx.attrs
    index_num, shard_id = int(a["index_num"]), int(a["shard_id"])
    size = (index_num + int(a["nshards"]) - 1) // int(a["nshards"])
    ignore = int(a["ignore_value"])

    def fn(x: Any) -> Any:
        if x.size and bool(((x < 0) | (x >= index_num)).any()):   # one value read back
            bad = int(x[(x < 0) | (x >= index_num)].reshape(-1)[0])
            raise IndexError(f"shard_index: index {bad} is outside [0, index_num="
                             f"{index_num})")
        return xp.where(x // size == shard_id, x % size, ignore).astype(x.dtype, copy=False)
    return fn


register(OpSpec("shard_index", slots("X"), slots("Out"), _shard_index_infer, _shard_index_kernel,
                host_access="reads",
                attrs={"index_num": 1, "nshards": 1, "shard_id": 0, "ignore_value": -1},
                doc="Out = X's index within its shard where that shard is shard_id, else "
                    "ignore_value"))
