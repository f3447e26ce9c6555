"""A GRU forward step (ops/gru.py; gates and candidate each a sigmoid or a tanh; the reset
before the hidden product, `ExactStep`, or with linear_before_reset after it,
`ExactLbrStep`) as passes around NumPy's products and ``tanh`` calls: compiled where the
tier runs them (kernels/rnn_passes.py), otherwise NumPy calls that do the same operations
in the same order, so that a step's values never depend on which ran.

As for the LSTM (lstm_exact.py), an activation's clip and its sigmoid-from-tanh step are
per-column operands (`rnn.column_operands`), the operations `rnn.activation` makes column
by column; tests/kernels/test_rnn_tier.py compares the step compiled, its NumPy
stand-ins and the kernel without the tier, bit for bit.
"""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ..kernels.rnn_passes import rnn_source
from .compiled import compiled_kernel, run_compiled
from .rnn import PRE_SCALE, column_operands
from .spec import KernelContext

#: the activations whose gates these passes run
GATE_ACTS = ("sigmoid", "tanh")
_PASSES = ("gates_in", "gru_reset", "gates_in", "gru_update")
_LBR_PASSES = ("gru_lbr_gates_in", "gru_lbr_candidate", "gru_update")


def _operands(xp: Any, width: int, act: str, clip: bool, dtype: str) -> tuple:
    """(top, half, shift) of ``width`` columns of ``act``; no top without ``clip``."""
    top, half, shift = column_operands(xp, 0, width, [(0, width)] if act == "sigmoid"
                                       else [], dtype)
    if not clip:
        top = xp.asarray(np.full(width, np.inf, dtype))
    return top, half, shift


def state_update(xp: Any, g: Any, h: Any, out: Any, origin: bool) -> None:
    """out = h + u * (c~ - h), or c~ + u * (h - c~) in origin mode, from the activated
    gates g [B, 3H], in the order every GRU step makes it."""
    hid = h.shape[1]
    u, cand = g[:, :hid], g[:, 2 * hid:]
    base, other = (cand, h) if origin else (h, cand)
    xp.subtract(other, base, out=out)
    xp.multiply(out, u, out=out)
    xp.add(out, base, out=out)


def hidden_product(xp: Any, hw: Any, b_c: Any, product: Any) -> None:
    """A linear_before_reset step's hidden product [B, H]: the candidate's columns of hw =
    h @ [W_ur | W_c], plus the candidate's bias b_c (None: no bias)."""
    hid = product.shape[1]
    if b_c is None:
        xp.copyto(product, hw[:, 2 * hid:])
    else:
        xp.add(hw[:, 2 * hid:], b_c, out=product)


def add_reset_product(xp: Any, g: Any, product: Any, tmp: Any, scale: float) -> None:
    """A linear_before_reset step's candidate pre-activation g[:, 2H:] += r * product,
    times ``scale`` (a sigmoid candidate's pre-scale) where that is not 1."""
    hid = product.shape[1]
    xp.multiply(g[:, hid:2 * hid], product, out=tmp)
    if scale != 1.0:
        xp.multiply(tmp, scale, out=tmp)
    xp.add(g[:, 2 * hid:], tmp, out=g[:, 2 * hid:])


def _candidate_and_state(update: Any, xp: Any, g: Any, cand_ops: tuple, h: Any,
                         origin: bool, hidden: Any) -> None:
    """After NumPy's tanh of the candidate: its sigmoid-from-tanh columns, then the new
    state into ``hidden`` (the pass ``update``, else NumPy)."""
    _, half_c, shift_c = cand_ops
    cand = g[:, 2 * h.shape[1]:]
    if not run_compiled(update, lambda: (g, half_c, shift_c, h, int(origin), hidden)):
        xp.multiply(cand, half_c, out=cand)
        xp.add(cand, shift_c, out=cand)
        state_update(xp, g, h, hidden, origin)


class ExactStep:
    """One forward step: the gates g [B, 3H] activated, the reset state into ``reset``
    and the new state into ``hidden`` [B, H], from the state h [B, H] and the weights'
    pre-scaled parts w_ur [H, 2H] and w_c [H, H]."""

    def __init__(self, ctx: KernelContext, gate: str, cand: str, origin: bool, clip: bool):
        xp, dt = ctx.xp, ctx.input("Input").dtype
        b, _, width = ctx.input("Input").shape
        h = self.H = width // 3
        self.xp, self.origin = xp, origin
        self.gates_ops = _operands(xp, 2 * h, gate, clip, dt)
        self.cand_ops = _operands(xp, h, cand, clip, dt)
        self.hw = xp.empty((b, 2 * h), dt)
        self.product = xp.empty((b, h), dt)
        self.passes = [compiled_kernel(ctx, dt, partial(rnn_source, n, dt)) for n in _PASSES]

    @property
    def available(self) -> bool:
        """Whether the tier has the passes (not on a device, nor for another dtype)."""
        return all(p is not None for p in self.passes)

    def __call__(self, g: Any, h: Any, w_ur: Any, w_c: Any, reset: Any, hidden: Any) -> None:
        xp, H = self.xp, self.H
        (top, half, shift), (top_c, _, _) = self.gates_ops, self.cand_ops
        ur, cand = g[:, :2 * H], g[:, 2 * H:]
        xp.matmul(h, w_ur, out=self.hw)
        if not run_compiled(self.passes[0], lambda: (g, 0, self.hw, top)):
            xp.add(ur, self.hw, out=ur)
            xp.minimum(ur, top, out=ur)
        xp.tanh(ur, out=ur)
        if not run_compiled(self.passes[1], lambda: (g, half, shift, h, reset)):
            xp.multiply(ur, half, out=ur)
            xp.add(ur, shift, out=ur)
            xp.multiply(g[:, H:2 * H], h, out=reset)
        xp.matmul(reset, w_c, out=self.product)
        if not run_compiled(self.passes[2], lambda: (g, 2 * H, self.product, top_c)):
            xp.add(cand, self.product, out=cand)
            xp.minimum(cand, top_c, out=cand)
        xp.tanh(cand, out=cand)
        _candidate_and_state(self.passes[3], xp, g, self.cand_ops, h, self.origin, hidden)


class ExactLbrStep:
    """One forward step with linear_before_reset: the gates g [B, 3H] activated, the
    hidden product (+ the candidate's bias b_c) into ``product`` and the new state into
    ``hidden`` [B, H], from the state h [B, H] and the weight w_all [H, 3H] (the gates'
    part pre-scaled, the candidate's not: the candidate's pre-scale multiplies r *
    product)."""

    def __init__(self, ctx: KernelContext, gate: str, cand: str, origin: bool, clip: bool):
        xp, dt = ctx.xp, ctx.input("Input").dtype
        b, _, width = ctx.input("Input").shape
        h = self.H = width // 3
        self.xp, self.origin = xp, origin
        self.scale = PRE_SCALE[cand]   # the candidate's pre-scale: 0.5 or 1
        self.gates_ops = _operands(xp, 2 * h, gate, clip, dt)
        self.cand_ops = _operands(xp, h, cand, clip, dt)
        self.hw = xp.empty((b, 3 * h), dt)
        self.tmp = xp.empty((b, h), dt)
        self.no_bias = xp.zeros(h, dt)
        self.passes = [compiled_kernel(ctx, dt, partial(rnn_source, n, dt))
                       for n in _LBR_PASSES]

    @property
    def available(self) -> bool:
        """Whether the tier has the passes (not on a device, nor for another dtype)."""
        return all(p is not None for p in self.passes)

    def __call__(self, g: Any, h: Any, w_all: Any, b_c: Any, product: Any,
                 hidden: Any) -> None:
        xp, H, hw = self.xp, self.H, self.hw
        (top, half, shift), (top_c, _, _) = self.gates_ops, self.cand_ops
        ur, cand = g[:, :2 * H], g[:, 2 * H:]
        xp.matmul(h, w_all, out=hw)
        bias = self.no_bias if b_c is None else b_c
        if not run_compiled(self.passes[0], lambda: (g, hw, bias, int(b_c is not None),
                                                     top, product)):
            xp.add(ur, hw[:, :2 * H], out=ur)
            xp.minimum(ur, top, out=ur)
            hidden_product(xp, hw, b_c, product)
        xp.tanh(ur, out=ur)
        flags = 2 * int(self.scale != 1.0)
        if not run_compiled(self.passes[1], lambda: (g, half, shift, product, flags, top_c)):
            xp.multiply(ur, half, out=ur)
            xp.add(ur, shift, out=ur)
            add_reset_product(xp, g, product, self.tmp, self.scale)
            xp.minimum(cand, top_c, out=cand)
        xp.tanh(cand, out=cand)
        _candidate_and_state(self.passes[2], xp, g, self.cand_ops, h, self.origin, hidden)
