"""One step of the fused recurrent cells (ops/lstm.py, ops/gru.py) in one pass, for the
compiled tier: everything a step does besides its matrix products (the gates' sums and
activations, the state update, freezing the rows past their length), where NumPy makes
ten to fifteen calls over [B, H] arrays, each paying a call's overhead.

A module is generated per dtype and per choice of activations (constants of the text, so
Numba drops the branches not taken). Each function does the arithmetic of its NumPy step
in the same order, rounding each operation to the arrays' dtype as NumPy does, so the
values are bit-identical except for ``tanh`` (and sigmoid, computed from it as the ops
do: ``0.5 * tanh(x / 2) + 0.5``). For float32 the loops compute tanh with `TANH32`, in
float64 from a Taylor series of expm1 (|x| / 32, to the tenth power, then doubled six
times: expm1(2a) = expm1(a) * (expm1(a) + 2)): the float32 it rounds to is the correctly
rounded tanh (no difference over 3 million points of [-12, 12]), where NumPy's tanh is
within one unit in the last place of it: the two agree within float32 rounding. For
float64 the loops call ``np.tanh`` (the C library's). Plain arithmetic of float64 lanes
vectorises, where a call of the library's tanhf per element runs 40x slower than NumPy's.

The loops run from 0 with offsets, and read and write each array through the same
indices: LLVM vectorises those, not a loop from H, nor two views of one array. They read
within the arrays whatever shapes they are given.
"""
from __future__ import annotations

import math

from .build import KernelSource, module_text

#: tanh of a float32, computed in float64 (see the module's docstring)
TANH32 = '''
@njit(**INLINE)
def tanh_(x):
    t = abs(np.float64(x))
    t = 10.0 if t > 10.0 else t     # tanh rounds to 1 from 9.1 on; NaN stays
    a = t * 0.03125
    q = a * (1.0 + a * (E[2] + a * (E[3] + a * (E[4] + a * (E[5] + a * (
        E[6] + a * (E[7] + a * (E[8] + a * (E[9] + a * E[10])))))))))
    q = q * (q + 2.0)
    q = q * (q + 2.0)
    q = q * (q + 2.0)
    q = q * (q + 2.0)
    q = q * (q + 2.0)
    q = q * (q + 2.0)               # expm1(2t)
    return np.float32(math.copysign(q / (q + 2.0), x))
'''

TANH64 = '''
@njit(**INLINE)
def tanh_(x):
    return np.tanh(x)
'''

#: an activation of a value pre-scaled by the op (sigmoid's x / 2: rnn.PRE_SCALE)
SCALED = {"sigmoid": "tanh_(v) * HALF + HALF", "tanh": "tanh_(v)",
          "relu": "v if v > ZERO else (v if v != v else ZERO)",   # np.maximum(v, 0)
          "identity": "v"}
#: an activation of the true value (the LSTM's cell activation)
UNSCALED = dict(SCALED, sigmoid="tanh_(v * HALF) * HALF + HALF")

_HEAD = '''# {dtype} arrays; {what}
import math

import numpy as np
from numba import njit

HALF = np.{dtype}(0.5)
ZERO = np.{dtype}(0)
E = ({coefficients})   # 1 / k!
INLINE = dict(inline="always", cache=True, error_model="numpy", fastmath=False)
{tanh}
'''

_ACT = '''
@njit(**INLINE)
def {name}(v):
    return {expr}
'''

_LSTM = '''
PEEP = {peep}


def lstm_step(g, hw, c_prev, h_prev, w, frozen, c, h, tc):
    """g (pre-activations, [B, 4H]: c~ i f o) += hw, activated in place; c, h the new
    state, frozen rows keeping c_prev, h_prev; w [3, H] the (pre-scaled) peepholes."""
    B = min(g.shape[0], hw.shape[0], c_prev.shape[0], h_prev.shape[0], frozen.shape[0],
            c.shape[0], h.shape[0], tc.shape[0])
    H = min(g.shape[1] // 4, hw.shape[1] // 4, c_prev.shape[1], h_prev.shape[1],
            c.shape[1], h.shape[1], tc.shape[1])
    if PEEP:
        H = min(H, w.shape[1])
    for b in range(B):
        for j in range(H):
            g[b, j] = cand(g[b, j] + hw[b, j])
        if PEEP:
            for j in range(H):
                k = H + j
                g[b, k] = gate((g[b, k] + hw[b, k]) + c_prev[b, j] * w[0, j])
            for j in range(H):
                k = 2 * H + j
                g[b, k] = gate((g[b, k] + hw[b, k]) + c_prev[b, j] * w[1, j])
        else:
            for j in range(3 * H):
                k = H + j
                g[b, k] = gate(g[b, k] + hw[b, k])
    for b in range(B):
        for j in range(H):
            c[b, j] = g[b, 2 * H + j] * c_prev[b, j] + g[b, H + j] * g[b, j]
    if PEEP:
        for b in range(B):
            for j in range(H):
                k = 3 * H + j
                g[b, k] = gate((g[b, k] + hw[b, k]) + c[b, j] * w[2, j])
    for b in range(B):
        for j in range(H):
            tc[b, j] = cell(c[b, j])
    for b in range(B):
        for j in range(H):
            h[b, j] = g[b, 3 * H + j] * tc[b, j]
        if frozen[b]:
            for j in range(H):
                c[b, j] = c_prev[b, j]
                h[b, j] = h_prev[b, j]


def lstm_grad_step(dh, dh_in, k, carry, dc_in, p, g, w, flags, dc, dg):
    """One step back: dh (+= dh_in when flags & 1), dc = dh * k (+ carry when flags & 2,
    + dc_in when flags & 4; + the output peephole's part), dg = p * (dc, dc, dc, dh), and
    the carry to the step before: dc * f (+ the input and forget peepholes' parts)."""
    B = min(dh.shape[0], dh_in.shape[0], k.shape[0], carry.shape[0], dc_in.shape[0],
            p.shape[0], g.shape[0], dc.shape[0], dg.shape[0])
    H = min(dh.shape[1], dh_in.shape[1], k.shape[1], carry.shape[1], dc_in.shape[1],
            p.shape[1] // 4, g.shape[1] // 4, dc.shape[1], dg.shape[1] // 4)
    if PEEP:
        H = min(H, w.shape[1])
    for b in range(B):
        for j in range(H):
            d = dh[b, j]
            if flags & 1:
                d = d + dh_in[b, j]
                dh[b, j] = d
            x = d * k[b, j]
            if flags & 2:
                x = x + carry[b, j]
            if flags & 4:
                x = x + dc_in[b, j]
            d_o = d * p[b, 3 * H + j]
            dg[b, 3 * H + j] = d_o
            if PEEP:
                x = x + d_o * w[2, j]
            dc[b, j] = x
            dg[b, j] = p[b, j] * x
            d_i = p[b, H + j] * x
            d_f = p[b, 2 * H + j] * x
            dg[b, H + j] = d_i
            dg[b, 2 * H + j] = d_f
            r = x * g[b, 2 * H + j]
            if PEEP:
                r = r + d_i * w[0, j]
                r = r + d_f * w[1, j]
            carry[b, j] = r
'''

_GRU = '''
ORIGIN = {origin}      # h_t = c~ + u * (h - c~), else h + u * (c~ - h)
SCALE_CAND = {scale}   # linear_before_reset: r * N pre-scaled for the candidate


def gru_gates(g, hw, h, reset):
    """g[:, :2H] (u, r) += hw[:, :2H], activated in place; reset = r * h."""
    B = min(g.shape[0], hw.shape[0], h.shape[0], reset.shape[0])
    H = min(g.shape[1] // 3, hw.shape[1] // 3, h.shape[1], reset.shape[1])
    for b in range(B):
        for j in range(2 * H):
            g[b, j] = gate(g[b, j] + hw[b, j])
    for b in range(B):
        for j in range(H):
            reset[b, j] = g[b, H + j] * h[b, j]


def _update(g, h, frozen, out, B, H):
    for b in range(B):
        for j in range(H):
            c = g[b, 2 * H + j]
            if ORIGIN:
                out[b, j] = (h[b, j] - c) * g[b, j] + c
            else:
                out[b, j] = (c - h[b, j]) * g[b, j] + h[b, j]
        if frozen[b]:
            for j in range(H):
                out[b, j] = h[b, j]


def gru_update(g, rh, h, frozen, out):
    """g[:, 2H:] (c~) += rh (the reset state's product), activated in place; out the new
    state, frozen rows keeping h."""
    B = min(g.shape[0], rh.shape[0], h.shape[0], frozen.shape[0], out.shape[0])
    H = min(g.shape[1] // 3, rh.shape[1], h.shape[1], out.shape[1])
    for b in range(B):
        for j in range(H):
            k = 2 * H + j
            g[b, k] = cand(g[b, k] + rh[b, j])
    _update(g, h, frozen, out, B, H)


def gru_lbr_step(g, hw, bias, h, frozen, flags, n, out):
    """linear_before_reset: n = hw[:, 2H:] (+ bias when flags & 1), g[:, :2H] += hw[:, :2H]
    activated, g[:, 2H:] += r * n activated, and the new state as `gru_update`."""
    B = min(g.shape[0], hw.shape[0], h.shape[0], frozen.shape[0], n.shape[0], out.shape[0])
    H = min(g.shape[1] // 3, hw.shape[1] // 3, h.shape[1], n.shape[1], out.shape[1])
    if flags & 1:
        H = min(H, bias.shape[0])
    for b in range(B):
        for j in range(H):
            v = hw[b, 2 * H + j]
            n[b, j] = v + bias[j] if flags & 1 else v
        for j in range(2 * H):
            g[b, j] = gate(g[b, j] + hw[b, j])
    for b in range(B):
        for j in range(H):
            k = 2 * H + j
            x = g[b, H + j] * n[b, j]
            if SCALE_CAND:
                x = x * HALF
            g[b, k] = cand(g[b, k] + x)
    _update(g, h, frozen, out, B, H)


def gru_grad_pre(dh, dh_next, dh_in, p, flags, dg):
    """dh = dh_in (+ dh_next when flags & 1); the gate gradients that need only dh:
    dg = p * dh for u and c~ (and for r, with linear_before_reset: flags & 2)."""
    B = min(dh.shape[0], dh_next.shape[0], dh_in.shape[0], p.shape[0], dg.shape[0])
    H = min(dh.shape[1], dh_next.shape[1], dh_in.shape[1], p.shape[1] // 4,
            dg.shape[1] // 3)
    for b in range(B):
        for j in range(H):
            d = dh_next[b, j] + dh_in[b, j] if flags & 1 else dh_in[b, j]
            dh[b, j] = d
            dg[b, j] = p[b, j] * d
            dg[b, 2 * H + j] = p[b, 2 * H + j] * d
            if flags & 2:
                dg[b, H + j] = p[b, H + j] * d


def gru_grad_post(dh_next, dh, keep, drh, g, flags):
    """dh_next (the product through the weight) += dh * keep (+ drh * r, unless
    linear_before_reset: flags & 2)."""
    B = min(dh_next.shape[0], dh.shape[0], keep.shape[0], drh.shape[0], g.shape[0])
    H = min(dh_next.shape[1], dh.shape[1], keep.shape[1], drh.shape[1], g.shape[1] // 3)
    for b in range(B):
        for j in range(H):
            x = dh_next[b, j] + dh[b, j] * keep[b, j]
            if not flags & 2:
                x = x + drh[b, j] * g[b, H + j]
            dh_next[b, j] = x
'''


def _coefficients() -> str:
    return ", ".join(["0.0", "1.0"] + [repr(1.0 / math.factorial(k)) for k in range(2, 11)])


def _head(dtype: str, what: str, acts: dict[str, str]) -> str:
    text = _HEAD.format(dtype=dtype, what=what, coefficients=_coefficients(),
                        tanh=TANH32 if dtype == "float32" else TANH64)
    return text + "".join(_ACT.format(name=name, expr=expr) for name, expr in acts.items())


#: each function's arguments: f an array of the cell's dtype, A the same in any layout
#: (a view with strided rows), b a bool array, i an int64 scalar
_ARGS = {"lstm_step": "fffffbfff", "lstm_grad_step": "fAffAfffifA",
         "gru_gates": "ffff", "gru_update": "fffbf", "gru_lbr_step": "ffvfbiff",
         "gru_grad_pre": "ffAfif", "gru_grad_post": "ffAffi"}
_GRU_FUNCTIONS = ["_update", "gru_gates", "gru_update", "gru_lbr_step", "gru_grad_pre",
                  "gru_grad_post"]


def _types(function: str, dtype: str) -> tuple:
    kinds = {"f": ("array", dtype, 2), "A": ("array", dtype, 2, "A"),
             "v": ("array", dtype, 1), "b": ("array", "bool", 1), "i": ("scalar", "int64")}
    return tuple(kinds[k] for k in _ARGS[function])


def lstm_source(function: str, dtype: str, gate: str, cell: str, cand: str,
                peepholes: bool) -> KernelSource:
    """``lstm_step`` or ``lstm_grad_step`` for float32/64 arrays and these activations
    (the gate and candidate activations of pre-scaled values, the cell's of true ones)."""
    acts = {"gate": SCALED[gate], "cand": SCALED[cand], "cell": UNSCALED[cell]}
    text = _head(dtype, f"LSTM gate {gate}, cell {cell}, candidate {cand}", acts) + \
        _LSTM.format(peep=bool(peepholes))
    return KernelSource("lstm", module_text(text, ["lstm_step", "lstm_grad_step"]),
                        function, _types(function, dtype))


def gru_source(function: str, dtype: str, gate: str, cand: str, origin: bool,
               linear_before_reset: bool) -> KernelSource:
    """A GRU step's function (``gru_gates`` and ``gru_update``, or ``gru_lbr_step``;
    ``gru_grad_pre`` and ``gru_grad_post``) for float32/64 arrays, these activations
    (of pre-scaled values) and modes."""
    acts = {"gate": SCALED[gate], "cand": SCALED[cand]}
    scale = linear_before_reset and cand == "sigmoid"
    text = _head(dtype, f"GRU gate {gate}, candidate {cand}", acts) + \
        _GRU.format(origin=bool(origin), scale=scale)
    return KernelSource("gru", module_text(text, _GRU_FUNCTIONS), function,
                        _types(function, dtype))
