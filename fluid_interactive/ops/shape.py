"""Shape and layout ops: reshape, transpose, concat, split, slice, squeeze, unsqueeze, cast.

Ops that only re-index their input (reshape, squeeze, unsqueeze, transpose, slice, split
and the gradients of concat) return NumPy views and so declare ``aliases=True``: no copy
is made, and the planner keeps the input's buffer alive as long as the view. Where the
result is the input itself (a reshape to the same shape, a full slice) the kernel factory
returns ``Forward(0)`` and no call is generated at all. Shape rules
accept -1 (a batch dimension unknown while tracing) wherever the result does not depend on
it, and recheck with the concrete shape when a plan is built.

The reductions (``reduce_sum`` and friends) live in `reduce.py`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import Any

from ..ir.records import FLOAT_DTYPES, canonical_dtype
from ..ir.text import format_shape
from .int_args import IntList, marked_by_flags, marked_minus_one, read_list, split_inputs
from .registry import register
from .spec import (
    Forward,
    GradContext,
    InferContext,
    KernelContext,
    OpSpec,
    TensorType,
    emit_default_grad,
    infer_like,
    present,
    slots,
)


def fmt_shape(shape: Sequence[int]) -> str:
    """A shape as users read it: ``[?, 2, 3]``, '?' marking a dim unknown while tracing."""
    return format_shape(shape)


def normalize_axis(ctx: Any, axis: int, rank: int, what: str, shape: Sequence[int]) -> int:
    """``axis`` in ``[-rank, rank)`` as a non-negative index; fails naming the shape."""
    if not -rank <= axis < rank:
        ctx.fail(f"{what} {axis} is out of range for X {fmt_shape(shape)} of rank {rank}; "
                 f"use a value in [{-rank}, {rank - 1}]")
    return axis + rank if axis < 0 else axis


def _index_along(axis: int, start: int, stop: int) -> tuple:
    return (slice(None),) * axis + (slice(start, stop),)


def _reshape_back_kernel(ctx: KernelContext) -> Callable | Forward:
    """Shared by reshape/squeeze/unsqueeze gradients: dOut viewed in X's shape."""
    shape = ctx.input("X").shape
    if ctx.input("Out@GRAD").shape == shape:
        return Forward(1)
    return lambda x, g: g.reshape(shape)


def _view_grad_specs(name: str, attrs: dict) -> None:
    register(OpSpec(name + "_grad", slots("X", "Out@GRAD"), slots("X@GRAD"),
                    infer_like({"X@GRAD": "X"}), _reshape_back_kernel, attrs=attrs,
                    aliases=True, shape_only=("X",), doc=f"X@GRAD = dOut in X's shape "
                                                         f"(gradient of {name})"))


def _grad_of_view(name: str) -> Callable[[GradContext], None]:
    return lambda g: emit_default_grad(g, ("X",), name + "_grad", ("X",))


def _view_kernel(ctx: KernelContext) -> Callable | Forward:
    shape = ctx.output("Out").shape
    if ctx.input("X").shape == shape:
        return Forward(0)  # nothing to do: the output is the input
    return lambda a: a.reshape(shape)


# --- reshape -------------------------------------------------------------------------------

def reshape_target(ctx: Any, in_shape: Sequence[int], spec: Sequence[int]) -> tuple[int, ...]:
    """Paddle's reshape rule: 0 copies the input dim at the same index, one -1 is inferred
    from the element count. An unknown input dim that 0 does not copy leaves the inferred
    dim unknown (-1) while tracing."""
    spec = [int(d) for d in spec]
    where = f"reshape X {fmt_shape(in_shape)} to shape {spec}"
    if spec.count(-1) > 1:
        ctx.fail(f"cannot {where}: at most one dim may be -1 (inferred); give the others")
    out: list[int] = []
    copied: set[int] = set()
    for i, d in enumerate(spec):
        if d == 0:
            if i >= len(in_shape):
                ctx.fail(f"cannot {where}: 0 at position {i} copies input dim {i}, but X has "
                         f"only {len(in_shape)} dims")
            out.append(in_shape[i])
            copied.add(i)
        elif d < -1:
            ctx.fail(f"cannot {where}: dims must be positive, 0 (copy) or -1 (infer), got {d}")
        else:
            out.append(d)
    # The copied dims appear on both sides and cancel; what is left must agree.
    rest_in = [d for i, d in enumerate(in_shape) if i not in copied]
    rest_out = prod(d for i, d in enumerate(spec) if d > 0)
    in_known = all(d >= 0 for d in rest_in)
    n_in = prod(rest_in) if in_known else -1
    counted = f"{n_in} elements" + (" outside the dims copied by 0" if copied else "")
    if -1 in spec:
        k = spec.index(-1)
        if n_in >= 0:
            if n_in % rest_out:
                ctx.fail(f"cannot {where}: X's {counted} do not divide by {rest_out}, the "
                         f"product of the given dims")
            out[k] = n_in // rest_out
        else:
            out[k] = -1
    elif n_in >= 0 and n_in != rest_out:
        ctx.fail(f"cannot {where}: X has {counted} but the shape holds {rest_out}; use -1 "
                 f"for one dim to infer it, or 0 to copy a dim of X")
    return tuple(out)


def _define_view(name: str, target: Callable, attr: str, doc: str) -> None:
    """An op whose output is X re-indexed to ``target(ctx, X.shape, attrs[attr])``: a
    view, with the gradient the inverse re-indexing."""
    def infer(ctx: InferContext) -> None:
        x = ctx.input("X")
        ctx.set_output("Out", target(ctx, x.shape, ctx.attrs[attr]), x.dtype)

    attrs: dict[str, list[int]] = {attr: []}
    register(OpSpec(name, slots("X"), slots("Out"), infer, _view_kernel, _grad_of_view(name),
                    attrs=attrs, aliases=True, doc=doc))
    _view_grad_specs(name, attrs)


# The shape may come from tensors: Shape (Paddle's actual_shape, the whole list) or
# ShapeTensor (one tensor per entry, the attr holding -1 where a tensor stands).
RESHAPE_SHAPE = IntList("shape", "Shape", "ShapeTensor", marked_minus_one("shape"))


def _reshape_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if not RESHAPE_SHAPE.given_by_tensors(ctx):
        ctx.set_output("Out", reshape_target(ctx, x.shape, ctx.attrs["shape"]), x.dtype)
        return
    spec = RESHAPE_SHAPE.traced(ctx)
    if ctx.has_input("Shape"):   # the tensor overrides the attr: nothing is known
        spec = [None] * len(spec)
    out = [x.shape[i] if d == 0 and i < x.rank else (-1 if d is None else d)
           for i, d in enumerate(spec)]
    ctx.set_output("Out", out, x.dtype)


class RunTimeCheck:
    """A shape rule's context for checks made when a kernel runs: ``fail`` raises."""

    def __init__(self, attrs: Any = None):
        self.attrs = attrs or {}

    def fail(self, message: str) -> None:
        raise ValueError(message)


def _reshape_kernel(ctx: KernelContext) -> Callable | Forward:
    if RESHAPE_SHAPE.given_by_tensors(ctx):   # a new shape each call
        def reshape(*args: Any) -> Any:
            spec = read_list(RESHAPE_SHAPE, ctx.attrs, split_inputs(ctx, args))
            return args[0].reshape(reshape_target(RunTimeCheck(), args[0].shape, spec))
        return reshape
    shape = ctx.output("Out").shape
    if ctx.input("X").shape == shape:
        return Forward(0)  # nothing to do: the output is the input
    return lambda a: a.reshape(shape)


_RESHAPE: dict[str, list[int]] = {"shape": []}
register(OpSpec("reshape", slots("X", *RESHAPE_SHAPE.slot_specs()), slots("Out"),
                _reshape_infer, _reshape_kernel, _grad_of_view("reshape"), attrs=_RESHAPE,
                aliases=True, host_access="reads",
                doc="Out = X with a new shape; 0 copies X's dim at that index, one -1 is "
                    "inferred; the shape may come from int tensors. A view when X is "
                    "contiguous."))
_view_grad_specs("reshape", _RESHAPE)


# --- squeeze / unsqueeze ---------------------------------------------------------------------

def squeezed_shape(ctx: Any, shape: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    """Drop the listed size-1 dims (all size-1 dims when ``axes`` is empty). A listed dim
    unknown while tracing is taken to be 1 and checked once the shape is concrete."""
    rank = len(shape)
    if not axes:
        return tuple(d for d in shape if d != 1)
    drop = set()
    for a in axes:
        i = normalize_axis(ctx, int(a), rank, "squeeze axis", shape)
        if shape[i] not in (1, -1):
            ctx.fail(f"cannot squeeze axis {a} of X {fmt_shape(shape)}: that dim has size "
                     f"{shape[i]}, only size-1 dims can be removed; use reshape instead")
        drop.add(i)
    return tuple(d for i, d in enumerate(shape) if i not in drop)


def unsqueezed_shape(ctx: Any, shape: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    """Insert size-1 dims one at a time, in the order given; each axis indexes the shape
    built so far (a negative axis counts from its end, -1 appends)."""
    if not axes:
        ctx.fail(f"unsqueeze of X {fmt_shape(shape)} needs at least one axis")
    out = list(shape)
    for a in axes:
        a = int(a)
        cur = len(out)
        pos = a + cur + 1 if a < 0 else a
        if not 0 <= pos <= cur:
            ctx.fail(f"unsqueeze axis {a} is out of range for X {fmt_shape(shape)} (a shape of "
                     f"rank {cur} at that step); use a value in [{-cur - 1}, {cur}]")
        out.insert(pos, 1)
    return tuple(out)


_define_view("squeeze", squeezed_shape, "axes",
             "Out = X without the size-1 dims listed in axes (all of them when axes is "
             "empty). A view.")
_define_view("unsqueeze", unsqueezed_shape, "axes",
             "Out = X with size-1 dims inserted at axes, in order. A view.")


# --- transpose -----------------------------------------------------------------------------

def _permutation(ctx: Any, axis: Sequence[int], shape: Sequence[int]) -> tuple[int, ...]:
    rank = len(shape)
    perm = tuple(int(a) + rank if int(a) < 0 else int(a) for a in axis)
    if sorted(perm) != list(range(rank)):
        ctx.fail(f"transpose axis {list(axis)} is not a permutation of the {rank} dims of X "
                 f"{fmt_shape(shape)}; list each of 0..{rank - 1} exactly once")
    return perm


def _transpose_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    perm = _permutation(ctx, ctx.attrs["axis"], x.shape)
    ctx.set_output("Out", [x.shape[p] for p in perm], x.dtype)


def _transpose_kernel(ctx: KernelContext) -> Callable | Forward:
    perm = _permutation(ctx, ctx.attrs["axis"], ctx.input("X").shape)
    if perm == tuple(range(len(perm))):
        return Forward(0)
    return lambda a: a.transpose(perm)


def _transpose_grad_infer(ctx: InferContext) -> None:
    g = ctx.input("Out@GRAD")
    perm = _permutation(ctx, ctx.attrs["axis"], g.shape)
    shape = [0] * len(perm)
    for i, p in enumerate(perm):
        shape[p] = g.shape[i]
    ctx.set_output("X@GRAD", shape, g.dtype)


def _transpose_grad_kernel(ctx: KernelContext) -> Callable | Forward:
    perm = _permutation(ctx, ctx.attrs["axis"], ctx.input("Out@GRAD").shape)
    if perm == tuple(range(len(perm))):
        return Forward(0)
    inverse = tuple(sorted(range(len(perm)), key=perm.__getitem__))
    return lambda g: g.transpose(inverse)


def _transpose_grad(g: GradContext) -> None:
    emit_default_grad(g, (), "transpose_grad", ("X",))


_TRANSPOSE: dict[str, list[int]] = {"axis": []}
register(OpSpec("transpose", slots("X"), slots("Out"), _transpose_infer, _transpose_kernel,
                _transpose_grad, attrs=_TRANSPOSE, aliases=True,
                doc="Out = X with its dims permuted: Out.shape[i] = X.shape[axis[i]]. A view."))
register(OpSpec("transpose_grad", slots("Out@GRAD"), slots("X@GRAD"), _transpose_grad_infer,
                _transpose_grad_kernel, attrs=_TRANSPOSE, aliases=True,
                doc="X@GRAD = dOut permuted back by the inverse of axis."))


# --- concat and split ------------------------------------------------------------------------

def concat_type(ctx: Any, types: Sequence[TensorType], axis: int, what: str) -> TensorType:
    """The type of ``types`` joined along ``axis``: other dims must agree (-1 matches any),
    the axis dim is their sum (unknown if any part is)."""
    if not types:
        ctx.fail(f"{what} needs at least one input")
    first = types[0]
    if first.rank == 0:
        ctx.fail(f"{what} cannot join 0-d tensors; unsqueeze them to shape [1] first")
    ax = normalize_axis(ctx, axis, first.rank, f"{what} axis", first.shape)
    out = list(first.shape)
    for i, t in enumerate(types[1:], 1):
        if t.dtype != first.dtype:
            ctx.fail_dtype(f"{what} inputs must share a dtype: input 0 is {first.dtype}, "
                           f"input {i} is {t.dtype}; cast one of them")
        bad = t.rank != first.rank or any(
            a >= 0 and b >= 0 and a != b for d, (a, b) in enumerate(zip(out, t.shape))
            if d != ax)
        if bad:
            ctx.fail(f"{what} along axis {axis}: input 0 is {fmt_shape(first.shape)} but input "
                     f"{i} is {fmt_shape(t.shape)}; all dims except axis {axis} must match")
        out = [b if d != ax and a < 0 else a for d, (a, b) in enumerate(zip(out, t.shape))]
    sizes = [t.shape[ax] for t in types]
    out[ax] = sum(sizes) if all(s >= 0 for s in sizes) else -1
    return TensorType(tuple(out), first.dtype)


def _concat_infer(ctx: InferContext) -> None:
    ctx.set_outputs("Out", [concat_type(ctx, ctx.inputs("X"), ctx.attrs["axis"], "concat")])


def _join_kernel(in_slot: str, out_slot: str) -> Callable[[KernelContext], Callable]:
    def kernel(ctx: KernelContext) -> Callable:
        concatenate = ctx.xp.concatenate
        t = ctx.inputs(in_slot)[0]
        axis = normalize_axis(ctx, ctx.attrs["axis"], t.rank, "axis", t.shape)
        out = ctx.buffer(out_slot)
        return lambda *xs: concatenate(xs, axis=axis, out=out)
    return kernel


def _splitter(axis: int, sizes: Sequence[int]) -> Callable:
    """fn(a) -> views of ``a`` cut along ``axis`` into ``sizes`` (one array, or a tuple)."""
    index, start = [], 0
    for s in sizes:
        index.append(_index_along(axis, start, start + s))
        start += s
    if len(index) == 1:
        only = index[0]
        return lambda a: a[only]
    return lambda a: tuple([a[i] for i in index])


def _concat_grad(g: GradContext) -> None:
    dout = g.out_grad("Out")
    if not dout or not present(dout) or not g.wants("X"):
        return
    # Each input's gradient is a view of dOut; unwanted ones get a throwaway name.
    names = [n if n is not None else g.tmp("concat_unused") for n in g.in_grad("X")]
    g.emit("concat_grad", {"X": g.input("X"), "Out@GRAD": dout}, {"X@GRAD": names}, g.attrs)


def _concat_grad_kernel(ctx: KernelContext) -> Callable | Forward:
    xs = ctx.inputs("X")
    if len(xs) == 1:
        return Forward(1)  # dX is dOut itself
    axis = normalize_axis(ctx, ctx.attrs["axis"], xs[0].rank, "axis", xs[0].shape)
    cut = _splitter(axis, [t.shape[axis] for t in xs])
    return lambda *args: cut(args[-1])


_CONCAT = {"axis": 0}
register(OpSpec("concat", slots("X*"), slots("Out"), _concat_infer, _join_kernel("X", "Out"),
                _concat_grad, attrs=_CONCAT,
                doc="Out = the inputs joined along axis; other dims must match."))
register(OpSpec("concat_grad", slots("X*", "Out@GRAD"), slots("X@GRAD*"),
                infer_like({"X@GRAD": "X"}), _concat_grad_kernel, attrs=_CONCAT, aliases=True,
                shape_only=("X",), doc="X@GRAD[i] = the part of dOut that came from X[i]."))


def split_types(ctx: Any, x: TensorType, axis: int, num: int, sections: Sequence[int],
                n_out: int) -> list[TensorType]:
    """Output types of splitting ``x`` into ``num`` equal parts or the given ``sections``
    (one of which may be -1: the rest)."""
    ax = normalize_axis(ctx, axis, x.rank, "split axis", x.shape)
    d = x.shape[ax]
    sections = [int(s) for s in sections]
    where = f"split X {fmt_shape(x.shape)} along axis {axis}"
    if num > 0 and sections:
        ctx.fail(f"{where}: give num or sections, not both (num={num}, sections={sections})")
    if num > 0:
        if d >= 0 and d % num:
            ctx.fail(f"cannot {where} (size {d}) into {num} equal parts; give sections "
                     f"instead, e.g. {[d // num] * (num - 1) + [d - d // num * (num - 1)]}")
        sizes = [d // num if d >= 0 else -1] * num
    elif sections:
        if sections.count(-1) > 1 or any(s < -1 for s in sections):
            ctx.fail(f"{where}: sections {sections} must be sizes >= 0 with at most one -1")
        known = sum(s for s in sections if s >= 0)
        if -1 in sections:
            if d >= 0 and known > d:
                ctx.fail(f"cannot {where} (size {d}) into sections {sections}: the given "
                         f"sizes already add up to {known}")
            sizes = [(d - known if d >= 0 else -1) if s == -1 else s for s in sections]
        else:
            if d >= 0 and known != d:
                ctx.fail(f"cannot {where} (size {d}) into sections {sections}, which add up "
                         f"to {known}; make them add up to {d} or use -1 for one of them")
            sizes = sections
    else:
        ctx.fail(f"{where}: give num > 0 or a list of sections")
    if len(sizes) != n_out:
        ctx.fail(f"{where} makes {len(sizes)} parts but the op lists {n_out} outputs")
    return [TensorType(x.shape[:ax] + (s,) + x.shape[ax + 1:], x.dtype) for s in sizes]


def _split_infer(ctx: InferContext) -> None:
    a = ctx.attrs
    ctx.set_outputs("Out", split_types(ctx, ctx.input("X"), a["axis"], a["num"],
                                       a["sections"], ctx.output_count("Out")))


def _split_kernel(ctx: KernelContext) -> Callable | Forward:
    x = ctx.input("X")
    if len(ctx.out_types) == 1:
        return Forward(0)  # one part: all of X
    axis = normalize_axis(ctx, ctx.attrs["axis"], x.rank, "axis", x.shape)
    return _splitter(axis, [t.shape[axis] for t in ctx.out_slots["Out"]])


def emit_parts_grad(g: GradContext, out_slot: str, grad_type: str) -> None:
    """The gradient of an op cutting X into the parts of ``out_slot``: one ``grad_type``
    op joining the parts' gradients (``<out_slot>@GRAD``) into X's, zeros standing for a
    part no gradient reached."""
    douts = g.out_grad(out_slot)
    if not g.wants("X") or not any(n is not None for n in douts):
        return
    parts = []
    for fwd, name in zip(g.output(out_slot), douts):
        if name is None:  # a part no gradient reached contributes zeros
            name = g.tmp(fwd + "@ZERO")
            g.emit("fill_zeros_like", {"X": [fwd]}, {"Out": [name]})
        parts.append(name)
    g.emit(grad_type, {out_slot + "@GRAD": parts},
           {"X@GRAD": [n for n in g.in_grad("X") if n]}, g.attrs)


def _split_grad(g: GradContext) -> None:
    emit_parts_grad(g, "Out", "split_grad")


def _split_grad_infer(ctx: InferContext) -> None:
    ctx.set_outputs("X@GRAD", [concat_type(ctx, ctx.inputs("Out@GRAD"), ctx.attrs["axis"],
                                           "split_grad")])


_SPLIT = {"axis": 0, "num": 0, "sections": []}
register(OpSpec("split", slots("X"), slots("Out*"), _split_infer, _split_kernel, _split_grad,
                attrs=_SPLIT, aliases=True,
                doc="Out = X cut along axis into num equal parts or parts of the sizes in "
                    "sections (one may be -1); views of X."))
register(OpSpec("split_grad", slots("Out@GRAD*"), slots("X@GRAD"), _split_grad_infer,
                _join_kernel("Out@GRAD", "X@GRAD"), attrs=_SPLIT,
                doc="X@GRAD = the parts' gradients joined along axis."))


# --- slice ---------------------------------------------------------------------------------

# starts and ends may come from tensors (Paddle's StartsTensor, EndsTensorList, ...), their
# tensor entries marked -1 in infer_flags
SLICE_STARTS = IntList("starts", "StartsTensor", "StartsTensorList",
                       marked_by_flags("infer_flags"))
SLICE_ENDS = IntList("ends", "EndsTensor", "EndsTensorList", marked_by_flags("infer_flags"))


def slice_bounds(ctx: Any, shape: Sequence[int], axes: Sequence[int],
                 starts: Sequence[int | None], ends: Sequence[int | None]
                 ) -> dict[int, tuple[int, int] | tuple[None, None]]:
    """axis -> (start, stop) clamped like Python slicing; (None, None) where the dim, or
    a bound given by a tensor, is unknown while tracing."""
    if not len(axes) == len(starts) == len(ends):
        ctx.fail(f"slice of X {fmt_shape(shape)}: axes {list(axes)}, starts {list(starts)} and "
                 f"ends {list(ends)} must have the same length")
    bounds: dict[int, tuple[int, int] | tuple[None, None]] = {}
    for a, s, e in zip(axes, starts, ends):
        i = normalize_axis(ctx, int(a), len(shape), "slice axis", shape)
        if i in bounds:
            ctx.fail(f"slice of X {fmt_shape(shape)}: axis {a} is listed twice in {list(axes)}")
        d = shape[i]
        if d < 0 or s is None or e is None:
            bounds[i] = (None, None)
        else:
            start, stop, _ = slice(int(s), int(e)).indices(d)
            bounds[i] = (start, max(start, stop))
    return bounds


def _slice_index(ctx: Any, shape: Sequence[int], groups: Any = None) -> tuple:
    a = ctx.attrs
    starts, ends = a["starts"], a["ends"]
    if groups is not None:
        starts, ends = read_list(SLICE_STARTS, a, groups), read_list(SLICE_ENDS, a, groups)
    bounds = slice_bounds(ctx, shape, a["axes"], starts, ends)
    return tuple(slice(*bounds[i]) if i in bounds else slice(None) for i in range(len(shape)))


def _slice_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    bounds = slice_bounds(ctx, x.shape, ctx.attrs["axes"], SLICE_STARTS.traced(ctx),
                          SLICE_ENDS.traced(ctx))
    shape = [d if (b := bounds.get(i)) is None else (-1 if b[0] is None else b[1] - b[0])
             for i, d in enumerate(x.shape)]
    ctx.set_output("Out", shape, x.dtype)


def _from_tensors(ctx: KernelContext) -> bool:
    return SLICE_STARTS.given_by_tensors(ctx) or SLICE_ENDS.given_by_tensors(ctx)


def _slice_kernel(ctx: KernelContext) -> Callable | Forward:
    if _from_tensors(ctx):   # the bounds change from call to call
        return lambda *args: args[0][_slice_index(ctx, ctx.input("X").shape,
                                                  split_inputs(ctx, args))]
    if ctx.output("Out").shape == ctx.input("X").shape:
        return Forward(0)  # every slice covers its whole dim
    index = _slice_index(ctx, ctx.input("X").shape)
    return lambda a, *_: a[index]


def _slice_grad_kernel(ctx: KernelContext) -> Callable:
    xp = ctx.xp
    x = ctx.input("X")
    index = None if _from_tensors(ctx) else _slice_index(ctx, x.shape)
    out = ctx.buffer("X@GRAD")

    def fn(*args: Any) -> Any:
        r = xp.zeros(x.shape, x.dtype) if out is None else out
        if out is not None:
            r.fill(0)
        r[index if index is not None else
          _slice_index(ctx, x.shape, split_inputs(ctx, args))] = args[-1]
        return r
    return fn


def _slice_grad(g: GradContext) -> None:
    tensors = [s.rstrip("?*") for arg in (SLICE_STARTS, SLICE_ENDS) for s in arg.slot_specs()]
    emit_default_grad(g, ("X", *tensors), "slice_grad", ("X",))


_SLICE: dict[str, list[int]] = {"axes": [], "starts": [], "ends": [], "infer_flags": []}
_SLICE_TENSORS = (*SLICE_STARTS.slot_specs(), *SLICE_ENDS.slot_specs())
register(OpSpec("slice", slots("X", *_SLICE_TENSORS), slots("Out"), _slice_infer,
                _slice_kernel, _slice_grad, attrs=_SLICE, aliases=True, host_access="reads",
                doc="Out = X[starts:ends] along each of axes; indices clamp like Python's. "
                    "A view. starts and ends may come from int tensors."))
register(OpSpec("slice_grad", slots("X", *_SLICE_TENSORS, "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "X"}), _slice_grad_kernel, attrs=_SLICE,
                shape_only=("X",), host_access="reads",
                doc="X@GRAD = zeros with dOut in the sliced region."))


# --- cast ----------------------------------------------------------------------------------

def _cast_dtype(ctx: InferContext) -> str:
    try:
        return canonical_dtype(ctx.attrs["out_dtype"])
    except TypeError as e:
        problem = str(e)
    ctx.fail_dtype(f"cast: {problem}")  # outside the except: no chained traceback
    return ""


def _cast_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, _cast_dtype(ctx))


def _cast_kernel(ctx: KernelContext) -> Callable:
    xp, dtype, out = ctx.xp, ctx.output("Out").dtype, ctx.buffer("Out")
    if out is None:
        return lambda a: a.astype(dtype)

    def fn(a: Any) -> Any:
        xp.copyto(out, a, casting="unsafe")
        return out
    return fn


def _cast_grad_infer(ctx: InferContext) -> None:
    x, g = ctx.input("X"), ctx.input("Out@GRAD")
    if x.dtype not in FLOAT_DTYPES or g.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"cast from {x.dtype} to {g.dtype} carries no gradient; only casts "
                       f"between float dtypes do")
    ctx.set_output("X@GRAD", x.shape, x.dtype)


def _cast_grad_kernel(ctx: KernelContext) -> Callable:
    xp, dtype, out = ctx.xp, ctx.input("X").dtype, ctx.buffer("X@GRAD")
    if out is None:
        return lambda x, g: g.astype(dtype)

    def fn(x: Any, g: Any) -> Any:
        xp.copyto(out, g, casting="unsafe")
        return out
    return fn


_CAST = {"out_dtype": "float32"}
register(OpSpec("cast", slots("X"), slots("Out"), _cast_infer, _cast_kernel,
                lambda g: emit_default_grad(g, ("X",), "cast_grad", ("X",)), attrs=_CAST,
                doc="Out = X converted to out_dtype (floats to ints truncate toward zero). "
                    "Only float-to-float casts carry a gradient."))
register(OpSpec("cast_grad", slots("X", "Out@GRAD"), slots("X@GRAD"), _cast_grad_infer,
                _cast_grad_kernel, attrs=_CAST, shape_only=("X",),
                doc="X@GRAD = dOut converted back to X's dtype."))
