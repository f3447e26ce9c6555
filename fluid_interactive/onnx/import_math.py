"""Import rules of elementwise math: binary ops (Paddle's ``axis`` from a lined-up bias,
``scale`` from a multiplication or addition by a constant), activations, softmax, cast,
clip, sum and the pass-through nodes."""
from __future__ import annotations

import numpy as np

from .import_registry import NodeImport, Pending, import_rule

_BINARY = {"Add": "elementwise_add", "Sub": "elementwise_sub", "Mul": "elementwise_mul",
           "Div": "elementwise_div", "Pow": "elementwise_pow", "Max": "elementwise_max",
           "Min": "elementwise_min"}


def _scalar(n: NodeImport, i: int) -> float | None:
    value = n.constant(i)
    if value is None or value.size != 1 or value.dtype.kind != "f":
        return None
    return float(value.reshape(()))


def _scale_of(n: NodeImport, x: int, c: float) -> Pending | None:
    """The node as a pending ``scale`` of input ``x`` by the constant ``c``, or None."""
    op = n.node.op_type
    if op == "Mul":
        return Pending("scale", n.var(x), {"scale": c, "bias": 0.0, "bias_after_scale": True})
    if op == "Div" and x == 0 and c != 0.0:
        return Pending("scale", n.var(x), {"scale": 1.0 / c, "bias": 0.0,
                                            "bias_after_scale": True})
    if op in ("Add", "Sub") and (op == "Add" or x == 0):
        bias = c if op == "Add" else -c
        prior = n.pending(x, "scale")
        if prior is not None and prior.attrs["bias"] == 0.0:   # scale * x, then + bias
            return Pending("scale", prior.base, {**prior.attrs, "bias": bias})
        return Pending("scale", n.var(x), {"scale": 1.0, "bias": bias,
                                            "bias_after_scale": True})
    return None


@import_rule(*_BINARY)
def _binary(n: NodeImport) -> None:
    node = n.node
    if len(node.inputs) != 2:
        if node.op_type in ("Max", "Min") and len(node.inputs) > 2:
            _chain(n)
            return
        n.fail(f"has {len(node.inputs)} inputs; only two are supported")
    a, b = node.inputs
    if node.op_type == "Mul" and a == b:
        n.op("square", {"X": n.var(0)}, {})
        return
    if node.op_type == "Mul" and _row_mask(n) is not None:
        n.bind(Pending("elementwise_mul", n.var(0), {"axis": -1}, {"row_mask": _row_mask(n)},
                       {"Y": b}))
        return
    for side, c in ((0, _scalar(n, 1)), (1, _scalar(n, 0))):
        if c is None:
            continue
        if node.op_type == "Pow" and side == 0:
            n.op("pow", {"X": n.var(0)}, {"factor": c})
            return
        scaled = _scale_of(n, side, c)
        if scaled is not None:
            n.bind(scaled)
            return
    x, y, axis = _operands(n)
    op_type = _BINARY[node.op_type]
    if op_type == "elementwise_div" and not n.dtype(x).startswith("float"):
        # ONNX's integer Div truncates; floordiv gives the same for the non-negative
        # sizes and counts files divide (elementwise_div of ints gives a fraction)
        op_type = "elementwise_floordiv"
    n.op(op_type, {"X": x, "Y": y}, {"axis": axis})


def _row_mask(n: NodeImport) -> int | None:
    """The one zero row of a constant [V, 1] 0/1 mask multiplying a [V, D] table (how an
    embedding's padding_idx is exported), or None."""
    mask = n.constant(1)
    if mask is None or mask.ndim != 2 or mask.shape[1] != 1:
        return None
    zeros = np.flatnonzero(mask[:, 0] == 0)
    if len(zeros) != 1 or not np.all((mask == 0) | (mask == 1)):
        return None
    table = n.replay.graph.initializers.get(n.input_name(0))
    if table is None or table.ndim != 2 or table.shape[0] != mask.shape[0]:
        return None
    return int(zeros[0])


def _operands(n: NodeImport) -> tuple[str, str, int]:
    """(X, Y, axis) in Paddle's terms. A Y lined up by trailing 1s (an Unsqueeze of a bias)
    becomes the bias itself with the axis it starts at; a Y of lower rank than X gets its
    explicit start axis; otherwise NumPy broadcasting (axis -1), swapping the operands of a
    commutative op so that X has the larger rank."""
    x = n.var(0)
    lined_up = n.pending(1, "unsqueeze")
    rank_x = len(n.shape(x))
    if lined_up is not None and lined_up.info.get("trailing"):
        base = lined_up.base
        span = len(n.shape(base)) + len(lined_up.attrs["axes"])
        if span <= rank_x:
            return x, base, rank_x - span
    y = n.var(1)
    rank_y = len(n.shape(y))
    if rank_y < rank_x:
        return x, y, rank_x - rank_y
    if rank_y > rank_x and n.node.op_type in ("Add", "Mul", "Max", "Min"):
        return y, x, rank_y - rank_x
    return x, y, -1


def _chain(n: NodeImport) -> None:
    """Max / Min of more than two inputs, pairwise."""
    op = _BINARY[n.node.op_type]
    acc = n.var(0)
    last = len(n.node.inputs) - 1
    for i in range(1, last + 1):
        acc = n.op(op, {"X": acc, "Y": n.var(i)}, {"axis": -1},
                   name=None if i == last else f"{n.node.outputs[0]}.part{i}")


_UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log",
          "Sqrt": "sqrt", "Abs": "abs", "Sign": "sign"}


@import_rule(*_UNARY)
def _unary(n: NodeImport) -> None:
    n.op(_UNARY[n.node.op_type], {"X": n.var(0)}, {})


@import_rule("LeakyRelu")
def _leaky_relu(n: NodeImport) -> None:
    n.op("leaky_relu", {"X": n.var(0)}, {"alpha": float(n.attr("alpha", 0.01))})


@import_rule("Elu")
def _elu(n: NodeImport) -> None:
    n.op("elu", {"X": n.var(0)}, {"alpha": float(n.attr("alpha", 1.0))})


@import_rule("Gelu")
def _gelu(n: NodeImport) -> None:
    n.op("gelu", {"X": n.var(0)}, {"approximate": n.attr("approximate", "none") == "tanh"})


@import_rule("Softmax", "LogSoftmax")
def _softmax(n: NodeImport) -> None:
    """Opset 13 normalises along one axis (default -1); older opsets flatten at the axis
    (default 1), which is the same only when the axis is the last."""
    x = n.var(0)
    rank = len(n.shape(x))
    if n.opset >= 13:
        axis = int(n.attr("axis", -1))
    else:
        axis = int(n.attr("axis", 1))
        if (axis + rank if axis < 0 else axis) != rank - 1:
            n.fail(f"uses the pre-opset-13 meaning (flatten at axis {axis}) on a rank-{rank} "
                   f"input; only the last axis is supported there")
    op = "softmax" if n.node.op_type == "Softmax" else "log_softmax"
    n.op(op, {"X": x}, {"axis": axis})


@import_rule("Cast")
def _cast(n: NodeImport) -> None:
    from .proto import dtype_from_onnx
    to = dtype_from_onnx(int(n.attr("to")), f"{n.replay.graph.path}: {n.node.label}")
    shape = n.pending(0, "shape")
    if shape is not None and to == "int32":   # Paddle's shape op: an int32 shape
        n.op("shape", {"Input": shape.base}, {})
        return
    n.op("cast", {"X": n.var(0)}, {"out_dtype": to})


@import_rule("Clip")
def _clip(n: NodeImport) -> None:
    """Bounds from inputs 1 and 2 (opset 11+) or attributes; a missing bound is none; a
    bound the file computes becomes the op's Min / Max tensor."""
    x = n.var(0)
    big = float(np.finfo(n.dtype(x)).max) if n.dtype(x).startswith("float") else float(2 ** 62)
    bounds, tensors = [], {}
    for i, key, slot, default in ((1, "min", "Min", -big), (2, "max", "Max", big)):
        if n.has_input(i):
            value = n.static(i)
            if value is None:
                tensors[slot] = n.var(i)
            bounds.append(default if value is None else float(np.asarray(value).reshape(())))
        else:
            bounds.append(float(n.attr(key, default)))
    n.op("clip", {"X": x, **tensors}, {"min": bounds[0], "max": bounds[1]})


@import_rule("Sum")
def _sum(n: NodeImport) -> None:
    n.op("sum", {"X": [n.var(i) for i in range(len(n.node.inputs))]}, {})


@import_rule("Identity")
def _identity(n: NodeImport) -> None:
    value = n.replay.values.get(n.node.inputs[0])
    n.bind(value if value is not None else n.var(0))


@import_rule("Dropout")
def _dropout(n: NodeImport) -> None:
    """Dropout as the op that trains with it: identity in inference (the method decides),
    random masks scaled by 1 / (1 - ratio) in a training method."""
    n.unused(1)
    ratio = n.static(1) if n.has_input(1) else None
    p = float(np.asarray(ratio).reshape(())) if ratio is not None else \
        float(n.attr("ratio", 0.5))
    n.op("dropout", {"X": n.var(0)}, {"dropout_prob": p,
                                      "dropout_implementation": "upscale_in_train"})


@import_rule("Constant")
def _constant(n: NodeImport) -> None:
    """Nothing to append: the value, read with the file, becomes state only where a node
    takes it as a tensor (`Replay.var`); shapes, axes and scalars are read directly."""
