"""Tensor arrays: vars of kind ``tensor_array`` holding a list of tensors of one dtype and
rank (the var's type is that of an element, -1 in the dims where elements differ; an
array not yet written has the element shape ``[]``, learnt from its first write). A loop
fills one step by step and reads it back (Paddle's LoDTensorArray ops):

``create_array``            Out = an empty array of ``dtype``;
``write_to_array``          Out = Array with element I set to X (I at or past its length
                            grows it: elements in between stay empty, an error only when
                            read); Out and Array are one var, updated in place;
``read_from_array``         Out = Array[I];
``lod_array_length``        Out = the array's length, int64 [1];
``tensor_array_to_tensor``  Out = its elements stacked (``use_stack``) or joined along
                            ``axis``; OutIndex = each element's size along ``axis``.

An array's value is a `TensorArray` (`ops/array_value.py`): immutable, so the values a
loop keeps for its gradient stay valid, yet a write costs O(1), so a loop of N steps
costs O(N). The gradient of an array is a sparse `TensorArray` whose elements never
written are zero; the gradient of a write drops the element it wrote, that of a read
holds one element. An index is one int on the host: reading it back (and handing a
length to the device) are these ops' host crossings.
"""
from __future__ import annotations

import itertools

from ..ir.records import INT_DTYPES
from ..ir.text import format_shape
from .array_value import TensorArray
from .control import join
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, TensorType, grad_names, slots

ARRAY = "tensor_array"
_EMPTY = TensorArray()   # an empty value never lends its store: one serves every plan


def _index(ctx: InferContext, slot: str = "I") -> None:
    i = ctx.input(slot)
    if i.dtype not in INT_DTYPES or len(i.shape) != 1 or i.shape[0] not in (1, -1):
        ctx.fail_dtype(f"the index {slot} must be an int var of shape [1], got "
                       f"{i.dtype}{format_shape(i.shape)}")


def _element(ctx: InferContext, slot: str) -> TensorType:
    t = ctx.input(slot)
    if t.kind != ARRAY:
        ctx.fail(f"{slot} must be a tensor array (fluid.layers.create_array), got a "
                 f"{t.kind}")
    return t


def _index_value(i, length: int, what: str, grows: bool) -> int:
    """The int an index var holds (its host read), checked against the array's length:
    a write may grow the array, a read may not."""
    k = int(i.reshape(-1)[0])
    if k < 0 or (not grows and k >= length):
        raise IndexError(f"{what}: index {k} is out of range for an array of length "
                         f"{length}{'' if grows else ' (indices run from 0)'}")
    return k


# --- create_array ---------------------------------------------------------------------------

def _create_infer(ctx: InferContext) -> None:
    ctx.set_output("Out", (), ctx.attrs["dtype"], ARRAY)


def _create_kernel(ctx: KernelContext):
    return TensorArray


register(OpSpec("create_array", (), slots("Out"), _create_infer, _create_kernel,
                attrs={"dtype": "float32"}, doc="Out = an empty tensor array"))


# --- write_to_array ---------------------------------------------------------------------------

def _write_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    _index(ctx)
    shape = tuple(x.shape)
    if ctx.has_input("Array") and (a := _element(ctx, "Array")).shape:
        merged = join(a, TensorType(x.shape, x.dtype, ARRAY))
        if merged is None:
            ctx.fail(f"the array holds {a.dtype}{format_shape(a.shape)} elements; X is "
                     f"{x.dtype}{format_shape(x.shape)}: the elements of an array share "
                     f"their dtype and rank (their dims may differ)")
        shape = merged.shape if merged else shape
    ctx.set_output("Out", shape, x.dtype, ARRAY)


def _write_kernel(ctx: KernelContext):
    xp = ctx.xp

    def write(x, i, array=_EMPTY):
        k = _index_value(i, len(array), "array_write", grows=True)
        # the array owns a copy: X may live in a buffer that a later step reuses
        return array.write(k, xp.array(x, copy=True))
    return write


def _write_grad(g: GradContext) -> None:
    dout = g.out_grad("Out")
    if not dout or dout[0] is None or not (g.wants("X") or g.wants("Array")):
        return
    g.emit("write_to_array_grad",
           {"X": g.input("X"), "I": g.input("I"), "Out@GRAD": grad_names(dout)},
           {"X@GRAD": grad_names(g.in_grad("X")), "Array@GRAD": grad_names(g.in_grad("Array"))})


def _write_grad_infer(ctx: InferContext) -> None:
    x, d = ctx.input("X"), ctx.input("Out@GRAD")
    ctx.set_output("X@GRAD", x.shape, x.dtype)
    ctx.set_output("Array@GRAD", d.shape, d.dtype, ARRAY)


def _write_grad_kernel(ctx: KernelContext):
    x = ctx.input("X")
    zeros = ctx.xp.zeros(x.shape, x.dtype)
    want_x, want_array = ctx.has_output("X@GRAD"), ctx.has_output("Array@GRAD")

    def grad(x_, i, dout):
        k = int(i.reshape(-1)[0])
        if k >= len(dout):
            return (zeros, dout) if want_x and want_array else (zeros if want_x else dout)
        dx = dout[k]
        # the element written was not the array's before: its gradient leaves; a write
        # at the end (a loop's append, replayed newest first) drops the last one, O(1)
        rest = dout.prefix(k) if k == len(dout) - 1 else dout.write(k, None)
        dx = zeros if dx is None else dx
        return (dx, rest) if want_x and want_array else (dx if want_x else rest)
    return grad


register(OpSpec("write_to_array", slots("X", "I", "Array?"), slots("Out"), _write_infer,
                _write_kernel, _write_grad, updates=(("Out", "Array"),), host_access="index",
                doc="Out = Array with element I set to X (or appended at the end)"))
register(OpSpec("write_to_array_grad", slots("X", "I", "Out@GRAD"),
                slots("X@GRAD?", "Array@GRAD?"), _write_grad_infer, _write_grad_kernel,
                shape_only=("X",), aliases=True, host_access="index",
                doc="X@GRAD = Out@GRAD[I]; Array@GRAD = Out@GRAD without element I"))


# --- read_from_array ---------------------------------------------------------------------------

def _read_infer(ctx: InferContext) -> None:
    a = _element(ctx, "X")
    _index(ctx)
    ctx.set_output("Out", a.shape, a.dtype)


def _read_kernel(ctx: KernelContext):
    def read(array, i):
        k = _index_value(i, len(array), "array_read", grows=False)
        element = array[k]
        if element is None:
            raise IndexError(f"array_read: element {k} of the array (length {len(array)}) "
                             f"was never written: a write past the end left it empty")
        return element
    return read


def _read_grad(g: GradContext) -> None:
    dout = g.out_grad("Out")
    if dout and dout[0] is not None and g.wants("X"):
        g.emit("read_from_array_grad", {"I": g.input("I"), "Out@GRAD": grad_names(dout)},
               {"X@GRAD": grad_names(g.in_grad("X"))})


def _read_grad_infer(ctx: InferContext) -> None:
    d = ctx.input("Out@GRAD")
    ctx.set_output("X@GRAD", d.shape, d.dtype, ARRAY)


def _read_grad_kernel(ctx: KernelContext):
    def grad(i, dout):
        return _EMPTY.write(int(i.reshape(-1)[0]), dout)   # one element: O(1)
    return grad


register(OpSpec("read_from_array", slots("X", "I"), slots("Out"), _read_infer, _read_kernel,
                _read_grad, aliases=True, host_access="index",
                doc="Out = element I of the array X"))
register(OpSpec("read_from_array_grad", slots("I", "Out@GRAD"), slots("X@GRAD"),
                _read_grad_infer, _read_grad_kernel, aliases=True, host_access="index",
                doc="X@GRAD = an array holding Out@GRAD at I (zero elsewhere)"))


# --- lod_array_length --------------------------------------------------------------------

def _length_infer(ctx: InferContext) -> None:
    _element(ctx, "X")
    ctx.set_output("Out", (1,), "int64")


def _length_kernel(ctx: KernelContext):
    xp = ctx.xp
    return lambda array: xp.asarray([len(array)], dtype="int64")


register(OpSpec("lod_array_length", slots("X"), slots("Out"), _length_infer, _length_kernel,
                host_access="index", doc="Out = the number of elements of the array X"))


# --- tensor_array_to_tensor ---------------------------------------------------------------

def _to_tensor_infer(ctx: InferContext) -> None:
    a = _element(ctx, "X")
    axis, stack = ctx.attrs["axis"], ctx.attrs["use_stack"]
    rank = len(a.shape) + (1 if stack else 0)
    if not 0 <= (axis if axis >= 0 else axis + rank) < rank:
        ctx.fail(f"axis {axis} is out of range for elements {format_shape(a.shape)}")
    axis = axis if axis >= 0 else axis + rank
    shape = list(a.shape)
    if stack:
        shape.insert(axis, -1)
    else:
        shape[axis] = -1
    ctx.set_output("Out", shape, a.dtype)
    ctx.set_output("OutIndex", (-1,), "int32")


def _normal_axis(axis: int, rank: int, stack: bool) -> int:
    """``axis`` from 0, against the rank of the result (one more than an element's when
    stacking)."""
    return axis if axis >= 0 else axis + rank + (1 if stack else 0)


def _elements(array: TensorArray, what: str) -> list:
    elements = list(array)
    for k, e in enumerate(elements):
        if e is None:
            raise IndexError(f"{what}: element {k} of the array (length {len(array)}) was "
                             f"never written: a write past the end left it empty")
    return elements


def _to_tensor_kernel(ctx: KernelContext):
    xp = ctx.xp
    stack = ctx.attrs["use_stack"]
    elem = ctx.input("X")
    axis = _normal_axis(ctx.attrs["axis"], len(elem.shape), stack)

    def to_tensor(array):
        elements = _elements(array, "tensor_array_to_tensor")
        if not elements:
            shape = [max(d, 0) for d in elem.shape]
            if stack:
                shape.insert(axis, 0)
            else:
                shape[axis] = 0
            return xp.zeros(shape, elem.dtype), xp.zeros((0,), "int32")
        out = xp.stack(elements, axis=axis) if stack else xp.concatenate(elements, axis=axis)
        # Paddle's OutIndex: each element's size along axis, stacked or not (1 for a new
        # last axis, which no element has)
        sizes = [a.shape[axis] if axis < a.ndim else 1 for a in elements]
        return out, xp.asarray(sizes, dtype="int32")
    return to_tensor


def _to_tensor_grad(g: GradContext) -> None:
    dout = g.out_grad("Out")
    if dout and dout[0] is not None and g.wants("X"):
        g.emit("tensor_array_to_tensor_grad", {"X": g.input("X"), "Out@GRAD": grad_names(dout)},
               {"X@GRAD": grad_names(g.in_grad("X"))}, g.attrs)


def _to_tensor_grad_infer(ctx: InferContext) -> None:
    a = _element(ctx, "X")
    ctx.set_output("X@GRAD", a.shape, a.dtype, ARRAY)


def _to_tensor_grad_kernel(ctx: KernelContext):
    xp = ctx.xp
    stack = ctx.attrs["use_stack"]
    axis = _normal_axis(ctx.attrs["axis"], len(ctx.input("X").shape), stack)

    def grad(array, dout):
        if stack:
            return TensorArray.of(xp.take(dout, k, axis=axis) for k in range(len(array)))
        # the elements' own sizes along axis: they may differ
        ends = list(itertools.accumulate(e.shape[axis] for e in array))
        return TensorArray.of(xp.split(dout, ends[:-1], axis=axis)) if ends else _EMPTY
    return grad


_TO_TENSOR = {"axis": 0, "use_stack": True}
register(OpSpec("tensor_array_to_tensor", slots("X"), slots("Out", "OutIndex"),
                _to_tensor_infer, _to_tensor_kernel, _to_tensor_grad, attrs=_TO_TENSOR,
                host_access="index",
                doc="Out = the elements of X stacked (use_stack) or joined along axis"))
register(OpSpec("tensor_array_to_tensor_grad", slots("X", "Out@GRAD"), slots("X@GRAD"),
                _to_tensor_grad_infer, _to_tensor_grad_kernel, attrs=_TO_TENSOR,
                aliases=True,
                doc="X@GRAD = Out@GRAD cut back into the array's elements"))
