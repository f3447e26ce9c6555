"""Layer normalisation (ops/norm.py, ``layer_norm``) in one compiled call each way: each
row's statistics, its normalised values and, backward, its gradient, while the row is in
the cache, where NumPy makes a pass over all rows for each of about ten ufunc calls.

Values are NumPy's, bit for bit, because both sides add in the same order:

* a row's sum is NumPy's pairwise summation of a contiguous run (what ``np.sum(a,
  axis=-1)`` does: `pairwise`), added to the reduction's start value 0;
* a column's sum over rows (the gradients of Scale and Bias) adds the rows in order to
  0, as ``np.sum(a, axis=0)`` of a C-contiguous array does;
* everything else is one correctly rounded operation at a time in the arrays' dtype, in
  the NumPy kernel's order (a mean is the sum divided by D; 1 / sqrt(var + eps)).

These are plain Python functions (a test runs them uncompiled on a few values); the tier
compiles a module of their source for one dtype (`norm_source`), whose constants replace
the defaults below.
"""
from __future__ import annotations

import numpy as np

from .build import KernelSource, module_source, module_text

# --- what a generated module defines for one dtype (the defaults: float32) --------------
FLOAT = np.float32
ZERO = np.float32(0)
ONE = np.float32(1)
#: NumPy's block below which a pairwise sum adds in eight interleaved partial sums
BLOCK = 128
#: frames of `pairwise`'s stack: each halves the run, so 64 cover any length
DEPTH = 64


def block_sum(a, lo, n):
    """The sum of ``a[lo:lo + n]``, n <= `BLOCK`, as NumPy's pairwise summation adds a
    block: under 8 elements one by one from 0; else eight partial sums over interleaved
    elements, combined ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the
    remainder one by one."""
    if n < 8:
        s = ZERO
        for k in range(lo, lo + n):
            s += a[k]
        return s
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    end = lo + n - n % 8
    for k in range(lo + 8, end, 8):
        r0 += a[k]
        r1 += a[k + 1]
        r2 += a[k + 2]
        r3 += a[k + 3]
        r4 += a[k + 4]
        r5 += a[k + 5]
        r6 += a[k + 6]
        r7 += a[k + 7]
    s = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for k in range(end, lo + n):
        s += a[k]
    return s


def pairwise(a, lo, n, frames, lefts):
    """The sum of ``a[lo:lo + n]`` as NumPy's pairwise summation adds it: a block
    (`block_sum`) up to `BLOCK` elements, beyond it the sums of the two halves (the first
    a multiple of 8) added. The halving runs on an explicit stack (``frames``: int64
    [DEPTH, 3] of start, size and whether the left half is summed; ``lefts``: [DEPTH]
    the left halves' sums): Numba's cache cannot load a function that calls itself."""
    if n <= BLOCK:
        return block_sum(a, lo, n)
    top = 0
    frames[0, 0], frames[0, 1], frames[0, 2] = lo, n, 0
    while True:
        start, size = frames[top, 0], frames[top, 1]
        if size > BLOCK:                  # split: the left half first
            half = size // 2
            half -= half % 8
            top += 1
            frames[top, 0], frames[top, 1], frames[top, 2] = start, half, 0
            continue
        v = block_sum(a, start, size)
        top -= 1
        while True:                       # hand the sum to the frames below
            half = frames[top, 1] // 2
            half -= half % 8
            if frames[top, 2] == 0:       # their left half: now the right one
                lefts[top] = v
                frames[top, 2] = 1
                nxt = top + 1
                frames[nxt, 0] = frames[top, 0] + half
                frames[nxt, 1] = frames[top, 1] - half
                frames[nxt, 2] = 0
                top = nxt
                break
            v = lefts[top] + v
            if top == 0:
                return v
            top -= 1


def _inverse_std(var, eps):
    return ONE / np.sqrt(var + eps)


def layer_norm(x, scale, bias, eps, flags, y, mean, var):
    """Rows of x [M, D] normalised into y [M, D], their means and variances into mean and
    var [M]; times scale [D] when ``flags & 1``, plus bias [D] when ``flags & 2``."""
    m_rows, d = x.shape
    dd = FLOAT(d)
    sq = np.empty(d, FLOAT)
    frames, lefts = np.empty((DEPTH, 3), np.int64), np.empty(DEPTH, FLOAT)
    for i in range(m_rows):
        mu = (ZERO + pairwise(x[i], 0, d, frames, lefts)) / dd
        for j in range(d):
            c = x[i, j] - mu
            y[i, j] = c
            sq[j] = c * c
        v = (ZERO + pairwise(sq, 0, d, frames, lefts)) / dd
        mean[i] = mu
        var[i] = v
        inv = _inverse_std(v, eps)
        for j in range(d):
            t = y[i, j] * inv
            if flags & 1:
                t = t * scale[j]
            if flags & 2:
                t = t + bias[j]
            y[i, j] = t


def layer_norm_grad(x, scale, mean, var, dy, eps, flags, dx, dscale, dbias):
    """The gradients of `layer_norm`: dx [M, D] when ``flags & 4``, dscale [D] when
    ``flags & 8``, dbias [D] when ``flags & 16``; scale is read when ``flags & 1``.
    With xhat = (x - mean) * inv and g = dy * scale: dx = inv * (g - xhat * mean(g *
    xhat) - mean(g)), in the NumPy kernel's order."""
    m_rows, d = x.shape
    dd = FLOAT(d)
    g = np.empty(d, FLOAT)
    gx = np.empty(d, FLOAT)
    xhat = np.empty(d, FLOAT)
    frames, lefts = np.empty((DEPTH, 3), np.int64), np.empty(DEPTH, FLOAT)
    if flags & 8:
        dscale[:] = ZERO
    if flags & 16:
        dbias[:] = ZERO
    for i in range(m_rows):
        inv = _inverse_std(var[i], eps)
        mu = mean[i]
        for j in range(d):
            xhat[j] = (x[i, j] - mu) * inv
        if flags & 8:
            for j in range(d):
                dscale[j] += dy[i, j] * xhat[j]
        if flags & 16:
            for j in range(d):
                dbias[j] += dy[i, j]
        if not flags & 4:
            continue
        for j in range(d):
            gj = dy[i, j] * scale[j] if flags & 1 else dy[i, j]
            g[j] = gj
            gx[j] = gj * xhat[j]
        mg = (ZERO + pairwise(g, 0, d, frames, lefts)) / dd
        mgx = (ZERO + pairwise(gx, 0, d, frames, lefts)) / dd
        for j in range(d):
            dx[i, j] = ((g[j] - xhat[j] * mgx) - mg) * inv


_FUNCTIONS = (block_sum, pairwise, _inverse_std, layer_norm, layer_norm_grad)
#: each entry point's arguments: a, v for arrays of rank 2 and 1, s for a scalar, i for flags
_ARGS = {"layer_norm": "avvsiavv", "layer_norm_grad": "avvvasiavv"}


def norm_source(function: str, dtype: str) -> KernelSource:
    """``layer_norm`` or ``layer_norm_grad`` over C-contiguous arrays of ``dtype``."""
    text = module_source(dtype, {"BLOCK": BLOCK, "DEPTH": DEPTH}, _FUNCTIONS) + \
        f"\n\nFLOAT = np.{dtype}\nZERO = FLOAT(0)\nONE = FLOAT(1)\n"
    kinds = {"a": ("array", dtype, 2), "v": ("array", dtype, 1), "s": ("scalar", dtype),
             "i": ("scalar", "int64")}
    args = tuple(kinds[k] for k in _ARGS[function])
    compiled = [f.__name__ for f in _FUNCTIONS]
    return KernelSource("norm", module_text(text, compiled), function, args)
