"""Comparisons, elementwise: ``less_than(x, y)`` is ``x < y`` as a bool Variable (the
operators ``<  <=  >  >=  ==  !=`` on Variables record the same ops). ``y`` may be a number.
No gradient flows through a comparison; turn the mask into numbers with
``fluid.layers.cast(mask, 'float32')`` to use it in a loss."""
from __future__ import annotations

from numbers import Real

from ...errors import OpArgumentError
from ..tracing import error_at
from ..variable import Variable
from .helpers import append_simple, as_variable
from .tensor import fill_constant

__all__ = ["less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal"]

Operand = Variable | float | int


def _operand(x: Variable, y: Operand, op_type: str) -> Variable:
    if isinstance(y, Real) and not isinstance(y, bool):
        return fill_constant([1], x.dtype, y)
    if isinstance(y, Variable):
        return as_variable(y, f"{op_type}: y")
    raise error_at(OpArgumentError, f"{op_type}: cannot compare a Variable with "
                                    f"{type(y).__name__} {y!r:.40}; use a Variable or a number")


def _compare(op_type: str, x: Variable, y: Operand, axis: int, name: str | None) -> Variable:
    x = as_variable(x, f"{op_type}: x")
    out = append_simple(op_type, {"X": x, "Y": _operand(x, y, op_type)}, {"axis": axis},
                        name=name)
    out.stop_gradient = True
    return out


def less_than(x: Variable, y: Operand, axis: int = -1, name: str | None = None) -> Variable:
    """``x < y`` elementwise (bool)."""
    return _compare("less_than", x, y, axis, name)


def less_equal(x: Variable, y: Operand, axis: int = -1, name: str | None = None
               ) -> Variable:
    """``x <= y`` elementwise (bool)."""
    return _compare("less_equal", x, y, axis, name)


def greater_than(x: Variable, y: Operand, axis: int = -1, name: str | None = None
                 ) -> Variable:
    """``x > y`` elementwise (bool)."""
    return _compare("greater_than", x, y, axis, name)


def greater_equal(x: Variable, y: Operand, axis: int = -1, name: str | None = None
                  ) -> Variable:
    """``x >= y`` elementwise (bool)."""
    return _compare("greater_equal", x, y, axis, name)


def equal(x: Variable, y: Operand, axis: int = -1, name: str | None = None) -> Variable:
    """``x == y`` elementwise (bool)."""
    return _compare("equal", x, y, axis, name)


def not_equal(x: Variable, y: Operand, axis: int = -1, name: str | None = None
              ) -> Variable:
    """``x != y`` elementwise (bool)."""
    return _compare("not_equal", x, y, axis, name)
