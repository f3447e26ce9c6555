"""Export rules of Paddle 1.8's further math: the elementwise functions and activations
(one ONNX node where ONNX has the function, a few nodes otherwise), prelu, maxout,
cumsum, the further reductions, the products and the norms; and the tensor-valued attrs
of scale, pow and clip.

Not exported: ``similarity_focus`` (a greedy selection, one position at a time: a Loop,
not written). ``cross`` is in `export_build`, ``mean_iou`` in `export_query`.
"""
from __future__ import annotations

from .export_registry import OpExport, export_rule
from .export_shape import reduce_node

#: op -> (ONNX node, {ONNX attr: (Paddle attr)}): one node each, imported back as the op
_DIRECT = {"sin": ("Sin", {}), "cos": ("Cos", {}), "atan": ("Atan", {}),
           "asin": ("Asin", {}), "acos": ("Acos", {}), "ceil": ("Ceil", {}),
           "floor": ("Floor", {}), "reciprocal": ("Reciprocal", {}), "erf": ("Erf", {}),
           "softplus": ("Softplus", {}), "softsign": ("Softsign", {}),
           "selu": ("Selu", {"alpha": "alpha", "gamma": "scale"}),
           "thresholded_relu": ("ThresholdedRelu", {"alpha": "threshold"}),
           "hard_sigmoid": ("HardSigmoid", {"alpha": "slope", "beta": "offset"})}


@export_rule(*_DIRECT)
def _direct(e: OpExport) -> None:
    node, attrs = _DIRECT[e.op.type]
    e.node(node, [e.input("X")], [e.output("Out")],
           **{k: float(e.attrs[v]) for k, v in attrs.items()})


@export_rule("softshrink", "hard_shrink")
def _shrink(e: OpExport) -> None:
    """ONNX's Shrink: X - bias above lambd, X + bias below -lambd, 0 between."""
    soft = e.op.type == "softshrink"
    lam = float(e.attrs["lambda" if soft else "threshold"])
    e.node("Shrink", [e.input("X")], [e.output("Out")], lambd=lam, bias=lam if soft else 0.0)


def _clip(e: OpExport, x: str, lo: float, hi: float, out: list[str] | None = None) -> str:
    """Clip of ``x`` (a value of the op's input dtype) to [lo, hi]."""
    dtype = e.dtype(e.input("X"))
    return e.node("Clip", [x, e.const(lo, dtype, "min"), e.const(hi, dtype, "max")], out)[0]


@export_rule("relu6", "brelu")
def _bounded(e: OpExport) -> None:
    lo, hi = ((0.0, e.attrs["threshold"]) if e.op.type == "relu6" else
              (e.attrs["t_min"], e.attrs["t_max"]))
    _clip(e, e.input("X"), float(lo), float(hi), [e.output("Out")])


@export_rule("logsigmoid")
def _logsigmoid(e: OpExport) -> None:
    """-softplus(-x)."""
    negated = e.node("Neg", [e.input("X")])[0]
    e.node("Neg", [e.node("Softplus", [negated])[0]], [e.output("Out")])


@export_rule("tanh_shrink")
def _tanh_shrink(e: OpExport) -> None:
    x = e.input("X")
    e.node("Sub", [x, e.node("Tanh", [x])[0]], [e.output("Out")])


@export_rule("rsqrt")
def _rsqrt(e: OpExport) -> None:
    e.node("Reciprocal", [e.node("Sqrt", [e.input("X")])[0]], [e.output("Out")])


@export_rule("log1p")
def _log1p(e: OpExport) -> None:
    x = e.input("X")
    e.node("Log", [e.node("Add", [x, e.scalar(1.0, x, "one")])[0]], [e.output("Out")])


@export_rule("round")
def _round(e: OpExport) -> None:
    """Halves away from zero, as Paddle rounds (ONNX's Round takes them to even):
    sign(x) * floor(|x| + 0.5)."""
    x = e.input("X")
    up = e.node("Add", [e.node("Abs", [x])[0], e.scalar(0.5, x, "half")])[0]
    e.node("Mul", [e.node("Sign", [x])[0], e.node("Floor", [up])[0]], [e.output("Out")])


@export_rule("hard_swish")
def _hard_swish(e: OpExport) -> None:
    x = e.input("X")
    shifted = e.node("Add", [x, e.scalar(float(e.attrs["offset"]), x, "offset")])[0]
    gate = _clip(e, shifted, 0.0, float(e.attrs["threshold"]))
    product = e.node("Mul", [gate, x])[0]
    e.node("Div", [product, e.scalar(float(e.attrs["scale"]), x, "scale")], [e.output("Out")])


@export_rule("soft_relu")
def _soft_relu(e: OpExport) -> None:
    t = float(e.attrs["threshold"])
    e.node("Softplus", [_clip(e, e.input("X"), -t, t)], [e.output("Out")])


@export_rule("stanh")
def _stanh(e: OpExport) -> None:
    x = e.input("X")
    inner = e.node("Mul", [x, e.scalar(float(e.attrs["scale_a"]), x, "scale_a")])[0]
    e.node("Mul", [e.node("Tanh", [inner])[0], e.scalar(float(e.attrs["scale_b"]), x,
                                                          "scale_b")], [e.output("Out")])


@export_rule("mish")
def _mish(e: OpExport) -> None:
    """x * tanh(softplus(x)); beyond the threshold softplus(x) and x differ by less than
    exp(-threshold), below float32's resolution for the default 20."""
    x = e.input("X")
    e.node("Mul", [x, e.node("Tanh", [e.node("Softplus", [x])[0]])[0]], [e.output("Out")])


@export_rule("prelu")
def _prelu(e: OpExport) -> None:
    x, alpha = e.input("X"), e.input("Alpha")
    rank = len(e.shape(x))
    if e.attrs["mode"] == "channel" and len(e.shape(alpha)) != rank:
        channels = e.shape(x)[1]
        alpha = e.node("Reshape", [alpha, e.ints([1, channels] + [1] * (rank - 2),
                                                 "shape")])[0]
    e.node("PRelu", [x, alpha], [e.output("Out")])


@export_rule("maxout")
def _maxout(e: OpExport) -> None:
    """The channels split as [C / groups, groups], then the max over the groups."""
    x = e.input("X")
    shape, axis, groups = list(e.shape(x)), int(e.attrs["axis"]), int(e.attrs["groups"])
    split = [0] + shape[1:axis] + [shape[axis] // groups, groups] + shape[axis + 1:]
    grouped = e.node("Reshape", [x, e.ints(split, "shape")])[0]
    if e.opset >= 18:
        e.node("ReduceMax", [grouped, e.ints([axis + 1])], [e.output("Out")], keepdims=0)
    else:
        e.node("ReduceMax", [grouped], [e.output("Out")], axes=[axis + 1], keepdims=0)


@export_rule("cumsum")
def _cumsum(e: OpExport) -> None:
    x = e.input("X")
    axis = e.const(int(e.attrs["axis"]), "int64", "axis")
    e.node("CumSum", [x, axis], [e.output("Out")], exclusive=int(bool(e.attrs["exclusive"])),
           reverse=int(bool(e.attrs["reverse"])))


_REDUCE = {"reduce_prod": "ReduceProd", "logsumexp": "ReduceLogSumExp"}


@export_rule(*_REDUCE)
def _reduce(e: OpExport) -> None:
    reduce_node(e, _REDUCE[e.op.type])


@export_rule("reduce_all", "reduce_any")
def _reduce_bool(e: OpExport) -> None:
    """All: the minimum of the values as 0/1; any: the maximum."""
    as_int = e.node("Cast", [e.input("X")], to=e.onnx_dtype("int32"))[0]
    keep = int(bool(e.attrs["keep_dim"]))
    shape = e.shape(e.input("X"))
    axes = list(range(len(shape))) if e.attrs["reduce_all"] or not e.attrs["dim"] else \
        [int(d) for d in e.attrs["dim"]]
    node = "ReduceMin" if e.op.type == "reduce_all" else "ReduceMax"
    if e.opset >= 18:
        folded = e.node(node, [as_int, e.ints(axes)], keepdims=keep)[0]
    else:
        folded = e.node(node, [as_int], axes=axes, keepdims=keep)[0]
    e.node("Cast", [folded], [e.output("Out")], to=e.onnx_dtype("bool"))
