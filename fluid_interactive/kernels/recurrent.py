"""Whole sequences of the fused recurrent cells (ops/lstm.py, ops/gru.py) in one compiled
call each way: one loop over the time steps around the recurrent matrix products, which
run BLAS from inside the loop (Numba's ``np.dot`` with an output, SciPy's BLAS), and the
elementwise work of each step in between. The NumPy kernels make one Python call per
step and ten to fifteen NumPy calls in it; here a sequence is one call.

These are plain Python functions (a test may run them uncompiled on a few values); the
tier compiles a module made of their source (`sequence_source`), preceded by the
constants and activations of one choice of dtype, activations and modes, which replace
the defaults below (Numba folds the branches not taken).

Values: each step does the NumPy step's arithmetic in the same order, rounding each
operation to the arrays' dtype as NumPy does, with two differences, so the results agree
within float rounding rather than bit for bit:

* ``tanh`` of float32 is a rational approximation (`tanh32`, within 4e-7 relative of the
  true value; NumPy's own is within 2e-7): a loop calling the C library's ``tanhf`` runs
  40 times slower than NumPy's SIMD ``tanh``, while this one vectorises and runs as fast.
  Float64 calls the C library's ``tanh``.
* the products run SciPy's BLAS, which may sum in another order than NumPy's.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

import numpy as np

from .build import KernelSource, function_source, module_text

# --- what a generated module defines for one choice (the defaults: float32, sigmoid) ----

HALF = np.float32(0.5)
ZERO = np.float32(0)
PEEP = False          # LSTM peepholes
ORIGIN = False        # GRU origin_mode: h_t = c~ + u * (h - c~)
LBR = False           # GRU linear_before_reset
SCALE_CAND = False    # linear_before_reset with a sigmoid candidate: r * N pre-scaled
CLIP = False          # sigmoids clip their input as Paddle's fused RNN kernels (SIGMOID_RANGE)

#: The range Paddle's fused RNN kernels (gru, lstm) clip a sigmoid's input to; its one-step
#: ops (gru_unit, lstm_unit) do not clip.
SIGMOID_RANGE = (-40.0, 13.0)
#: The top bound on a sigmoid's pre-activation halved (the form act_sigmoid takes). Only
#: the top bound needs applying: in the tanh form, any input below -40 already gives
#: exactly 0 (tanh(-20) is -1 in float32 and float64), as -40 itself does.
SIG_TOP = np.float32(SIGMOID_RANGE[1] / 2)

#: tanh32's clamp and coefficients: tanh(x) = x * P(x^2) / Q(x^2) on [-C, C], +-1 beyond
T_CLAMP = np.float32(7.90531110763549805)
T_TINY = np.float32(0.0004)
P13, P11, P9, P7, P5, P3, P1 = (np.float32(v) for v in (
    -2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
    5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
    4.89352455891786e-03))
Q6, Q4, Q2, Q0 = (np.float32(v) for v in (
    1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
    4.89352518554385e-03))


def tanh32(x):
    """tanh of a float32 without a library call (so that the loops vectorise): a
    rational function, clamped where tanh rounds to +-1; NaN stays NaN."""
    if x > T_CLAMP:
        x = T_CLAMP
    elif x < -T_CLAMP:
        x = -T_CLAMP
    x2 = x * x
    p = x2 * P13 + P11
    p = p * x2 + P9
    p = p * x2 + P7
    p = p * x2 + P5
    p = p * x2 + P3
    p = p * x2 + P1
    p = p * x
    q = x2 * Q6 + Q4
    q = q * x2 + Q2
    q = q * x2 + Q0
    return x if abs(x) < T_TINY else p / q


def tanh64(x):
    return math.tanh(x)


tanh = tanh32


def act_sigmoid(v):
    """A sigmoid gate from its pre-activation halved (the ops fold the 1/2 into their
    weights: rnn.PRE_SCALE), as NumPy computes it: 0.5 * tanh(v) + 0.5, v clipped at
    SIG_TOP first with CLIP (NaN stays NaN, as with np.minimum)."""
    if CLIP and v > SIG_TOP:
        v = SIG_TOP
    return tanh(v) * HALF + HALF


def act_tanh(v):
    return tanh(v)


def act_relu(v):
    """np.maximum(v, 0): NaN stays NaN, -0 gives +0."""
    return v if v > ZERO else (v if v != v else ZERO)


def act_identity(v):
    return v


def cell_sigmoid(c):
    """An LSTM's cell activation of c (not pre-scaled): sigmoid(c) as NumPy's kernel
    computes it, 0.5 * tanh(c * 0.5) + 0.5, c * 0.5 clipped as act_sigmoid's v."""
    v = c * HALF
    if CLIP and v > SIG_TOP:
        v = SIG_TOP
    return tanh(v) * HALF + HALF


def d_sigmoid(y):
    """The derivative of a sigmoid from its value, as NumPy's kernels compute it."""
    return (HALF + HALF - y) * y


def d_tanh(y):
    return HALF + HALF - y * y


def d_relu(y):
    return HALF + HALF if y > ZERO else ZERO


def d_identity(y):
    return HALF + HALF


gate = cand = cell = act_sigmoid
gate_d = cand_d = cell_d = d_sigmoid

# --- the LSTM ------------------------------------------------------------------------------


def lstm_forward(x, bias, scale, gates, ws, h0, c0, w, frozen, flags, hw, cells, hids,
                 hidden, cell_out):
    """Every step forward. x [B, T, 4H] the op's Input: the gates' input part, read when
    flags & 1 (else gates holds it already), with bias [4H] added (flags & 2) and times
    the pre-scale (flags & 4), zero at frozen positions; gates [T, B, 4H] (c~ i f o) in
    processing order, activated in place; ws [H, 4H] the pre-scaled weight; h0, c0 [B, H]
    the state before step 0; w [3, H] the pre-scaled peepholes; frozen [T, B] the padded
    positions (they keep the state); hw [B, 4H] scratch; cells, hids [T, B, H] c_t, h_t,
    also written to cell_out and hidden [B, T, H] in the op's order when flags & 16.
    Arrays in the op's order run backwards in time when flags & 8 (is_reverse).

    Each phase of a step is a loop nest of its own, each inner loop from 0 with offsets:
    LLVM vectorises those (one loop over the rows holding every phase ran 8x slower)."""
    T = gates.shape[0]
    B = gates.shape[1]
    H = gates.shape[2] // 4
    for t in range(T):
        tt = T - 1 - t if flags & 8 else t   # the step's position in the op's order
        h_prev = h0 if t == 0 else hids[t - 1]
        c_prev = c0 if t == 0 else cells[t - 1]
        np.dot(h_prev, ws, hw)
        g = gates[t]
        c = cells[t]
        h = hids[t]
        if flags & 1:
            _lstm_load(x, bias, scale, frozen[t], flags, tt, g, B, H)
        for b in range(B):
            for j in range(4 * H):
                g[b, j] = g[b, j] + hw[b, j]
        if PEEP:
            for b in range(B):
                for j in range(H):
                    g[b, H + j] = g[b, H + j] + c_prev[b, j] * w[0, j]
                    g[b, 2 * H + j] = g[b, 2 * H + j] + c_prev[b, j] * w[1, j]
        for b in range(B):
            for j in range(H):
                g[b, j] = cand(g[b, j])
            for j in range(2 * H if PEEP else 3 * H):
                g[b, H + j] = gate(g[b, H + j])
        for b in range(B):
            for j in range(H):
                c[b, j] = g[b, 2 * H + j] * c_prev[b, j] + g[b, H + j] * g[b, j]
        if PEEP:
            for b in range(B):
                for j in range(H):
                    g[b, 3 * H + j] = gate(g[b, 3 * H + j] + c[b, j] * w[2, j])
        for b in range(B):
            for j in range(H):
                h[b, j] = g[b, 3 * H + j] * cell(c[b, j])
        for b in range(B):
            if frozen[t, b]:
                for j in range(H):
                    c[b, j] = c_prev[b, j]
                    h[b, j] = h_prev[b, j]
        if flags & 16:
            for b in range(B):
                for j in range(H):
                    hidden[b, tt, j] = h[b, j]
                    cell_out[b, tt, j] = c[b, j]


def _lstm_load(x, bias, scale, frozen, flags, tt, g, B, H):
    """g = (x[:, tt] + bias) * scale, zero in frozen rows (as ops/lstm.py's _load)."""
    for b in range(B):
        for j in range(4 * H):
            v = x[b, tt, j]
            if flags & 2:
                v = v + bias[j]
            if flags & 4:
                v = v * scale[j]
            g[b, j] = ZERO if frozen[b] else v


def lstm_backward(dh_in, dc_in, cells, c0, gates, wt, w, flags, dh, carry, dgc, tc, xs, dg):
    """Every step back, from the last. dh_in, dc_in: the gradients flowing into Hidden and
    Cell (read when flags & 1, flags & 2), [T, B, H] in processing order, or as the op's
    [B, T, H] (flags & 4, flags & 8); cells [T, B, H] and gates [T, B, 4H] what the
    forward kept, c0 [B, H] the cell state before step 0; wt [4H, H] the weight
    transposed; w [3, H] the peepholes; dh, carry, tc, xs [B, H] and dgc [B, 4H] scratch
    (carry ends as the gradient of C0); dg the gates' gradients, [T, B, 4H] in processing
    order, or the op's Input@GRAD [B, T, 4H] (flags & 16). Arrays in the op's order run
    backwards in time when flags & 32 (is_reverse).

    A step's factors (the gates' derivatives times what they multiply, ops/lstm.py's P
    and K) are computed as it runs. Each loop reads few arrays: LLVM vectorises a loop
    only when the overlaps it must rule out at run time are few."""
    T = cells.shape[0]
    B = cells.shape[1]
    H = cells.shape[2]
    for t in range(T - 1, -1, -1):
        tt = T - 1 - t if flags & 32 else t   # the step's position in the op's order
        if t == T - 1:
            for b in range(B):
                for j in range(H):
                    dh[b, j] = ZERO
        else:
            np.dot(dgc, wt, dh)
        if flags & 1:
            for b in range(B):
                for j in range(H):
                    dh[b, j] = dh[b, j] + (dh_in[b, tt, j] if flags & 4 else dh_in[t, b, j])
        _lstm_gate_grads(dh, dc_in, cells[t], c0 if t == 0 else cells[t - 1], gates[t], w,
                         flags, t, tt, t == T - 1, carry, dgc, tc, xs, B, H)
        for b in range(B):
            for j in range(4 * H):
                if flags & 16:
                    dg[b, tt, j] = dgc[b, j]
                else:
                    dg[t, b, j] = dgc[b, j]


def _lstm_gate_grads(dh, dc_in, c, c_prev, g, w, flags, t, tt, last, carry, dgc, tc, xs,
                     B, H):
    """One step back after dh: the gates' gradients into dgc and the carry to the step
    before (ops/lstm.py's factors P and K, computed as it runs)."""
    for b in range(B):
        for j in range(H):
            tc[b, j] = cell(c[b, j])
    for b in range(B):
        for j in range(H):
            xs[b, j] = dh[b, j] * (cell_d(tc[b, j]) * g[b, 3 * H + j])
    if not last:
        for b in range(B):
            for j in range(H):
                xs[b, j] = xs[b, j] + carry[b, j]
    if flags & 2:
        for b in range(B):
            for j in range(H):
                xs[b, j] = xs[b, j] + (dc_in[b, tt, j] if flags & 8 else dc_in[t, b, j])
    for b in range(B):
        for j in range(H):
            dgc[b, 3 * H + j] = dh[b, j] * (gate_d(g[b, 3 * H + j]) * tc[b, j])
    if PEEP:
        for b in range(B):
            for j in range(H):
                xs[b, j] = xs[b, j] + dgc[b, 3 * H + j] * w[2, j]
    for b in range(B):
        for j in range(H):
            x = xs[b, j]
            dgc[b, j] = (cand_d(g[b, j]) * g[b, H + j]) * x
            dgc[b, H + j] = (gate_d(g[b, H + j]) * g[b, j]) * x
            dgc[b, 2 * H + j] = (gate_d(g[b, 2 * H + j]) * c_prev[b, j]) * x
    for b in range(B):
        for j in range(H):
            carry[b, j] = xs[b, j] * g[b, 2 * H + j]
    if PEEP:
        for b in range(B):
            for j in range(H):
                r = carry[b, j] + dgc[b, H + j] * w[0, j]
                carry[b, j] = r + dgc[b, 2 * H + j] * w[1, j]


# --- the GRU -------------------------------------------------------------------------------


def gru_forward(gates, w_ur, w_c, w_all, h0, b_c, frozen, flags, hw_all, hw_ur, tmp,
                resets, hids):
    """Every step forward. gates [T, B, 3H] (u r c~): the input's part, pre-scaled, in
    processing order, activated in place; w_ur [H, 2H], w_c [H, H] the pre-scaled
    weight's parts (w_all [H, 3H] the whole, with linear_before_reset); h0 [B, H]; b_c [H]
    the candidate's bias, added to the hidden product with linear_before_reset when
    flags & 1; frozen [T, B]; hw_all [B, 3H], hw_ur [B, 2H], tmp [B, H] scratch; resets
    [T, B, H] r * h (the hidden product, with linear_before_reset); hids [T, B, H]."""
    T = gates.shape[0]
    B = gates.shape[1]
    H = gates.shape[2] // 3
    for t in range(T):
        h_prev = h0 if t == 0 else hids[t - 1]
        g = gates[t]
        reset = resets[t]
        if LBR:
            np.dot(h_prev, w_all, hw_all)
            _gru_lbr_gates(g, hw_all, b_c, flags, reset, B, H)
        else:
            np.dot(h_prev, w_ur, hw_ur)
            for b in range(B):
                for j in range(2 * H):
                    g[b, j] = gate(g[b, j] + hw_ur[b, j])
            for b in range(B):
                for j in range(H):
                    reset[b, j] = g[b, H + j] * h_prev[b, j]
            np.dot(reset, w_c, tmp)
            for b in range(B):
                for j in range(H):
                    g[b, 2 * H + j] = g[b, 2 * H + j] + tmp[b, j]
        _gru_update(g, h_prev, frozen[t], hids[t], B, H)


def _gru_lbr_gates(g, hw, b_c, flags, hidden_product, B, H):
    """linear_before_reset: the gates u, r activated and the candidate's pre-activation
    += r * (the hidden product + its bias)."""
    for b in range(B):
        for j in range(2 * H):
            g[b, j] = gate(g[b, j] + hw[b, j])
    for b in range(B):
        for j in range(H):
            n = hw[b, 2 * H + j] + b_c[j] if flags & 1 else hw[b, 2 * H + j]
            hidden_product[b, j] = n
            x = g[b, H + j] * n
            if SCALE_CAND:
                x = x * HALF
            g[b, 2 * H + j] = g[b, 2 * H + j] + x


def _gru_update(g, h_prev, frozen, out, B, H):
    """The candidate activated and the new state; frozen rows keep the old one."""
    for b in range(B):
        for j in range(H):
            g[b, 2 * H + j] = cand(g[b, 2 * H + j])
    for b in range(B):
        for j in range(H):
            c = g[b, 2 * H + j]
            if ORIGIN:
                out[b, j] = (h_prev[b, j] - c) * g[b, j] + c
            else:
                out[b, j] = (c - h_prev[b, j]) * g[b, j] + h_prev[b, j]
    for b in range(B):
        if frozen[b]:
            for j in range(H):
                out[b, j] = h_prev[b, j]


def gru_backward(dh_in, p, keep, gates, w_ur_t, w_c_t, w_t, dh_seq, dh_next, drh, dgc,
                 dg_ur, dg_c, dg):
    """Every step back, from the last. dh_in [T, B, H] (any layout): the gradient flowing
    into Hidden in processing order; p [T, B, 4H] and keep [T, B, H] (any layout) the
    factors of ops/gru.py; gates [T, B, 3H]; w_ur_t [2H, H], w_c_t [H, H], w_t [3H, H] the weight's
    parts transposed; dh_seq [T, B, H] receives each step's dh; dh_next, drh [B, H],
    dgc [B, 3H], dg_ur [B, 2H] and dg_c [B, H] scratch (dh_next ends as the gradient of
    H0); dg [T, B, 3H] the gates' gradients."""
    T = keep.shape[0]
    B = keep.shape[1]
    H = keep.shape[2]
    for t in range(T - 1, -1, -1):
        dh = dh_seq[t]
        for b in range(B):
            for j in range(H):
                d = dh_in[t, b, j] if t == T - 1 else dh_next[b, j] + dh_in[t, b, j]
                dh[b, j] = d
                dgc[b, j] = p[t, b, j] * d
                dgc[b, 2 * H + j] = p[t, b, 2 * H + j] * d
                if LBR:
                    dgc[b, H + j] = p[t, b, H + j] * d
        if LBR:
            np.dot(dgc, w_t, dh_next)
        else:
            for b in range(B):
                for j in range(H):
                    dg_c[b, j] = dgc[b, 2 * H + j]
            np.dot(dg_c, w_c_t, drh)
            for b in range(B):
                for j in range(H):
                    dgc[b, H + j] = drh[b, j] * p[t, b, H + j]
            for b in range(B):
                for j in range(2 * H):
                    dg_ur[b, j] = dgc[b, j]
            np.dot(dg_ur, w_ur_t, dh_next)
        for b in range(B):
            for j in range(H):
                x = dh_next[b, j] + dh[b, j] * keep[t, b, j]
                if not LBR:
                    x = x + drh[b, j] * gates[t, b, H + j]
                dh_next[b, j] = x
        for b in range(B):
            for j in range(3 * H):
                dg[t, b, j] = dgc[b, j]


# --- the modules the tier compiles -----------------------------------------------------------

#: the compiled functions, with their helpers (inlined where they are called)
LSTM_FUNCTIONS = ("lstm_forward", "lstm_backward")
GRU_FUNCTIONS = ("gru_forward", "gru_backward")
_HELPERS: tuple[Callable, ...] = (tanh32, tanh64, act_sigmoid, act_tanh, act_relu,
                                  act_identity, cell_sigmoid, d_sigmoid, d_tanh, d_relu,
                                  d_identity, _lstm_load, _lstm_gate_grads, _gru_lbr_gates,
                                  _gru_update)
_CONSTANTS = ("T_CLAMP", "T_TINY", "P13", "P11", "P9", "P7", "P5", "P3", "P1", "Q6", "Q4",
              "Q2", "Q0")
#: an activation's function by name: gates and candidates (pre-scaled), LSTM cells
ACTS = {"sigmoid": "act_sigmoid", "tanh": "act_tanh", "relu": "act_relu",
        "identity": "act_identity"}
CELLS = {**ACTS, "sigmoid": "cell_sigmoid"}
#: an activation's derivative from its value
DERIVATIVES = {act: f"d_{act}" for act in ACTS}
#: each function's arguments and their shapes in the example call that compiles it (T = B
#: = H = 2): f an array of the dtype, A the same in any layout (a view), b a bool array,
#: i an int64 scalar
_ARGS = {
    "lstm_forward": "f:2,2,8 f:8 f:8 f:2,2,8 f:2,8 f:2,2 f:2,2 f:3,2 b:2,2 i f:2,8 f:2,2,2 "
                    "f:2,2,2 f:2,2,2 f:2,2,2",
    "lstm_backward": "f:2,2,2 f:2,2,2 f:2,2,2 f:2,2 f:2,2,8 f:8,2 f:3,2 i f:2,2 f:2,2 "
                     "f:2,8 f:2,2 f:2,2 f:2,2,8",
    "gru_forward": "f:2,2,6 f:2,4 f:2,2 f:2,6 f:2,2 f:2 b:2,2 i f:2,6 f:2,4 f:2,2 f:2,2,2 "
                   "f:2,2,2",
    "gru_backward": "A:2,2,2 f:2,2,8 A:2,2,2 f:2,2,6 f:4,2 f:2,2 f:6,2 f:2,2,2 f:2,2 f:2,2 "
                    "f:2,6 f:2,4 f:2,2 f:2,2,6"}


def _arg_types(function: str, dtype: str) -> tuple:
    def one(code: str) -> tuple:
        kind, _, dims = code.partition(":")
        if kind == "i":
            return ("scalar", "int64")
        shape = tuple(int(d) for d in dims.split(","))
        return ("array", "bool" if kind == "b" else dtype, len(shape),
                "A" if kind == "A" else "C", shape)
    return tuple(one(code) for code in _ARGS[function].split())


@cache
def _sources() -> str:
    """The helpers' and the kernels' text, as written above."""
    functions = [*_HELPERS, *(globals()[f] for f in LSTM_FUNCTIONS + GRU_FUNCTIONS)]
    return "\n\n".join(function_source(f) for f in functions)


def sequence_source(function: str, dtype: str, acts: dict[str, str],
                    modes: dict[str, bool]) -> KernelSource:
    """``function`` (of `LSTM_FUNCTIONS`, `GRU_FUNCTIONS`) for float32/64 arrays, the
    activations ``acts`` ('gate', 'cand' and for an LSTM 'cell': an activation's name)
    and ``modes`` (PEEP, ORIGIN, LBR, SCALE_CAND, CLIP: the defaults' names)."""
    lines = ["import math", "", "import numpy as np", "",
             f"HALF = np.{dtype}(0.5)", f"ZERO = np.{dtype}(0)",
             f"SIG_TOP = np.{dtype}({SIGMOID_RANGE[1] / 2!r})"]
    lines += [f"{name} = np.float32(float.fromhex({float(globals()[name]).hex()!r}))"
              for name in _CONSTANTS]
    lines += [f"{mode} = {bool(modes.get(mode, False))}"
              for mode in ("PEEP", "ORIGIN", "LBR", "SCALE_CAND", "CLIP")]
    lines.append(f"tanh = {'tanh32' if dtype == 'float32' else 'tanh64'}")
    table = {"gate": ACTS, "cand": ACTS, "cell": CELLS}
    lines += [f"{role} = {table[role][act]}" for role, act in sorted(acts.items())]
    lines += [f"{role}_d = {DERIVATIVES[act]}" for role, act in sorted(acts.items())]
    helpers = [f.__name__ for f in _HELPERS]
    inline = "\n".join(f"{h} = njit(inline='always', {_OPTIONS})({h})" for h in helpers)
    tail = 2 * len(acts) + 1   # the aliases: after the functions they name
    body = "\n".join(lines[:-tail]) + "\n\n\n" + _sources() + \
        "\n\n\nfrom numba import njit  # noqa: E402\n\n" + inline + "\n" + \
        "\n".join(lines[-tail:])
    kernels = LSTM_FUNCTIONS if function.startswith("lstm") else GRU_FUNCTIONS
    return KernelSource(function.split("_")[0], module_text(body, kernels), function,
                        _arg_types(function, dtype))


_OPTIONS = "cache=True, error_model='numpy', fastmath=False"
