"""One step of the fused recurrent cells (ops/lstm.py, ops/gru.py) in a few calls, for
the compiled tier: the elementwise work of a step besides its matrix products and its
``tanh`` calls (the gates' sums, the sigmoid and other activations finished from tanh's
values, the state update, freezing the rows past their length), where NumPy makes ten to
fifteen calls over [B, H] arrays, each paying a call's overhead.

The ``tanh`` calls stay NumPy's, the very calls of its step on the same views: NumPy's
tanh runs in SIMD lanes (about 0.2 ns an element), where a loop calling the C library's
tanhf runs 40x slower, and a tanh of our own in vectorised float64 arithmetic was still
5x slower. So every value is NumPy's, bit for bit: each function does the arithmetic of
the NumPy step in the same order, rounding each operation to the arrays' dtype as NumPy
does (a sigmoid is ``0.5 * tanh(x / 2) + 0.5``, its x / 2 folded into the weights by
the op, rnn.PRE_SCALE; a relu is ``np.maximum(v, 0)``'s choice, NaN and signed zeros
included).

A module is generated per dtype and per choice of activations, which are constants of
its text (Numba drops the branches not taken). The loops run from 0 with offsets, and
read and write each array through the same indices: LLVM vectorises those, not a loop
that starts at H. They read within the arrays whatever shapes they are given.
"""
from __future__ import annotations

from .build import KernelSource, module_text

#: an activation finished from the value NumPy's tanh calls left (for sigmoid and tanh)
#: or from the pre-activation itself (relu, identity)
FINISH = {"sigmoid": "v * HALF + HALF", "tanh": "v",
          "relu": "v if v > ZERO else (v if v != v else ZERO)",   # np.maximum(v, 0)
          "identity": "v"}
#: the LSTM's cell activation of c, from t: tanh(c) (tanh), tanh(c / 2) (sigmoid)
CELL = {"sigmoid": "t * HALF + HALF", "tanh": "t",
        "relu": "c if c > ZERO else (c if c != c else ZERO)", "identity": "c"}

_HEAD = '''# {dtype} arrays; {what}
import numpy as np
from numba import njit

HALF = np.{dtype}(0.5)
ZERO = np.{dtype}(0)
INLINE = dict(inline="always", cache=True, error_model="numpy", fastmath=False)
'''

_ACT = '''

@njit(**INLINE)
def {name}({args}):
    return {expr}
'''

_LSTM = '''

PEEP = {peep}


def lstm_front(g, hw, c_prev, w):
    """g [B, 4H] (c~ i f o) += hw, and with peepholes i += c_prev * w[0], f += c_prev *
    w[1] (w: the pre-scaled peepholes [3, H])."""
    B = min(g.shape[0], hw.shape[0], c_prev.shape[0])
    H = min(g.shape[1] // 4, hw.shape[1] // 4, c_prev.shape[1])
    if PEEP:
        H = min(H, w.shape[1])
    for b in range(B):
        for j in range(4 * H):
            g[b, j] = g[b, j] + hw[b, j]
    if PEEP:
        for b in range(B):
            for j in range(H):
                g[b, H + j] = g[b, H + j] + c_prev[b, j] * w[0, j]
                g[b, 2 * H + j] = g[b, 2 * H + j] + c_prev[b, j] * w[1, j]


def lstm_cell(g, c_prev, w, c):
    """After NumPy's tanh calls on the front: its activations finished in place, c = f *
    c_prev + i * c~, and with peepholes the output gate's o += c * w[2]."""
    B = min(g.shape[0], c_prev.shape[0], c.shape[0])
    H = min(g.shape[1] // 4, c_prev.shape[1], c.shape[1])
    if PEEP:
        H = min(H, w.shape[1])
    for b in range(B):
        for j in range(H):
            g[b, j] = cand(g[b, j])
        for j in range(3 * H if not PEEP else 2 * H):
            g[b, H + j] = gate(g[b, H + j])
    for b in range(B):
        for j in range(H):
            c[b, j] = g[b, 2 * H + j] * c_prev[b, j] + g[b, H + j] * g[b, j]
    if PEEP:
        for b in range(B):
            for j in range(H):
                g[b, 3 * H + j] = g[b, 3 * H + j] + c[b, j] * w[2, j]


def lstm_out(g, c, tc, c_prev, h_prev, frozen, h):
    """After NumPy's tanh calls on c (into tc) and, with peepholes, on o: h = o *
    act_cell(c); frozen rows keep c_prev and h_prev."""
    B = min(g.shape[0], c.shape[0], tc.shape[0], c_prev.shape[0], h_prev.shape[0],
            frozen.shape[0], h.shape[0])
    H = min(g.shape[1] // 4, c.shape[1], tc.shape[1], c_prev.shape[1], h_prev.shape[1],
            h.shape[1])
    if PEEP:
        for b in range(B):
            for j in range(H):
                g[b, 3 * H + j] = gate(g[b, 3 * H + j])
    for b in range(B):
        for j in range(H):
            h[b, j] = g[b, 3 * H + j] * cell(c[b, j], tc[b, j])
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


def gru_reset(g, h, reset):
    """After NumPy's sum and tanh calls on the gates u, r (g[:, :2H]): their activations
    finished in place, and reset = r * h."""
    B = min(g.shape[0], h.shape[0], reset.shape[0])
    H = min(g.shape[1] // 3, h.shape[1], reset.shape[1])
    for b in range(B):
        for j in range(2 * H):
            g[b, j] = gate(g[b, j])
    for b in range(B):
        for j in range(H):
            reset[b, j] = g[b, H + j] * h[b, j]


def gru_update(g, h, frozen, out):
    """After NumPy's sum and tanh calls on the candidate (g[:, 2H:]): its activation
    finished in place, out the new state; frozen rows keep h."""
    B = min(g.shape[0], h.shape[0], frozen.shape[0], out.shape[0])
    H = min(g.shape[1] // 3, h.shape[1], out.shape[1])
    for b in range(B):
        for j in range(H):
            g[b, 2 * H + j] = cand(g[b, 2 * H + j])
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


def gru_lbr_front(g, hw, bias, flags, n):
    """linear_before_reset: g[:, :2H] += hw[:, :2H]; n = hw[:, 2H:] (+ bias when
    flags & 1)."""
    B = min(g.shape[0], hw.shape[0], n.shape[0])
    H = min(g.shape[1] // 3, hw.shape[1] // 3, n.shape[1])
    if flags & 1:
        H = min(H, bias.shape[0])
    for b in range(B):
        for j in range(2 * H):
            g[b, j] = g[b, j] + hw[b, j]
        for j in range(H):
            v = hw[b, 2 * H + j]
            n[b, j] = v + bias[j] if flags & 1 else v


def gru_lbr_cand(g, n):
    """After NumPy's tanh calls on u, r: their activations finished in place, and the
    candidate's g[:, 2H:] += r * n (pre-scaled)."""
    B = min(g.shape[0], n.shape[0])
    H = min(g.shape[1] // 3, n.shape[1])
    for b in range(B):
        for j in range(2 * H):
            g[b, j] = gate(g[b, j])
    for b in range(B):
        for j in range(H):
            x = g[b, H + j] * n[b, j]
            if SCALE_CAND:
                x = x * HALF
            g[b, 2 * H + j] = g[b, 2 * H + j] + x


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


def _head(dtype: str, what: str, acts: dict[str, tuple[str, str]]) -> str:
    """The module's start: its constants and the activations (name: (arguments,
    expression)), inlined where they are called."""
    return _HEAD.format(dtype=dtype, what=what) + "".join(
        _ACT.format(name=name, args=args, expr=expr) for name, (args, expr) in acts.items())


#: each function's arguments: f an array of the cell's dtype, A the same in any layout
#: (a view with strided rows), v a vector of the dtype, b a bool array, i an int64 scalar
_ARGS = {"lstm_front": "ffff", "lstm_cell": "ffff", "lstm_out": "fffffbf",
         "lstm_grad_step": "fAffAfffifA",
         "gru_reset": "fff", "gru_update": "ffbf", "gru_lbr_front": "ffvif",
         "gru_lbr_cand": "ff", "gru_grad_pre": "ffAfif", "gru_grad_post": "ffAffi"}
LSTM_FUNCTIONS = ("lstm_front", "lstm_cell", "lstm_out", "lstm_grad_step")
GRU_FUNCTIONS = ("gru_reset", "gru_update", "gru_lbr_front", "gru_lbr_cand", "gru_grad_pre",
                 "gru_grad_post")


def _types(function: str, dtype: str) -> tuple:
    kinds = {"f": ("array", dtype, 2), "A": ("array", dtype, 2, "A"),
             "v": ("array", dtype, 1), "b": ("array", "bool", 1), "i": ("scalar", "int64")}
    return tuple(kinds[k] for k in _ARGS[function])


def lstm_source(function: str, dtype: str, gate: str, cell: str, cand: str,
                peepholes: bool) -> KernelSource:
    """One of `LSTM_FUNCTIONS` for float32/64 arrays and these activations."""
    acts = {"gate": ("v", FINISH[gate]), "cand": ("v", FINISH[cand]),
            "cell": ("c, t", CELL[cell])}
    text = _head(dtype, f"LSTM gate {gate}, cell {cell}, candidate {cand}", acts) + \
        _LSTM.format(peep=bool(peepholes))
    return KernelSource("lstm", module_text(text, LSTM_FUNCTIONS), function,
                        _types(function, dtype))


def gru_source(function: str, dtype: str, gate: str, cand: str, origin: bool,
               linear_before_reset: bool) -> KernelSource:
    """One of `GRU_FUNCTIONS` for float32/64 arrays, these activations and modes."""
    acts = {"gate": ("v", FINISH[gate]), "cand": ("v", FINISH[cand])}
    scale = linear_before_reset and cand == "sigmoid"
    text = _head(dtype, f"GRU gate {gate}, candidate {cand}", acts) + \
        _GRU.format(origin=bool(origin), scale=scale)
    return KernelSource("gru", module_text(text, GRU_FUNCTIONS), function,
                        _types(function, dtype))
