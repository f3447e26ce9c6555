"""The recurrent ops' elementwise passes compiled, around NumPy's own products and
``tanh``: for the LSTM (ops/lstm.py) the input's load into processing order, each forward
step's gates before and after tanh, the backward's per-step factors for the whole
sequence, and each backward step after its product; for the GRU (ops/gru.py) each forward
step's gates and candidate around tanh (reset before or after the hidden product), and
the backward's factors. The NumPy kernel
makes a ufunc call per operation over strided views of the gates (about ten over the
whole sequence for the factors, six per step); each pass here is one call that visits
every element once while it is in the cache.

Values are the NumPy kernel's, bit for bit: there is no sum and no transcendental
function in these passes (``tanh`` and the products stay NumPy's), so each element is
the same correctly rounded operations in the same order, in the arrays' dtype.

Arrays that the NumPy kernel reads through a processing-order view (``Steps.time_view``)
come here as the array itself and an ``order`` (`time_row`), so that every argument is
C-contiguous. These are plain Python functions; the tier compiles a module of their
source for one dtype (`rnn_source`).
"""
from __future__ import annotations

from functools import cache

import numpy as np

from .build import KernelSource, module_source, module_text

FLOAT = np.float32
ZERO = np.float32(0)
ONE = np.float32(1)
HALF = np.float32(0.5)

#: an activation's code (`derivative_of`)
SIGMOID, TANH, RELU, IDENTITY = 0, 1, 2, 3
ACT_CODES = {"sigmoid": SIGMOID, "tanh": TANH, "relu": RELU, "identity": IDENTITY}
#: an array's layout (`time_row`): processing order [T, B, K]; the op's [B, T, K] read
#: forward; the op's [B, T, K] read backwards in time
TIME_MAJOR, BATCH_MAJOR, BATCH_REVERSED = 0, 1, 2
#: what the compiled module's functions name besides NumPy and each other
_CONSTANTS = {"SIGMOID": SIGMOID, "TANH": TANH, "RELU": RELU, "TIME_MAJOR": TIME_MAJOR,
              "BATCH_MAJOR": BATCH_MAJOR}


def time_row(a, order, t, b):
    """Row ``b`` of processing step ``t`` of ``a`` laid out as ``order`` says."""
    if order == TIME_MAJOR:
        return a[t, b]
    if order == BATCH_MAJOR:
        return a[b, t]
    return a[b, a.shape[1] - 1 - t]


def derivative_of(y, act):
    """d act(x) / dx from the activated value ``y``, as rnn.derivative computes it."""
    if act == SIGMOID:
        return (ONE - y) * y
    if act == TANH:
        return ONE - y * y
    if act == RELU:
        return ONE if y > ZERO else ZERO
    return ONE


def _minimum(v, top):
    """``np.minimum(v, top)`` for a ``top`` that is never NaN: a NaN ``v`` stays."""
    return top if v > top else v


def lstm_load(x, order, bias, scale, frozen, flags, gates):
    """gates [T, B, G] = x in processing order, plus bias [G] when ``flags & 1``, times
    scale [G] when ``flags & 2``, zero where frozen [T, B] when ``flags & 4``."""
    steps, rows, width = gates.shape
    for t in range(steps):
        for b in range(rows):
            src, dst = time_row(x, order, t, b), gates[t, b]
            if (flags & 4) != 0 and frozen[t, b]:
                for j in range(width):
                    dst[j] = ZERO
                continue
            for j in range(width):
                v = src[j]
                if flags & 1:
                    v = v + bias[j]
                if flags & 2:
                    v = v * scale[j]
                dst[j] = v


def gates_in(g, lo, hw, top):
    """Gates before NumPy's tanh: g[:, lo:lo + W] = minimum(g[:, lo:lo + W] + hw [B, W],
    top [W]) with each column's top (`rnn.column_operands`): an LSTM's whole row of gates,
    a GRU's update and reset gates, or a GRU's candidate after its reset product."""
    rows, width = hw.shape
    for b in range(rows):
        gr, hr = g[b], hw[b]
        for j in range(width):
            gr[lo + j] = _minimum(gr[lo + j] + hr[j], top[j])


def lstm_cell(g, half, shift, c_prev, c):
    """A forward step's gates after NumPy's tanh: g = g * half + shift per column (a
    sigmoid column from tanh(x / 2), a tanh column unchanged), then the cell c [B, H] =
    f * c_prev + i * c~."""
    rows, width = g.shape
    h = width // 4
    for b in range(rows):
        gr, cr, pr = g[b], c[b], c_prev[b]
        for j in range(width):
            gr[j] = gr[j] * half[j] + shift[j]
        for j in range(h):
            cr[j] = gr[2 * h + j] * pr[j] + gr[h + j] * gr[j]


def lstm_peep_gates_in(g, hw, c_prev, peep_if, top):
    """A forward step's gates with peepholes before NumPy's tanh of columns 0:3H: g [B,
    4H] += hw; i and f (columns H:3H) + c_prev * peep_if[0] and [1]; columns 0:3H =
    minimum(., top [3H])."""
    rows, width = g.shape
    h = width // 4
    for b in range(rows):
        gr, hr, pr = g[b], hw[b], c_prev[b]
        for j in range(h):
            gr[j] = _minimum(gr[j] + hr[j], top[j])
        for j in range(h):
            gr[h + j] = _minimum((gr[h + j] + hr[h + j]) + pr[j] * peep_if[0, j], top[h + j])
            gr[2 * h + j] = _minimum((gr[2 * h + j] + hr[2 * h + j]) + pr[j] * peep_if[1, j],
                                     top[2 * h + j])
        for j in range(h):
            gr[3 * h + j] = gr[3 * h + j] + hr[3 * h + j]


def lstm_peep_cell(g, half, shift, c_prev, peep_o, top_o, c):
    """After NumPy's tanh of columns 0:3H: those * half + shift [3H], the cell c [B, H] =
    f * c_prev + i * c~, and the output gate o = minimum(o + c * peep_o, top_o) for NumPy's
    tanh next."""
    rows, width = g.shape
    h = width // 4
    for b in range(rows):
        gr, cr, pr = g[b], c[b], c_prev[b]
        for j in range(3 * h):
            gr[j] = gr[j] * half[j] + shift[j]
        for j in range(h):
            cv = gr[2 * h + j] * pr[j] + gr[h + j] * gr[j]
            cr[j] = cv
            gr[3 * h + j] = _minimum(gr[3 * h + j] + cv * peep_o[j], top_o[j])


def lstm_peep_out(g, half_o, shift_o, cell_act, hidden):
    """After NumPy's tanh of the output gate and of the cell (cell_act [B, H]): o = o *
    half_o + shift_o, hidden [B, H] = o * cell_act."""
    rows, width = g.shape
    h = width // 4
    for b in range(rows):
        gr, ar, hr = g[b], cell_act[b], hidden[b]
        for j in range(h):
            o = gr[3 * h + j] * half_o[j] + shift_o[j]
            gr[3 * h + j] = o
            hr[j] = o * ar[j]


def lstm_factors(gates, cells, c0, act_c, acts, p, k):
    """P = [i * cand'(c~), c~ * g'(i), c_prev * g'(f), act_c * g'(o)] [T, B, 4H] and K =
    cell'(act_c) * o [T, B, H] for every step, from the activated gates [T, B, 4H], the
    cells [T, B, H] (c_prev: c0 [B, H] at the first step) and their activations act_c;
    ``acts`` = 100 * gate + 10 * cell + candidate (`ACT_CODES`)."""
    steps, rows, width = gates.shape
    h = width // 4
    gate, cell, cand = acts // 100, acts // 10 % 10, acts % 10
    for t in range(steps):
        for b in range(rows):
            g, pr, kr, ar = gates[t, b], p[t, b], k[t, b], act_c[t, b]
            prev = c0[b] if t == 0 else cells[t - 1, b]
            for j in range(h):
                pr[j] = derivative_of(g[j], cand) * g[h + j]
                pr[h + j] = derivative_of(g[h + j], gate) * g[j]
                pr[2 * h + j] = derivative_of(g[2 * h + j], gate) * prev[j]
                pr[3 * h + j] = derivative_of(g[3 * h + j], gate) * ar[j]
                kr[j] = derivative_of(ar[j], cell) * g[3 * h + j]


def gru_reset(g, half, shift, h_prev, reset):
    """After NumPy's tanh of the gates: g[:, :2H] = g * half + shift [2H], and reset [B,
    H] = r * h_prev."""
    rows, h = reset.shape
    for b in range(rows):
        gr, hp, rr = g[b], h_prev[b], reset[b]
        for j in range(2 * h):
            gr[j] = gr[j] * half[j] + shift[j]
        for j in range(h):
            rr[j] = gr[h + j] * hp[j]


def gru_update(g, half, shift, h_prev, origin, hidden):
    """After NumPy's tanh of the candidate: c~ = c~ * half + shift [H], then hidden [B,
    H] = h + u * (c~ - h), or with ``origin`` c~ + u * (h - c~), in NumPy's order."""
    rows, h = hidden.shape
    for b in range(rows):
        gr, hp, out = g[b], h_prev[b], hidden[b]
        for j in range(h):
            c = gr[2 * h + j] * half[j] + shift[j]
            gr[2 * h + j] = c
            base, other = (c, hp[j]) if origin else (hp[j], c)
            out[j] = (other - base) * gr[j] + base


def gru_lbr_gates_in(g, hw, bias, flags, top, product):
    """A linear_before_reset step's gates before NumPy's tanh, from the product hw [B, 3H]
    = h_prev @ [W_ur | W_c]: g[:, :2H] = minimum(g[:, :2H] + hw[:, :2H], top [2H]), and
    the hidden product [B, H] = hw[:, 2H:], + bias [H] when ``flags & 1``."""
    rows, h = product.shape
    for b in range(rows):
        gr, hr, pr = g[b], hw[b], product[b]
        for j in range(2 * h):
            gr[j] = _minimum(gr[j] + hr[j], top[j])
        for j in range(h):
            pr[j] = hr[2 * h + j] + bias[j] if flags & 1 else hr[2 * h + j]


def gru_lbr_candidate(g, half, shift, product, flags, top):
    """After NumPy's tanh of a linear_before_reset step's gates: g[:, :2H] = g * half +
    shift [2H], then the candidate c~ = minimum(c~ + (r * product) [* 0.5 when ``flags &
    2``: a sigmoid candidate's pre-scale], top [H]) for NumPy's tanh next."""
    rows, h = product.shape
    for b in range(rows):
        gr, pr = g[b], product[b]
        for j in range(2 * h):
            gr[j] = gr[j] * half[j] + shift[j]
        for j in range(h):
            v = gr[h + j] * pr[j]
            if flags & 2:
                v = v * HALF
            gr[2 * h + j] = _minimum(gr[2 * h + j] + v, top[j])


def gru_factors(gates, h_prev, resets, acts, flags, p, keep):
    """The GRU backward's factors for every step from its activated gates [T, B, 3H] (u,
    r, c~), the previous states h_prev [T, B, H] and BatchResetHiddenPrev [T, B, H]: keep
    [T, B, H] = 1 - u; with take = 1 - u in origin mode (``flags & 1``), else u, P [T, B,
    4H] = [u' * +-(c~ - h), r' * h, c~' * take] or, with linear_before_reset (``flags &
    2``), [u' * +-(c~ - h), r' * P_c * N, P_c * r, P_c] where P_c = c~' * take; ``acts`` =
    10 * gate + candidate (`ACT_CODES`). The order of rnn's NumPy passes, element by
    element."""
    steps, rows, width = gates.shape
    h = width // 3
    gate, cand = acts // 10, acts % 10
    for t in range(steps):
        for b in range(rows):
            g, hp, n, pr, kp = gates[t, b], h_prev[t, b], resets[t, b], p[t, b], keep[t, b]
            for j in range(h):
                u, r, c = g[j], g[h + j], g[2 * h + j]
                other = ONE - u
                kp[j] = other
                pc = derivative_of(c, cand) * (other if flags & 1 else u)
                pr[j] = derivative_of(u, gate) * ((hp[j] - c) if flags & 1 else (c - hp[j]))
                if flags & 2:
                    pr[h + j] = derivative_of(r, gate) * pc * n[j]
                    pr[2 * h + j] = pc * r
                    pr[3 * h + j] = pc
                else:
                    pr[h + j] = derivative_of(r, gate) * hp[j]
                    pr[2 * h + j] = pc


def _add_row(dst, src):
    for j in range(dst.shape[0]):
        dst[j] = dst[j] + src[j]


def lstm_grad_step(t, flags, orders, dh, dh_in, dc_in, k, p, gates, carry, peep_o, peep_if,
                   dc, dg):
    """One backward step after its product dh [B, H] (= dG[t + 1] @ W^T): dh += dh_in[t]
    when ``flags & 1``; dc = dh * K[t], + carry when ``flags & 2``, + dc_in[t] when
    ``flags & 4``; dG[t] = (P[t] * (dc, dc, dc, dh)), the output gate's first; with
    peepholes (``flags & 8``) dc += dG_o * peep_o before dG's other gates; carry = dc * f
    (+ dG_i * peep_if[0] + dG_f * peep_if[1] with peepholes). ``orders``: the layouts of
    dh_in, dc_in and dG, 3 bits each (`time_row`)."""
    rows, h = dh.shape
    for b in range(rows):
        d, c, cr = dh[b], dc[b], carry[b]
        kr, pr, gr = k[t, b], p[t, b], gates[t, b]
        gd = time_row(dg, orders >> 6, t, b)
        if flags & 1:
            _add_row(d, time_row(dh_in, orders & 7, t, b))
        for j in range(h):
            c[j] = d[j] * kr[j]
        if flags & 2:
            _add_row(c, cr)
        if flags & 4:
            _add_row(c, time_row(dc_in, (orders >> 3) & 7, t, b))
        for j in range(h):
            gd[3 * h + j] = d[j] * pr[3 * h + j]
        if flags & 8:
            for j in range(h):
                c[j] = c[j] + gd[3 * h + j] * peep_o[j]
        for j in range(h):
            v = c[j]
            gd[j] = pr[j] * v
            gd[h + j] = pr[h + j] * v
            gd[2 * h + j] = pr[2 * h + j] * v
            cr[j] = v * gr[2 * h + j]
        if flags & 8:
            for j in range(h):
                cr[j] = cr[j] + gd[h + j] * peep_if[0, j]
                cr[j] = cr[j] + gd[2 * h + j] * peep_if[1, j]


_FUNCTIONS = (time_row, derivative_of, _minimum, _add_row, lstm_load, gates_in, lstm_cell,
              lstm_peep_gates_in, lstm_peep_cell, lstm_peep_out, lstm_factors,
              lstm_grad_step, gru_reset, gru_update, gru_lbr_gates_in, gru_lbr_candidate,
              gru_factors)
#: each entry point's arguments: a digit for a float array of that rank, i for an int, m
#: for the bool mask [T, B]; with the shapes the compiling call's examples need (4H
#: columns for H): G an LSTM's gates [T, B, 4H], g one step's [B, 4H], v a row of 4H,
#: U a GRU's gates [T, B, 3H], P its factors [T, B, 4H], u one step's gates [B, 3H]
_ARGS = {"lstm_load": "3i11mi3", "gates_in": "gi2v", "lstm_cell": "gvv22",
         "lstm_peep_gates_in": "gg22v", "lstm_peep_cell": "gvv2112",
         "lstm_peep_out": "g1122", "lstm_factors": "G323iG3",
         "lstm_grad_step": "iii2333GG2122G", "gru_factors": "U33iiP3",
         "gru_reset": "uvv22", "gru_update": "uvv2i2", "gru_lbr_gates_in": "uuviv2",
         "gru_lbr_candidate": "uvv2iv"}


@cache
def rnn_source(function: str, dtype: str) -> KernelSource:
    """One of the passes over C-contiguous arrays of ``dtype``."""
    def kind(k: str) -> tuple:
        if k == "i":
            return ("scalar", "int64")
        if k == "m":
            return ("array", "bool", 2)
        if k == "G":
            return ("array", dtype, 3, "C", (2, 2, 8))
        if k in "UP":   # a GRU's gates [T, B, 3H], its factors [T, B, 4H]
            return ("array", dtype, 3, "C", (2, 2, 6 if k == "U" else 8))
        if k == "u":    # a GRU step's gates [B, 3H]
            return ("array", dtype, 2, "C", (2, 6))
        if k == "g":
            return ("array", dtype, 2, "C", (2, 8))
        if k == "v":
            return ("array", dtype, 1, "C", (8,))
        return ("array", dtype, int(k))
    text = module_source(dtype, _CONSTANTS, _FUNCTIONS) + \
        f"\n\nFLOAT = np.{dtype}\nZERO = FLOAT(0)\nONE = FLOAT(1)\nHALF = FLOAT(0.5)\n"
    every = [f.__name__ for f in _FUNCTIONS]
    return KernelSource("rnn", module_text(text, every), function,
                        tuple(kind(k) for k in _ARGS[function]))
