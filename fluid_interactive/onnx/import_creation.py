"""Import rules of the nodes the creation and utility ops export to: Range, EyeLike,
Trilu and Size. (A TopK of a whole axis is an argsort: import_index's TopK; Shape followed
by a Cast to int32 is Paddle's shape op: import_math's Cast; a Slice of step -1 over whole
dims is a reverse: import_shape's Slice.)"""
from __future__ import annotations

import numpy as np

from .import_registry import NodeImport, import_rule


@import_rule("Range")
def _range(n: NodeImport) -> None:
    """Bounds fixed in the file become attrs (the length is known); others are inputs,
    each a one-value var."""
    static = [n.static(i) for i in range(3)]
    if all(v is not None for v in static):
        start, end, step = (np.asarray(v).reshape(-1)[0] for v in static)
        dtype = np.asarray(static[0]).dtype.name
        n.op("range", {}, {"start": float(start), "end": float(end), "step": float(step),
                           "dtype": dtype})
        return
    slots = {}
    for i, slot in enumerate(("Start", "End", "Step")):
        slots[slot] = n.op("reshape", {"X": n.var(i)}, {"shape": [1]},
                           name=f"{n.node.outputs[0]}.{slot.lower()}")
    n.op("range", slots, {})


@import_rule("EyeLike")
def _eye_like(n: NodeImport) -> None:
    if n.attr("k", 0):
        n.fail(f"has k={n.attr('k')}; only the main diagonal (k=0) is supported")
    static = n.static(0)
    shape = np.shape(static) if static is not None else n.shape(n.var(0))
    if len(shape) != 2 or any(d < 0 for d in shape):
        n.fail(f"takes the shape {list(shape)}; eye needs a known [rows, columns]")
    to = n.attr("dtype")
    if to is not None:
        from .proto import dtype_from_onnx
        dtype = dtype_from_onnx(int(to), f"{n.replay.graph.path}: {n.node.label}")
    else:
        dtype = static.dtype.name if static is not None else n.dtype(n.var(0))
    n.op("eye", {}, {"num_rows": int(shape[0]), "num_columns": int(shape[1]), "dtype": dtype})


@import_rule("Trilu")
def _trilu(n: NodeImport) -> None:
    k = 0
    if n.has_input(1):
        static = n.static(1)
        if static is None:
            n.fail("has a diagonal k known only at run time")
        k = int(np.asarray(static).reshape(-1)[0])
    n.op("tril_triu", {"X": n.var(0)}, {"diagonal": k, "lower": not n.attr("upper", 1)})


@import_rule("Size")
def _size(n: NodeImport) -> None:
    """ONNX's Size is 0-d; the size op gives [1]."""
    count = n.op("size", {"Input": n.var(0)}, {}, name=f"{n.node.outputs[0]}.count")
    n.op("reshape", {"X": count}, {"shape": []})
