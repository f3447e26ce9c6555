"""Export rules of elementwise math: binary ops with Paddle's ``axis`` broadcasting,
activations, softmax, scale, clip, cast, pow, sum and assign."""
from __future__ import annotations

from ..ops.broadcast import aligned_y_shape
from .export_registry import OpExport, export_rule

_BINARY = {"elementwise_add": "Add", "elementwise_sub": "Sub", "elementwise_mul": "Mul",
           "elementwise_div": "Div", "elementwise_max": "Max", "elementwise_min": "Min",
           "elementwise_pow": "Pow"}


def aligned_operand(e: OpExport, x: str, y: str, axis: int) -> str:
    """Y as ONNX's (NumPy's) broadcasting needs it for Paddle's ``axis`` rule: Y's dims
    matched to X's from ``axis`` on gain trailing 1s through an Unsqueeze."""
    try:
        aligned = aligned_y_shape(e.shape(x), e.shape(y), axis)
    except ValueError as err:
        e.fail(f"cannot broadcast Y into X: {err}")
    if aligned is None or aligned == e.shape(y):
        return y
    y_shape = e.shape(y)
    kept = aligned[axis:axis + len(y_shape)]
    if tuple(kept) == tuple(y_shape):
        trailing = list(range(len(y_shape), len(aligned) - axis))
        return e.node("Unsqueeze", [y, e.ints(trailing)], [e.tmp("unsqueezed")])[0]
    target = list(aligned[axis:])
    return e.node("Reshape", [y, e.ints(target, "shape")], [e.tmp("aligned")])[0]


@export_rule(*_BINARY)
def _binary(e: OpExport) -> None:
    x, y = e.input("X"), e.input("Y")
    y = aligned_operand(e, x, y, e.attrs["axis"])
    e.node(_BINARY[e.op.type], [x, y], [e.output("Out")])


_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log",
          "sqrt": "Sqrt", "abs": "Abs", "sign": "Sign"}


@export_rule(*_UNARY)
def _unary(e: OpExport) -> None:
    e.node(_UNARY[e.op.type], [e.input("X")], [e.output("Out")])


@export_rule("square")
def _square(e: OpExport) -> None:
    x = e.input("X")
    e.node("Mul", [x, x], [e.output("Out")])


@export_rule("leaky_relu")
def _leaky_relu(e: OpExport) -> None:
    e.node("LeakyRelu", [e.input("X")], [e.output("Out")], alpha=float(e.attrs["alpha"]))


@export_rule("elu")
def _elu(e: OpExport) -> None:
    e.node("Elu", [e.input("X")], [e.output("Out")], alpha=float(e.attrs["alpha"]))


@export_rule("gelu")
def _gelu(e: OpExport) -> None:
    e.require_opset(20, "Gelu")
    e.node("Gelu", [e.input("X")], [e.output("Out")],
           approximate="tanh" if e.attrs["approximate"] else "none")


@export_rule("swish")
def _swish(e: OpExport) -> None:
    """x * sigmoid(beta * x)."""
    x = e.input("X")
    beta = float(e.attrs["beta"])
    arg = x if beta == 1.0 else e.node("Mul", [x, e.scalar(beta, x, "beta")])[0]
    gate = e.node("Sigmoid", [arg])[0]
    e.node("Mul", [x, gate], [e.output("Out")])


def attr_or_tensor(e: OpExport, slot: str, attr: str, like: str) -> str:
    """The value of ``attr``, or the 1-element tensor in ``slot`` that gives it instead
    (cast to ``like``'s dtype; a [1] tensor broadcasts like a scalar)."""
    if not e.has_input(slot):
        return e.scalar(float(e.attrs[attr]), like, attr)
    value = e.input(slot)
    if e.dtype(value) == e.dtype(like):
        return value
    return e.node("Cast", [value], to=e.onnx_dtype(e.dtype(like)))[0]


@export_rule("pow")
def _pow(e: OpExport) -> None:
    x = e.input("X")
    e.node("Pow", [x, attr_or_tensor(e, "FactorTensor", "factor", x)], [e.output("Out")])


@export_rule("softmax", "log_softmax")
def _softmax(e: OpExport) -> None:
    node = "Softmax" if e.op.type == "softmax" else "LogSoftmax"
    e.node(node, [e.input("X")], [e.output("Out")], axis=int(e.attrs["axis"]))


@export_rule("scale")
def _scale(e: OpExport) -> None:
    """scale * x + bias (or scale * (x + bias)); factors of 1 and biases of 0 are left out
    (a ScaleTensor is always multiplied)."""
    x, out = e.input("X"), e.output("Out")
    s, b = float(e.attrs["scale"]), float(e.attrs["bias"])
    tensor = e.has_input("ScaleTensor")
    steps = [("Mul", s, 1.0, tensor), ("Add", b, 0.0, False)]
    if not e.attrs["bias_after_scale"]:
        steps.reverse()
    needed = [(node, v, t) for node, v, neutral, t in steps if v != neutral or t]
    if not needed:
        e.node("Identity", [x], [out])
        return
    value = x
    for i, (node, v, t) in enumerate(needed):
        target = [out] if i == len(needed) - 1 else None
        operand = attr_or_tensor(e, "ScaleTensor", "scale", x) if t else \
            e.scalar(v, x, node.lower())
        value = e.node(node, [value, operand], target)[0]


@export_rule("clip")
def _clip(e: OpExport) -> None:
    """Bounds given as [1] tensors (Min, Max) become the 0-d ones Clip takes."""
    x = e.input("X")
    bounds = []
    for slot, attr in (("Min", "min"), ("Max", "max")):
        value = attr_or_tensor(e, slot, attr, x)
        if e.has_input(slot):
            value = e.node("Reshape", [value, e.ints([], "scalar")])[0]
        bounds.append(value)
    e.node("Clip", [x, *bounds], [e.output("Out")])


@export_rule("cast")
def _cast(e: OpExport) -> None:
    e.node("Cast", [e.input("X")], [e.output("Out")],
           to=e.onnx_dtype(e.dtype(e.output("Out"))))


@export_rule("sum")
def _sum(e: OpExport) -> None:
    e.node("Sum", e.inputs("X"), [e.output("Out")])


@export_rule("assign")
def _assign(e: OpExport) -> None:
    e.node("Identity", [e.input("X")], [e.output("Out")])


@export_rule("mean")
def _mean(e: OpExport) -> None:
    """The mean of every element: a 0-d result."""
    x = e.input("X")
    rank = len(e.shape(x))
    if e.opset >= 18:
        e.node("ReduceMean", [x, e.ints(range(rank))], [e.output("Out")], keepdims=0)
    else:
        e.node("ReduceMean", [x], [e.output("Out")], axes=list(range(rank)), keepdims=0)


@export_rule("argmax", "argmin")
def _argmax(e: OpExport) -> None:
    node = "ArgMax" if e.op.type == "argmax" else "ArgMin"
    e.node(node, [e.input("X")], [e.output("Out")], axis=int(e.attrs["axis"]), keepdims=0)
