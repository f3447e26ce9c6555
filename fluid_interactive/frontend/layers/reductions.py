"""Reductions, running sums and bounds: ``cumsum``, ``reduce_prod``, ``reduce_all``,
``reduce_any``, ``logsumexp``, ``log1p``, ``clamp``, ``clip_by_norm``, ``sign``,
``mean_iou`` and ``similarity_focus``, with Paddle 1.8's signatures.

A layer's ``out=`` (``output=`` for clamp) writes the result into that existing var,
as ``fluid.layers.assign(result, output=out)`` would, and returns it."""
from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np

from ...errors import OpArgumentError
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, append_simple, as_variable, float_input
from .targets import written_to
from .tensor import IntList, _reduce, assign
from .unary import unary


def _int(value: Any, layer: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise error_at(OpArgumentError, f"{layer}: {what} must be an int, got "
                                        f"{type(value).__name__} {value!r:.40}")
    return int(value)


def cumsum(x: Variable, axis: int | None = None, exclusive: bool | None = None,
           reverse: bool | None = None) -> Variable:
    """The running sum of ``x`` along ``axis`` (default -1, the last). ``exclusive``:
    each element leaves itself out (the first is 0); ``reverse``: the sum runs from the
    end of the axis."""
    x = as_variable(x, "cumsum: x")
    attrs: dict[str, Any] = {}
    if axis is not None:
        attrs["axis"] = _int(axis, "cumsum", "axis")
        if not -max(len(x.shape), 1) <= attrs["axis"] < max(len(x.shape), 1):
            raise error_at(OpArgumentError, f"cumsum: axis={axis} does not fit x "
                                            f"{x.name}:{short_type(x.desc)}")
    for key, value in (("exclusive", exclusive), ("reverse", reverse)):
        if value is not None:
            attrs[key] = bool(value)
    return append_simple("cumsum", {"X": x}, attrs)


def reduce_prod(input: Variable, dim: int | IntList | None = None, keep_dim: bool = False,
                name: str | None = None) -> Variable:
    """The product over ``dim`` (an int or a list; None: every dim, giving a 0-d var)."""
    return _reduce("reduce_prod", input, dim, keep_dim, name)


def reduce_all(input: Variable, dim: int | IntList | None = None, keep_dim: bool = False,
               name: str | None = None) -> Variable:
    """Whether every element over ``dim`` is true, for a bool var (a bool result)."""
    return _reduce("reduce_all", input, dim, keep_dim, name)


def reduce_any(input: Variable, dim: int | IntList | None = None, keep_dim: bool = False,
               name: str | None = None) -> Variable:
    """Whether any element over ``dim`` is true, for a bool var (a bool result)."""
    return _reduce("reduce_any", input, dim, keep_dim, name)


def logsumexp(x: Variable, dim: int | IntList | None = None, keepdim: bool = False,
              out: Variable | None = None, name: str | None = None) -> Variable:
    """``log(sum(exp(x)))`` over ``dim`` (None: every dim), computed stably; ``keepdim``
    keeps the reduced dims with size 1."""
    return written_to(_reduce("logsumexp", float_input(x, "logsumexp: x"), dim, keepdim,
                              name), out, "logsumexp")


def log1p(x: Variable, out: Variable | None = None, name: str | None = None) -> Variable:
    """``ln(1 + x)``, accurate for x near 0."""
    return written_to(unary("log1p", x, name), out, "log1p")


def _bound(value: Any, what: str) -> tuple[Variable | None, float | None]:
    """A clamp bound as (tensor, None), (None, number) or (None, None)."""
    if value is None:
        return None, None
    if isinstance(value, Variable):
        v = as_variable(value, f"clamp: {what}")
        if v.dtype not in ("float32", "float64", "int32"):
            raise error_at(OpArgumentError, f"clamp: {what} {v.name}:{short_type(v.desc)} "
                                            f"must be float32, float64 or int32")
        v.stop_gradient = True
        return v, None
    if isinstance(value, Real) and not isinstance(value, bool):
        return None, float(value)
    raise error_at(OpArgumentError, f"clamp: {what} must be a number or a Variable, got "
                                    f"{type(value).__name__} {value!r:.40}")


def clamp(input: Variable, min: Any = None, max: Any = None, output: Variable | None = None,
          name: str | None = None) -> Variable:
    """``input`` limited to ``[min, max]``; each bound a number, a 1-element Variable, or
    None for no bound on that side (at least one is needed). The gradient is that of
    ``input`` strictly inside the bounds, zero outside."""
    x = float_input(input, "clamp: input")
    if min is None and max is None:
        raise error_at(OpArgumentError, "clamp: give min, max or both")
    lo_var, lo = _bound(min, "min")
    hi_var, hi = _bound(max, "max")
    if lo is not None and hi is not None and not lo < hi:
        raise error_at(OpArgumentError, f"clamp: min ({lo}) must be below max ({hi})")
    limit = float(np.finfo(x.dtype).max)
    attrs = {"min": -limit if lo is None else lo, "max": limit if hi is None else hi}
    out = append_simple("clip", {"X": x, "Min": lo_var, "Max": hi_var}, attrs, layer="clamp",
                        name=name)
    return written_to(out, output, "clamp", "output")


def clip_by_norm(x: Variable, max_norm: float, name: str | None = None) -> Variable:
    """``x * max_norm / ||x||`` when the L2 norm of all of ``x`` exceeds ``max_norm``, else
    ``x``. No gradient flows through it (as in Paddle)."""
    x = float_input(x, "clip_by_norm: x")
    if not isinstance(max_norm, Real) or isinstance(max_norm, bool) or not max_norm > 0:
        raise error_at(OpArgumentError, f"clip_by_norm: max_norm must be a number > 0, got "
                                        f"{max_norm!r:.40}")
    return append_simple("clip_by_norm", {"X": x}, {"max_norm": float(max_norm)}, name=name)


def sign(x: Variable | np.ndarray) -> Variable:
    """-1, 0 or 1 by the sign of each element; a NumPy array is recorded as a constant
    first (as Paddle's ``sign`` does). No gradient flows through it."""
    if isinstance(x, np.ndarray):
        x = assign(x)
    return unary("sign", x)


def mean_iou(input: Variable, label: Variable, num_classes: int
             ) -> tuple[Variable, Variable, Variable]:
    """The mean intersection over union of int class predictions ``input`` against
    ``label`` (same shape): ``(mean_iou [1] float32, wrong [num_classes] int32, correct
    [num_classes] int32)``, the counts per class. No gradient."""
    n = _int(num_classes, "mean_iou", "num_classes")
    helper = LayerHelper("mean_iou")
    outs = helper.append("mean_iou", {"Predictions": input, "Labels": label},
                         {"num_classes": n})
    result = outs["OutMeanIou"][0], outs["OutWrong"][0], outs["OutCorrect"][0]
    for v in result:
        v.stop_gradient = True
    return result


def similarity_focus(input: Variable, axis: int, indexes: IntList,
                     name: str | None = None) -> Variable:
    """A 0/1 mask of ``input`` [B, d1, d2, d3]: for each index of ``indexes`` along
    ``axis`` (1, 2 or 3), the largest values of that 2-D slice are taken one per row and
    column, greatest first; the mask is 1 along ``axis`` at every position taken."""
    x = float_input(input, "similarity_focus: input")
    axis = _int(axis, "similarity_focus", "axis")
    if axis not in (1, 2, 3):
        raise error_at(OpArgumentError, f"similarity_focus: axis must be 1, 2 or 3, got "
                                        f"{axis}")
    if not isinstance(indexes, (list, tuple)) or not indexes:
        raise error_at(OpArgumentError, f"similarity_focus: indexes must be a non-empty "
                                        f"list of ints, got {indexes!r:.40}")
    idx = [_int(i, "similarity_focus", "indexes") for i in indexes]
    out = append_simple("similarity_focus", {"X": x}, {"axis": axis, "indexes": idx},
                        name=name)
    out.stop_gradient = True
    return out


__all__ = ["cumsum", "reduce_prod", "reduce_all", "reduce_any", "logsumexp", "log1p",
           "clamp", "clip_by_norm", "sign", "mean_iou", "similarity_focus"]
