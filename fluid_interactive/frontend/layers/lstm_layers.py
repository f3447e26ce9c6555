"""The LSTMs of Paddle 1.8's layers/rnn.py beyond `dynamic_lstm`: `dynamic_lstmp` (a
recurrent projection, one ``lstmp`` op over a padded batch and its lengths) and `lstm`
(the cuDNN-style multi-layer, optionally bidirectional LSTM over a time-major batch
``[T, B, D]``, written as one ``lstm`` op per layer and direction).
"""
from __future__ import annotations

import math
from typing import Any

from ...errors import ShapeError
from ...ir.text import short_type
from ..initializer import Uniform
from ..param_attr import ParamAttr
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable
from .nn import fc
from .norm import _float_input, dropout
from .recurrent import (
    _optional,
    _positive_int,
    _sequence_input,
    _weight,
    check_dtype_name,
    dynamic_lstm,
    lstm_bias,
)
from .tensor import concat, transpose, unsqueeze

__all__ = ["dynamic_lstmp", "lstm"]


def dynamic_lstmp(input: Variable, size: int, proj_size: int, param_attr: Any = None,
                  bias_attr: Any = None, use_peepholes: bool = True, is_reverse: bool = False,
                  gate_activation: str = "sigmoid", cell_activation: str = "tanh",
                  candidate_activation: str = "tanh", proj_activation: str = "tanh",
                  dtype: str = "float32", name: str | None = None, h_0: Variable | None = None,
                  c_0: Variable | None = None, cell_clip: float | None = None,
                  proj_clip: float | None = None, lengths: Variable | None = None
                  ) -> tuple[Variable, Variable]:
    """An LSTM whose recurrent state is a projection ``r = act_proj(h @ W_proj)`` of size
    ``proj_size``: returns ``(projection [B, T, P], cell [B, T, H])``.

    ``input`` is projected to ``[B, T, 4H]`` and ``size`` is ``4H``, as for
    `dynamic_lstm`. Parameters: the weight ``[P, 4H]``, the projection weight ``[H, P]``
    (both from ``param_attr``; a named one gives the projection the name + ``'.proj'``)
    and the bias ``[1, 4H]`` or ``[1, 7H]`` with ``use_peepholes``. ``h_0`` ``[B, P]`` and
    ``c_0`` ``[B, H]`` start the state; ``cell_clip`` / ``proj_clip`` bound c and r.
    """
    layer = "dynamic_lstmp"
    check_dtype_name(dtype, layer)
    helper = LayerHelper("lstmp", name)
    size = _positive_int(size, "size (4 * hidden size)", layer, multiple=4)
    p = _positive_int(proj_size, "proj_size", layer)
    x = _sequence_input(input, size, layer, f"size={size}")
    h = size // 4
    helper.context = f" (input {x.name}:{short_type(x.desc)}, size={size})"
    weight = _weight(helper, param_attr, [p, 4 * h], x.dtype, layer)
    pattr = helper.param_attr(param_attr, "param_attr")
    proj_attr = ParamAttr(name=None if pattr is None or pattr.name is None
                          else pattr.name + ".proj",
                          initializer=None if pattr is None else pattr.initializer)
    proj_weight = helper.create_parameter(proj_attr, [h, p], x.dtype)
    bias = lstm_bias(helper, bias_attr, use_peepholes, h, x.dtype, layer)
    inputs = {"Input": x, "H0": _optional(h_0, "h_0"), "C0": _optional(c_0, "c_0"),
              "Weight": weight, "ProjWeight": proj_weight, "Bias": bias,
              "Lengths": _optional(lengths, "lengths")}
    attrs = {"use_peepholes": bool(use_peepholes), "is_reverse": bool(is_reverse),
             "gate_activation": gate_activation, "cell_activation": cell_activation,
             "candidate_activation": candidate_activation, "proj_activation": proj_activation,
             "cell_clip": float(cell_clip or 0.0), "proj_clip": float(proj_clip or 0.0)}
    outs = helper.append("lstmp", inputs, attrs)
    return outs["Projection"][0], outs["Cell"][0]


def _states(init: Any, what: str, count: int, hidden: int) -> Variable:
    v = as_variable(init, f"lstm: {what}")
    if len(v.shape) != 3 or v.shape[0] not in (count, -1) or v.shape[2] not in (hidden, -1):
        raise error_at(ShapeError, f"lstm: {what} {v.name}:{short_type(v.desc)} must be "
                                   f"[num_layers * directions, B, hidden_size] = "
                                   f"[{count}, B, {hidden}]")
    return v


def lstm(input: Variable, init_h: Variable, init_c: Variable, max_len: int,
         hidden_size: int, num_layers: int, dropout_prob: float = 0.0,
         is_bidirec: bool = False, is_test: bool = False, name: str | None = None,
         default_initializer: Any = None, seed: int = -1
         ) -> tuple[Variable, Variable, Variable]:
    """A multi-layer LSTM over a time-major batch ``input`` ``[T, B, D]`` (Paddle's cuDNN
    LSTM): returns ``(rnn_out [T, B, H * directions], last_h, last_c)``, the last two
    ``[num_layers * directions, B, H]``, from ``init_h`` / ``init_c`` of that shape.

    Layer k's direction d (k * directions + d in the states) projects its input with
    ``<name>.w_ih_l{k}`` and ``<name>.b_l{k}`` and runs the recurrence with
    ``<name>.w_hh_l{k}`` (``_reverse`` for the backward direction), gates c~, i, f, o, no
    peepholes; weights start uniform in ±1/sqrt(H) unless ``default_initializer`` says
    otherwise. ``dropout_prob`` drops between layers in training. ``max_len`` is
    Paddle's bound on T and is only checked.
    """
    layer = "lstm"
    x = _float_input(layer, input)   # dtypes first: TypeErrors, as Paddle's checks are
    _float_input(layer, init_h, "init_h")
    _float_input(layer, init_c, "init_c")
    if len(x.shape) != 3:
        raise error_at(ShapeError, f"lstm: input {x.name}:{short_type(x.desc)} must be "
                                   f"time-major [T, B, D]")
    hidden = _positive_int(hidden_size, "hidden_size", layer)
    layers_n = _positive_int(num_layers, "num_layers", layer)
    _positive_int(max_len, "max_len", layer)
    dirs = 2 if is_bidirec else 1
    h0s = _states(init_h, "init_h", layers_n * dirs, hidden)
    c0s = _states(init_c, "init_c", layers_n * dirs, hidden)
    helper = LayerHelper("cudnn_lstm", name)
    init = default_initializer or Uniform(-1 / math.sqrt(hidden), 1 / math.sqrt(hidden))
    seq, last_h, last_c = transpose(x, [1, 0, 2]), [], []
    for k in range(layers_n):
        outs = []
        for d in range(dirs):
            sfx = f"l{k}" + ("_reverse" if d else "")
            attr = {key: ParamAttr(name=f"{helper.name}.{key}_{sfx}", initializer=init)
                    for key in ("w_ih", "b", "w_hh")}
            proj = fc(seq, 4 * hidden, num_flatten_dims=2, param_attr=attr["w_ih"],
                      bias_attr=attr["b"])
            idx = k * dirs + d
            h, c = dynamic_lstm(proj, 4 * hidden, h_0=h0s[idx], c_0=c0s[idx],
                                param_attr=attr["w_hh"], bias_attr=False,
                                use_peepholes=False, is_reverse=bool(d))
            end = 0 if d else -1
            last_h.append(unsqueeze(h[:, end], [0]))
            last_c.append(unsqueeze(c[:, end], [0]))
            outs.append(h)
        seq = outs[0] if dirs == 1 else concat(outs, axis=2)
        if dropout_prob and k < layers_n - 1:
            seq = dropout(seq, dropout_prob, is_test=is_test, seed=None if seed < 0 else seed,
                          dropout_implementation="upscale_in_train")
    return (transpose(seq, [1, 0, 2]), concat(last_h, axis=0), concat(last_c, axis=0))
