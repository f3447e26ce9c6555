"""Tensor arrays: a list of tensors of one dtype and rank (their dims may differ) that a
loop fills step by step and reads back (Paddle's LoDTensorArray). Indices are int64 vars
of shape [1], such as a loop counter::

    arr = fluid.layers.create_array('float32')
    with loop.block():
        fluid.layers.array_write(h, i, array=arr)     # element i; i >= length grows it
        ...
    hs, _ = fluid.layers.tensor_array_to_tensor(arr, axis=0, use_stack=True)   # [T, ...]

Gradients flow through writes, reads and `tensor_array_to_tensor`.
"""
from __future__ import annotations

from typing import Any

from ...errors import OpArgumentError, ShapeError
from ...ir.records import VarDesc, canonical_dtype
from ...ir.text import short_type
from ...ops.control import join
from ...ops.spec import TensorType, var_type
from ...ops.tensor_array import ARRAY
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable

__all__ = ["create_array", "array_write", "array_read", "array_length",
           "tensor_array_to_tensor"]


def _array(value: Any, what: str) -> Variable:
    arr = as_variable(value, what)
    if arr.desc.kind != ARRAY:
        raise error_at(OpArgumentError, f"{what} must be a tensor array (made with "
                                        f"fluid.layers.create_array), got "
                                        f"{arr.name}:{short_type(arr.desc)}")
    return arr


def create_array(dtype: Any) -> Variable:
    """An empty tensor array of ``dtype``; its element shape comes from its first write."""
    helper = LayerHelper("array")
    try:
        dt = canonical_dtype(dtype)
    except TypeError as e:
        raise error_at(OpArgumentError, f"create_array: {e}") from None
    name = helper.out_name()
    helper.trace.declare(VarDesc(name, (), dt, kind=ARRAY, stop_gradient=False))
    helper.append("create_array", {}, {"dtype": dt}, outputs={"Out": [name]})
    return Variable(helper.trace, name)


def array_write(x: Variable, i: Variable, array: Variable | None = None) -> Variable:
    """Write ``x`` as element ``i`` of ``array`` (a new array when None) and return the
    array. ``i`` may be at or past the array's length, which grows it (the elements in
    between are empty: reading one is an error)."""
    x = as_variable(x, "array_write: x")
    if array is None:
        array = create_array(x.dtype)
    arr = _array(array, "array_write: array")
    desc = arr.desc
    if not desc.shape:   # the first write tells the element shape
        desc.shape = tuple(x.shape)
    else:                # elements may differ in their dims: -1 there
        merged = join(var_type(desc), TensorType(x.shape, x.dtype, ARRAY))
        if merged is None:
            raise error_at(ShapeError, f"array_write: the array {arr.name!r} holds "
                                       f"{short_type(VarDesc(arr.name, desc.shape, desc.dtype))}"
                                       f" elements, x is {x.name}:{short_type(x.desc)}; the "
                                       f"elements of an array share their dtype and rank")
        desc.shape = merged.shape
    helper = LayerHelper("array_write")
    helper.append("write_to_array", {"X": x, "I": as_variable(i, "array_write: i"),
                                     "Array": arr}, outputs={"Out": [arr.name]})
    return arr


def array_read(array: Variable, i: Variable) -> Variable:
    """Element ``i`` of ``array``."""
    arr = _array(array, "array_read: array")
    if not arr.desc.shape:
        raise error_at(OpArgumentError, f"array_read: nothing was written to {arr.name!r} "
                                        f"yet, so its element type is unknown; write to it "
                                        f"first (fluid.layers.array_write)")
    helper = LayerHelper("array_read")
    return helper.append_one("read_from_array", {"X": arr, "I": as_variable(i, "array_read: i")})


def array_length(array: Variable) -> Variable:
    """The number of elements of ``array``: an int64 var of shape [1]."""
    arr = _array(array, "array_length: array")
    out = LayerHelper("array_length").append_one("lod_array_length", {"X": arr})
    out.stop_gradient = True
    return out


def tensor_array_to_tensor(input: Variable, axis: int = 1, name: str | None = None,
                           use_stack: bool = False) -> tuple[Variable, Variable]:
    """The elements of the array ``input`` joined along ``axis`` or, with ``use_stack``,
    stacked along a new dim ``axis``; returns ``(tensor, index)`` where ``index`` (int32)
    holds each element's size along ``axis`` (Paddle's OutIndex, stacked or not)."""
    arr = _array(input, "tensor_array_to_tensor: input")
    helper = LayerHelper("tensor_array_to_tensor", name)
    outs = helper.append("tensor_array_to_tensor", {"X": arr},
                         {"axis": int(axis), "use_stack": bool(use_stack)})
    outs["OutIndex"][0].stop_gradient = True
    return outs["Out"][0], outs["OutIndex"][0]
