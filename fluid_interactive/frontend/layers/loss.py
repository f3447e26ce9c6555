"""Cost layers: squared error and the classification losses.

The classification losses check their labels while the method is traced, so a label of
the wrong dtype or shape fails at the user's line with the fix in the message:

* hard labels are integer class indices (declare them ``dtype='int64'``) with a size-1 dim
  where the input has its class dim: ``[N, 1]`` for ``[N, C]`` scores (``shape=[1]`` in
  `fluid.layers.data`), not ``[N]``;
* soft labels (``soft_label=True``) are float probabilities of the input's shape and dtype.
"""
from __future__ import annotations

from ...errors import DTypeError, OpArgumentError, ShapeError
from ...ir.records import FLOAT_DTYPES, INT_DTYPES
from ...ir.text import format_shape as _dims
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable
from .loss_checks import FLOATS, flag, var_of


def _same_shape(layer: str, input: Variable, label: Variable) -> None:
    a, b = input.shape, label.shape
    if len(a) != len(b) or any(x >= 0 and y >= 0 and x != y for x, y in zip(a, b)):
        raise error_at(ShapeError, f"{layer}: input {input.name!r} has shape {_dims(a)} but "
                                   f"label {label.name!r} has shape {_dims(b)}; they must "
                                   f"match (declare the label as shape=[1] for one value "
                                   f"per sample)")


def square_error_cost(input: Variable, label: Variable) -> Variable:
    """Per-sample ``(input - label) ** 2`` (no 1/2 factor); average it with `mean`.
    ``input`` and ``label`` are float32 or float64 of one shape."""
    helper = LayerHelper("square_error_cost")
    input = var_of("square_error_cost", input, "input", FLOATS)
    label = var_of("square_error_cost", label, "label", FLOATS)
    _same_shape("square_error_cost", input, label)
    diff = helper.append_one("elementwise_sub", {"X": input, "Y": label}, final=False)
    return helper.append_one("square", {"X": diff})


def _compatible(a, b) -> bool:
    return len(a) == len(b) and all(x < 0 or y < 0 or x == y for x, y in zip(a, b))


def _check_float_input(layer: str, what: str, input: Variable) -> None:
    if input.dtype not in FLOAT_DTYPES:
        raise error_at(DTypeError, f"{layer}: {what} {input.name!r} is {input.dtype}; it must "
                                   f"be float32 (or float16/float64)")
    if len(input.shape) == 0:
        raise error_at(ShapeError, f"{layer}: {what} {input.name!r} is 0-d; it needs a class "
                                   f"dimension, e.g. shape [N, C]")


def _check_int_arg(layer: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise error_at(OpArgumentError, f"{layer}: {name} must be an int, got {value!r}")
    return value


def _check_label(layer: str, input: Variable, label: Variable, soft_label: bool,
                 axis: int, what: str = "input") -> None:
    """Hard labels: integer dtype, the input's shape with a 1 at ``axis``. Soft labels:
    the input's shape and dtype."""
    shape, lshape = input.shape, label.shape
    if soft_label:
        if label.dtype not in FLOAT_DTYPES:
            raise error_at(DTypeError,
                           f"{layer}: soft_label=True but label {label.name!r} is "
                           f"{label.dtype}{_dims(lshape)}; soft labels are float "
                           f"probabilities. For integer class indices use soft_label=False")
        if not _compatible(shape, lshape):
            raise error_at(ShapeError,
                           f"{layer}: soft label {label.name!r} has shape {_dims(lshape)} but "
                           f"{what} {input.name!r} has shape {_dims(shape)}; a soft label "
                           f"gives a probability for every class, so the shapes must match "
                           f"(for class indices use soft_label=False and shape [N, 1])")
        if label.dtype != input.dtype:
            raise error_at(DTypeError,
                           f"{layer}: soft label {label.name!r} is {label.dtype} but {what} "
                           f"{input.name!r} is {input.dtype}; declare or cast the label as "
                           f"{input.dtype}")
        return
    want = shape[:axis] + (1,) + shape[axis + 1:]
    if label.dtype not in INT_DTYPES:
        raise error_at(DTypeError,
                       f"{layer}: label {label.name!r} is {label.dtype}{_dims(lshape)} but hard "
                       f"labels are integer class indices; declare it with dtype='int64' "
                       f"(fluid.layers.data(..., shape=[1], dtype='int64')), or pass "
                       f"soft_label=True for float probability labels of shape "
                       f"{_dims(shape)}")
    if not _compatible(want, lshape):
        hint = (" (declare it with shape=[1] so each sample's label is [1], not a scalar)"
                if len(lshape) == len(shape) - 1 else "")
        raise error_at(ShapeError,
                       f"{layer}: label {label.name!r} has shape {_dims(lshape)} but {what} "
                       f"{input.name!r} of shape {_dims(shape)} needs a label of shape "
                       f"{_dims(want)}: one class index per row with a size-1 class "
                       f"dim{hint}")


def cross_entropy(input: Variable, label: Variable, soft_label: bool = False,
                  ignore_index: int = -100) -> Variable:
    """Cross entropy of class probabilities ``input`` (``[N, C]``, e.g. a softmax output)
    against ``label``; returns the per-sample loss ``[N, 1]`` (average it with `mean`).

    * hard labels (default): int64 ``[N, 1]``; ``loss = -log(input[label])``. A label equal
      to ``ignore_index`` gives loss 0 and no gradient.
    * ``soft_label=True``: float ``[N, C]`` probabilities; ``loss = -sum(label * log(input))``.

    Like Paddle, -log(0) is clamped to 1e20 instead of inf. The gradient flows to ``input``
    only. Leading dims other than N are allowed: ``[..., C]`` with labels ``[..., 1]``.
    For logits, prefer `softmax_with_cross_entropy`, which is numerically stable.
    """
    helper = LayerHelper("cross_entropy")
    input, label = as_variable(input, "input"), as_variable(label, "label")
    _check_float_input("cross_entropy", "input", input)
    ignore_index = _check_int_arg("cross_entropy", "ignore_index", ignore_index)
    _check_label("cross_entropy", input, label, bool(soft_label), len(input.shape) - 1)
    return helper.append_one("cross_entropy", {"X": input, "Label": label},
                             {"soft_label": bool(soft_label), "ignore_index": ignore_index})


def softmax_with_cross_entropy(logits: Variable, label: Variable, soft_label: bool = False,
                               ignore_index: int = -100, numeric_stable_mode: bool = True,
                               return_softmax: bool = False, axis: int = -1
                               ) -> Variable | tuple[Variable, Variable]:
    """Softmax of ``logits`` along ``axis`` and its cross entropy with ``label``, fused into
    one numerically stable op (log-sum-exp; large logits never overflow).

    Returns the loss, shaped like ``logits`` with a 1 at ``axis`` (``[N, 1]`` for
    ``[N, C]``), or ``(loss, softmax)`` when ``return_softmax=True``.

    * hard labels (default): int64, shaped like the loss; a label equal to
      ``ignore_index`` gives loss 0 and no gradient.
    * ``soft_label=True``: float probabilities of ``logits``' shape.

    The gradient to ``logits`` is ``(softmax - onehot(label)) * dloss``. The op is always
    the numerically stable one; ``numeric_stable_mode=False`` is accepted as Paddle accepts
    it, with ``axis`` the last one as Paddle requires then.
    """
    helper = LayerHelper("softmax_with_cross_entropy")
    logits, label = as_variable(logits, "logits"), as_variable(label, "label")
    layer = "softmax_with_cross_entropy"
    _check_float_input(layer, "logits", logits)
    ignore_index = _check_int_arg(layer, "ignore_index", ignore_index)
    rank = len(logits.shape)
    axis = _check_int_arg(layer, "axis", axis)
    if not -rank <= axis < rank:
        raise error_at(OpArgumentError, f"{layer}: axis={axis} does not fit logits "
                                        f"{logits.name!r} of shape {_dims(logits.shape)}; "
                                        f"use an axis in [{-rank}, {rank - 1}]")
    stable = flag(layer, "numeric_stable_mode", numeric_stable_mode)
    if not stable and axis % rank != rank - 1:
        raise error_at(OpArgumentError, f"{layer}: numeric_stable_mode=False needs the last "
                                        f"axis (Paddle's rule), got axis={axis}")
    _check_label(layer, logits, label, bool(soft_label), axis % rank, what="logits")
    outs = helper.append("softmax_with_cross_entropy", {"Logits": logits, "Label": label},
                         {"soft_label": bool(soft_label), "ignore_index": ignore_index,
                          "numeric_stable_mode": stable, "axis": axis},
                         outputs={"Softmax": [helper.tmp()], "Loss": [helper.out_name()]},
                         final=False)
    loss, softmax = outs["Loss"][0], outs["Softmax"][0]
    return (loss, softmax) if return_softmax else loss


def sigmoid_cross_entropy_with_logits(x: Variable, label: Variable, ignore_index: int = -100,
                                      name: str | None = None,
                                      normalize: bool = False) -> Variable:
    """Elementwise logistic loss of logits ``x`` against probabilities ``label`` (same
    shape and float dtype), computed stably as
    ``max(x, 0) - x * label + log(1 + exp(-|x|))``.

    Elements whose label equals ``ignore_index`` give 0 and no gradient; with
    ``normalize=True`` the result is divided by the number of elements not ignored.
    """
    helper = LayerHelper("sigmoid_cross_entropy_with_logits", name)
    layer = "sigmoid_cross_entropy_with_logits"
    x, label = as_variable(x, "x"), as_variable(label, "label")
    if x.dtype not in FLOAT_DTYPES:
        raise error_at(DTypeError, f"{layer}: x {x.name!r} is {x.dtype}; logits must be float")
    ignore_index = _check_int_arg(layer, "ignore_index", ignore_index)
    if label.dtype != x.dtype:
        raise error_at(DTypeError, f"{layer}: label {label.name!r} is {label.dtype} but x "
                                   f"{x.name!r} is {x.dtype}; labels are probabilities "
                                   f"(0 or 1 for a binary target) of x's dtype: declare "
                                   f"the label with dtype={x.dtype!r}")
    if not _compatible(x.shape, label.shape):
        raise error_at(ShapeError, f"{layer}: label {label.name!r} has shape "
                                   f"{_dims(label.shape)} but x {x.name!r} has shape "
                                   f"{_dims(x.shape)}; there is one label per logit, so "
                                   f"they must match")
    return helper.append_one(layer, {"X": x, "Label": label},
                             {"ignore_index": ignore_index, "normalize": bool(normalize)})


__all__ = ['square_error_cost', 'cross_entropy', 'softmax_with_cross_entropy',
           'sigmoid_cross_entropy_with_logits']
