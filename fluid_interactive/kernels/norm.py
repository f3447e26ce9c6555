"""Layer normalisation (ops/norm.py, ``layer_norm``) in one compiled call each way: each
row's statistics, its normalised values and, backward, its gradient, while the row is in
the cache, where NumPy makes a pass over all rows for each of about ten ufunc calls.

Values are NumPy's, bit for bit, because both sides add in the same order:

* a row's sum is NumPy's pairwise summation of a contiguous run (what ``np.sum(a,
  axis=-1)`` does: `sums.pairwise`), added to the reduction's start value 0;
* a column's sum over rows (the gradients of Scale and Bias) adds the rows in order to
  0, as ``np.sum(a, axis=0)`` of a C-contiguous array does;
* everything else is one correctly rounded operation at a time in the arrays' dtype, in
  the NumPy kernel's order (a mean is the sum divided by D; 1 / sqrt(var + eps)).

These are plain Python functions; the tier compiles a module of their source and the
sums' for one dtype (`norm_source`).
"""
from __future__ import annotations

from functools import cache

import numpy as np

from .build import KernelSource
from .sums import DEPTH, FLOAT, ONE, ZERO, pairwise, sums_module


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


_FUNCTIONS = (_inverse_std, layer_norm, layer_norm_grad)
#: each entry point's arguments: a, v for arrays of rank 2 and 1, s for a scalar, i for flags
_ARGS = {"layer_norm": "avvsiavv", "layer_norm_grad": "avvvasiavv"}


@cache
def norm_source(function: str, dtype: str) -> KernelSource:
    """``layer_norm`` or ``layer_norm_grad`` over C-contiguous arrays of ``dtype``."""
    kinds = {"a": ("array", dtype, 2), "v": ("array", dtype, 1), "s": ("scalar", dtype),
             "i": ("scalar", "int64")}
    args = tuple(kinds[k] for k in _ARGS[function])
    return KernelSource("norm", sums_module(dtype, _FUNCTIONS), function, args)
