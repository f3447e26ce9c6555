"""Cutting a box out of a tensor: strided slices and crops (views of their input).

``strided_slice``  Out = Input[starts:ends:strides] along each of ``axes``, as Python's
                   slicing clamps them (a negative stride walks backwards)
``crop_tensor``    Out = X[offsets[i] : offsets[i] + shape[i]] along every dim; a shape
                   entry of -1 takes the rest of the dim after its offset
``crop``           the same with the shape taken from a reference tensor Y (its shape
                   alone) or the ``shape`` attr (Paddle's older op)

Every list may come from tensors (`int_args`): the dims it decides are then known when the
op runs. The gradients put dOut back into zeros of the input's shape.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..ir.text import format_shape as _fmt
from .int_args import IntList, marked_by_flags, marked_minus_one, read_list, split_inputs
from .registry import register
from .shape import RunTimeCheck, normalize_axis
from .spec import GradContext, InferContext, KernelContext, OpSpec, emit_default_grad, slots

Index = tuple[slice, ...]


def region_grad_kernel(x_slot: str, index_of: Callable[[KernelContext, Any], Index]
                       ) -> Callable[[KernelContext], Callable]:
    """The kernel of a gradient that puts dOut (the last input) into zeros of the
    forward input's shape at the region ``index_of(ctx, groups)`` selects."""
    def kernel(ctx: KernelContext) -> Callable:
        xp, x, out = ctx.xp, ctx.input(x_slot), ctx.buffer(x_slot + "@GRAD")

        def grad(*args: Any) -> Any:
            groups = split_inputs(ctx, args)
            dx = xp.zeros(x.shape, x.dtype) if out is None else out
            if out is not None:
                dx.fill(0)
            dx[index_of(ctx, groups)] = args[-1]
            return dx
        return grad
    return kernel


def _grad_of(op: str, x_slot: str, uses: Sequence[str]) -> Callable[[GradContext], None]:
    return lambda g: emit_default_grad(g, (x_slot, *uses), op + "_grad", (x_slot,))


def _register_with_grad(op: str, x_slot: str, lists: Sequence[IntList], infer: Callable,
                        kernel: Callable, grad_kernel: Callable, attrs: dict, doc: str,
                        shape_ref: str = "") -> None:
    """The op (``x_slot``, the tensor slots of ``lists``, and ``shape_ref``: an optional
    input read for its shape alone) and its ``<op>_grad`` (the same inputs and dOut,
    giving ``<x_slot>@GRAD``)."""
    tensor_slots = [s for arg in lists for s in arg.slot_specs()]
    tensor_slots += [shape_ref + "?"] if shape_ref else []
    names = [s.rstrip("?*") for s in tensor_slots]
    register(OpSpec(op, slots(x_slot, *tensor_slots), slots("Out"), infer, kernel,
                    _grad_of(op, x_slot, names), attrs=attrs, aliases=True,
                    host_access="reads", shape_only=(shape_ref,) if shape_ref else (),
                    doc=doc))

    def grad_infer(ctx: InferContext) -> None:
        x = ctx.input(x_slot)
        ctx.set_output(x_slot + "@GRAD", x.shape, x.dtype)
    register(OpSpec(op + "_grad", slots(x_slot, *tensor_slots, "Out@GRAD"),
                    slots(x_slot + "@GRAD"), grad_infer, grad_kernel, attrs=attrs,
                    shape_only=(x_slot, shape_ref) if shape_ref else (x_slot,),
                    host_access="reads",
                    doc=f"{x_slot}@GRAD = zeros with dOut in the region {op} took."))


# --- strided_slice ----------------------------------------------------------------------------

_FLAGGED = marked_by_flags("infer_flags")
STRIDED_STARTS = IntList("starts", "StartsTensor", "StartsTensorList", _FLAGGED)
STRIDED_ENDS = IntList("ends", "EndsTensor", "EndsTensorList", _FLAGGED)
STRIDED_STRIDES = IntList("strides", "StridesTensor", "StridesTensorList", _FLAGGED)
STRIDED_LISTS = (STRIDED_STARTS, STRIDED_ENDS, STRIDED_STRIDES)


def _axes(ctx: Any, shape: Sequence[int]) -> list[int]:
    axes = [normalize_axis(ctx, int(a), len(shape), "strided_slice axis", shape)
            for a in ctx.attrs["axes"]]
    if len(set(axes)) != len(axes):
        ctx.fail(f"strided_slice: axes {list(ctx.attrs['axes'])} list an axis twice")
    return axes


def _strided_infer(ctx: InferContext) -> None:
    x = ctx.input("Input")
    axes = _axes(ctx, x.shape)
    n = len(axes)
    starts, ends, strides = (arg.traced(ctx, n) for arg in STRIDED_LISTS)
    out = list(x.shape)
    for a, s, e, st in zip(axes, starts, ends, strides):
        if st == 0:
            ctx.fail(f"strided_slice: the stride for axis {a} is 0; strides must not be 0")
        known = None not in (s, e, st) and x.shape[a] >= 0
        out[a] = len(range(*slice(s, e, st).indices(x.shape[a]))) if known else -1
    ctx.set_output("Out", out, x.dtype)


def _strided_index(ctx: KernelContext, groups: Any) -> Index:
    shape = ctx.input("Input").shape
    lists = [read_list(arg, ctx.attrs, groups) for arg in STRIDED_LISTS]
    index = [slice(None)] * len(shape)
    for a, s, e, st in zip(_axes(ctx, shape), *lists):
        if st == 0:
            raise ValueError(f"strided_slice: the stride for axis {a} is 0")
        index[a] = slice(s, e, st)
    return tuple(index)


def _strided_kernel(ctx: KernelContext) -> Callable:
    return lambda *args: args[0][_strided_index(ctx, split_inputs(ctx, args))]


_register_with_grad("strided_slice", "Input", STRIDED_LISTS, _strided_infer,
                    _strided_kernel, region_grad_kernel("Input", _strided_index),
                    {"axes": [], "starts": [], "ends": [], "strides": [], "infer_flags": []},
                    "Out = Input[starts:ends:strides] along each of axes (Python's "
                    "slicing); a view.")


# --- crop_tensor, crop ------------------------------------------------------------------------

CROP_SHAPE = IntList("shape", "Shape", "ShapeTensor", marked_minus_one("shape"))
CROP_OFFSETS = IntList("offsets", "Offsets", "OffsetsTensor", marked_minus_one("offsets"))


def crop_sizes(ctx: Any, x_shape: Sequence[int], shape: Sequence[int | None],
               offsets: Sequence[int | None]) -> list[int]:
    """Each dim's size: the given one, or (-1) the rest of X's dim after the offset; -1
    where that is unknown. Known sizes and offsets must fit in X."""
    sizes = []
    for i, (d, s, o) in enumerate(zip(x_shape, shape, offsets)):
        if s is not None and (s == 0 or s < -1):
            ctx.fail(f"crop: shape {list(shape)} entry {i} is {s}; give a positive size or -1 "
                     f"(the rest of the dim)")
        if o is not None and o < 0:
            ctx.fail(f"crop: offsets must be >= 0, got {o} for dim {i}")
        size = (d - o if d >= 0 and o is not None else -1) if s == -1 else \
            (-1 if s is None else s)
        if d >= 0 and size >= 0 and o is not None and o + size > d:
            ctx.fail(f"crop: a box of shape {list(shape)} at offsets {list(offsets)} does not "
                     f"fit in X {_fmt(x_shape)} (dim {i}: {o} + {size} > {d})")
        sizes.append(size)
    return sizes


def _traced_offsets(ctx: Any, rank: int) -> Sequence[int | None]:
    if not ctx.attrs["offsets"] and not CROP_OFFSETS.given_by_tensors(ctx):
        return [0] * rank
    return CROP_OFFSETS.traced(ctx, rank)


def _crop_tensor_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.set_output("Out", crop_sizes(ctx, x.shape, CROP_SHAPE.traced(ctx, x.rank),
                                     _traced_offsets(ctx, x.rank)), x.dtype)


def _box(ctx: KernelContext, x_shape: Sequence[int], shape: Sequence[int],
         offsets: Sequence[int]) -> Index:
    sizes = crop_sizes(RunTimeCheck(), x_shape, shape, offsets)
    return tuple(slice(o, o + s) for o, s in zip(offsets, sizes))


def _offsets_now(ctx: KernelContext, groups: Any, rank: int) -> list[int]:
    if not ctx.attrs["offsets"] and not groups.get("Offsets") and \
            not groups.get("OffsetsTensor"):
        return [0] * rank
    return read_list(CROP_OFFSETS, ctx.attrs, groups)


def _crop_tensor_index(ctx: KernelContext, groups: Any) -> Index:
    x = ctx.input("X").shape
    return _box(ctx, x, read_list(CROP_SHAPE, ctx.attrs, groups),
                _offsets_now(ctx, groups, len(x)))


def _crop_tensor_kernel(ctx: KernelContext) -> Callable:
    return lambda *args: args[0][_crop_tensor_index(ctx, split_inputs(ctx, args))]


_CROP_ATTRS: dict[str, list[int]] = {"shape": [], "offsets": []}
_register_with_grad("crop_tensor", "X", (CROP_SHAPE, CROP_OFFSETS), _crop_tensor_infer,
                    _crop_tensor_kernel, region_grad_kernel("X", _crop_tensor_index),
                    _CROP_ATTRS, "Out = X[offsets : offsets + shape] in every dim (a shape "
                                 "entry of -1: the rest of the dim); a view.")

def _crop_shape(ctx: Any, rank: int) -> Sequence[int | None]:
    if ctx.has_input("Y"):
        y = ctx.input("Y")
        if y.rank != rank:
            ctx.fail(f"crop: Y {_fmt(y.shape)} (whose shape is the box's) must have X's rank "
                     f"{rank}")
        return list(y.shape)
    shape = [int(d) for d in ctx.attrs["shape"]]
    if len(shape) != rank:
        ctx.fail(f"crop: shape {shape} must have one entry per dim of X (rank {rank})")
    return shape


def _crop_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.set_output("Out", crop_sizes(ctx, x.shape, _crop_shape(ctx, x.rank),
                                     _traced_offsets(ctx, x.rank)), x.dtype)


def _crop_index(ctx: KernelContext, groups: Any) -> Index:
    x = ctx.input("X").shape
    shape = list(ctx.input("Y").shape) if ctx.has_input("Y") else \
        [int(d) for d in ctx.attrs["shape"]]
    return _box(ctx, x, shape, _offsets_now(ctx, groups, len(x)))


def _crop_kernel(ctx: KernelContext) -> Callable:
    return lambda *args: args[0][_crop_index(ctx, split_inputs(ctx, args))]


_register_with_grad("crop", "X", (CROP_OFFSETS,), _crop_infer, _crop_kernel,
                    region_grad_kernel("X", _crop_index), _CROP_ATTRS,
                    "Out = X[offsets : offsets + shape], the shape Y's (its shape alone) or "
                    "the shape attr's; a view.", shape_ref="Y")
