"""`Variable`: a handle on a var of the program being traced, with Python operators that
record ops, so it behaves like an array where users expect it: arithmetic (``a + b``,
``x * 2``, ``-x``, ``x ** 2``, ``a @ b``), ``abs(x)``, comparisons (``x > 0``, ``a == b``:
bool Variables) and indexing (``h[:, 0]``, ``h[..., 1:3]``, ``h[None]``)."""
from __future__ import annotations

import linecache
import math
from numbers import Real
from typing import Any, Protocol

from ..errors import OpArgumentError, ProgramDefinitionError
from ..ir.records import SourceLoc, VarDesc
from ..ir.source import user_location
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
            if self._trace.declared_in_sub_block(self.name):
                raise error_at(OpArgumentError, self._trace.not_visible(self.name))
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

    def _set_error_clip(self, error_clip: Any) -> None:
        """Clip the gradient flowing back through this var (a
        `fluid.clip.ErrorClipByValue`) in the backward passes that follow (Paddle's
        spelling)."""
        _layers().set_error_clip(self._trace, self.name, error_clip)

    def __bool__(self) -> bool:
        raise error_at(ProgramDefinitionError,
                       f"the truth value of Variable {self.name!r} is not known while "
                       f"tracing; Python control flow (if, while, and, or) cannot depend on "
                       f"it. Record the control flow in the program instead:\n"
                       f"{control_flow_hint(user_location())}")

    # --- arithmetic: recorded as ops ----------------------------------------------------------

    def __add__(self, other: Any) -> Variable:
        return _binary("elementwise_add", self, other, scalar=lambda s: _scale(self, 1.0, s))

    def __radd__(self, other: Any) -> Variable:
        return self.__add__(other)

    def __sub__(self, other: Any) -> Variable:
        return _binary("elementwise_sub", self, other, scalar=lambda s: _scale(self, 1.0, -s))

    def __rsub__(self, other: Any) -> Variable:
        if _is_scalar(other):
            return _scale(self, -1.0, float(other))
        return _binary("elementwise_sub", _as_var(other), self)

    def __mul__(self, other: Any) -> Variable:
        return _binary("elementwise_mul", self, other, scalar=lambda s: _scale(self, s, 0.0))

    def __rmul__(self, other: Any) -> Variable:
        return self.__mul__(other)

    def __truediv__(self, other: Any) -> Variable:
        return _binary("elementwise_div", self, other,
                       scalar=lambda s: _scale(self, 1.0 / _nonzero(s), 0.0))

    def __rtruediv__(self, other: Any) -> Variable:
        if _is_scalar(other):
            return _scale(_unary("pow", self, factor=-1.0), float(other), 0.0)
        return _binary("elementwise_div", _as_var(other), self)

    def __pow__(self, other: Any) -> Variable:
        if _is_scalar(other):
            return _unary("pow", self, factor=float(other))
        return _binary("elementwise_pow", self, other)

    def __rpow__(self, other: Any) -> Variable:
        if _is_scalar(other) and other > 0:   # s ** x == exp(x * ln s)
            return _unary("exp", _scale(self, math.log(other), 0.0))
        if _is_scalar(other):
            raise error_at(OpArgumentError, f"{other!r} ** Variable needs a positive base")
        return _binary("elementwise_pow", _as_var(other), self)

    def __mod__(self, other: Any) -> Variable:   # the sign of the divisor, as Python's %
        return _binary("elementwise_mod", self, other,
                       scalar=lambda s: _binary("elementwise_mod", self, _constant(self, s)))

    def __neg__(self) -> Variable:
        return _scale(self, -1.0, 0.0)

    def __pos__(self) -> Variable:
        return self

    def __matmul__(self, other: Any) -> Variable:
        return _binary("matmul", self, other)

    def __abs__(self) -> Variable:
        return _unary("abs", self)

    # --- comparisons: bool Variables, no gradient ---------------------------------------------

    def __lt__(self, other: Any) -> Variable:
        return _compare("less_than", self, other)

    def __le__(self, other: Any) -> Variable:
        return _compare("less_equal", self, other)

    def __gt__(self, other: Any) -> Variable:
        return _compare("greater_than", self, other)

    def __ge__(self, other: Any) -> Variable:
        return _compare("greater_equal", self, other)

    def __eq__(self, other: Any) -> Variable:  # type: ignore[override]
        return _compare("equal", self, other)

    def __ne__(self, other: Any) -> Variable:  # type: ignore[override]
        return _compare("not_equal", self, other)

    # --- indexing -----------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> Variable:
        return _layers().getitem(self, key)

    def __iter__(self) -> Any:
        # without this, Python would iterate by indexing 0, 1, 2, ... for ever
        raise error_at(ProgramDefinitionError,
                       f"Variable {self.name!r} cannot be iterated while tracing; index it "
                       f"(x[i], x[:, 0]) or split it with fluid.layers.split")

    __hash__ = object.__hash__


def control_flow_hint(loc: SourceLoc | None) -> str:
    """The two lines that record what the user's ``if`` or ``while`` at ``loc`` meant."""
    text = linecache.getline(loc.file, loc.line).strip() if loc is not None else ""
    words = text.split()
    test = text.partition(" ")[2].rstrip(":").strip() if words else ""
    test = test if test and words[0] in ("if", "elif", "while") else "<condition>"
    if words and words[0] == "while":
        return (f"    cond = {test}   # a bool var of shape [1]\n"
                f"    loop = fluid.layers.While(cond=cond)\n"
                f"    with loop.block(): ...   # the body; it updates cond, e.g. "
                f"fluid.layers.less_than(x=i, y=n, cond=cond)\n"
                f"  or, as functions of the loop vars:\n"
                f"    vars = fluid.layers.while_loop(cond_fn, body_fn, [var, ...])")
    return (f"    pred = {test}   # a bool var of shape [1]\n"
            f"    out = fluid.layers.cond(pred, lambda: value_if_true, lambda: value_if_false)\n"
            f"  or, to set vars case by case:\n"
            f"    with fluid.layers.Switch() as switch:\n"
            f"        with switch.case(pred): fluid.layers.assign(value, output=var)")


def _is_scalar(value: Any) -> bool:
    """A Python or NumPy real number (bool excluded): an operand folded into an op."""
    return isinstance(value, Real) and not isinstance(value, bool)


def _nonzero(s: float) -> float:
    if s == 0:
        raise error_at(OpArgumentError, "dividing a Variable by the constant 0")
    return s


def _as_var(value: Any) -> Variable:
    if isinstance(value, Variable):
        return _layers().as_variable(value, "operand")
    raise error_at(OpArgumentError, f"cannot combine a Variable with "
                                    f"{type(value).__name__} {value!r:.40}; use a Variable "
                                    f"or a Python number (for an array, declare a data var "
                                    f"or use fluid.layers.fill_constant/assign)")


def _binary(op_type: str, x: Variable, other: Any, scalar=None) -> Variable:
    if _is_scalar(other):
        if scalar is None:
            raise error_at(OpArgumentError, f"{op_type} needs a Variable operand, got {other!r}")
        return scalar(float(other))
    attrs = {} if op_type == "matmul" else {"axis": -1}
    return _layers().append_simple(op_type, {"X": _as_var(x), "Y": _as_var(other)}, attrs,
                                   layer=op_type)


def _unary(op_type: str, x: Variable, **attrs: Any) -> Variable:
    return _layers().append_simple(op_type, {"X": x}, attrs, layer=op_type)


def _compare(layer: str, x: Variable, other: Any) -> Variable:
    """x < y is fluid.layers.less_than(x, y), and so on."""
    return _layers().compare(layer, x, other)


def _constant(like: Variable, value: float) -> Variable:
    """A [1] var of ``like``'s dtype holding ``value`` (a Python number's operand)."""
    return _layers().fill_constant([1], like.dtype, value)


class Layers(Protocol):
    """What a Variable's operators record their ops with: the layers' own functions. The
    layers build on this module, so it does not import them: frontend/operators.py hands
    them over (`record_with`) when the frontend package loads."""

    def as_variable(self, value: Any, what: str) -> Variable: ...

    def append_simple(self, op_type: str, inputs: dict[str, Any], attrs: dict[str, Any],
                      layer: str) -> Variable: ...

    def compare(self, layer: str, x: Variable, other: Any) -> Variable: ...

    def fill_constant(self, shape: list[int], dtype: str, value: float) -> Variable: ...

    def getitem(self, x: Variable, key: Any) -> Variable: ...

    def set_error_clip(self, trace: TraceContext, name: str, error_clip: Any) -> None: ...


_LAYERS: list[Layers] = []


def record_with(layers: Layers) -> None:
    """Make ``layers`` what Variables' operators record with (frontend/operators.py)."""
    _LAYERS[:] = [layers]


def _layers() -> Layers:
    if not _LAYERS:   # the frontend package loads them: only a partial import lacks them
        raise RuntimeError("a Variable's operators need fluid_interactive.frontend's layers: "
                           "import fluid_interactive (or fluid) first")
    return _LAYERS[0]


def _scale(x: Variable, scale: float, bias: float) -> Variable:
    return _unary("scale", x, scale=float(scale), bias=float(bias))


class Placeholder(Variable):
    """What a mapped method argument holds while the method is traced: a Variable named
    after its data var, usable once ``fluid.layers.data(name=...)`` has declared that var
    in the method (before that, any use is an error naming the user's line)."""

    __slots__ = ("method",)

    def __init__(self, trace: TraceContext, name: str, method: str):
        super().__init__(trace, name)
        self.method = method

    @property
    def declared(self) -> bool:
        var = self._trace.block.vars.get(self.name)
        return var is not None and var.is_data and self._trace.method == self.method

    @property
    def desc(self) -> VarDesc:
        return self.resolve().desc

    def resolve(self) -> Variable:
        """The data var this argument stands for, once declared."""
        if not self.declared:
            raise error_at(OpArgumentError, self.undeclared())
        return Variable(self._trace, self.name)

    def undeclared(self) -> str:
        """What using it before it is declared is, and what to do."""
        return (f"argument {self.name!r} of {self.method}() is used before its data var is "
                f"declared; first write {self.name} = fluid.layers.data(name={self.name!r}, "
                f"shape=[...], dtype='float32')")

    def __repr__(self) -> str:
        state = "declared" if self.declared else "not declared yet"
        return f"Placeholder({self.name!r}, {state})"
