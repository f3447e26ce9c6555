"""Losses for large vocabularies that score a few of the classes: nce, hsigmoid and
sampled_softmax_with_cross_entropy.

The sampling ops draw from the program's seeded generator (``seed=0``) or from their own
``seed``; ``is_sparse`` is accepted as Paddle accepts it, and gradients are dense here.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import OpArgumentError, ShapeError
from ...ir.records import VarDesc
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper
from .loss_checks import FLOATS, INTS, choice, flag, integer, optional_var, var_of

__all__ = ["nce", "hsigmoid", "sampled_softmax_with_cross_entropy"]

_SAMPLERS = ("uniform", "log_uniform", "custom_dist")


def _features(layer: str, input: Any, label: Any) -> tuple[Variable, Variable]:
    x = var_of(layer, input, "input", FLOATS)
    lab = var_of(layer, label, "label", ("int64",))
    if len(x.shape) != 2 or x.shape[1] < 0:
        raise error_at(ShapeError, f"{layer}: input {x.name}:{short_type(x.desc)} must be "
                                   f"[N, D] with D known")
    if len(lab.shape) != 2:
        raise error_at(ShapeError, f"{layer}: label {lab.name}:{short_type(lab.desc)} must "
                                   f"be [N, num_true] class ids (declare it shape=[1])")
    return x, lab


def _constant_state(helper: LayerHelper, values: np.ndarray) -> Variable:
    """Persistable state holding ``values``, set when the program compiles."""
    trace = helper.trace
    name = helper._next("w")
    trace.declare(VarDesc(name, values.shape, values.dtype.name, persistable=True,
                          stop_gradient=True), in_global=True)
    trace.append_op("assign_value", {}, {"Out": [name]},
                    {"shape": list(values.shape), "dtype": values.dtype.name,
                     "values": values.reshape(-1).tolist()}, in_global=True)
    return Variable(trace, name)


def _custom_dist(layer: str, helper: LayerHelper, custom_dist: Any, classes: int) -> Variable:
    dist = np.asarray(custom_dist, dtype=np.float64) if custom_dist is not None else None
    if dist is None or dist.shape != (classes,) or (dist < 0).any() or \
            not np.isclose(dist.sum(), 1.0, atol=1e-4):
        raise error_at(OpArgumentError, f"{layer}: sampler='custom_dist' needs custom_dist, "
                                        f"{classes} probabilities (one per class) summing to "
                                        f"1")
    return _constant_state(helper, dist.astype(np.float32))


def nce(input: Variable, label: Variable, num_total_classes: int,
        sample_weight: Variable | None = None, param_attr: Any = None, bias_attr: Any = None,
        num_neg_samples: int | None = None, name: str | None = None, sampler: str = "uniform",
        custom_dist: Any = None, seed: int = 0, is_sparse: bool = False) -> Variable:
    """Noise-contrastive estimation loss ``[N, 1]``: each row's true classes ``label``
    (int64 ``[N, num_true]``) told apart from ``num_neg_samples`` (default 10) classes drawn
    by ``sampler`` ('uniform', 'log_uniform', or 'custom_dist' with ``custom_dist``, one
    probability per class) by a logistic score ``w_k . input + b_k``. The weight
    ``[num_total_classes, D]`` and bias ``[num_total_classes, 1]`` are parameters
    (``bias_attr=False``: none); ``sample_weight`` (``[N]`` or ``[N, 1]``) weighs the rows.
    The result is divided by ``num_neg_samples + 1``, as Paddle divides it."""
    layer = "nce"
    x, lab = _features(layer, input, label)
    classes = integer(layer, "num_total_classes", num_total_classes, minimum=2)
    neg = 10 if num_neg_samples is None else integer(layer, "num_neg_samples",
                                                     num_neg_samples, minimum=1)
    kind = _SAMPLERS.index(choice(layer, "sampler", sampler, _SAMPLERS))
    flag(layer, "is_sparse", is_sparse)
    weight = optional_var(layer, sample_weight, "sample_weight", (x.dtype,))
    helper = LayerHelper(layer, name)
    helper.context = f" (input {x.name}:{short_type(x.desc)})"
    w = helper.create_parameter(helper.param_attr(param_attr, "param_attr") or
                                _no_false(layer, "param_attr"), [classes, x.shape[1]], x.dtype)
    battr = helper.param_attr(bias_attr, "bias_attr")
    b = None if battr is None else helper.create_parameter(battr, [classes, 1], x.dtype,
                                                           is_bias=True)
    dist = _custom_dist(layer, helper, custom_dist, classes) if kind == 2 else None
    attrs = {"num_total_classes": classes, "num_neg_samples": neg, "sampler": kind,
             "seed": integer(layer, "seed", seed), "is_sparse": bool(is_sparse)}
    cost = helper.append(layer, {"Input": x, "Label": lab, "Weight": w, "Bias": b,
                                 "SampleWeight": weight, "CustomDistProbs": dist}, attrs,
                         final=False)["Cost"][0]
    return helper.append_one("scale", {"X": cost}, {"scale": 1.0 / (neg + 1)})


def _no_false(layer: str, what: str) -> Any:
    raise error_at(OpArgumentError, f"{layer}: {what}=False is not allowed; the layer "
                                    f"always has this parameter")


def _check_hsigmoid_tree(layer: str, num_classes: Any, path_table: Any, path_code: Any,
                         is_custom: bool) -> None:
    if not is_custom:
        if not isinstance(num_classes, int) or isinstance(num_classes, bool) or \
                num_classes < 2:
            raise error_at(OpArgumentError, f"{layer}: num_classes must be an int >= 2 with "
                                            f"the default tree, got {num_classes!r}")
        if path_table is not None or path_code is not None:
            raise error_at(OpArgumentError, f"{layer}: path_table and path_code need "
                                            f"is_custom=True; the default tree takes "
                                            f"num_classes only")
        return
    if path_table is None or path_code is None:
        raise error_at(OpArgumentError, f"{layer}: is_custom=True needs both path_table and "
                                        f"path_code")
    integer(layer, "num_classes", num_classes, minimum=1)


def hsigmoid(input: Variable, label: Variable, num_classes: int, param_attr: Any = None,
             bias_attr: Any = None, name: str | None = None,
             path_table: Variable | None = None, path_code: Variable | None = None,
             is_custom: bool = False, is_sparse: bool = False) -> Variable:
    """Hierarchical sigmoid loss ``[N, 1]`` of features ``input`` ``[N, D]`` for the
    classes ``label`` (int64 ``[N, 1]``): minus the log-probability of the class as a
    chain of binary decisions down a tree, one logistic score per inner node.

    The default tree is Paddle's complete binary tree over ``num_classes`` (weight
    ``[num_classes - 1, D]``, bias ``[num_classes - 1, 1]``). With ``is_custom=True``,
    ``path_table`` (int64 ``[N, L]``: each row's inner-node ids from the root, ended by a
    negative id) and ``path_code`` (``[N, L]``: the decisions, 0 or 1) give each row's path,
    and the weight is ``[num_classes, D]`` (``num_classes`` counts the inner nodes). As in
    Paddle, a path shorter than the longest adds log 2 for each step it lacks."""
    layer = "hsigmoid"
    x, lab = _features(layer, input, label)
    custom = flag(layer, "is_custom", is_custom)
    flag(layer, "is_sparse", is_sparse)
    _check_hsigmoid_tree(layer, num_classes, path_table, path_code, custom)
    table = optional_var(layer, path_table, "path_table", INTS)
    code = optional_var(layer, path_code, "path_code", INTS)
    rows = num_classes if custom else num_classes - 1
    helper = LayerHelper("hierarchical_sigmoid", name)
    w = helper.create_parameter(helper.param_attr(param_attr, "param_attr") or
                                _no_false(layer, "param_attr"), [rows, x.shape[1]], x.dtype)
    battr = helper.param_attr(bias_attr, "bias_attr")
    b = None if battr is None else helper.create_parameter(battr, [rows, 1], x.dtype,
                                                           is_bias=True)
    outs = helper.append("hierarchical_sigmoid",
                         {"X": x, "W": w, "Label": lab, "PathTable": table, "PathCode": code,
                          "Bias": b}, {"num_classes": num_classes, "is_sparse": bool(is_sparse)},
                         outputs={"Out": [helper.out_name()], "PreOut": [helper.tmp()]},
                         final=False)
    return outs["Out"][0]


def sampled_softmax_with_cross_entropy(logits: Variable, label: Variable, num_samples: int,
                                       num_true: int = 1, remove_accidental_hits: bool = True,
                                       use_customized_samples: bool = False,
                                       customized_samples: Variable | None = None,
                                       customized_probabilities: Variable | None = None,
                                       seed: int = 0) -> Variable:
    """Softmax cross entropy ``[N, 1]`` over each row's ``num_true`` true classes
    ``label`` (int64 ``[N, num_true]``) and ``num_samples`` distinct classes drawn
    log-uniformly (shared by the batch), the logits ``[N, K]`` corrected by ``-log Q`` for
    the chance of a class being sampled; a sample equal to a true class is left out
    (``remove_accidental_hits``). With ``use_customized_samples``, ``customized_samples``
    (int64 ``[N, num_true + num_samples]``, the true classes first) and
    ``customized_probabilities`` (their Q) replace the drawing."""
    layer = "sampled_softmax_with_cross_entropy"
    x = var_of(layer, logits, "logits", FLOATS)
    lab = var_of(layer, label, "label", ("int64",))
    s = integer(layer, "num_samples", num_samples, minimum=1)
    nt = integer(layer, "num_true", num_true, minimum=1)
    if len(lab.shape) != 2 or lab.shape[1] not in (nt, -1):
        raise error_at(ShapeError, f"{layer}: label {lab.name}:{short_type(lab.desc)} must be "
                                   f"[N, num_true] = [N, {nt}]")
    custom = flag(layer, "use_customized_samples", use_customized_samples)
    samples = optional_var(layer, customized_samples, "customized_samples", ("int64",))
    probs = optional_var(layer, customized_probabilities, "customized_probabilities", FLOATS)
    if custom and (samples is None or probs is None):
        raise error_at(OpArgumentError, f"{layer}: use_customized_samples=True needs "
                                        f"customized_samples and customized_probabilities")
    helper = LayerHelper("sample_logits")
    attrs = {"num_samples": s, "use_customized_samples": custom, "uniq": True,
             "remove_accidental_hits": flag(layer, "remove_accidental_hits",
                                            remove_accidental_hits),
             "seed": integer(layer, "seed", seed)}
    outs = helper.append("sample_logits", {"Logits": x, "Labels": lab,
                                           "CustomizedSamples": samples if custom else None,
                                           "CustomizedProbabilities": probs if custom else None},
                         attrs, final=False)
    # the soft label: 1 in each true class's column (the first num_true), as Paddle's
    # one_hot of the sampled labels gives for num_true = 1
    cols = helper.append_one("unsqueeze", {"X": outs["SampledLabels"][0]}, {"axes": [2]},
                             final=False)
    hot = helper.append_one("one_hot", {"X": cols}, {"depth": nt + s, "dtype": x.dtype},
                            final=False)
    soft = helper.append_one("reduce_sum", {"X": hot}, {"dim": [1]}, final=False)
    loss = helper.append("softmax_with_cross_entropy",
                         {"Logits": outs["SampledLogits"][0], "Label": soft},
                         {"soft_label": True}, final=False)["Loss"][0]
    return helper.append_one("scale", {"X": loss}, {"scale": 1.0 / nt})
