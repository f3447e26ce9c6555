"""Export rules of the one-step cells written by hand (`ops/rnn_unit.py`): ``gru_unit`` and
``lstm_unit`` as the elementwise nodes of their formulas.

ONNX's GRU and LSTM nodes run whole sequences and give neither the activated gates nor
r * h, which ``gru_unit`` returns; a cell inside a `DynamicRNN` or `StaticRNN` runs one
step per iteration of the Loop its network exports as, so plain MatMul, Split, Sigmoid,
Tanh, Mul and Add nodes state each step exactly, every output included. ``gru_unit``'s
Weight [D, 3D] is in Paddle's layout (`ops/gru.py`): W_ur [D, 2D] is its first 2D*D values,
W_c [D, D] the rest, which Reshape, Split and Reshape nodes read out.
"""
from __future__ import annotations

from .export_registry import OpExport, export_rule

_ACTIVATIONS = {"sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "Relu", "identity": "Identity"}


def _activate(e: OpExport, attr: str, x: str) -> str:
    name = e.attrs[attr]
    if name not in _ACTIVATIONS:
        e.fail(f"has {attr}={name!r}; the ONNX export knows {', '.join(_ACTIVATIONS)}")
    return e.node(_ACTIVATIONS[name], [x])[0]


def _split(e: OpExport, x: str, sizes: list[int]) -> list[str]:
    outs = [e.tmp("part") for _ in sizes]
    return e.node("Split", [x, e.ints(sizes, "split")], outs, axis=1)


def _weight_parts(e: OpExport, w: str, d: int) -> list[str]:
    """W_ur [D, 2D] and W_c [D, D] of a Weight [D, 3D] in Paddle's layout."""
    flat = e.node("Reshape", [w, e.ints([-1], "shape")])[0]
    parts = e.node("Split", [flat, e.ints([2 * d * d, d * d], "split")],
                   [e.tmp("part"), e.tmp("part")], axis=0)
    return [e.node("Reshape", [part, e.ints([d, k * d], "shape")])[0]
            for part, k in zip(parts, (2, 1))]


@export_rule("gru_unit")
def _gru_unit(e: OpExport) -> None:
    """[u r] = act_g(x_ur + h W_ur + b_ur); c~ = act(x_c + (r * h) W_c + b_c);
    Hidden = h + u (c~ - h), or c~ + u (h - c~) with origin_mode."""
    h = e.input("HiddenPrev")
    d = e.shape(h)[1]
    x_ur, x_c = _split(e, e.input("Input"), [2 * d, d])
    if e.has_input("Bias"):
        b_ur, b_c = _split(e, e.input("Bias"), [2 * d, d])
        x_ur = e.node("Add", [x_ur, b_ur])[0]
        x_c = e.node("Add", [x_c, b_c])[0]
    w_ur, w_c = _weight_parts(e, e.input("Weight"), d)
    ur = _activate(e, "gate_activation",
                   e.node("Add", [x_ur, e.node("MatMul", [h, w_ur])[0]])[0])
    u, r = _split(e, ur, [d, d])
    rh = e.node("Mul", [r, h], [e.output("ResetHiddenPrev")])[0]
    c = _activate(e, "activation", e.node("Add", [x_c, e.node("MatMul", [rh, w_c])[0]])[0])
    e.node("Concat", [u, r, c], [e.output("Gate")], axis=1)
    start, toward = (c, h) if e.attrs["origin_mode"] else (h, c)
    step = e.node("Mul", [u, e.node("Sub", [toward, start])[0]])[0]
    e.node("Add", [start, step], [e.output("Hidden")])


@export_rule("lstm_unit")
def _lstm_unit(e: OpExport) -> None:
    """Gates i, f, o, g of X: C = sigmoid(f + forget_bias) C_prev + sigmoid(i) tanh(g);
    H = sigmoid(o) tanh(C)."""
    c_prev = e.input("C_prev")
    d = e.shape(c_prev)[1]
    i, f, o, g = _split(e, e.input("X"), [d] * 4)
    if e.attrs["forget_bias"]:
        f = e.node("Add", [f, e.scalar(float(e.attrs["forget_bias"]), c_prev, "forget_bias")])[0]
    kept = e.node("Mul", [e.node("Sigmoid", [f])[0], c_prev])[0]
    new = e.node("Mul", [e.node("Sigmoid", [i])[0], e.node("Tanh", [g])[0]])[0]
    c = e.node("Add", [kept, new], [e.output("C")])[0]
    e.node("Mul", [e.node("Sigmoid", [o])[0], e.node("Tanh", [c])[0]], [e.output("H")])
