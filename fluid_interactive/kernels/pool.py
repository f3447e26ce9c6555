"""Max pooling of batch-innermost images ([C, H, W, N], ops/layouts.py) in one pass, for
the compiled tier: the forward reads each window once and writes its maximum; the
gradient finds each window's first maximum in row-major order and writes every position
of it once. NumPy needs kh*kw passes over strided views for each (and, for the gradient,
masks kept between them).

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

from .build import KernelSource, module_text

_TEXT = '''# {dtype} arrays: a module per dtype (a loaded kernel takes only the types it was
# built for)
import numpy as np

KH, KW, SH, SW = {kh}, {kw}, {sh}, {sw}


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


def max_pool_grad(x, y, g, dx):
    A, H, W, B = x.shape
    OH = min(y.shape[1], (H - KH) // SH + 1)
    OW = min(y.shape[2], (W - KW) // SW + 1)
    free = np.empty(B, np.bool_)
    one = x.dtype.type(1)
    nought = x.dtype.type(0)
    for a in range(A):
        for h in range(H):
            for w in range(W):
                if h >= OH * SH or w >= OW * SW or (h % SH) >= KH or (w % SW) >= KW:
                    for b in range(B):
                        dx[a, h, w, b] = nought
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
'''


def pool_source(function: str, window: tuple[int, int], strides: tuple[int, int],
                dtype: str) -> KernelSource:
    """``max_pool(x, out)`` or ``max_pool_grad(x, y, g, dx)`` for this window and these
    strides, over 4-D C-contiguous arrays of ``dtype``."""
    text = _TEXT.format(kh=window[0], kw=window[1], sh=strides[0], sw=strides[1], dtype=dtype)
    arrays = 2 if function == "max_pool" else 4
    return KernelSource("pool", module_text(text, ["max_pool", "max_pool_grad"]), function,
                        (("array", dtype, 4),) * arrays)
