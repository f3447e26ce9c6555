"""Ranking and metric-learning losses: rank_loss, margin_rank_loss, bpr_loss, npair_loss,
center_loss."""
from __future__ import annotations

import dataclasses
from typing import Any

from ...errors import ShapeError
from ...ir.text import format_shape as dims
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper
from .loss_checks import (
    FLOATS,
    INTS,
    flag,
    ids_per_row,
    integer,
    number,
    same_dtype,
    same_shape,
    var_of,
)
from .norm import _state_var

__all__ = ["rank_loss", "margin_rank_loss", "bpr_loss", "npair_loss", "center_loss"]


def _column(layer: str, v: Variable, what: str, allow_1d: bool = True) -> None:
    s = v.shape
    ok = (len(s) == 2 and s[1] in (1, -1)) or (allow_1d and len(s) == 1)
    if not ok:
        shapes = "[N] or [N, 1]" if allow_1d else "[N, 1]"
        raise error_at(ShapeError, f"{layer}: {what} {v.name!r} has shape {dims(s)}; it must "
                                   f"be {shapes}, one value per pair")


def _pair_inputs(layer: str, label: Any, left: Any, right: Any, names: tuple[str, str],
                 allow_1d: bool) -> tuple[Variable, Variable, Variable]:
    lab = var_of(layer, label, "label", FLOATS)
    a = var_of(layer, left, names[0], FLOATS)
    b = var_of(layer, right, names[1], FLOATS)
    for v, what in ((lab, "label"), (a, names[0]), (b, names[1])):
        _column(layer, v, what, allow_1d)
        same_dtype(layer, lab, v, "label", what)
    sizes = {v.shape[0] for v in (lab, a, b) if v.shape[0] >= 0}
    if len(sizes) > 1:
        raise error_at(ShapeError, f"{layer}: label, {names[0]} and {names[1]} have batch "
                                   f"sizes {', '.join(str(v.shape[0]) for v in (lab, a, b))}; "
                                   f"they must agree")
    return lab, a, b


def rank_loss(label: Variable, left: Variable, right: Variable,
              name: str | None = None) -> Variable:
    """RankNet's pairwise loss: with ``d = left - right`` (the two documents' scores),
    ``log(1 + exp(d)) - label * d``, where ``label`` is 1 when ``left`` should rank higher,
    0 otherwise (0.5 for a tie). Each input is ``[N, 1]`` (or ``[N]``); the result has
    ``label``'s shape."""
    layer = "rank_loss"
    lab, a, b = _pair_inputs(layer, label, left, right, ("left", "right"), True)
    return LayerHelper(layer, name).append_one(layer, {"Label": lab, "Left": a, "Right": b})


def margin_rank_loss(label: Variable, left: Variable, right: Variable, margin: float = 0.1,
                     name: str | None = None) -> Variable:
    """Hinge ranking loss ``max(0, -label * (left - right) + margin)`` per pair, all
    ``[N, 1]``; ``label`` is +1 when ``left`` should rank higher, -1 otherwise."""
    layer = "margin_rank_loss"
    lab, a, b = _pair_inputs(layer, label, left, right, ("left", "right"), False)
    helper = LayerHelper(layer, name)
    outs = helper.append(layer, {"Label": lab, "X1": a, "X2": b},
                         {"margin": number(layer, "margin", margin)},
                         outputs={"Out": [helper.out_name()], "Activated": [helper.tmp()]},
                         final=False)
    return outs["Out"][0]


def bpr_loss(input: Variable, label: Variable, name: str | None = None) -> Variable:
    """Bayesian personalised ranking: scores ``input`` ``[N, C]`` (or ``[..., C]``) and the
    positive item ``label`` (int64 ``[N, 1]``); per row, the mean over the other items j of
    ``log(1 + exp(input[j] - input[label]))``, shaped ``[N, 1]``."""
    layer = "bpr_loss"
    x = var_of(layer, input, "input", FLOATS)
    lab = var_of(layer, label, "label", INTS)
    ids_per_row(layer, x, lab, "label")
    return LayerHelper(layer, name).append_one(layer, {"X": x, "Label": lab})


def npair_loss(anchor: Variable, positive: Variable, labels: Variable,
               l2_reg: float = 0.002) -> Variable:
    """N-pair loss of embeddings ``anchor`` and ``positive`` (``[N, D]``, float) with class
    ``labels`` (``[N]`` or ``[N, 1]``, float or int64), a 0-d var: the soft-label cross
    entropy of the similarities ``anchor @ positive^T`` against the rows of the
    same-class matrix (each row normalised to sum 1), averaged, plus
    ``0.25 * l2_reg * (mean |anchor_i|^2 + mean |positive_i|^2)``."""
    layer = "npair_loss"
    a = var_of(layer, anchor, "anchor", FLOATS)
    p = var_of(layer, positive, "positive", FLOATS)
    lab = var_of(layer, labels, "labels", FLOATS + ("int64",))
    same_shape(layer, a, p, "anchor", "positive")
    same_dtype(layer, a, p, "anchor", "positive")
    if len(a.shape) != 2:
        raise error_at(ShapeError, f"{layer}: anchor {a.name!r} has shape {dims(a.shape)}; it "
                                   f"must be embeddings [N, D]")
    _column(layer, lab, "labels")
    reg = number(layer, "l2_reg", l2_reg)
    helper = LayerHelper(layer)
    col = helper.append_one("reshape", {"X": lab}, {"shape": [-1, 1]}, final=False)
    row = helper.append_one("transpose", {"X": col}, {"axis": [1, 0]}, final=False)
    same = helper.append_one("equal", {"X": col, "Y": row}, final=False)
    target = helper.append_one("cast", {"X": same}, {"out_dtype": a.dtype}, final=False)
    count = helper.append_one("reduce_sum", {"X": target}, {"dim": [1], "keep_dim": True},
                              final=False)
    target = helper.append_one("elementwise_div", {"X": target, "Y": count}, final=False)
    l2 = [helper.append_one("reduce_mean", {"X": helper.append_one(
        "reduce_sum", {"X": helper.append_one("square", {"X": v}, final=False)},
        {"dim": [1]}, final=False)}, {"reduce_all": True}, final=False) for v in (a, p)]
    l2loss = helper.append_one("elementwise_add", {"X": l2[0], "Y": l2[1]}, final=False)
    l2loss = helper.append_one("scale", {"X": l2loss}, {"scale": 0.25 * reg}, final=False)
    sim = helper.append_one("matmul", {"X": a, "Y": p}, {"transpose_Y": True}, final=False)
    ce = helper.append("softmax_with_cross_entropy", {"Logits": sim, "Label": target},
                       {"soft_label": True}, final=False)["Loss"][0]
    ce = helper.append_one("elementwise_mul", {"X": target, "Y": ce}, final=False)
    ce = helper.append_one("reduce_sum", {"X": ce}, {"dim": [0]}, final=False)
    ce = helper.append_one("reduce_mean", {"X": ce}, {"reduce_all": True}, final=False)
    return helper.append_one("elementwise_add", {"X": l2loss, "Y": ce})


def center_loss(input: Variable, label: Variable, num_classes: int, alpha: Any,
                param_attr: Any, update_center: bool = True) -> Variable:
    """Center loss ``[N, 1]``: ``|input_i - centers[label_i]|^2 / 2`` for features
    ``input`` ``[N, D]`` and class ids ``label`` (int64 ``[N, 1]``).

    The centres ``[num_classes, D]`` are a parameter named by ``param_attr`` that no
    optimizer updates: in a training call (a method that runs an optimizer) with
    ``update_center``, each class's centre moves by ``alpha`` times the sum of its
    samples' differences divided by (their count + 1), as Paddle does; other calls leave
    it as it is. ``alpha`` is a number or a one-element Variable (the rate may follow a
    schedule)."""
    layer = "center_loss"
    x = var_of(layer, input, "input", FLOATS)
    lab = var_of(layer, label, "label", INTS)
    k = integer(layer, "num_classes", num_classes, minimum=1)
    update = flag(layer, "update_center", update_center)
    if len(x.shape) != 2 or x.shape[1] < 0:
        raise error_at(ShapeError, f"{layer}: input {x.name!r} has shape {dims(x.shape)}; it "
                                   f"must be features [N, D] with D known")
    _column(layer, lab, "label")
    helper = LayerHelper(layer)
    pattr = helper.param_attr(param_attr, "param_attr")
    if pattr is None:
        raise error_at(ShapeError, f"{layer}: the centres are a parameter; param_attr=False "
                                   f"is not allowed")
    centers = helper.create_parameter(dataclasses.replace(pattr, trainable=False),
                                      [k, x.shape[1]], x.dtype)
    if isinstance(alpha, Variable):
        rate = var_of(layer, alpha, "alpha", (x.dtype,))
    else:
        rate = _state_var(helper, None, [1], x.dtype, number(layer, "alpha", alpha))
    outs = helper.append(layer, {"X": x, "Label": lab, "Centers": centers,
                                 "CenterUpdateRate": rate},
                         {"cluster_num": k, "need_update": update},
                         outputs={"SampleCenterDiff": [helper.tmp()],
                                  "Loss": [helper.out_name()], "CentersOut": [centers.name]},
                         final=False)
    return outs["Loss"][0]
