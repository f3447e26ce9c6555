"""Recurrent layers over a padded batch ``[B, T, ...]`` with optional int64 ``lengths``
``[B]``: `dynamic_lstm` and `dynamic_gru` (one fused op for the whole sequence), and
`lstm_unit` / `gru_unit` for one step of a cell written by hand.

Positions at or past a row's length never change that row's state, outputs or gradients;
the outputs there are zero. Without ``lengths`` every row is full length.
"""
from __future__ import annotations

from typing import Any

from ...errors import OpArgumentError, ShapeError
from ...ir.records import canonical_dtype
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable
from .nn import fc
from .tensor import concat

__all__ = ["dynamic_lstm", "dynamic_gru", "lstm_unit", "gru_unit"]


def _positive_int(value: Any, what: str, layer: str, multiple: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value % multiple:
        extra = f" multiple of {multiple}" if multiple > 1 else ""
        raise error_at(OpArgumentError, f"{layer}: {what} must be a positive{extra} int, "
                                        f"got {value!r}")
    return value


def _sequence_input(input: Any, columns: int, layer: str, size_hint: str) -> Variable:
    x = as_variable(input, f"{layer} input")
    if len(x.shape) != 3:
        raise error_at(ShapeError, f"{layer}: input {x.name}:{short_type(x.desc)} must be a "
                                   f"padded batch [B, T, {columns}]; project a [B, T, D] "
                                   f"sequence with fc(input=x, size={columns}, "
                                   f"num_flatten_dims=2)")
    if x.shape[2] >= 0 and x.shape[2] != columns:
        raise error_at(ShapeError, f"{layer}: input {x.name}:{short_type(x.desc)} has "
                                   f"{x.shape[2]} columns but {size_hint} needs {columns}")
    return x


def check_dtype_name(dtype: Any, layer: str) -> str:
    """A layer's ``dtype=``: a dtype name, or an error at the user's line."""
    try:
        return canonical_dtype(dtype)
    except TypeError as e:
        raise error_at(OpArgumentError, f"{layer}: {e}") from None


def _optional(value: Any, what: str) -> Variable | None:
    return None if value is None else as_variable(value, what)


def _weight(helper: LayerHelper, param_attr: Any, shape: list[int], dtype: str,
            layer: str) -> Variable:
    """The recurrent weight (Xavier by default); every recurrent layer has one."""
    pattr = helper.param_attr(param_attr, "param_attr")
    if pattr is None:
        raise error_at(OpArgumentError, f"{layer} needs a weight; param_attr=False is not "
                                        f"allowed")
    return helper.create_parameter(pattr, shape, dtype)


def lstm_bias(helper: LayerHelper, bias_attr: Any, use_peepholes: bool, hidden: int,
              dtype: str, layer: str) -> Variable | None:
    """An LSTM's bias: [1, 4H], or [1, 7H] holding the peepholes too."""
    if bias_attr is False and use_peepholes:
        raise error_at(OpArgumentError, f"{layer}: use_peepholes=True keeps the peephole "
                                        f"weights in the bias; bias_attr=False needs "
                                        f"use_peepholes=False")
    return _bias(helper, bias_attr, (7 if use_peepholes else 4) * hidden, dtype)


def _bias(helper: LayerHelper, bias_attr: Any, width: int, dtype: str) -> Variable | None:
    """The bias [1, width] (zeros by default), or None for bias_attr=False."""
    battr = helper.param_attr(bias_attr, "bias_attr")
    return None if battr is None else helper.create_parameter(battr, [1, width], dtype,
                                                              is_bias=True)


def dynamic_lstm(input: Variable, size: int, h_0: Variable | None = None,
                 c_0: Variable | None = None, param_attr: Any = None, bias_attr: Any = None,
                 use_peepholes: bool = True, is_reverse: bool = False,
                 gate_activation: str = "sigmoid", cell_activation: str = "tanh",
                 candidate_activation: str = "tanh", dtype: str = "float32",
                 name: str | None = None, lengths: Variable | None = None
                 ) -> tuple[Variable, Variable]:
    """An LSTM over a whole padded batch in one op: returns ``(hidden, cell)``, each
    ``[B, T, H]``.

    ``input`` is already projected to ``[B, T, 4H]`` and ``size`` is ``4H``, as in Paddle
    (``fc(input=x, size=4 * H, num_flatten_dims=2)`` does the projection). Gates, in
    Paddle's order c~, i, f, o::

        i = act_g(x_i + h W_i + b_i [+ W_ic * c])   f likewise, c~ = act_cand(x_c + h W_c + b_c)
        c_t = f * c + i * c~;  o = act_g(x_o + h W_o + b_o [+ W_oc * c_t]);  h_t = o * act_cell(c_t)

    Parameters: the weight ``[H, 4H]`` (Xavier) and the bias ``[1, 4H]`` (zeros), or
    ``[1, 7H]`` with ``use_peepholes`` (b_c, b_i, b_f, b_o, W_ic, W_fc, W_oc).
    ``bias_attr=False`` leaves the bias out (then ``use_peepholes`` must be False).
    ``h_0``/``c_0`` ``[B, H]`` start the state (default zeros); ``is_reverse`` runs each
    row from its last valid position back to its first. Activations: sigmoid, tanh, relu
    or identity. The parameters take the input's dtype (``dtype`` must name a dtype).
    """
    layer = "dynamic_lstm"
    check_dtype_name(dtype, layer)
    helper = LayerHelper("lstm", name)
    size = _positive_int(size, "size (4 * hidden size)", layer, multiple=4)
    x = _sequence_input(input, size, layer, f"size={size}")
    h = size // 4
    helper.context = f" (input {x.name}:{short_type(x.desc)}, size={size})"
    weight = _weight(helper, param_attr, [h, 4 * h], x.dtype, layer)
    bias = lstm_bias(helper, bias_attr, use_peepholes, h, x.dtype, layer)
    inputs = {"Input": x, "H0": _optional(h_0, "h_0"), "C0": _optional(c_0, "c_0"),
              "Weight": weight, "Bias": bias, "Lengths": _optional(lengths, "lengths")}
    attrs = {"use_peepholes": bool(use_peepholes), "is_reverse": bool(is_reverse),
             "gate_activation": gate_activation, "cell_activation": cell_activation,
             "candidate_activation": candidate_activation}
    outs = helper.append("lstm", inputs, attrs)
    return outs["Hidden"][0], outs["Cell"][0]


def dynamic_gru(input: Variable, size: int, param_attr: Any = None, bias_attr: Any = None,
                is_reverse: bool = False, gate_activation: str = "sigmoid",
                candidate_activation: str = "tanh", h_0: Variable | None = None,
                origin_mode: bool = False, lengths: Variable | None = None) -> Variable:
    """A GRU over a whole padded batch in one op: returns hidden ``[B, T, H]``.

    ``input`` is already projected to ``[B, T, 3H]`` and ``size`` is ``H``. Gates, in
    Paddle's order u, r, c~::

        u, r = act_g(x_ur + h W_ur + b_ur);  c~ = act_cand(x_c + (r * h) W_c + b_c)
        h_t = (1 - u) * h + u * c~        (origin_mode=True: u * h + (1 - u) * c~)

    Parameters: the weight ``[H, 3H]`` (Xavier), in Paddle's layout: ``W_ur`` ``[H, 2H]``
    is its first ``2H*H`` values, ``W_c`` ``[H, H]`` the rest (docs/sequences.md); the
    bias ``[1, 3H]`` (zeros; ``bias_attr=False``: none). ``h_0`` ``[B, H]`` starts the
    state (default zeros). As Paddle's, sigmoids clip their input to [-40, 13].
    """
    layer = "dynamic_gru"
    helper = LayerHelper("gru")
    size = _positive_int(size, "size (the hidden size)", layer)
    x = _sequence_input(input, 3 * size, layer, f"size={size} (3 * size)")
    helper.context = f" (input {x.name}:{short_type(x.desc)}, size={size})"
    weight = _weight(helper, param_attr, [size, 3 * size], x.dtype, layer)
    bias = _bias(helper, bias_attr, 3 * size, x.dtype)
    inputs = {"Input": x, "H0": _optional(h_0, "h_0"), "Weight": weight, "Bias": bias,
              "Lengths": _optional(lengths, "lengths")}
    attrs = {"is_reverse": bool(is_reverse), "gate_activation": gate_activation,
             "activation": candidate_activation, "origin_mode": bool(origin_mode)}
    return helper.append("gru", inputs, attrs)["Hidden"][0]


def lstm_unit(x_t: Variable, hidden_t_prev: Variable, cell_t_prev: Variable,
              forget_bias: float = 0.0, param_attr: Any = None, bias_attr: Any = None,
              name: str | None = None) -> tuple[Variable, Variable]:
    """One LSTM step: ``fc([x_t, hidden_t_prev], 4D)`` then the cell (gates i, f, o, g);
    returns ``(hidden, cell)``, each ``[B, D]`` with D from ``cell_t_prev [B, D]``.
    ``forget_bias`` is added to the forget gate's pre-activation."""
    helper = LayerHelper("lstm_unit", name)
    c_prev = as_variable(cell_t_prev, "lstm_unit cell_t_prev")
    h_prev = as_variable(hidden_t_prev, "lstm_unit hidden_t_prev")
    if len(c_prev.shape) != 2 or c_prev.shape[1] < 0:
        raise error_at(ShapeError, f"lstm_unit: cell_t_prev {c_prev.name}:"
                                   f"{short_type(c_prev.desc)} must be [B, D] with D known")
    d = c_prev.shape[1]
    both = concat([as_variable(x_t, "lstm_unit x_t"), h_prev], axis=1)
    gates = fc(both, size=4 * d, param_attr=param_attr, bias_attr=bias_attr)
    outs = helper.append("lstm_unit", {"X": gates, "C_prev": c_prev},
                         {"forget_bias": float(forget_bias)},
                         outputs={"H": [helper.out_name()], "C": [helper.tmp()]})
    return outs["H"][0], outs["C"][0]


def gru_unit(input: Variable, hidden: Variable, size: int, param_attr: Any = None,
             bias_attr: Any = None, activation: str = "tanh",
             gate_activation: str = "sigmoid", origin_mode: bool = False
             ) -> tuple[Variable, Variable, Variable]:
    """One GRU step (`dynamic_gru`'s formula) on ``input [B, 3D]`` (projected) and
    ``hidden [B, D]``, with ``size = 3D``; returns ``(updated_hidden, reset_hidden_pre,
    gate)``: ``[B, D]``, ``r * hidden`` ``[B, D]`` and the activated gates ``[B, 3D]``.
    The weight ``[D, 3D]`` is in `dynamic_gru`'s layout, so the two can share it.
    Gradients flow from ``updated_hidden``."""
    helper = LayerHelper("gru_unit")
    size = _positive_int(size, "size (3 * hidden size)", "gru_unit", multiple=3)
    x, h = as_variable(input, "gru_unit input"), as_variable(hidden, "gru_unit hidden")
    d = size // 3
    helper.context = f" (input {x.name}:{short_type(x.desc)}, size={size})"
    weight = _weight(helper, param_attr, [d, 3 * d], x.dtype, "gru_unit")
    bias = _bias(helper, bias_attr, 3 * d, x.dtype)
    outs = helper.append("gru_unit", {"Input": x, "HiddenPrev": h, "Weight": weight,
                                      "Bias": bias},
                         {"activation": activation, "gate_activation": gate_activation,
                          "origin_mode": bool(origin_mode)},
                         outputs={"Hidden": [helper.out_name()], "Gate": [helper.tmp()],
                                  "ResetHiddenPrev": [helper.tmp()]})
    return outs["Hidden"][0], outs["ResetHiddenPrev"][0], outs["Gate"][0]
