"""Export rules of the creation and utility ops: fill_any_like (Shape, ConstantOfShape),
range (Range), linspace (a Constant), eye (EyeLike), tril_triu (Trilu), argsort (TopK of
the whole axis), shape (Shape, Cast), size (Size, Reshape) and reverse (Slice, step -1).

ONNX has no node for the others of the family: diag, diag_embed and trace (diagonals),
kron, meshgrid, hash, shard_index, allclose and the reduced isinf / isnan / isfinite (an
elementwise IsInf / IsNaN the import could not turn back into one op), the random ops
(ONNX's draw from generators of their own) and py_func.
"""
from __future__ import annotations

import numpy as np

from ..ops.creation import linspace
from .export_registry import OpExport, export_rule
from .proto import onnx_module

#: int64's most negative value: a Slice end meaning "past the front" for a step of -1
_FRONT = -(2 ** 63)


def _constant(e: OpExport, value: np.ndarray) -> None:
    out = e.output("Out")
    e.node("Constant", [], [out], value=onnx_module().numpy_helper.from_array(value, out))


@export_rule("fill_any_like")
def _fill_any_like(e: OpExport) -> None:
    out = e.output("Out")
    value = np.array([e.attrs["value"]], dtype=e.dtype(out))
    e.node("ConstantOfShape", [e.node("Shape", [e.input("X")])[0]], [out],
           value=onnx_module().numpy_helper.from_array(value, e.tmp_hint("value")))


@export_rule("range")
def _range(e: OpExport) -> None:
    """Range of three scalars: the attrs as constants, or the one-value inputs reshaped."""
    dtype = e.dtype(e.output("Out"))
    if e.has_input("Start"):
        scalar = e.ints([], "scalar")
        bounds = [e.node("Reshape", [e.input(s), scalar])[0] for s in ("Start", "End", "Step")]
    else:
        bounds = [e.const(e.attrs[k], dtype, k) for k in ("start", "end", "step")]
    e.node("Range", bounds, [e.output("Out")])


@export_rule("linspace")
def _linspace(e: OpExport) -> None:
    if e.has_input("Start"):
        e.fail("takes its bounds as inputs; ONNX has no linspace (give numbers: the values "
               "are then a constant)")
    a = e.attrs
    _constant(e, linspace(np, a["start"], a["stop"], a["num"], a["dtype"]))


@export_rule("eye")
def _eye(e: OpExport) -> None:
    rows, cols = e.shape(e.output("Out"))
    zeros = e.const(np.zeros((rows, cols)), e.attrs["dtype"], "zeros")
    e.node("EyeLike", [zeros], [e.output("Out")])


@export_rule("tril_triu")
def _tril_triu(e: OpExport) -> None:
    e.require_opset(14, "Trilu")
    e.node("Trilu", [e.input("X"), e.const(int(e.attrs["diagonal"]), "int64", "k")],
           [e.output("Out")], upper=0 if e.attrs["lower"] else 1)


@export_rule("argsort")
def _argsort(e: OpExport) -> None:
    """TopK of every value along the axis, largest first when descending. (TopK makes no
    promise about the order of ties.)"""
    x = e.input("X")
    shape = e.shape(x)
    axis = int(e.attrs["axis"]) % len(shape)
    if shape[axis] < 0:
        e.fail(f"sorts along axis {axis}, whose size is unknown until run time")
    e.node("TopK", [x, e.ints([shape[axis]], "k")], [e.output("Out"), e.output("Indices")],
           axis=axis, largest=int(bool(e.attrs["descending"])), sorted=1)


@export_rule("shape")
def _shape(e: OpExport) -> None:
    shape = e.node("Shape", [e.input("Input")])[0]
    e.node("Cast", [shape], [e.output("Out")], to=e.onnx_dtype("int32"))


@export_rule("size")
def _size(e: OpExport) -> None:
    e.node("Reshape", [e.node("Size", [e.input("Input")])[0], e.ints([1], "shape")],
           [e.output("Out")])


@export_rule("reverse")
def _reverse(e: OpExport) -> None:
    rank = len(e.shape(e.input("X")))
    axes = [int(a) % rank for a in e.attrs["axis"]]
    n = len(axes)
    e.node("Slice", [e.input("X"), e.ints([-1] * n, "starts"), e.ints([_FRONT] * n, "ends"),
                     e.ints(axes, "axes"), e.ints([-1] * n, "steps")], [e.output("Out")])
