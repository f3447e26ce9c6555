"""Regression and probability losses: huber_loss, smooth_l1, mse_loss, kldiv_loss, log_loss,
teacher_student_sigmoid_loss, dice_loss, and label_smooth for soft targets.

A loss that reduces the whole batch (``mse_loss``, ``dice_loss``, ``kldiv_loss`` with a
reduction) gives a 0-d var, as `mean` does, so a compiled method returns it as a Python
float; Paddle's has shape [1].
"""
from __future__ import annotations

from typing import Any

from ...errors import OpArgumentError, ShapeError
from ...ir.text import format_shape as dims
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper
from .loss_checks import (
    FLOATS,
    INTS,
    choice,
    dtype_arg,
    ids_per_row,
    number,
    optional_var,
    same_dtype,
    same_shape,
    var_of,
)

__all__ = ["huber_loss", "smooth_l1", "mse_loss", "kldiv_loss", "log_loss",
           "teacher_student_sigmoid_loss", "dice_loss", "label_smooth"]


def huber_loss(input: Variable, label: Variable, delta: float) -> Variable:
    """Elementwise Huber loss of the residual ``r = label - input``: ``0.5 r^2`` where
    ``|r| <= delta``, ``delta (|r| - delta / 2)`` elsewhere. ``input`` and ``label``
    have one shape (float32 or float64); so does the result."""
    layer = "huber_loss"
    x = var_of(layer, input, "input", FLOATS)
    y = var_of(layer, label, "label", FLOATS)
    same_shape(layer, x, y, "input", "label")
    same_dtype(layer, x, y, "input", "label")
    delta = number(layer, "delta", delta)
    helper = LayerHelper(layer)
    return helper.append_one(layer, {"X": x, "Y": y}, {"delta": delta})


def smooth_l1(x: Variable, y: Variable, inside_weight: Variable | None = None,
              outside_weight: Variable | None = None, sigma: float | None = None) -> Variable:
    """Per-sample smooth L1 loss ``[N, 1]`` of ``x`` and ``y`` (``[N, ...]``, rank >= 2):
    the row sum of ``outside_weight * f(inside_weight * (x - y))`` with
    ``f(d) = 0.5 sigma^2 d^2`` where ``|d| < 1 / sigma^2`` and ``|d| - 0.5 / sigma^2``
    elsewhere (``sigma`` None means 1). Give both weights (of ``x``'s shape) or neither."""
    layer = "smooth_l1"
    a = var_of(layer, x, "x", FLOATS)
    b = var_of(layer, y, "y", FLOATS)
    same_shape(layer, a, b, "x", "y")
    same_dtype(layer, a, b, "x", "y")
    iw = optional_var(layer, inside_weight, "inside_weight", FLOATS)
    ow = optional_var(layer, outside_weight, "outside_weight", FLOATS)
    if (iw is None) != (ow is None):
        raise error_at(ShapeError, f"{layer}: give both inside_weight and outside_weight, "
                                   f"or neither")
    for w, what in ((iw, "inside_weight"), (ow, "outside_weight")):
        if w is not None:
            same_shape(layer, a, w, "x", what)
    if len(a.shape) < 2:
        raise error_at(ShapeError, f"{layer}: x {a.name!r} has shape {dims(a.shape)}; it "
                                   f"must be a batch [N, ...] of rank >= 2")
    sigma = 1.0 if sigma is None else number(layer, "sigma", sigma)
    helper = LayerHelper(layer)
    outs = helper.append("smooth_l1_loss", {"X": a, "Y": b, "InsideWeight": iw,
                                            "OutsideWeight": ow}, {"sigma": sigma},
                         outputs={"Diff": [helper.tmp()], "Out": [helper.out_name()]},
                         final=False)
    return outs["Out"][0]


def mse_loss(input: Variable, label: Variable) -> Variable:
    """Mean squared error of ``input`` against ``label`` (same shape), a 0-d var:
    ``mean((input - label) ** 2)``."""
    layer = "mse_loss"
    x = var_of(layer, input, "input", FLOATS)
    y = var_of(layer, label, "label", FLOATS)
    same_shape(layer, x, y, "input", "label")
    same_dtype(layer, x, y, "input", "label")
    helper = LayerHelper(layer)
    diff = helper.append_one("elementwise_sub", {"X": x, "Y": y}, final=False)
    sq = helper.append_one("square", {"X": diff}, final=False)
    return helper.append_one("reduce_mean", {"X": sq}, {"reduce_all": True})


def kldiv_loss(x: Variable, target: Variable, reduction: str = "mean",
               name: str | None = None) -> Variable:
    """Kullback-Leibler divergence of ``target`` (probabilities) from ``exp(x)`` (``x``
    holds log-probabilities): ``target * (log target - x)`` elementwise, 0 where
    ``target <= 0``; ``reduction`` 'none' keeps that shape, 'mean' averages every element,
    'batchmean' sums and divides by the batch size, 'sum' sums (the last three give a 0-d
    var). As PyTorch's ``kl_div``."""
    layer = "kldiv_loss"
    a = var_of(layer, x, "x", FLOATS)
    t = var_of(layer, target, "target", FLOATS)
    same_shape(layer, a, t, "x", "target")
    same_dtype(layer, a, t, "x", "target")
    reduction = choice(layer, "reduction", reduction, ("none", "batchmean", "mean", "sum"))
    return LayerHelper(layer, name).append_one(layer, {"X": a, "Target": t},
                                               {"reduction": reduction})


def log_loss(input: Variable, label: Variable, epsilon: float = 1e-4,
             name: str | None = None) -> Variable:
    """Negative log likelihood of probabilities ``input`` ``[N, 1]`` against 0/1 labels
    ``[N, 1]``: ``-label log(input + epsilon) - (1 - label) log(1 - input + epsilon)``."""
    layer = "log_loss"
    p = var_of(layer, input, "input", FLOATS)
    lab = var_of(layer, label, "label", FLOATS)
    same_shape(layer, p, lab, "input", "label")
    same_dtype(layer, p, lab, "input", "label")
    if len(p.shape) != 2 or p.shape[1] not in (1, -1):
        raise error_at(ShapeError, f"{layer}: input {p.name!r} has shape {dims(p.shape)}; it "
                                   f"must be [N, 1], one probability per sample")
    eps = number(layer, "epsilon", epsilon)
    return LayerHelper(layer, name).append_one(layer, {"Predicted": p, "Labels": lab},
                                               {"epsilon": eps})


def teacher_student_sigmoid_loss(input: Variable, label: Variable,
                                 soft_max_up_bound: float = 15.0,
                                 soft_max_lower_bound: float = -15.0) -> Variable:
    """The logistic loss of Paddle's CTR distillation on logits ``input`` ``[N, 1]``.
    ``label`` ``[N, 1]`` encodes a click z and an optional teacher value z' in [0, 1]:
    -2 (no z', z = 0), -1 (no z', z = 1), z' (z = 0) or 1 + z' (z = 1). The loss is the
    sigmoid cross entropy against z plus, when z' is there, the one against z'. The
    gradient is 0 where ``input`` leaves ``[soft_max_lower_bound, soft_max_up_bound]``."""
    layer = "teacher_student_sigmoid_loss"
    x = var_of(layer, input, "input", FLOATS)
    lab = var_of(layer, label, "label", FLOATS)
    same_shape(layer, x, lab, "input", "label")
    same_dtype(layer, x, lab, "input", "label")
    attrs = {"soft_max_up_bound": number(layer, "soft_max_up_bound", soft_max_up_bound),
             "soft_max_lower_bound": number(layer, "soft_max_lower_bound",
                                            soft_max_lower_bound)}
    return LayerHelper(layer).append_one(layer, {"X": x, "Label": lab}, attrs)


def _reduce(helper: LayerHelper, op: str, x: Variable, dims_: list[int] | None,
            final: bool = False) -> Variable:
    attrs = {"reduce_all": True} if dims_ is None else {"dim": dims_, "keep_dim": False}
    return helper.append_one(op, {"X": x}, attrs, final=final)


def dice_loss(input: Variable, label: Variable, epsilon: float = 0.00001,
              name: str | None = None) -> Variable:
    """Dice loss for segmentation, a 0-d var: with ``onehot`` the one-hot form of
    ``label`` (int64 ``[N, ..., 1]``) and sums over every dim but the batch one,
    ``mean(1 - 2 sum(input * onehot) / (sum(input) + sum(onehot) + epsilon))``.
    ``input`` ``[N, ..., C]`` holds class probabilities (a softmax output)."""
    layer = "dice_loss"
    x = var_of(layer, input, "input", FLOATS)
    lab = var_of(layer, label, "label", INTS)
    ids_per_row(layer, x, lab, "label")
    if x.shape[-1] < 0:
        raise error_at(ShapeError, f"{layer}: input {x.name!r} has an unknown class count "
                                   f"(its last dim); declare it")
    eps = number(layer, "epsilon", epsilon)
    helper = LayerHelper(layer, name)
    onehot = helper.append_one("one_hot", {"X": lab}, {"depth": x.shape[-1],
                                                       "dtype": x.dtype}, final=False)
    axes = list(range(1, len(x.shape)))
    inse = _reduce(helper, "reduce_sum",
                   helper.append_one("elementwise_mul", {"X": x, "Y": onehot}, final=False),
                   axes)
    denom = helper.append_one("elementwise_add", {"X": _reduce(helper, "reduce_sum", x, axes),
                                                  "Y": _reduce(helper, "reduce_sum", onehot,
                                                               axes)}, final=False)
    denom = helper.append_one("scale", {"X": denom}, {"bias": eps}, final=False)
    ratio = helper.append_one("elementwise_div", {"X": inse, "Y": denom}, final=False)
    score = helper.append_one("scale", {"X": ratio}, {"scale": -2.0, "bias": 1.0}, final=False)
    return _reduce(helper, "reduce_mean", score, None, final=True)


def label_smooth(label: Variable, prior_dist: Variable | None = None, epsilon: float = 0.1,
                 dtype: Any = "float32", name: str | None = None) -> Variable:
    """Smoothed targets ``(1 - epsilon) * label + epsilon / K`` of one-hot ``label``
    ``[..., K]`` (float), or ``+ epsilon * prior_dist`` with a prior of K probabilities
    (``[1, K]``). ``epsilon`` lies in [0, 1]. The result has ``label``'s dtype, cast to
    ``dtype`` when that is another float type; an integer ``dtype`` changes nothing, as in
    Paddle (which declares the output with it but writes the label's float values)."""
    layer = "label_smooth"
    x = var_of(layer, label, "label", FLOATS)
    prior = optional_var(layer, prior_dist, "prior_dist", FLOATS)
    eps = number(layer, "epsilon", epsilon)
    if not 0.0 <= eps <= 1.0:
        raise error_at(OpArgumentError, f"{layer}: epsilon must lie in [0, 1], got "
                                        f"{epsilon!r}")
    out_dtype = dtype_arg(layer, dtype)
    helper = LayerHelper(layer, name)
    same = out_dtype == x.dtype or out_dtype not in FLOATS
    out = helper.append_one(layer, {"X": x, "PriorDist": prior}, {"epsilon": eps}, final=same)
    if same:
        return out
    return helper.append_one("cast", {"X": out}, {"out_dtype": out_dtype})

