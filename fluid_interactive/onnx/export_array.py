"""Export rules of tensor arrays (`ops/tensor_array.py`) as ONNX sequences (opset 11's
sequence operators; a Loop or If carries sequences from opset 13, the oldest opset we
write, so no array needs a newer one):

``create_array``            ``SequenceEmpty`` of the array's dtype
``write_to_array``          ``SequenceInsert`` at I when I is the length (an append), else
                            ``SequenceErase`` of element I first: an ``If`` on I < length
``read_from_array``         ``SequenceAt``
``lod_array_length``        ``SequenceLength``, as int64 [1]
``tensor_array_to_tensor``  ``ConcatFromSequence`` (``new_axis`` when stacking); an
                            ``If`` gives an empty array's empty tensor, which onnxruntime's
                            ConcatFromSequence refuses to make

An array a ``while`` writes is one of its Loop's carried values, a sequence, like any
other (`export_control`). An index is the int [1] var our ops take, squeezed to the 0-d
position ONNX's take. ONNX counts a negative position from the end, where our kernels
refuse it; a position past the end fails in both.

An empty array's elements have no shape when the graph runs: its tensor has 0 along the
stacking (or joining) axis and along each dim unknown before the method runs, where
``infer`` knows them from its plan (an array of ``[?, 4]`` rows stacks to ``[0, 0, 4]``
in onnxruntime and ``[0, B, 4]`` in ``infer``).
"""
from __future__ import annotations

import numpy as np

from .export_control import Subgraph
from .export_registry import OpExport, export_rule


def _position(e: OpExport) -> str:
    """Index I (int [1]) as the 0-d int64 ONNX's sequence operators and comparisons take."""
    i = e.input("I")
    if e.dtype(i) != "int64":
        i = e.node("Cast", [i], to=e.onnx_dtype("int64"))[0]
    return e.node("Squeeze", [i, e.ints([0])])[0]


@export_rule("create_array")
def _create_array(e: OpExport) -> None:
    e.node("SequenceEmpty", [], [e.output("Out")], dtype=e.onnx_dtype(e.attrs["dtype"]))


@export_rule("write_to_array")
def _write_to_array(e: OpExport) -> None:
    """Out = Array with element I set to X: erase element I and insert X there, or, when
    I is the length, insert X at the end."""
    x, out = e.input("X"), e.output("Out")
    array = e.input("Array") if e.has_input("Array") else \
        e.node("SequenceEmpty", [], dtype=e.onnx_dtype(e.dtype(x)))[0]
    at = _position(e)
    inside = e.node("Less", [at, e.node("SequenceLength", [array])[0]])[0]
    replace = Subgraph(e, {}, e.block)
    erased = replace.node("SequenceErase", [array, at], e.tmp_hint("erased"))
    replaced = replace.node("SequenceInsert", [erased, x, at], e.tmp_hint("replaced"))
    append = Subgraph(e, {}, e.block)
    appended = append.node("SequenceInsert", [array, x, at], e.tmp_hint("appended"))
    e.node("If", [inside], [out], then_branch=replace.make([(replaced, out)], f"{out}.set"),
           else_branch=append.make([(appended, out)], f"{out}.append"))


@export_rule("read_from_array")
def _read_from_array(e: OpExport) -> None:
    e.node("SequenceAt", [e.input("X"), _position(e)], [e.output("Out")])


@export_rule("lod_array_length")
def _lod_array_length(e: OpExport) -> None:
    length = e.node("SequenceLength", [e.input("X")])[0]
    e.node("Unsqueeze", [length, e.ints([0])], [e.output("Out")])


@export_rule("tensor_array_to_tensor")
def _tensor_array_to_tensor(e: OpExport) -> None:
    """Out = the elements stacked or joined along axis; OutIndex = each element's size
    along axis, int32."""
    array, out = e.input("X"), e.output("Out")
    stack = bool(e.attrs["use_stack"])
    element = list(e.shape(array))
    rank = len(element) + stack
    axis = int(e.attrs["axis"]) % rank
    length = e.node("SequenceLength", [array])[0]
    empty = e.node("Equal", [length, e.const(0, "int64", "none")])[0]
    shape = [max(d, 0) for d in element]
    if stack:
        shape.insert(axis, 0)
    else:
        shape[axis] = 0
    nothing = Subgraph(e, {}, e.block)
    zeros = nothing.graph.constant(np.zeros(shape, e.dtype(array)), e.tmp_hint("empty"))
    joined = Subgraph(e, {}, e.block)
    tensor = joined.node("ConcatFromSequence", [array], e.tmp_hint("joined"), axis=axis,
                         new_axis=int(stack))
    e.node("If", [empty], [out], then_branch=nothing.make([(zeros, out)], f"{out}.empty"),
           else_branch=joined.make([(tensor, out)], f"{out}.joined"))
    each = _size_along(e, out, axis, length, stack, len(element))
    sizes = e.node("Expand", [each, e.node("Unsqueeze", [length, e.ints([0])])[0]])[0]
    e.node("Cast", [sizes], [e.output("OutIndex")], to=e.onnx_dtype("int32"))


def _size_along(e: OpExport, out: str, axis: int, length: str, stack: bool, rank: int
                ) -> str:
    """An element's size along ``axis``: stacked, Out's next dim (1 for a new last axis);
    joined, Out's size there over the length (the elements of an exported array share
    their shape)."""
    if stack and axis == rank:
        return e.const(1, "int64", "one")
    shape = e.node("Shape", [out])[0]
    along = e.node("Gather", [shape, e.const(axis + stack, "int64", "axis")], axis=0)[0]
    if stack:
        return along
    return e.node("Div", [along, e.node("Max", [length, e.const(1, "int64", "one")])[0]])[0]
