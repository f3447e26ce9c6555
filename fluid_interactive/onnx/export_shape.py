"""Export rules of shape ops: reshape, transpose, concat, split, slice, flatten, squeeze,
unsqueeze, and the reductions."""
from __future__ import annotations

from ..ops.reduce import reduced_axes
from ..ops.shape import RESHAPE_SHAPE, SLICE_ENDS, SLICE_STARTS, normalize_axis
from .export_index import int64, list_value
from .export_registry import OpExport, export_rule


@export_rule("reshape")
def _reshape(e: OpExport) -> None:
    """Paddle's and ONNX's reshape agree: 0 copies the input dim, one -1 is inferred. A
    shape given by tensors is joined into one (Shape, Paddle's actual_shape, first)."""
    shape = int64(e, e.input("Shape")) if e.has_input("Shape") else \
        list_value(e, RESHAPE_SHAPE, "shape")
    e.node("Reshape", [e.input("X"), shape], [e.output("Out")])


@export_rule("transpose")
def _transpose(e: OpExport) -> None:
    rank = len(e.shape(e.input("X")))
    perm = [int(a) + rank if int(a) < 0 else int(a) for a in e.attrs["axis"]]
    e.node("Transpose", [e.input("X")], [e.output("Out")], perm=perm)


@export_rule("concat")
def _concat(e: OpExport) -> None:
    e.node("Concat", e.inputs("X"), [e.output("Out")], axis=int(e.attrs["axis"]))


@export_rule("split")
def _split(e: OpExport) -> None:
    """The part sizes come from the declared output shapes (the split axis is known)."""
    x, outs = e.input("X"), e.outputs("Out")
    shape = e.shape(x)
    axis = normalize_axis(e, int(e.attrs["axis"]), len(shape), "split axis", shape)
    sizes = [e.shape(o)[axis] for o in outs]
    if any(s < 0 for s in sizes):
        e.fail(f"splits along axis {axis}, whose size is unknown until run time")
    e.node("Split", [x, e.ints(sizes, "split")], outs, axis=axis)


@export_rule("slice")
def _slice(e: OpExport) -> None:
    a = e.attrs
    e.node("Slice", [e.input("X"), list_value(e, SLICE_STARTS, "starts"),
                     list_value(e, SLICE_ENDS, "ends"), e.ints(a["axes"], "axes")],
           [e.output("Out")])


@export_rule("flatten")
def _flatten(e: OpExport) -> None:
    e.node("Flatten", [e.input("X")], [e.output("Out")], axis=int(e.attrs["axis"]))


@export_rule("squeeze")
def _squeeze(e: OpExport) -> None:
    """The removed dims, spelled out: with no axes Paddle removes the size-1 dims the traced
    shape shows, which never includes an unknown batch dim."""
    x = e.input("X")
    shape = e.shape(x)
    axes = [normalize_axis(e, int(a), len(shape), "squeeze axis", shape)
            for a in e.attrs["axes"]] or [i for i, d in enumerate(shape) if d == 1]
    e.node("Squeeze", [x, e.ints(sorted(axes))], [e.output("Out")])


@export_rule("unsqueeze")
def _unsqueeze(e: OpExport) -> None:
    """Paddle inserts one axis at a time, each indexing the shape built so far; ONNX takes
    the new dims' positions in the output."""
    rank = len(e.shape(e.input("X")))
    slots: list[bool] = [False] * rank   # True marks an inserted dim
    for a in e.attrs["axes"]:
        a = int(a)
        pos = a + len(slots) + 1 if a < 0 else a
        slots.insert(pos, True)
    axes = [i for i, new in enumerate(slots) if new]
    e.node("Unsqueeze", [e.input("X"), e.ints(axes)], [e.output("Out")])


_REDUCE = {"reduce_sum": "ReduceSum", "reduce_mean": "ReduceMean", "reduce_max": "ReduceMax",
           "reduce_min": "ReduceMin"}


@export_rule(*_REDUCE)
def _reduce(e: OpExport) -> None:
    reduce_node(e, _REDUCE[e.op.type])


def reduce_node(e: OpExport, node: str) -> None:
    """A reduce op (attrs dim, keep_dim, reduce_all) as the ONNX reduction ``node``."""
    x = e.input("X")
    axes = list(reduced_axes(e, e.shape(x), e.attrs))   # checks them
    if len(axes) < len(e.shape(x)) and not e.attrs["reduce_all"]:
        axes = [int(d) for d in e.attrs["dim"]]   # as the layer recorded them
    keep = int(bool(e.attrs["keep_dim"]))
    if node == "ReduceSum" or e.opset >= 18:   # axes became an input (ReduceSum in 13)
        e.node(node, [x, e.ints(axes)], [e.output("Out")], keepdims=keep)
    else:
        e.node(node, [x], [e.output("Out")], axes=axes, keepdims=keep)
