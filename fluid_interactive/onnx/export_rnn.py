"""Export rules of the recurrent ops: ``lstm`` as ONNX ``LSTM`` and ``gru`` as ``GRU``.

Our ops take the input already projected ([B, T, 4H] or [B, T, 3H], batch-major) and keep
the gates in Paddle's order; ONNX's take [T, B, I] and project it themselves, with the
gates in its own order (LSTM i, o, f, c; GRU z, r, h). So the ONNX node gets the projected
input transposed, an input weight W that only reorders the gates (a permutation matrix),
and the recurrent weight R and the biases as initializers holding our parameters' current
values transposed, with their gates reordered (as PyTorch writes them: the import reads
them back as parameters). Lengths become
``sequence_lens``; Hidden is ONNX's Y, transposed back. ONNX has no counterpart of the
whole cell sequence (Cell), so a method that returns or reads it does not export.

GRU: the recurrent weight R is our Weight's two parts (Paddle's layout: `ops/gru.py`) side
by side, [W_ur | W_c], transposed. ONNX's update gate z keeps the old state (our
``origin_mode=True``). Our default,
``h = (1 - u) * h + u * c~``, exports with the update gate's pre-activation negated, since
1 - sigmoid(x) = sigmoid(-x); that needs a sigmoid gate activation.
"""
from __future__ import annotations

import numpy as np

from ..ops.gru import weight_to_blocks
from .export_registry import OpExport, export_rule

_ACTS = {"sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "Relu"}
#: For each ONNX LSTM gate (i, o, f, c), the block of our gates (c~, i, f, o) it is.
_LSTM_BLOCKS = (1, 3, 2, 0)


def _acts(e: OpExport, names: tuple[str, ...]) -> list[str]:
    out = []
    for name in names:
        act = e.attrs[name]
        if act not in _ACTS:
            e.fail(f"has {name}={act!r}; the ONNX export knows {', '.join(_ACTS)}")
        out.append(_ACTS[act])
    return out


def _columns(blocks: tuple[int, ...], h: int) -> list[int]:
    return [c for k in blocks for c in range(k * h, (k + 1) * h)]


def _time_major(e: OpExport) -> str:
    return e.node("Transpose", [e.input("Input")], perm=[1, 0, 2])[0]


def _optional_inputs(e: OpExport) -> list[str]:
    """sequence_lens, initial_h (and for LSTM initial_c) as ONNX wants them, '' if absent."""
    lens = e.node("Cast", [e.input("Lengths")], to=e.onnx_dtype("int32"))[0] \
        if e.has_input("Lengths") else ""
    states = [e.node("Unsqueeze", [e.input(s), e.ints([0])])[0] if e.has_input(s) else ""
              for s in ("H0", "C0") if s == "H0" or e.op.type == "lstm"]
    return [lens] + states


def _hidden_out(e: OpExport, y: str) -> None:
    """ONNX's Y [T, 1, B, H] -> our Hidden [B, T, H]."""
    seq = e.node("Squeeze", [y, e.ints([1])])[0]
    e.node("Transpose", [seq], [e.output("Hidden")], perm=[1, 0, 2])


def _state(e: OpExport, slot: str) -> np.ndarray:
    """The current value of the op's ``slot`` (a parameter)."""
    value = e.value(e.input(slot))
    if value is None:
        e.fail(f"takes a {slot} computed in the method; the ONNX export takes it as a "
               f"parameter (it writes the weights in ONNX's layout)")
    assert value is not None
    return value


@export_rule("lstm")
def _lstm(e: OpExport) -> None:
    x = e.input("Input")
    h = e.shape(x)[2] // 4
    dtype = e.dtype(x)
    acts = _acts(e, ("gate_activation", "candidate_activation", "cell_activation"))
    cols = _columns(_LSTM_BLOCKS, h)
    w = e.const(np.eye(4 * h)[cols][None], dtype, "W")
    r = e.initializer(_state(e, "Weight").T[cols][None], "R")
    b = peep = ""
    if e.has_input("Bias"):
        flat = _state(e, "Bias").reshape(-1)
        b = e.initializer(np.concatenate([flat[cols], np.zeros(4 * h, dtype)])[None], "B")
        if e.attrs["use_peepholes"]:   # ours W_ic, W_fc, W_oc; ONNX's i, o, f
            peep = e.initializer(flat[_columns((4, 6, 5), h)][None], "P")
    lens, h0, c0 = _optional_inputs(e)
    direction = "reverse" if e.attrs["is_reverse"] else "forward"
    y = e.node("LSTM", [_time_major(e), w, r, b, lens, h0, c0, peep],
               [e.tmp("y")], hidden_size=h, direction=direction, activations=acts)[0]
    _hidden_out(e, y)


@export_rule("gru")
def _gru(e: OpExport) -> None:
    x = e.input("Input")
    h = e.shape(x)[2] // 3
    dtype = e.dtype(x)
    acts = _acts(e, ("gate_activation", "activation"))
    origin, lbr = bool(e.attrs["origin_mode"]), bool(e.attrs["linear_before_reset"])
    if not origin and e.attrs["gate_activation"] != "sigmoid":
        e.fail("has origin_mode=False with a gate activation other than sigmoid, which "
               "ONNX's GRU cannot express (it keeps the old state by the update gate)")
    sign = np.ones(3 * h, dtype)
    if not origin:
        sign[:h] = -1.0            # z = 1 - u = sigmoid(-pre_u)
    w = e.const(np.diag(sign)[None], dtype, "W")
    r = e.initializer((weight_to_blocks(_state(e, "Weight")).T * sign[:, None])[None], "R")
    b = ""
    if e.has_input("Bias"):
        flat = _state(e, "Bias").reshape(-1)
        inside = np.arange(3 * h) >= 2 * h
        parts = [flat * sign * ~inside if lbr else flat * sign,
                 flat * inside if lbr else np.zeros(3 * h, dtype)]
        b = e.initializer(np.concatenate(parts).astype(dtype)[None], "B")
    lens, h0 = _optional_inputs(e)
    direction = "reverse" if e.attrs["is_reverse"] else "forward"
    y = e.node("GRU", [_time_major(e), w, r, b, lens, h0], [e.tmp("y")],
               hidden_size=h, direction=direction, activations=acts,
               linear_before_reset=int(lbr))[0]
    _hidden_out(e, y)
