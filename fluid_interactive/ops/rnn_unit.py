"""One step of a recurrent cell, for cells written by hand: ``lstm_unit`` and ``gru_unit``.

``lstm_unit``: X [B, 4D] (the projection of [x_t, h_{t-1}], gates in Paddle's lstm_unit
order i, f, o, g) and C_prev [B, D] give

    i, f, o = sigmoid(X_i), sigmoid(X_f + forget_bias), sigmoid(X_o);  g = tanh(X_g)
    C = f * C_prev + i * g;  H = o * tanh(C)

``gru_unit``: one step of ``gru`` (see `gru.py`) on Input [B, 3D], HiddenPrev [B, D],
Weight [D, 3D] (in Paddle's layout, as gru's) and Bias [1, 3D]: Gate [B, 3D] (u, r, c~
activated), ResetHiddenPrev (r * h) and Hidden [B, D]. It runs the ``gru`` kernels with
T = 1, so both ops compute the same step the same way, except that, as Paddle's gru_unit
kernel, it does not clip the sigmoids' inputs (gru does); like Paddle's, its gradient
flows from Hidden only.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .gru import backward_kernel, forward_kernel, weight_from_blocks
from .registry import get_spec, register
from .rnn import check_activations, check_param, check_step, new_or
from .spec import (
    GradContext,
    InferContext,
    KernelContext,
    OpSpec,
    TensorType,
    emit_default_grad,
    slots,
)
from .value_layouts import register_layout_change

# --- lstm_unit ----------------------------------------------------------------------------------


def _lstm_unit_infer(ctx: InferContext) -> None:
    x, c = check_step(ctx, "X", "C_prev", 4, "lstm_unit")
    ctx.set_output("C", c.shape, x.dtype)
    ctx.set_output("H", c.shape, x.dtype)


def _lstm_gates(xp: Any, x: Any, d: int, forget_bias: float) -> Any:
    """[i, f, o, g] activated, in a new array."""
    a = xp.multiply(x, 0.5)
    if forget_bias:
        xp.add(a[:, d:2 * d], 0.5 * forget_bias, out=a[:, d:2 * d])
    xp.multiply(a[:, 3 * d:], 2.0, out=a[:, 3 * d:])
    xp.tanh(a, out=a)
    xp.multiply(a[:, :3 * d], 0.5, out=a[:, :3 * d])
    xp.add(a[:, :3 * d], 0.5, out=a[:, :3 * d])
    return a


def _lstm_unit_kernel(ctx: KernelContext):
    xp, d = ctx.xp, ctx.input("C_prev").shape[1]
    fb = float(ctx.attrs["forget_bias"])
    out_c, out_h = ctx.buffer("C"), ctx.buffer("H")

    def fn(x, c_prev):
        a = _lstm_gates(xp, x, d, fb)
        c = xp.multiply(a[:, d:2 * d], c_prev, out=out_c)
        c += a[:, :d] * a[:, 3 * d:]
        h = xp.tanh(c, out=out_h)
        return c, xp.multiply(h, a[:, 2 * d:3 * d], out=h)
    return fn


def _lstm_unit_grad(g: GradContext) -> None:
    dc, dh = g.flowing("C"), g.flowing("H")
    if (dc is None and dh is None) or not (g.wants("X") or g.wants("C_prev")):
        return
    inputs = {"X": g.input("X"), "C_prev": g.input("C_prev"), "C": g.output("C")}
    if dc is not None:
        inputs["C@GRAD"] = [dc]
    if dh is not None:
        inputs["H@GRAD"] = [dh]
    g.emit("lstm_unit_grad", inputs, {"X@GRAD": [n for n in g.in_grad("X") if n],
                                      "C_prev@GRAD": [n for n in g.in_grad("C_prev") if n]},
           g.attrs)


def _lstm_unit_grad_kernel(ctx: KernelContext):
    """dC_total = dC + dH * o * tanh'(C); d[i, f, o, g] through each gate's derivative."""
    xp, d = ctx.xp, ctx.input("C_prev").shape[1]
    fb = float(ctx.attrs["forget_bias"])
    has_dc, has_dh = ctx.has_input("C@GRAD"), ctx.has_input("H@GRAD")
    want_x, want_c = ctx.has_output("X@GRAD"), ctx.has_output("C_prev@GRAD")
    out_x, out_c = ctx.buffer("X@GRAD"), ctx.buffer("C_prev@GRAD")

    def fn(x, c_prev, c, *grads):
        dc_in = grads[0] if has_dc else None
        dh = grads[-1] if has_dh else xp.zeros_like(c)
        a = _lstm_gates(xp, x, d, fb)
        i, f, o, gg = a[:, :d], a[:, d:2 * d], a[:, 2 * d:3 * d], a[:, 3 * d:]
        tc = xp.tanh(c)
        dc = dh * o * (1 - tc * tc)
        if dc_in is not None:
            dc += dc_in
        dx = new_or(out_x, xp, x.shape, x.dtype)
        xp.multiply(dc * gg, i * (1 - i), out=dx[:, :d])
        xp.multiply(dc * c_prev, f * (1 - f), out=dx[:, d:2 * d])
        xp.multiply(dh * tc, o * (1 - o), out=dx[:, 2 * d:3 * d])
        xp.multiply(dc * i, 1 - gg * gg, out=dx[:, 3 * d:])
        res = ([dx] if want_x else []) + ([xp.multiply(dc, f, out=out_c)] if want_c else [])
        return res[0] if len(res) == 1 else tuple(res)
    return fn


def _lstm_unit_grad_infer(ctx: InferContext) -> None:
    ctx.set_output("X@GRAD", ctx.input("X").shape, ctx.input("X").dtype)
    ctx.set_output("C_prev@GRAD", ctx.input("C_prev").shape, ctx.input("C_prev").dtype)


register(OpSpec("lstm_unit", slots("X", "C_prev"), slots("C", "H"), _lstm_unit_infer,
                _lstm_unit_kernel, _lstm_unit_grad, attrs={"forget_bias": 0.0},
                doc="One LSTM step: X [B, 4D] (gates i, f, o, g) and C_prev [B, D] give "
                    "C = f * C_prev + i * g and H = o * tanh(C)."))
register(OpSpec("lstm_unit_grad", slots("X", "C_prev", "C", "C@GRAD?", "H@GRAD?"),
                slots("X@GRAD?", "C_prev@GRAD?"), _lstm_unit_grad_infer,
                _lstm_unit_grad_kernel, attrs={"forget_bias": 0.0}))


# --- gru_unit: the gru kernels with T = 1 ------------------------------------------------------

_GRU_UNIT_ATTRS = {"gate_activation": "sigmoid", "activation": "tanh", "origin_mode": False}
_GRU_SLOTS = {"Input": "Input", "HiddenPrev": "H0", "Weight": "Weight", "Bias": "Bias"}


def _gru_unit_infer(ctx: InferContext) -> None:
    x, h = check_step(ctx, "Input", "HiddenPrev", 3, "gru_unit")
    d = h.shape[1]
    check_param(ctx, "Weight", (d, 3 * d), x.dtype, "gru_unit")
    check_param(ctx, "Bias", (1, 3 * d), x.dtype, "gru_unit")
    check_activations(ctx, ("gate_activation", "activation"), "gru_unit")
    ctx.set_output("Gate", (x.shape[0], 3 * d), x.dtype)
    ctx.set_output("ResetHiddenPrev", h.shape, x.dtype)
    ctx.set_output("Hidden", h.shape, x.dtype)


def _gru_attrs(ctx: KernelContext) -> dict:
    return dict(get_spec("gru").attrs, **ctx.attrs)


def _one_step(ctx: KernelContext, spec_name: str, kernel: Callable, in_types: dict,
              out_types: dict, buffers: dict) -> Any:
    """``kernel`` of op ``spec_name`` (gru's or gru_grad's) for one step, sigmoids
    unclipped; its compiled passes, if any, are the plan's (its ``state``)."""
    context = KernelContext(get_spec(spec_name), _gru_attrs(ctx), ctx.xp, in_types,
                            out_types, buffers, state=ctx.state)
    return kernel(context, clip=False)


def _step_view(a: Any) -> Any:
    return None if a is None else a.reshape(1, *a.shape)


def _gru_unit_kernel(ctx: KernelContext):
    b, g = ctx.input("Input").shape
    dt = ctx.input("Input").dtype
    ins = {_GRU_SLOTS[s]: [TensorType((b, 1, g), dt) if s == "Input" else ctx.input(s)]
           for s in _GRU_SLOTS if ctx.has_input(s)}
    step = TensorType((1, b, g // 3), dt)
    outs = {"Hidden": [TensorType((b, 1, g // 3), dt)],
            "BatchGate": [TensorType((1, b, g), dt)], "BatchResetHiddenPrev": [step],
            "BatchHidden": [step]}
    bufs = {"BatchGate": [_step_view(ctx.buffer("Gate"))],
            "BatchResetHiddenPrev": [_step_view(ctx.buffer("ResetHiddenPrev"))],
            "BatchHidden": [_step_view(ctx.buffer("Hidden"))]}
    fn = _one_step(ctx, "gru", forward_kernel, ins, outs, bufs)

    def unit(x, *rest):
        _, gates, resets, hids = fn(x.reshape(b, 1, g), *rest)
        return gates[0], resets[0], hids[0]
    return unit


def _gru_unit_grad(g: GradContext) -> None:
    if g.flowing("Hidden") is None:
        return
    emit_default_grad(g, uses=("HiddenPrev", "Weight", "Gate", "ResetHiddenPrev", "Hidden"),
                      grad_type="gru_unit_grad",
                      in_slots=("Input", "HiddenPrev", "Weight", "Bias"),
                      out_slots=("Hidden",))


def _gru_unit_grad_infer(ctx: InferContext) -> None:
    h, w = ctx.input("HiddenPrev"), ctx.input("Weight")
    ctx.set_output("Input@GRAD", (h.shape[0], w.shape[1]), h.dtype)
    ctx.set_output("HiddenPrev@GRAD", h.shape, h.dtype)
    ctx.set_output("Weight@GRAD", w.shape, w.dtype)
    ctx.set_output("Bias@GRAD", (1, w.shape[1]), w.dtype)


def _gru_unit_grad_kernel(ctx: KernelContext):
    b, d = ctx.input("HiddenPrev").shape
    dt = ctx.input("HiddenPrev").dtype
    step = [TensorType((1, b, d), dt)]
    ins = {"H0": [ctx.input("HiddenPrev")], "Weight": [ctx.input("Weight")],
           "BatchGate": [TensorType((1, b, 3 * d), dt)], "BatchResetHiddenPrev": step,
           "BatchHidden": step, "Hidden@GRAD": [TensorType((b, 1, d), dt)]}
    wanted = [s for s in ("Input", "HiddenPrev", "Weight", "Bias")
              if ctx.has_output(s + "@GRAD")]
    outs, bufs = {}, {}
    for s in wanted:
        name = _GRU_SLOTS[s] + "@GRAD"
        outs[name] = ctx.out_slots[s + "@GRAD"]
        buf = ctx.buffer(s + "@GRAD")
        bufs[name] = [buf.reshape(b, 1, 3 * d) if s == "Input" and buf is not None else buf]
    if "Input" in wanted:
        outs["Input@GRAD"] = [TensorType((b, 1, 3 * d), dt)]
    fn = _one_step(ctx, "gru_grad", backward_kernel, ins, outs, bufs)

    def unit(h_prev, w, gate, reset, hidden, dhidden):
        res = fn(h_prev, w, gate[None], reset[None], hidden[None], dhidden.reshape(b, 1, d))
        res = list(res) if isinstance(res, tuple) else [res]
        if "Input" in wanted:
            res[0] = res[0].reshape(b, 3 * d)
        return res[0] if len(res) == 1 else tuple(res)
    return unit


register(OpSpec("gru_unit", slots("Input", "HiddenPrev", "Weight", "Bias?"),
                slots("Gate", "ResetHiddenPrev", "Hidden"), _gru_unit_infer,
                _gru_unit_kernel, _gru_unit_grad, attrs=_GRU_UNIT_ATTRS,
                doc="One GRU step (gru's formula) on Input [B, 3D] and HiddenPrev [B, D]: "
                    "Gate [B, 3D] (u, r, c~), ResetHiddenPrev (r * h), Hidden [B, D]."))
register(OpSpec("gru_unit_grad",
                slots("HiddenPrev", "Weight", "Gate", "ResetHiddenPrev", "Hidden",
                      "Hidden@GRAD"),
                slots("Input@GRAD?", "HiddenPrev@GRAD?", "Weight@GRAD?", "Bias@GRAD?"),
                _gru_unit_grad_infer, _gru_unit_grad_kernel, attrs=_GRU_UNIT_ATTRS))
# Weights saved before Paddle's layout (value_layouts.py's version 1) held [W_ur | W_c].
register_layout_change("gru_unit", "Weight", 2, weight_from_blocks)
