"""The elementwise functions of Paddle 1.8's ``layers/ops.py``: one op each, on a float
Variable, the result of the same shape and dtype."""
from __future__ import annotations

from numbers import Real
from typing import Any

from ...errors import OpArgumentError
from ..tracing import error_at
from ..variable import Variable
from .helpers import append_simple, float_input


def unary(op_type: str, x: Any, name: str | None = None,
          attrs: dict[str, Any] | None = None, **more: Any) -> Variable:
    """``op_type`` on the float Variable ``x``; number attrs (``attrs`` and ``more``) are
    checked and recorded as floats (None: the op's default)."""
    given = {}
    for key, value in {**(attrs or {}), **more}.items():
        if value is None:
            continue
        if not isinstance(value, Real) or isinstance(value, bool):
            raise error_at(OpArgumentError, f"{op_type}: {key} must be a number, got "
                                            f"{type(value).__name__} {value!r:.40}")
        given[key] = float(value)
    return append_simple(op_type, {"X": float_input(x, f"{op_type}: x")}, given, name=name)


def logsigmoid(x: Variable, name: str | None = None) -> Variable:
    """``log(1 / (1 + exp(-x)))``, computed without overflow."""
    return unary("logsigmoid", x, name)


def atan(x: Variable, name: str | None = None) -> Variable:
    """``arctan(x)``, in radians."""
    return unary("atan", x, name)


def tanh_shrink(x: Variable, name: str | None = None) -> Variable:
    """``x - tanh(x)``."""
    return unary("tanh_shrink", x, name)


def rsqrt(x: Variable, name: str | None = None) -> Variable:
    """``1 / sqrt(x)``."""
    return unary("rsqrt", x, name)


def ceil(x: Variable, name: str | None = None) -> Variable:
    """The least integer >= x (as a float). Its gradient is zero."""
    return unary("ceil", x, name)


def floor(x: Variable, name: str | None = None) -> Variable:
    """The greatest integer <= x (as a float). Its gradient is zero."""
    return unary("floor", x, name)


def cos(x: Variable, name: str | None = None) -> Variable:
    """``cos(x)``, x in radians."""
    return unary("cos", x, name)


def acos(x: Variable, name: str | None = None) -> Variable:
    """``arccos(x)`` for x in [-1, 1], in radians."""
    return unary("acos", x, name)


def asin(x: Variable, name: str | None = None) -> Variable:
    """``arcsin(x)`` for x in [-1, 1], in radians."""
    return unary("asin", x, name)


def sin(x: Variable, name: str | None = None) -> Variable:
    """``sin(x)``, x in radians."""
    return unary("sin", x, name)


def round(x: Variable, name: str | None = None) -> Variable:
    """x rounded to the nearest integer, halves away from zero (2.5 -> 3, -0.5 -> -1), as
    Paddle's kernel rounds; NumPy's ``round`` rounds halves to even instead. Its gradient
    is zero."""
    return unary("round", x, name)


def reciprocal(x: Variable, name: str | None = None) -> Variable:
    """``1 / x``."""
    return unary("reciprocal", x, name)


def softplus(x: Variable, name: str | None = None) -> Variable:
    """``log(1 + exp(x))``, computed without overflow."""
    return unary("softplus", x, name)


def softsign(x: Variable, name: str | None = None) -> Variable:
    """``x / (1 + |x|)``."""
    return unary("softsign", x, name)


def softshrink(x: Variable, alpha: float | None = None) -> Variable:
    """``x - alpha`` above ``alpha``, ``x + alpha`` below ``-alpha``, 0 between; ``alpha``
    (>= 0) defaults to 0.5."""
    if alpha is not None and isinstance(alpha, Real) and alpha < 0:
        raise error_at(OpArgumentError, f"softshrink: alpha must be >= 0, got {alpha}")
    return unary("softshrink", x, attrs={"lambda": alpha})


def hard_shrink(x: Variable, threshold: float | None = None) -> Variable:
    """x where ``|x| > threshold`` (default 0.5), else 0."""
    return unary("hard_shrink", x, threshold=threshold)


def thresholded_relu(x: Variable, threshold: float | None = None) -> Variable:
    """x where ``x > threshold`` (default 1.0), else 0."""
    return unary("thresholded_relu", x, threshold=threshold)


def erf(x: Variable, name: str | None = None) -> Variable:
    """The error function, ``2 / sqrt(pi) * integral of exp(-t^2) from 0 to x``."""
    return unary("erf", x, name)


__all__ = ["logsigmoid", "atan", "tanh_shrink", "rsqrt", "ceil", "floor", "cos", "acos",
           "asin", "sin", "round", "reciprocal", "softplus", "softsign", "softshrink",
           "hard_shrink", "thresholded_relu", "erf"]
