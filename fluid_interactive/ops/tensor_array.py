"""Tensor arrays: vars of kind ``tensor_array`` holding a list of tensors of one shape and
dtype (the var's type is that of an element; an array not yet written has the element
shape ``[]``, learnt from its first write). A loop fills one step by step and reads it
back (Paddle's LoDTensorArray ops):

``create_array``            Out = an empty array of ``dtype``;
``write_to_array``          Out = Array with element I set to X (I may be its length: an
                            append); Out and Array are one var, updated in place;
``read_from_array``         Out = Array[I];
``lod_array_length``        Out = the array's length, int64 [1];
``tensor_array_to_tensor``  Out = its elements stacked (``use_stack``) or joined along
                            ``axis``; OutIndex = each element's size along ``axis``.

Arrays are never changed in place: a write makes a new list (of references, no tensor is
copied), so the values a loop keeps for its gradient stay valid. The gradient of an array
is an array whose missing or None elements are zero. An index is one int on the host:
reading it back (and handing a length to the device) are these ops' host crossings.
"""
from __future__ import annotations

from ..ir.records import INT_DTYPES
from ..ir.text import format_shape
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, TensorType, grad_names, slots

ARRAY = "tensor_array"


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


def _check_index(i: int, length: int, what: str, allow_end: bool) -> int:
    last = length if allow_end else length - 1
    if not 0 <= i <= last:
        raise IndexError(f"{what}: index {i} is out of range for an array of length "
                         f"{length}{' (writing at the length appends)' if allow_end else ''}")
    return i


# --- create_array ---------------------------------------------------------------------------

def _create_infer(ctx: InferContext) -> None:
    ctx.set_output("Out", (), ctx.attrs["dtype"], ARRAY)


def _create_kernel(ctx: KernelContext):
    return lambda: []


register(OpSpec("create_array", (), slots("Out"), _create_infer, _create_kernel,
                attrs={"dtype": "float32"}, doc="Out = an empty tensor array"))


# --- write_to_array ---------------------------------------------------------------------------

def _write_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    _index(ctx)
    if ctx.has_input("Array"):
        a = _element(ctx, "Array")
        if a.shape and (a.dtype != x.dtype or len(a.shape) != len(x.shape) or any(
                d >= 0 and e >= 0 and d != e for d, e in zip(a.shape, x.shape))):
            ctx.fail(f"the array holds {a.dtype}{format_shape(a.shape)} elements; X is "
                     f"{x.dtype}{format_shape(x.shape)}: every element has one shape and "
                     f"dtype")
    ctx.set_output("Out", x.shape, x.dtype, ARRAY)


def _write_kernel(ctx: KernelContext):
    xp = ctx.xp

    def write(x, i, array=None):
        out = list(array) if array is not None else []
        k = _check_index(int(i.reshape(-1)[0]), len(out), "array_write", allow_end=True)
        # the array owns a copy: X may live in a buffer that a later step reuses
        element = xp.array(x, copy=True)
        if k == len(out):
            out.append(element)
        else:
            out[k] = element
        return out
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
        dx = dout[k] if k < len(dout) and dout[k] is not None else zeros
        rest = list(dout)
        if k < len(rest):
            rest[k] = None   # the element written was not the array's before
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
        k = _check_index(int(i.reshape(-1)[0]), len(array), "array_read", allow_end=False)
        if array[k] is None:
            raise IndexError(f"array_read: element {k} was never written")
        return array[k]
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
        k = int(i.reshape(-1)[0])
        return [None] * k + [dout]
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


def _to_tensor_kernel(ctx: KernelContext):
    xp = ctx.xp
    axis, stack = ctx.attrs["axis"], ctx.attrs["use_stack"]
    elem = ctx.input("X")

    def to_tensor(array):
        if not array:
            shape = list(elem.shape)
            if stack:
                shape.insert(axis if axis >= 0 else axis + len(shape) + 1, 0)
            else:
                shape[axis] = 0
            return xp.zeros(shape, elem.dtype), xp.zeros((0,), "int32")
        out = xp.stack(array, axis=axis) if stack else xp.concatenate(array, axis=axis)
        sizes = [1 if stack else a.shape[axis] for a in array]
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
    axis, stack = ctx.attrs["axis"], ctx.attrs["use_stack"]
    elem = ctx.input("X")

    def grad(array, dout):
        ax = axis if axis >= 0 else axis + dout.ndim
        if stack:
            return [xp.take(dout, k, axis=ax) for k in range(dout.shape[ax])]
        # every element has the element shape: equal parts
        return list(xp.split(dout, dout.shape[ax] // max(elem.shape[ax], 1), axis=ax)) \
            if dout.shape[ax] else []
    return grad


_TO_TENSOR = {"axis": 0, "use_stack": True}
register(OpSpec("tensor_array_to_tensor", slots("X"), slots("Out", "OutIndex"),
                _to_tensor_infer, _to_tensor_kernel, _to_tensor_grad, attrs=_TO_TENSOR,
                host_access="index",
                doc="Out = the elements of X stacked (use_stack) or joined along axis"))
register(OpSpec("tensor_array_to_tensor_grad", slots("X", "Out@GRAD"), slots("X@GRAD"),
                _to_tensor_grad_infer, _to_tensor_grad_kernel, attrs=_TO_TENSOR,
                aliases=True, shape_only=("X",),
                doc="X@GRAD = Out@GRAD cut back into the array's elements"))
