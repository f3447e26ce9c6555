"""`Variable`: a handle on a var of the program being traced, with Python operators that
record ops (``a + b``, ``x * 2``, ``-x``, ``x ** 2``)."""
from __future__ import annotations

from numbers import Number
from typing import Any, Optional

from ..errors import FeedError, OpArgumentError
from ..ir.records import VarDesc
from ..ir.text import short_type
from .tracing import TraceContext, error_at


class Variable:
    """A var of a traced block. Its description lives in the program, looked up by name,
    so passes that return new programs never leave a Variable stale."""

    __slots__ = ("_trace", "name")
    __array_priority__ = 100  # numpy scalars on the left defer to our operators

    def __init__(self, trace: TraceContext, name: str):
        self._trace = trace
        self.name = name

    @property
    def desc(self) -> VarDesc:
        v = self._trace.find(self.name)
        if v is None:
            raise error_at(OpArgumentError, f"variable {self.name!r} belongs to another method "
                                            f"and cannot be used in {self._trace.method}()")
        return v

    @property
    def shape(self) -> tuple[int, ...]:
        return self.desc.shape

    @property
    def dtype(self) -> str:
        return self.desc.dtype

    @property
    def persistable(self) -> bool:
        return self.desc.persistable

    @property
    def stop_gradient(self) -> bool:
        return self.desc.stop_gradient

    @stop_gradient.setter
    def stop_gradient(self, value: bool) -> None:
        self.desc.stop_gradient = bool(value)

    def __repr__(self) -> str:
        v = self._trace.find(self.name)
        return f"Variable({self.name}: {short_type(v)})"

    def __bool__(self) -> bool:
        raise error_at(TypeError, f"the truth value of Variable {self.name!r} is not known "
                                  f"while tracing; Python control flow cannot depend on it")

    # --- arithmetic: recorded as ops ----------------------------------------------------------

    def __add__(self, other: Any) -> "Variable":
        return _binary("elementwise_add", self, other, scalar=lambda s: _scale(self, 1.0, s))

    def __radd__(self, other: Any) -> "Variable":
        return self.__add__(other)

    def __sub__(self, other: Any) -> "Variable":
        return _binary("elementwise_sub", self, other, scalar=lambda s: _scale(self, 1.0, -s))

    def __rsub__(self, other: Any) -> "Variable":
        if isinstance(other, Number):
            return _scale(self, -1.0, float(other))
        return _binary("elementwise_sub", _as_var(self._trace, other), self)

    def __mul__(self, other: Any) -> "Variable":
        return _binary("elementwise_mul", self, other, scalar=lambda s: _scale(self, s, 0.0))

    def __rmul__(self, other: Any) -> "Variable":
        return self.__mul__(other)

    def __truediv__(self, other: Any) -> "Variable":
        return _binary("elementwise_div", self, other,
                       scalar=lambda s: _scale(self, 1.0 / s, 0.0))

    def __rtruediv__(self, other: Any) -> "Variable":
        if isinstance(other, Number):
            return _scale(_unary("pow", self, factor=-1.0), float(other), 0.0)
        return _binary("elementwise_div", _as_var(self._trace, other), self)

    def __pow__(self, other: Any) -> "Variable":
        if isinstance(other, Number):
            return _unary("pow", self, factor=float(other))
        return _binary("elementwise_pow", self, other)

    def __neg__(self) -> "Variable":
        return _scale(self, -1.0, 0.0)

    def __pos__(self) -> "Variable":
        return self

    def __matmul__(self, other: Any) -> "Variable":
        return _binary("matmul", self, other)

    __hash__ = object.__hash__


def _as_var(trace: TraceContext, value: Any) -> Variable:
    from .layers.helpers import as_variable
    return as_variable(value, "operand")


def _binary(op_type: str, x: Variable, other: Any, scalar=None) -> Variable:
    from .layers.helpers import append_simple
    if isinstance(other, Number) and not isinstance(other, bool):
        if scalar is None:
            raise error_at(OpArgumentError, f"{op_type} needs a Variable operand, got {other!r}")
        return scalar(float(other))
    if not isinstance(other, Variable):
        raise error_at(FeedError if other is None else OpArgumentError,
                       f"cannot combine Variable {x.name!r} with {type(other).__name__}; "
                       f"use a Variable or a Python number")
    attrs = {} if op_type == "matmul" else {"axis": -1}
    return append_simple(op_type, {"X": x, "Y": other}, attrs, layer=op_type)


def _unary(op_type: str, x: Variable, **attrs: Any) -> Variable:
    from .layers.helpers import append_simple
    return append_simple(op_type, {"X": x}, attrs, layer=op_type)


def _scale(x: Variable, scale: float, bias: float) -> Variable:
    return _unary("scale", x, scale=float(scale), bias=float(bias))


class Placeholder:
    """What a mapped method argument holds while the method is traced: it becomes the data
    var of the same name once ``fluid.layers.data(name=...)`` declares it."""

    def __init__(self, trace: TraceContext, name: str, method: str):
        self._trace, self.name, self.method = trace, name, method
        self.bound: Optional[Variable] = None

    def resolve(self) -> Variable:
        if self.bound is None:
            raise error_at(OpArgumentError,
                           f"argument {self.name!r} of {self.method}() is used before its data "
                           f"var is declared; first write {self.name} = fluid.layers.data("
                           f"name={self.name!r}, shape=[...], dtype='float32')")
        return self.bound

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self.resolve(), attr)

    def __repr__(self) -> str:
        state = "declared" if self.bound is not None else "not declared yet"
        return f"Placeholder({self.name!r}, {state})"


def _forward_to_bound(dunder: str):
    def method(self: Placeholder, *args: Any) -> Any:
        return getattr(self.resolve(), dunder)(*args)
    method.__name__ = dunder
    return method


for _dunder in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
                "__truediv__", "__rtruediv__", "__pow__", "__neg__", "__pos__", "__matmul__"):
    setattr(Placeholder, _dunder, _forward_to_bound(_dunder))
