"""Max pooling of batch-innermost images ([C, H, W, N], ops/layouts.py) in one pass, for
the compiled tier: the forward reads each window once and writes its maximum; the
gradient finds each window's first maximum in row-major order and writes every position
of it once. NumPy needs kh*kw passes over strided views for each (and, for the gradient,
masks kept between them).

Where a gradient op follows, the forward also records the index of each window's first
maximum (``max_pool_first``: uint8, kh*kw for "none", e.g. a NaN maximum), which the
gradient then reads instead of X (``max_pool_grad_first``): a quarter of X's bytes (one
byte per window instead of four per position).

The window (kh, kw) and strides (sh, sw) are constants of the module text, which is
generated per pooling: so `pool_source` builds one kernel per distinct pooling. Windows
do not overlap (sh >= kh, sw >= kw) and there is no padding: each position of X belongs
to at most one window, which is what makes the gradient's stores, like the NumPy
kernel's, plain writes. The values are NumPy's, bit for bit: a maximum takes the later
value on ties and NaN wherever one is (as ``np.maximum``), and a position that is not its
window's first maximum gets dOut * 0 (as NumPy's dOut * mask: -0 for a negative dOut,
NaN for a NaN). The loops read within X and Out whatever shapes they are given.
"""
from __future__ import annotations

import numpy as np

from .build import KernelSource, module_source, module_text

#: the window and strides: a generated module's own values replace these
KH, KW, SH, SW = 2, 2, 2, 2


def max_pool(x, out):
    A, H, W, B = x.shape
    OH = min(out.shape[1], (H - KH) // SH + 1)
    OW = min(out.shape[2], (W - KW) // SW + 1)
    for a in range(A):
        for i in range(OH):
            for j in range(OW):
                for b in range(B):
                    out[a, i, j, b] = x[a, i * SH, j * SW, b]
                for k in range(1, KH * KW):
                    h = i * SH + k // KW
                    w = j * SW + k % KW
                    for b in range(B):
                        v = x[a, h, w, b]
                        if v >= out[a, i, j, b] or v != v:
                            out[a, i, j, b] = v


def max_pool_first(x, out, first):
    A, H, W, B = x.shape
    OH = min(out.shape[1], first.shape[1], (H - KH) // SH + 1)
    OW = min(out.shape[2], first.shape[2], (W - KW) // SW + 1)
    for a in range(A):
        for i in range(OH):
            for j in range(OW):
                for b in range(B):
                    v = x[a, i * SH, j * SW, b]
                    out[a, i, j, b] = v
                    first[a, i, j, b] = 0 if v == v else KH * KW
                for k in range(1, KH * KW):
                    h = i * SH + k // KW
                    w = j * SW + k % KW
                    for b in range(B):
                        v = x[a, h, w, b]
                        m = out[a, i, j, b]
                        if v > m:                # a larger maximum: its first position
                            out[a, i, j, b] = v
                            first[a, i, j, b] = k
                        elif v != v:             # NaN: no position equals the maximum
                            out[a, i, j, b] = v
                            first[a, i, j, b] = KH * KW
                        elif v == m:             # a tie: the later value (signed zeros)
                            out[a, i, j, b] = v


def _zero_between(dx, OH, OW):
    A, H, W, B = dx.shape
    nought = dx.dtype.type(0)
    for a in range(A):
        for h in range(H):
            for w in range(W):
                if h >= OH * SH or w >= OW * SW or (h % SH) >= KH or (w % SW) >= KW:
                    for b in range(B):
                        dx[a, h, w, b] = nought


def max_pool_grad_first(first, g, dx):
    A, H, W, B = dx.shape
    OH = min(g.shape[1], first.shape[1], (H - KH) // SH + 1)
    OW = min(g.shape[2], first.shape[2], (W - KW) // SW + 1)
    one = dx.dtype.type(1)
    nought = dx.dtype.type(0)
    _zero_between(dx, OH, OW)
    for a in range(A):
        for i in range(OH):
            for j in range(OW):
                for k in range(KH * KW):
                    h = i * SH + k // KW
                    w = j * SW + k % KW
                    for b in range(B):
                        dx[a, h, w, b] = g[a, i, j, b] * (one if first[a, i, j, b] == k
                                                          else nought)


def max_pool_grad(x, y, g, dx):
    A, H, W, B = x.shape
    OH = min(y.shape[1], (H - KH) // SH + 1)
    OW = min(y.shape[2], (W - KW) // SW + 1)
    free = np.empty(B, np.bool_)
    one = x.dtype.type(1)
    nought = x.dtype.type(0)
    _zero_between(dx, OH, OW)
    for a in range(A):
        for i in range(OH):
            for j in range(OW):
                for b in range(B):
                    free[b] = True
                for k in range(KH * KW):
                    h = i * SH + k // KW
                    w = j * SW + k % KW
                    for b in range(B):
                        first = free[b] and x[a, h, w, b] == y[a, i, j, b]
                        free[b] = free[b] and not first
                        dx[a, h, w, b] = g[a, i, j, b] * (one if first else nought)


_FUNCTIONS = (max_pool, max_pool_first, _zero_between, max_pool_grad_first, max_pool_grad)
#: each function's arguments: f for an array of the pooling's dtype, i for the uint8 index
_ARGS = {"max_pool": "ff", "max_pool_grad": "ffff", "max_pool_first": "ffi",
         "max_pool_grad_first": "iff"}


def pool_source(function: str, window: tuple[int, int], strides: tuple[int, int],
                dtype: str) -> KernelSource:
    """``max_pool(x, out)``, ``max_pool_grad(x, y, g, dx)``, ``max_pool_first(x, out,
    first)`` or ``max_pool_grad_first(first, g, dx)`` for this window and these strides,
    over 4-D C-contiguous arrays of ``dtype`` (``first``: uint8)."""
    text = module_source(dtype, {"KH": window[0], "KW": window[1], "SH": strides[0],
                                 "SW": strides[1]}, _FUNCTIONS)
    args = tuple(("array", dtype if kind == "f" else "uint8", 4) for kind in _ARGS[function])
    return KernelSource("pool", module_text(text, ["_zero_between", *_ARGS]), function, args)
