"""Layers that measure without a gradient: argmax, argmin, accuracy."""
from __future__ import annotations

from ...errors import DTypeError, OpArgumentError, ShapeError
from ...ir.records import FLOAT_DTYPES, INT_DTYPES
from ...ir.text import format_shape as _dims
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable


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


def accuracy(input: Variable, label: Variable, k: int = 1) -> Variable:
    """Top-``k`` accuracy of class scores ``input`` (``[N, C]``: probabilities or logits)
    against int64 labels ``[N, 1]``: the fraction of samples whose label is among their
    ``k`` highest scores (ties go to the lower class index, as in `argmax`).

    The result is a 0-d float32 var, so a compiled method returns it as a Python float
    (Paddle's is shape [1]). No gradient flows through it.
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
    return helper.append("accuracy", {"Out": input, "Label": label}, {"k": k})["Accuracy"][0]


__all__ = ['argmax', 'argmin', 'accuracy']
