"""An LSTM forward step (ops/lstm.py) whose gates are each a sigmoid or a tanh, as passes
around NumPy's product and ``tanh`` calls: compiled where the tier runs them
(kernels/rnn_passes.py), and otherwise NumPy calls that do the same operations in the
same order, so that a step's values never depend on which ran.

The gate activation's clip and its sigmoid-from-tanh step are per-column operands
(`rnn.column_operands`): the minimum with ``top`` before tanh, the product with ``half``
and the sum with ``shift`` after it, which leave a tanh column unchanged. These are the
operations `rnn.activation` makes, column by column, so the values are the NumPy
kernel's bit for bit (tests/kernels/test_rnn_tier.py compares all three: this step
compiled, its NumPy stand-ins, and the kernel without the tier).
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from ..kernels.rnn_passes import rnn_source
from .compiled import compiled_kernel, run_compiled
from .rnn import column_operands
from .spec import KernelContext

#: the activations whose gates these passes run
GATE_ACTS = ("sigmoid", "tanh")


def _sigmoid_spans(spans: list[tuple[int, int, str]]) -> list[tuple[int, int]]:
    return [(a, b) for a, b, act in spans if act == "sigmoid"]


def cell_update(xp: Any, g: Any, c_prev: Any, c: Any, tmp: Any) -> None:
    """c = f * c_prev + i * c~ from the activated gates g [B, 4H], in the order every LSTM
    step makes it (``tmp`` [B, H]: scratch)."""
    h = c.shape[1]
    xp.multiply(g[:, 2 * h:3 * h], c_prev, out=c)
    xp.multiply(g[:, h:2 * h], g[:, :h], out=tmp)
    xp.add(c, tmp, out=c)


class ExactStep:
    """One forward step after the product ``hw = h_prev @ W``: the gates activated in g
    [B, 4H], the cell c and the hidden state h [B, H]. ``cell`` is the op's cell
    activation (``cell(c, out)``, into ``cell_out``)."""

    def __init__(self, ctx: KernelContext, gate: str, cand: str, peep: bool,
                 cell: Callable[[Any, Any], Any], cell_out: Any):
        xp, dt = ctx.xp, ctx.input("Input").dtype
        b, _, width = ctx.input("Input").shape
        h = self.H = width // 4
        self.xp, self.peep, self.cell, self.cell_out = xp, peep, cell, cell_out
        self.tmp = xp.empty((b, h), dt)
        self.pf = xp.empty((b, 2, h), dt)
        self.operands: tuple[tuple[Any, Any, Any], ...]
        names: tuple[str, ...]
        if peep:   # tanh over columns 0:3H, then over the output gate once c is known
            self.operands = (
                column_operands(xp, 0, 3 * h, _sigmoid_spans([(0, h, cand),
                                                               (h, 3 * h, gate)]), dt),
                column_operands(xp, 0, h, _sigmoid_spans([(0, h, gate)]), dt))
            names = ("lstm_peep_gates_in", "lstm_peep_cell", "lstm_peep_out")
        else:      # one tanh over whole rows of gates
            self.operands = (column_operands(xp, 0, 4 * h, _sigmoid_spans(
                [(0, h, cand), (h, 4 * h, gate)]), dt),)
            names = ("gates_in", "lstm_cell")
        self.passes = [compiled_kernel(ctx, dt, partial(rnn_source, n, dt)) for n in names]

    @property
    def available(self) -> bool:
        """Whether the tier has the passes (not on a device, nor for another dtype)."""
        return all(p is not None for p in self.passes)

    def __call__(self, g: Any, hw: Any, peep: tuple[Any, Any] | None, c_prev: Any, c: Any,
                 h: Any) -> None:
        if peep is None:
            self._whole_rows(g, hw, c_prev, c, h)
        else:
            self._with_peepholes(g, hw, peep, c_prev, c, h)

    def _whole_rows(self, g: Any, hw: Any, c_prev: Any, c: Any, h: Any) -> None:
        xp, H = self.xp, self.H
        top, half, shift = self.operands[0]
        if not run_compiled(self.passes[0], lambda: (g, 0, hw, top)):
            xp.add(g, hw, out=g)
            xp.minimum(g, top, out=g)
        xp.tanh(g, out=g)
        if not run_compiled(self.passes[1], lambda: (g, half, shift, c_prev, c)):
            xp.multiply(g, half, out=g)
            xp.add(g, shift, out=g)
            cell_update(xp, g, c_prev, c, self.tmp)
        xp.multiply(g[:, 3 * H:], self.cell(c, self.cell_out), out=h)

    def _with_peepholes(self, g: Any, hw: Any, peep: tuple[Any, Any], c_prev: Any, c: Any,
                        h: Any) -> None:
        xp, H = self.xp, self.H
        (top, half, shift), (top_o, half_o, shift_o) = self.operands
        peep_if, peep_o = peep
        front, o = g[:, :3 * H], g[:, 3 * H:]
        if not run_compiled(self.passes[0], lambda: (g, hw, c_prev, peep_if, top)):
            xp.add(g, hw, out=g)
            i_f = g[:, H:3 * H].reshape(-1, 2, H)
            xp.add(i_f, xp.multiply(c_prev.reshape(-1, 1, H), peep_if, out=self.pf), out=i_f)
            xp.minimum(front, top, out=front)
        xp.tanh(front, out=front)
        if not run_compiled(self.passes[1], lambda: (g, half, shift, c_prev, peep_o, top_o,
                                                     c)):
            xp.multiply(front, half, out=front)
            xp.add(front, shift, out=front)
            cell_update(xp, g, c_prev, c, self.tmp)
            xp.add(o, xp.multiply(c, peep_o, out=self.tmp), out=o)
            xp.minimum(o, top_o, out=o)
        xp.tanh(o, out=o)
        act_c = self.cell(c, self.cell_out)
        if not run_compiled(self.passes[2], lambda: (g, half_o, shift_o, act_c, h)):
            xp.multiply(o, half_o, out=o)
            xp.add(o, shift_o, out=o)
            xp.multiply(o, act_c, out=h)
