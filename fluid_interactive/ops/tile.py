"""Stacking and tiling: ``stack``, ``unstack``, ``expand``, ``expand_as``.

``stack``      Y = the inputs X[0..n) (one shape) stacked along a new dim ``axis``
``unstack``    Y[0..num) = X cut along ``axis`` into slices without that dim (views)
``expand``     Out = X tiled ``expand_times[i]`` times along dim i (NumPy's tile);
               expand_times may come from tensors (ExpandTimes, or expand_times_tensor
               with the attr holding -1 where a tensor stands)
``expand_as``  Out = X tiled to the shape of target_tensor (read for its shape alone),
               whose every dim must be a multiple of X's

The gradient of a tiling sums dOut over the copies.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..ir.text import format_shape as _fmt
from .int_args import IntList, marked_minus_one, read_list, split_inputs
from .registry import register
from .shape import emit_parts_grad, normalize_axis
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

# --- stack, unstack ---------------------------------------------------------------------------


def _stack_axis(ctx: Any, rank: int) -> int:
    """The new dim's position in the stacked result (rank + 1 dims)."""
    axis = int(ctx.attrs["axis"])
    if not -(rank + 1) <= axis <= rank:
        ctx.fail(f"stack: axis {axis} is out of range for inputs of rank {rank}; use a value "
                 f"in [{-(rank + 1)}, {rank}]")
    return axis + rank + 1 if axis < 0 else axis


def _stack_infer(ctx: InferContext) -> None:
    xs = ctx.inputs("X")
    if not xs:
        ctx.fail("stack needs at least one input")
    first = xs[0]
    shape = list(first.shape)
    for i, t in enumerate(xs[1:], 1):
        if t.dtype != first.dtype or t.rank != first.rank or any(
                a >= 0 and b >= 0 and a != b for a, b in zip(t.shape, shape)):
            ctx.fail(f"stack: every input must have one shape and dtype; input 0 is "
                     f"{first.dtype}{_fmt(first.shape)}, input {i} {t.dtype}{_fmt(t.shape)}")
        shape = [b if a < 0 else a for a, b in zip(shape, t.shape)]
    axis = _stack_axis(ctx, first.rank)
    ctx.set_output("Y", shape[:axis] + [len(xs)] + shape[axis:], first.dtype)


def _stacker(in_slot: str, out_slot: str) -> Callable[[KernelContext], Callable]:
    """The kernel stacking the vars of ``in_slot`` into ``out_slot`` along ``axis``."""
    def kernel(ctx: KernelContext) -> Callable:
        xp, out = ctx.xp, ctx.buffer(out_slot)
        axis = _stack_axis(ctx, ctx.inputs(in_slot)[0].rank)
        return lambda *xs: xp.stack(xs, axis=axis, out=out)
    return kernel


def _unstack_views(axis: int, count: int) -> Callable:
    """fn(a) -> the ``count`` slices of ``a`` along ``axis`` without that dim (views)."""
    index = [(slice(None),) * axis + (i,) for i in range(count)]
    if count == 1:
        return lambda a: a[index[0]]
    return lambda a: tuple(a[i] for i in index)


def _stack_grad_kernel(ctx: KernelContext):
    dy = ctx.input("Y@GRAD")
    axis = _stack_axis(ctx, dy.rank - 1)
    return _unstack_views(axis, dy.shape[axis])


def _stack_grad(g: GradContext) -> None:
    dy = g.out_grad("Y")
    if not dy or dy[0] is None or not g.wants("X"):
        return
    names = [n if n is not None else g.tmp("stack_unused") for n in g.in_grad("X")]
    g.emit("stack_grad", {"Y@GRAD": dy}, {"X@GRAD": names}, g.attrs)


def _stack_grad_infer(ctx: InferContext) -> None:
    dy = ctx.input("Y@GRAD")
    axis = _stack_axis(ctx, dy.rank - 1)
    part = TensorType(dy.shape[:axis] + dy.shape[axis + 1:], dy.dtype)
    ctx.set_outputs("X@GRAD", [part] * ctx.output_count("X@GRAD"))


_STACK = {"axis": 0}
register(OpSpec("stack", slots("X*"), slots("Y"), _stack_infer, _stacker("X", "Y"), _stack_grad,
                attrs=_STACK, doc="Y = the inputs stacked along a new dim axis."))
register(OpSpec("stack_grad", slots("Y@GRAD"), slots("X@GRAD*"), _stack_grad_infer,
                _stack_grad_kernel, attrs=_STACK, aliases=True,
                doc="X@GRAD[i] = dY's slice i along axis (views)."))


def _unstack_axis(ctx: Any, x: TensorType) -> int:
    return normalize_axis(ctx, int(ctx.attrs["axis"]), x.rank, "unstack axis", x.shape)


def _unstack_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    axis = _unstack_axis(ctx, x)
    num, n_out = int(ctx.attrs["num"]), ctx.output_count("Y")
    if num != n_out or (x.shape[axis] >= 0 and x.shape[axis] != num):
        ctx.fail(f"unstack: X {_fmt(x.shape)} has {x.shape[axis]} slices along axis "
                 f"{ctx.attrs['axis']}, but num={num} and the op lists {n_out} outputs")
    part = TensorType(x.shape[:axis] + x.shape[axis + 1:], x.dtype)
    ctx.set_outputs("Y", [part] * n_out)


def _unstack_kernel(ctx: KernelContext):
    x = ctx.input("X")
    return _unstack_views(_unstack_axis(ctx, x), len(ctx.out_types))


def _unstack_grad(g: GradContext) -> None:
    emit_parts_grad(g, "Y", "unstack_grad")


def _unstack_grad_infer(ctx: InferContext) -> None:
    parts = ctx.inputs("Y@GRAD")
    first = parts[0]
    axis = _stack_axis(ctx, first.rank)
    ctx.set_output("X@GRAD", first.shape[:axis] + (len(parts),) + first.shape[axis:],
                   first.dtype)


_UNSTACK = {"axis": 0, "num": 0}
register(OpSpec("unstack", slots("X"), slots("Y*"), _unstack_infer, _unstack_kernel,
                _unstack_grad, attrs=_UNSTACK, aliases=True,
                doc="Y[i] = X's slice i along axis, without that dim (views)."))
register(OpSpec("unstack_grad", slots("Y@GRAD*"), slots("X@GRAD"), _unstack_grad_infer,
                _stacker("Y@GRAD", "X@GRAD"), attrs=_UNSTACK,
                doc="X@GRAD = the slices' gradients stacked along axis."))


# --- expand, expand_as ------------------------------------------------------------------------

EXPAND_TIMES = IntList("expand_times", "ExpandTimes", "expand_times_tensor",
                 marked_minus_one("expand_times"))


def tiled_shape(ctx: Any, shape: Sequence[int], times: Sequence[int | None]) -> list[int]:
    if len(times) != len(shape):
        ctx.fail(f"expand: expand_times {list(times)} must have one entry per dim of X "
                 f"{_fmt(shape)}")
    if any(t is not None and t < 1 for t in times):
        ctx.fail(f"expand: expand_times {list(times)} must be positive")
    return [-1 if d < 0 or t is None else d * t for d, t in zip(shape, times)]


def _expand_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.set_output("Out", tiled_shape(ctx, x.shape, EXPAND_TIMES.traced(ctx)), x.dtype)


def _tile_kernel(ctx: KernelContext):
    xp = ctx.xp

    def expand(*args: Any) -> Any:
        return xp.tile(args[0], read_list(EXPAND_TIMES, ctx.attrs, split_inputs(ctx, args)))
    return expand


def sum_tiles(xp: Any, dout: Any, x_shape: Sequence[int], out: Any = None) -> Any:
    """dOut of a tiling of X summed over the copies: dOut viewed as [t0, d0, t1, d1, ...]
    and summed over the t axes."""
    split = []
    for d, full in zip(x_shape, dout.shape):
        split += [full // d if d else 0, d]
    return xp.sum(dout.reshape(split), axis=tuple(range(0, len(split), 2)), out=out)


def _untile_kernel(ctx: KernelContext):
    xp, x, out = ctx.xp, ctx.input("X"), ctx.buffer("X@GRAD")
    return lambda *args: sum_tiles(xp, args[-1], x.shape, out)


_EXPAND: dict[str, list[int]] = {"expand_times": []}
register(OpSpec("expand", slots("X", *EXPAND_TIMES.slot_specs()), slots("Out"), _expand_infer,
                _tile_kernel,
                lambda g: emit_default_grad(g, ("X",), "expand_grad", ("X",)),
                attrs=_EXPAND, host_access="reads",
                doc="Out = X tiled expand_times[i] times along dim i."))
register(OpSpec("expand_grad", slots("X", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "X"}), _untile_kernel, attrs=_EXPAND, shape_only=("X",),
                doc="X@GRAD = dOut summed over the copies."))


def _expand_as_infer(ctx: InferContext) -> None:
    x, target = ctx.input("X"), ctx.input("target_tensor")
    if x.rank != target.rank or any(a > 0 and b >= 0 and b % a
                                    for a, b in zip(x.shape, target.shape)):
        ctx.fail(f"expand_as: target_tensor {_fmt(target.shape)} must have X's rank and "
                 f"dims that are multiples of X's {_fmt(x.shape)}")
    ctx.set_output("Out", target.shape, x.dtype)


def _expand_as_kernel(ctx: KernelContext):
    xp, x, t = ctx.xp, ctx.input("X"), ctx.output("Out")
    times = [b // a if a else 1 for a, b in zip(x.shape, t.shape)]
    return lambda a, _target: xp.tile(a, times)


register(OpSpec("expand_as", slots("X", "target_tensor"), slots("Out"), _expand_as_infer,
                _expand_as_kernel,
                lambda g: emit_default_grad(g, ("X",), "expand_as_grad", ("X",)),
                shape_only=("target_tensor",),
                doc="Out = X tiled to target_tensor's shape (a multiple of X's)."))
register(OpSpec("expand_as_grad", slots("X", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "X"}), _untile_kernel, shape_only=("X",),
                doc="X@GRAD = dOut summed over the copies."))
