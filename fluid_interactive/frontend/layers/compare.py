"""Comparisons, elementwise: ``less_than(x, y)`` is ``x < y`` as a bool Variable (the
operators ``<  <=  >  >=  ==  !=`` on Variables record the same ops). ``y`` may be a number.
No gradient flows through a comparison; turn the mask into numbers with
``fluid.layers.cast(mask, 'float32')`` to use it in a loss."""
from __future__ import annotations

from numbers import Real

from ...errors import DTypeError, OpArgumentError, ShapeError
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, append_simple, as_variable
from .targets import written_to
from .tensor import fill_constant

__all__ = ["less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal",
           "logical_and", "logical_or", "logical_xor", "logical_not"]

Operand = Variable | float | int


def _operand(x: Variable, y: Operand, op_type: str) -> Variable:
    if isinstance(y, Real) and not isinstance(y, bool):
        return fill_constant([1], x.dtype, y)
    if isinstance(y, Variable):
        return as_variable(y, f"{op_type}: y")
    raise error_at(OpArgumentError, f"{op_type}: cannot compare a Variable with "
                                    f"{type(y).__name__} {y!r:.40}; use a Variable or a number")


def _compare(op_type: str, x: Variable, y: Operand, axis: int, name: str | None,
             cond: Variable | None) -> Variable:
    x = as_variable(x, f"{op_type}: x")
    inputs = {"X": x, "Y": _operand(x, y, op_type)}
    if cond is None:
        out = append_simple(op_type, inputs, {"axis": axis}, name=name)
    else:   # write into an existing bool var: a loop's condition
        out = as_variable(cond, f"{op_type}: cond")
        helper = LayerHelper(op_type, name)
        if out.dtype != "bool":
            raise error_at(DTypeError, f"{op_type}: cond must be a bool var, got "
                                       f"{out.name}:{short_type(out.desc)}")
        trace = helper.trace
        if trace.block.name and trace.has_value(out.name):
            raise error_at(OpArgumentError,
                           f"{op_type}: cond={out.name!r} already holds a value; cond= "
                           f"updates a loop's condition inside its body (a While or cond "
                           f"block). Here, compare into a new var: leave out cond=")
        made = helper.append(op_type, inputs, {"axis": axis}, outputs={"Out": [out.name]})
        got = made["Out"][0]
        if tuple(got.shape) != tuple(out.shape) and -1 not in out.shape:
            raise error_at(ShapeError, f"{op_type}: cond {out.name!r} has shape "
                                       f"{list(out.shape)}, the comparison gives "
                                       f"{list(got.shape)}")
    out.stop_gradient = True
    return out


def less_than(x: Variable, y: Operand, force_cpu: bool | None = None,
              cond: Variable | None = None, axis: int = -1,
              name: str | None = None) -> Variable:
    """``x < y`` elementwise (bool); with ``cond`` the result is written into that bool
    var (a loop's condition) and returned. ``force_cpu`` is accepted for Paddle
    compatibility and changes nothing; ``axis`` broadcasts y as in `elementwise_add`."""
    return _compare("less_than", x, y, axis, name, cond)


def less_equal(x: Variable, y: Operand, cond: Variable | None = None, axis: int = -1,
               name: str | None = None) -> Variable:
    """``x <= y`` elementwise (bool); ``cond`` as in `less_than`."""
    return _compare("less_equal", x, y, axis, name, cond)


def greater_than(x: Variable, y: Operand, cond: Variable | None = None, axis: int = -1,
                 name: str | None = None) -> Variable:
    """``x > y`` elementwise (bool); ``cond`` as in `less_than`."""
    return _compare("greater_than", x, y, axis, name, cond)


def greater_equal(x: Variable, y: Operand, cond: Variable | None = None, axis: int = -1,
                  name: str | None = None) -> Variable:
    """``x >= y`` elementwise (bool); ``cond`` as in `less_than`."""
    return _compare("greater_equal", x, y, axis, name, cond)


def equal(x: Variable, y: Operand, cond: Variable | None = None, axis: int = -1,
          name: str | None = None) -> Variable:
    """``x == y`` elementwise (bool); ``cond`` as in `less_than`."""
    return _compare("equal", x, y, axis, name, cond)


def not_equal(x: Variable, y: Operand, cond: Variable | None = None, axis: int = -1,
              name: str | None = None) -> Variable:
    """``x != y`` elementwise (bool); ``cond`` as in `less_than`."""
    return _compare("not_equal", x, y, axis, name, cond)


def _logical(op_type: str, x: Variable, y: Variable | None, out: Variable | None,
             name: str | None) -> Variable:
    inputs = {"X": as_variable(x, f"{op_type}: x")}
    if y is not None:
        inputs["Y"] = as_variable(y, f"{op_type}: y")
    result = append_simple(op_type, inputs, {} if y is None else {"axis": -1}, name=name)
    result.stop_gradient = True
    target = written_to(result, out, op_type)
    target.stop_gradient = True
    return target


def logical_and(x: Variable, y: Variable, out: Variable | None = None,
                name: str | None = None) -> Variable:
    """``x and y`` elementwise, for bool vars; with ``out`` written into that var."""
    return _logical("logical_and", x, y, out, name)


def logical_or(x: Variable, y: Variable, out: Variable | None = None,
               name: str | None = None) -> Variable:
    """``x or y`` elementwise, for bool vars; ``out`` as in `logical_and`."""
    return _logical("logical_or", x, y, out, name)


def logical_xor(x: Variable, y: Variable, out: Variable | None = None,
                name: str | None = None) -> Variable:
    """``x xor y`` elementwise, for bool vars; ``out`` as in `logical_and`."""
    return _logical("logical_xor", x, y, out, name)


def logical_not(x: Variable, out: Variable | None = None, name: str | None = None) -> Variable:
    """``not x`` elementwise, for a bool var; ``out`` as in `logical_and`."""
    return _logical("logical_not", x, None, out, name)
