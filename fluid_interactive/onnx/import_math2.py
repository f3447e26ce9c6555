"""Import rules of the ONNX nodes Paddle 1.8's further math exports: the elementwise
functions and activations, Shrink, PRelu, Neg, CumSum, ReduceProd, ReduceLogSumExp and
Mod."""
from __future__ import annotations

from math import prod

import numpy as np

from .import_registry import NodeImport, import_rule
from .import_shape import reduce_op

_UNARY = {"Sin": "sin", "Cos": "cos", "Atan": "atan", "Asin": "asin", "Acos": "acos",
          "Ceil": "ceil", "Floor": "floor", "Reciprocal": "reciprocal", "Erf": "erf",
          "Softplus": "softplus", "Softsign": "softsign"}


@import_rule(*_UNARY)
def _unary(n: NodeImport) -> None:
    n.op(_UNARY[n.node.op_type], {"X": n.var(0)}, {})


#: node -> (op, {Paddle attr: (ONNX attr, ONNX's default)})
_WITH_ATTRS = {
    "Selu": ("selu", {"alpha": ("alpha", 1.6732632423543772),
                      "scale": ("gamma", 1.0507009873554805)}),
    "ThresholdedRelu": ("thresholded_relu", {"threshold": ("alpha", 1.0)}),
    "HardSigmoid": ("hard_sigmoid", {"slope": ("alpha", 0.2), "offset": ("beta", 0.5)}),
}


@import_rule(*_WITH_ATTRS)
def _with_attrs(n: NodeImport) -> None:
    op, attrs = _WITH_ATTRS[n.node.op_type]
    n.op(op, {"X": n.var(0)}, {k: float(n.attr(a, d)) for k, (a, d) in attrs.items()})


@import_rule("Shrink")
def _shrink(n: NodeImport) -> None:
    """bias == lambd is softshrink, bias 0 hard_shrink."""
    lam, bias = float(n.attr("lambd", 0.5)), float(n.attr("bias", 0.0))
    if bias == lam:
        n.op("softshrink", {"X": n.var(0)}, {"lambda": lam})
    elif bias == 0.0:
        n.op("hard_shrink", {"X": n.var(0)}, {"threshold": lam})
    else:
        n.fail(f"has bias {bias} and lambd {lam}; only bias 0 (hard_shrink) or bias == lambd "
               f"(softshrink) have an op")


@import_rule("PRelu")
def _prelu(n: NodeImport) -> None:
    """The mode from the slope's size: one number ('all'), one per channel of dim 1
    ('channel'), or one per element of a sample ('element')."""
    x, slope = n.var(0), n.var(1)
    shape, slope_shape = n.shape(x), n.shape(slope)
    size = prod(slope_shape)
    if size == 1:
        mode = "all"
    elif len(shape) >= 2 and size == shape[1] and sorted(slope_shape)[:-1] == \
            [1] * (len(slope_shape) - 1):
        mode = "channel"
    elif len(shape) >= 2 and tuple(slope_shape[-(len(shape) - 1):]) == tuple(shape[1:]):
        mode = "element"
    else:
        n.fail(f"has a slope of shape {list(slope_shape)} for X of shape {list(shape)}; "
               f"one number, one per channel or one per element of a sample is supported")
    n.op("prelu", {"X": x, "Alpha": slope}, {"mode": mode})


@import_rule("Neg")
def _neg(n: NodeImport) -> None:
    n.op("scale", {"X": n.var(0)}, {"scale": -1.0, "bias": 0.0, "bias_after_scale": True})


@import_rule("CumSum")
def _cumsum(n: NodeImport) -> None:
    axis = n.static(1)
    if axis is None:
        n.fail("needs its axis fixed in the file")
    n.op("cumsum", {"X": n.var(0)}, {"axis": int(np.asarray(axis).reshape(())),
                                     "exclusive": bool(n.attr("exclusive", 0)),
                                     "reverse": bool(n.attr("reverse", 0))})


_REDUCE = {"ReduceProd": "reduce_prod", "ReduceLogSumExp": "logsumexp"}


@import_rule(*_REDUCE)
def _reduce(n: NodeImport) -> None:
    reduce_op(n, _REDUCE[n.node.op_type])


@import_rule("Mod")
def _mod(n: NodeImport) -> None:
    """Mod with fmod=0: the remainder with the divisor's sign, as elementwise_mod."""
    if n.attr("fmod", 0):
        n.fail("has fmod=1 (C's fmod, the dividend's sign); elementwise_mod takes the "
               "divisor's sign")
    n.op("elementwise_mod", {"X": n.var(0), "Y": n.var(1)}, {"axis": -1})
