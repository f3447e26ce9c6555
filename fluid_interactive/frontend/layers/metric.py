"""Layers that measure without a gradient: argmax, argmin, accuracy, auc."""
from __future__ import annotations

from ...errors import DTypeError, OpArgumentError, ShapeError
from ...ir.records import FLOAT_DTYPES, INT_DTYPES
from ...ir.text import format_shape as _dims
from ...ops.auc import stat_shape
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable
from .loss_checks import FLOATS, INTS, choice, integer, var_of
from .norm import _state_var


def argmax(x: Variable, axis: int = 0) -> Variable:
    """Index of the largest entry of ``x`` along ``axis`` (ties: the first), as int64;
    ``axis`` is removed from the shape, so ``argmax(scores, axis=1)`` of ``[N, C]`` scores
    is ``[N]``. No gradient flows through it."""
    return _arg("argmax", x, axis)


def argmin(x: Variable, axis: int = 0) -> Variable:
    """Index of the smallest entry of ``x`` along ``axis`` (ties: the first), as int64;
    ``axis`` is removed from the shape. No gradient flows through it."""
    return _arg("argmin", x, axis)


def _arg(layer: str, x: Variable, axis: int) -> Variable:
    helper = LayerHelper(layer)
    x = as_variable(x, "x")
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise error_at(OpArgumentError, f"{layer}: axis must be an int, got {axis!r}")
    rank = len(x.shape)
    if not -rank <= axis < rank:
        raise error_at(OpArgumentError, f"{layer}: axis={axis} does not fit x {x.name!r} of "
                                        f"shape {_dims(x.shape)}; use an axis in "
                                        f"[{-rank}, {rank - 1}]")
    out = helper.append_one(layer, {"X": x}, {"axis": axis})
    out.stop_gradient = True
    return out


def accuracy(input: Variable, label: Variable, k: int = 1, correct: Variable | None = None,
             total: Variable | None = None) -> Variable:
    """Top-``k`` accuracy of class scores ``input`` (``[N, C]``: probabilities or logits)
    against int64 labels ``[N, 1]``: the fraction of samples whose label is among their
    ``k`` highest scores (ties go to the lower class index, as in `argmax`).

    The result is a 0-d float32 var, so a compiled method returns it as a Python float
    (Paddle's is shape [1]). ``correct`` and ``total``, when given, are vars that receive
    the number of samples counted correct and the number of samples (cast to their dtype
    and shape, e.g. int32 ``[1]`` as Paddle makes them). No gradient flows through it.
    """
    helper = LayerHelper("accuracy")
    input, label = as_variable(input, "input"), as_variable(label, "label")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise error_at(OpArgumentError, f"accuracy: k must be a positive int, got {k!r}")
    if input.dtype not in FLOAT_DTYPES:
        raise error_at(DTypeError, f"accuracy: input {input.name!r} is {input.dtype}; it must "
                                   f"be float class scores [N, C]")
    if len(input.shape) != 2:
        raise error_at(ShapeError, f"accuracy: input {input.name!r} has shape "
                                   f"{_dims(input.shape)}; it must be class scores [N, C]")
    if label.dtype not in INT_DTYPES:
        raise error_at(DTypeError, f"accuracy: label {label.name!r} is {label.dtype}; labels "
                                   f"are class indices: declare them with dtype='int64'")
    n = input.shape[0]
    lshape = label.shape
    if len(lshape) != 2 or not (lshape[1] < 0 or lshape[1] == 1) or \
            not (lshape[0] < 0 or n < 0 or lshape[0] == n):
        hint = (" (declare it with shape=[1] so each sample's label is [1], not a scalar)"
                if len(lshape) == 1 else "")
        raise error_at(ShapeError, f"accuracy: label {label.name!r} has shape {_dims(lshape)} "
                                   f"but input {input.name!r} of shape {_dims(input.shape)} "
                                   f"needs a label of shape {_dims((n, 1))}{hint}")
    outs = helper.append("accuracy", {"Out": input, "Label": label}, {"k": k})
    for given, slot in ((correct, "Correct"), (total, "Total")):
        if given is not None:
            _write_count(helper, outs[slot][0], as_variable(given, f"accuracy: {slot.lower()}"))
    return outs["Accuracy"][0]


def _write_count(helper: LayerHelper, count: Variable, into: Variable) -> None:
    """A 0-d int64 count written into a var the user made (of another dtype or shape)."""
    shape = tuple(into.shape)
    if any(d not in (1, -1) for d in shape):
        raise error_at(ShapeError, f"accuracy: {into.name!r} has shape {_dims(shape)}; a "
                                   f"count var holds one value ([1] or [])")
    desc = into.desc
    if not desc.persistable and any(into.name in op.output_names()
                                    for op in helper.trace.block.ops):
        raise error_at(OpArgumentError, f"accuracy: {into.name!r} already holds a value an "
                                        f"op above computed, and a temporary is written once; "
                                        f"pass a var made with fluid.layers.create_tensor")
    value = count if into.dtype == count.dtype else helper.append_one(
        "cast", {"X": count}, {"out_dtype": into.dtype}, final=False)
    helper.append("reshape", {"X": value}, {"shape": [1] * len(shape)},
                  outputs={"Out": [into.name]}, final=False)


def auc(input: Variable, label: Variable, curve: str = "ROC",
        num_thresholds: int = 2 ** 12 - 1, topk: int = 1,
        slide_steps: int = 1) -> tuple[Variable, Variable, list[Variable]]:
    """The area under the ROC curve (``curve='ROC'``) or the precision-recall curve
    (``'PR'``) of binary predictions ``input`` (probabilities ``[N, 2]`` or ``[N, 1]``;
    the last column is the positive class's) against labels (int ``[N, 1]``, > 0
    positive, 0 negative), from counts of the predictions in ``num_thresholds + 1``
    buckets.

    Returns ``(auc_out, batch_auc_out, [batch_stat_pos, batch_stat_neg, stat_pos,
    stat_neg])``: the AUC over every call so far and over the last ``slide_steps`` calls
    (0-d float64), and the persistable int64 counts behind them (Paddle's layout). The
    counts are program state: they accumulate over the calls of every method that
    computes this AUC, are saved with the program, and `rewind` takes calls back. Reset
    them with ``set_var``. ``topk`` is accepted as Paddle does (it has no effect there
    either). No gradient flows through it.
    """
    layer = "auc"
    x = var_of(layer, input, "input", FLOATS)
    lab = var_of(layer, label, "label", INTS)
    curve = choice(layer, "curve", curve, ("ROC", "PR"))
    nt = integer(layer, "num_thresholds", num_thresholds, minimum=1)
    integer(layer, "topk", topk, minimum=1)
    slide = integer(layer, "slide_steps", slide_steps, minimum=0)
    helper = LayerHelper(layer)
    stats = [_state_var(helper, None, list(stat_shape(nt, s)), "int64", 0.0)
             for s in (slide, slide, 0, 0)]
    results = []
    for (pos, neg), steps in (((stats[0], stats[1]), slide), ((stats[2], stats[3]), 0)):
        outs = helper.append("auc", {"Predict": x, "Label": lab, "StatPos": pos,
                                     "StatNeg": neg},
                             {"curve": curve, "num_thresholds": nt, "slide_steps": steps},
                             outputs={"AUC": [helper.tmp()], "StatPosOut": [pos.name],
                                      "StatNegOut": [neg.name]}, final=False)
        results.append(outs["AUC"][0])
    return results[1], results[0], stats


__all__ = ['argmax', 'argmin', 'accuracy', 'auc']
