"""Import rules of ``OneHot``, ``IsNaN`` and ``IsInf`` (what one_hot and the overflow
queries export to):

``OneHot``  ``one_hot`` of the ids with a last dim of 1 (out-of-range ids give zero rows,
            as in ONNX; a negative id is first counted from the end, as ONNX counts it),
            then ``scale`` when the off and on values are not 0 and 1
``IsNaN``   ``not_equal`` of X and itself
``IsInf``   ``greater_than`` the dtype's largest finite value (of ``abs`` of X, or of X
            for +inf alone; ``less_than`` its negative for -inf alone)
"""
from __future__ import annotations

import numpy as np

from .import_registry import NodeImport, import_rule


def _fill(n: NodeImport, value: float, dtype: str, what: str) -> str:
    return n.op("fill_constant", {}, {"shape": [1], "dtype": dtype, "value": value},
                name=f"{n.node.outputs[0]}.{what}")


@import_rule("OneHot")
def _one_hot(n: NodeImport) -> None:
    depth, values = n.static(1), n.static(2)
    if depth is None or values is None or np.size(values) != 2:
        n.fail("needs its depth and its two values fixed in the file")
    assert depth is not None and values is not None
    ids = n.var(0)
    rank = len(n.shape(ids))
    if int(n.attr("axis", -1)) not in (-1, rank):
        n.fail(f"puts the classes on axis {n.attr('axis')}; one_hot puts them last")
    depth_value = int(np.asarray(depth).reshape(-1)[0])
    dtype = n.dtype(ids)
    negative = n.op("less_than", {"X": ids, "Y": _fill(n, 0, dtype, "zero")}, {"axis": -1},
                    name=f"{n.node.outputs[0]}.negative")
    counted = n.op("elementwise_add", {"X": ids, "Y": _fill(n, depth_value, dtype, "depth")},
                   {"axis": -1}, name=f"{n.node.outputs[0]}.counted")
    ids = n.op("where", {"Condition": negative, "X": counted, "Y": ids}, {},
               name=f"{n.node.outputs[0]}.ids")
    column = n.op("unsqueeze", {"X": ids}, {"axes": [rank]}, name=f"{n.node.outputs[0]}.col")
    off, on = (float(v) for v in np.asarray(values).reshape(-1))
    attrs = {"depth": depth_value, "dtype": np.asarray(values).dtype.name,
             "allow_out_of_range": True}
    if (off, on) == (0.0, 1.0):
        n.op("one_hot", {"X": column}, attrs)
        return
    hot = n.op("one_hot", {"X": column}, attrs, name=f"{n.node.outputs[0]}.hot")
    n.op("scale", {"X": hot}, {"scale": on - off, "bias": off, "bias_after_scale": True})


@import_rule("IsNaN")
def _is_nan(n: NodeImport) -> None:
    x = n.var(0)
    n.op("not_equal", {"X": x, "Y": x}, {"axis": -1})


@import_rule("IsInf")
def _is_inf(n: NodeImport) -> None:
    """Past the dtype's largest finite value (a NaN compares false either way)."""
    x = n.var(0)
    positive, negative = int(n.attr("detect_positive", 1)), int(n.attr("detect_negative", 1))
    if not positive and not negative:
        n.fail("detects neither infinity (detect_positive=0 and detect_negative=0)")
    if not n.dtype(x).startswith("float"):
        n.fail(f"takes {n.dtype(x)} values; IsInf takes floats")
    big = float(np.finfo(n.dtype(x)).max)
    if positive and negative:
        size = n.op("abs", {"X": x}, {}, name=f"{n.node.outputs[0]}.abs")
        n.op("greater_than", {"X": size, "Y": _fill(n, big, n.dtype(x), "max")}, {"axis": -1})
    elif positive:
        n.op("greater_than", {"X": x, "Y": _fill(n, big, n.dtype(x), "max")}, {"axis": -1})
    else:
        n.op("less_than", {"X": x, "Y": _fill(n, -big, n.dtype(x), "min")}, {"axis": -1})
