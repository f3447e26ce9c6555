"""Recurrent cells (Paddle 1.8's `RNNCell`, `GRUCell`, `LSTMCell`): one step of a recurrent
network, written once and run by `rnn` over a padded batch, or by `dynamic_decode` one
generated token at a time::

    cell = fluid.layers.GRUCell(hidden_size=64)
    outputs, final_state = fluid.layers.rnn(cell, inputs, sequence_length=lengths)

A cell subclasses `RNNCell` and writes ``call(inputs, states) -> (outputs, new_states)``
with layers; ``new_states`` has the structure, shapes and dtypes of ``states`` (a var, or
lists, tuples and dicts of them). ``state_shape`` (each state's dims after the batch dim)
lets `RNNCell.get_initial_states` make zero states.

A cell's parameters are made at its first call in a traced program and shared by every
later call in that program: all the steps of `rnn`, and the methods that call the same
cell object. A cell made anew in each method shares them when it is made under the same
`fluid.var_scope` (its parameters are named like a layer's: ``GRUCell_0.w_0``).
"""
from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable
from typing import Any

from ...errors import DTypeError, OpArgumentError
from ...ir.records import canonical_dtype
from ...ir.text import short_type
from ..param_attr import ParamAttr
from ..tracing import TraceContext, current_trace, error_at
from ..variable import Variable
from .activations import sigmoid, tanh
from .grouped import current_group
from .helpers import LayerHelper, as_variable
from .math import matmul
from .structure import flatten
from .tensor import concat, fill_constant_batch_size_like, split

__all__ = ["RNNCell", "GRUCell", "LSTMCell"]

_FLOATS = ("float32", "float64")


def float_var(value: Any, what: str) -> Variable:
    """``value`` as a float32/float64 Variable, or an error at the user's line (a
    TypeError, as Paddle raises)."""
    v = as_variable(value, what)
    if v.dtype not in _FLOATS:
        raise error_at(DTypeError, f"{what} {v.name}:{short_type(v.desc)} must be float32 or "
                                   f"float64; cast it first")
    return v


def _is_shape(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(
        isinstance(d, int) and not isinstance(d, bool) for d in value)


def map_shapes(fn: Callable[[list[int]], Any], shapes: Any) -> Any:
    """``fn`` of each shape (a list of ints) in a nested structure of them."""
    if _is_shape(shapes):
        return fn(list(shapes))
    if isinstance(shapes, (list, tuple)):
        items = [map_shapes(fn, s) for s in shapes]
        return items if isinstance(shapes, list) else tuple(items)
    if isinstance(shapes, dict):
        return {k: map_shapes(fn, v) for k, v in shapes.items()}
    raise error_at(OpArgumentError, f"RNNCell.get_initial_states: a shape is a list of ints "
                                    f"(the dims after the batch dim), got {shapes!r:.60}")


class RNNCell:
    """One step of a recurrent network: subclass it and write ``call``."""

    def call(self, inputs: Any, states: Any, **kwargs: Any) -> tuple[Any, Any]:
        """``(outputs, new_states)`` from the step's ``inputs`` ([batch, ...] each) and the
        ``states`` of the step before; ``new_states`` has the structure, shapes and dtypes
        of ``states``. ``kwargs`` are what `rnn` or `dynamic_decode` was given besides."""
        raise NotImplementedError(f"{type(self).__name__} must define call(inputs, states)")

    def __call__(self, inputs: Any, states: Any, **kwargs: Any) -> tuple[Any, Any]:
        return self.call(inputs, states, **kwargs)

    def get_initial_states(self, batch_ref: Any, shape: Any = None, dtype: Any = "float32",
                           init_value: float = 0, batch_dim_idx: int = 0) -> Any:
        """States filled with ``init_value``, one per shape of ``shape`` (default
        `state_shape`): each ``[batch] + shape`` (a shape already starting with -1 is
        taken as it is), the batch size that of dim ``batch_dim_idx`` of ``batch_ref``
        (its first var when a structure). ``dtype`` (None: `state_dtype`, else float32)
        holds for every state."""
        _, refs = flatten(batch_ref, "RNNCell.get_initial_states: batch_ref")
        ref = refs[0]
        if ref.dtype not in _FLOATS + ("int32", "int64"):
            raise error_at(DTypeError, f"RNNCell.get_initial_states: batch_ref "
                                       f"{ref.name}:{short_type(ref.desc)} must be float or "
                                       f"int")
        if dtype is None:
            try:
                dtype = self.state_dtype
            except NotImplementedError:
                dtype = "float32"
        try:
            dt = canonical_dtype(dtype)
        except TypeError as e:
            raise error_at(DTypeError, f"RNNCell.get_initial_states: {e}") from None
        if dt not in _FLOATS:
            raise error_at(DTypeError, f"RNNCell.get_initial_states: dtype must be float32 "
                                       f"or float64, got {dt}")

        group = current_group()

        def fill(dims: list[int]) -> Variable:
            full = dims if dims and dims[0] == -1 else [-1] + dims
            if group is None:
                return fill_constant_batch_size_like(ref, full, dt, init_value,
                                                     input_dim_idx=int(batch_dim_idx))
            return group.fill_like_batch(ref, full, dt, float(init_value), int(batch_dim_idx))
        return map_shapes(fill, self.state_shape if shape is None else shape)

    @property
    def state_shape(self) -> Any:
        """Each state's dims after the batch dim (a nested structure of int lists)."""
        raise NotImplementedError(f"{type(self).__name__} defines no state_shape; give "
                                  f"get_initial_states a shape, or rnn initial_states")

    @property
    def state_dtype(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} defines no state_dtype")


class _CellHelper(LayerHelper):
    """A `LayerHelper` named ``name`` exactly: the name its cell took at its first call."""

    def __init__(self, kind: str, name: str):
        self.trace = current_trace(f"fluid.layers.{kind}")
        self.layer_type, self.name, self.user_name = kind, name, None
        self._counters = {}


class _Params:
    """A cell's parameters: named once per traced program, at the cell's first call."""

    def __init__(self, kind: str, name: Any, dtype: Any):
        if not isinstance(name, str) or not name:
            raise error_at(OpArgumentError, f"{kind}: name must be a non-empty string, got "
                                            f"{name!r:.40}")
        try:
            self.dtype = canonical_dtype(dtype)
        except TypeError as e:
            raise error_at(DTypeError, f"{kind}: {e}") from None
        if self.dtype not in _FLOATS:
            raise error_at(DTypeError, f"{kind}: dtype must be float32 or float64, got "
                                       f"{self.dtype}")
        self.kind, self.name = kind, name
        self._prefix: weakref.WeakKeyDictionary[TraceContext, str] = \
            weakref.WeakKeyDictionary()

    def helper(self) -> LayerHelper:
        """A helper whose parameters are ``<prefix>.w_0``, ``.w_1``, ``.b_0``, ..."""
        trace = current_trace(f"fluid.layers.{self.kind}")
        if trace not in self._prefix:
            self._prefix[trace] = trace.names.generate(self.name)
        return _CellHelper(self.kind, self._prefix[trace])

    def weight(self, helper: LayerHelper, attr: Any, shape: list[int], suffix: str
               ) -> Variable:
        """A weight (Xavier); a named ParamAttr gets ``suffix`` appended when the cell
        has several weights."""
        pattr = helper.param_attr(attr, "param_attr")
        if pattr is None:
            raise error_at(OpArgumentError, f"{self.kind} needs its weights; "
                                            f"param_attr=False is not allowed")
        return helper.create_parameter(self._named(pattr, suffix), shape, self.dtype)

    def bias(self, helper: LayerHelper, attr: Any, shape: list[int], suffix: str
             ) -> Variable | None:
        """A bias (zeros), or None for ``bias_attr=False``."""
        pattr = helper.param_attr(attr, "bias_attr")
        return None if pattr is None else helper.create_parameter(
            self._named(pattr, suffix), shape, self.dtype, is_bias=True)

    @staticmethod
    def _named(pattr: ParamAttr, suffix: str) -> ParamAttr:
        return dataclasses.replace(pattr, name=pattr.name + suffix) \
            if pattr.name is not None and suffix else pattr


def _hidden_size(value: Any, kind: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise error_at(OpArgumentError, f"{kind}: hidden_size must be a positive int, got "
                                        f"{value!r:.40}")
    return value


def _activation(fn: Any, default: Callable[[Variable], Variable], kind: str, what: str
                ) -> Callable[[Variable], Variable]:
    if fn is None:
        return default
    if not callable(fn):
        raise error_at(OpArgumentError, f"{kind}: {what} must be a function of a Variable "
                                        f"(fluid.layers.sigmoid, ...), got {fn!r:.40}")
    return fn


def _no_extra(kwargs: dict, kind: str) -> None:
    if kwargs:
        raise error_at(OpArgumentError, f"{kind}.call takes inputs and states only, got "
                                        f"{', '.join(sorted(kwargs))} besides; a cell that "
                                        f"reads more subclasses RNNCell")


def _affine(x: Variable, w: Variable, b: Variable | None) -> Variable:
    y = matmul(x, w)
    return y if b is None else y + b


def _step_input(cell: str, inputs: Any, state: Any, hidden: int, what: str
                ) -> tuple[Variable, Variable]:
    x = float_var(inputs, f"{cell}: inputs")
    h = float_var(state, f"{cell}: {what}")
    if len(x.shape) != 2 or x.shape[1] < 0:
        raise error_at(OpArgumentError, f"{cell}: inputs {x.name}:{short_type(x.desc)} must be "
                                        f"[batch, input_size] with input_size known")
    if len(h.shape) != 2 or h.shape[1] not in (hidden, -1):
        raise error_at(OpArgumentError, f"{cell}: {what} {h.name}:{short_type(h.desc)} must "
                                        f"be [batch, {hidden}] (hidden_size={hidden})")
    return x, h


class GRUCell(RNNCell):
    """A GRU step (Paddle's ``BasicGRUUnit``; Cho et al. 2014)::

        r, u = act_g([x, h] @ W_g + b_g)             W_g [input + hidden, 2 * hidden]
        c~ = act_c([x, r * h] @ W_c + b_c)           W_c [input + hidden, hidden]
        h' = u * h + (1 - u) * c~

    ``call(inputs, states)`` takes ``inputs`` [batch, input] and the state ``h`` [batch,
    hidden] and returns ``(h', h')``. Parameters: ``<name>_<n>.w_0`` (W_g, Xavier),
    ``.w_1`` (W_c), ``.b_0`` (b_g [2 * hidden], zeros), ``.b_1`` (b_c); a named
    ``param_attr``/``bias_attr`` is suffixed ``_gate`` and ``_candidate``.
    ``gate_activation`` and ``activation`` are functions of a Variable (default
    `fluid.layers.sigmoid` and `fluid.layers.tanh`). ``linear_before_reset=True`` (not
    Paddle's) applies the reset gate after the product, ``c~ = act_c(x @ W_c[:input] + r *
    (h @ W_c[input:]) + b_c)``, as PyTorch's ``nn.GRU`` and cuDNN do.
    """

    def __init__(self, hidden_size: int, param_attr: Any = None, bias_attr: Any = None,
                 gate_activation: Callable | None = None, activation: Callable | None = None,
                 dtype: Any = "float32", name: str = "GRUCell",
                 linear_before_reset: bool = False):
        self.hidden_size = _hidden_size(hidden_size, "GRUCell")
        self._params = _Params("GRUCell", name, dtype)
        self._attrs = (param_attr, bias_attr)
        self._gate = _activation(gate_activation, sigmoid, "GRUCell", "gate_activation")
        self._act = _activation(activation, tanh, "GRUCell", "activation")
        self._linear_before_reset = bool(linear_before_reset)

    def call(self, inputs: Any, states: Any, **kwargs: Any) -> tuple[Any, Any]:
        _no_extra(kwargs, "GRUCell")
        hid = self.hidden_size
        x, h = _step_input("GRUCell", inputs, states, hid, "states")
        p, (w_attr, b_attr) = self._params, self._attrs
        helper = p.helper()
        rows = x.shape[1] + hid
        w_gate = p.weight(helper, w_attr, [rows, 2 * hid], "_gate")
        w_cand = p.weight(helper, w_attr, [rows, hid], "_candidate")
        b_gate = p.bias(helper, b_attr, [2 * hid], "_gate")
        b_cand = p.bias(helper, b_attr, [hid], "_candidate")
        r, u = split(self._gate(_affine(concat([x, h], axis=1), w_gate, b_gate)), 2, dim=1)
        if self._linear_before_reset:
            w_x, w_h = split(w_cand, [x.shape[1], hid], dim=0)
            c = self._act(_affine(x, w_x, b_cand) + r * matmul(h, w_h))
        else:
            c = self._act(_affine(concat([x, r * h], axis=1), w_cand, b_cand))
        new_h = c + u * (h - c)
        return new_h, new_h

    @property
    def state_shape(self) -> list[int]:
        return [self.hidden_size]


class LSTMCell(RNNCell):
    """An LSTM step (Paddle's ``BasicLSTMUnit``; Zaremba et al. 2014)::

        i, j, f, o = split([x, h] @ W + b)           W [input + hidden, 4 * hidden]
        c' = c * act_g(f + forget_bias) + act_g(i) * act_c(j)
        h' = act_c(c') * act_g(o)

    ``call(inputs, states)`` takes ``inputs`` [batch, input] and ``states = [h, c]``
    (each [batch, hidden]) and returns ``(h', [h', c'])``. Parameters ``<name>_<n>.w_0``
    (W, Xavier) and ``.b_0`` (b [4 * hidden], zeros). ``gate_activation`` and
    ``activation`` are functions of a Variable (default `fluid.layers.sigmoid` and
    `fluid.layers.tanh`).
    """

    def __init__(self, hidden_size: int, param_attr: Any = None, bias_attr: Any = None,
                 gate_activation: Callable | None = None, activation: Callable | None = None,
                 forget_bias: float = 1.0, dtype: Any = "float32", name: str = "LSTMCell"):
        self.hidden_size = _hidden_size(hidden_size, "LSTMCell")
        self._params = _Params("LSTMCell", name, dtype)
        self._attrs = (param_attr, bias_attr)
        self._gate = _activation(gate_activation, sigmoid, "LSTMCell", "gate_activation")
        self._act = _activation(activation, tanh, "LSTMCell", "activation")
        if isinstance(forget_bias, bool) or not isinstance(forget_bias, (int, float)):
            raise error_at(OpArgumentError, f"LSTMCell: forget_bias must be a number, got "
                                            f"{forget_bias!r:.40}")
        self.forget_bias = float(forget_bias)

    def call(self, inputs: Any, states: Any, **kwargs: Any) -> tuple[Any, Any]:
        _no_extra(kwargs, "LSTMCell")
        if not isinstance(states, (list, tuple)) or len(states) != 2:
            raise error_at(OpArgumentError, f"LSTMCell: states must be a list [hidden, cell], "
                                            f"got {type(states).__name__}")
        hid = self.hidden_size
        x, h = _step_input("LSTMCell", inputs, states[0], hid, "states[0] (hidden)")
        _, c = _step_input("LSTMCell", inputs, states[1], hid, "states[1] (cell)")
        p, (w_attr, b_attr) = self._params, self._attrs
        helper = p.helper()
        w = p.weight(helper, w_attr, [x.shape[1] + hid, 4 * hid], "")
        b = p.bias(helper, b_attr, [4 * hid], "")
        i, j, f, o = split(_affine(concat([x, h], axis=1), w, b), 4, dim=1)
        if self.forget_bias:
            f = f + self.forget_bias
        new_c = c * self._gate(f) + self._gate(i) * self._act(j)
        new_h = self._act(new_c) * self._gate(o)
        return new_h, [new_h, new_c]

    @property
    def state_shape(self) -> list[list[int]]:
        return [[self.hidden_size], [self.hidden_size]]
