"""Softmax over the last axis (ops/softmax.py) in fewer passes: the NumPy kernel makes
five over every row (max, subtract, exp, sum, divide), the compiled tier two of its own
around NumPy's ``exp``, and its gradient one instead of four.

Values are NumPy's, bit for bit. ``exp`` stays NumPy's (its SIMD code and LLVM's differ
in the last bit). A row's maximum is the same number in any order, up to the sign of a
zero, which ``x - max`` then ``exp`` cannot tell (``exp(+-0) == 1``); a row's sum is
NumPy's pairwise sum (`sums.pairwise`) from 0; every other step is one correctly rounded
operation in NumPy's order.

These are plain Python functions; the tier compiles a module of their source and the
sums' for one dtype (`softmax_source`).
"""
from __future__ import annotations

from functools import cache

import numpy as np

from .build import KernelSource
from .sums import DEPTH, FLOAT, ZERO, pairwise, sums_module


def softmax_shift(x, e):
    """e = x - max(x) along each row of x [R, N] (a NaN in a row gives NaN)."""
    rows, n = x.shape
    for i in range(rows):
        m = x[i, 0]
        for j in range(1, n):
            v = x[i, j]
            if v > m or v != v:
                m = v
        if m != m:   # NaN: the rest of the row cannot change it back
            for j in range(n):
                e[i, j] = m
            continue
        for j in range(n):
            e[i, j] = x[i, j] - m


def softmax_scale(e):
    """Each row of e [R, N] divided by its (pairwise) sum."""
    rows, n = e.shape
    frames, lefts = np.empty((DEPTH, 3), np.int64), np.empty(DEPTH, FLOAT)
    for i in range(rows):
        s = ZERO + pairwise(e[i], 0, n, frames, lefts)
        for j in range(n):
            e[i, j] = e[i, j] / s


def softmax_grad(y, g, dx):
    """dx = (g - sum(y * g)) * y along each row of [R, N] arrays, the sum pairwise over
    the products."""
    rows, n = y.shape
    t = np.empty(n, FLOAT)
    frames, lefts = np.empty((DEPTH, 3), np.int64), np.empty(DEPTH, FLOAT)
    for i in range(rows):
        for j in range(n):
            t[j] = y[i, j] * g[i, j]
        s = ZERO + pairwise(t, 0, n, frames, lefts)
        for j in range(n):
            dx[i, j] = (g[i, j] - s) * y[i, j]


_FUNCTIONS = (softmax_shift, softmax_scale, softmax_grad)
_ARRAYS = {"softmax_shift": 2, "softmax_scale": 1, "softmax_grad": 3}


@cache
def softmax_source(function: str, dtype: str) -> KernelSource:
    """One of `_FUNCTIONS` over C-contiguous [R, N] arrays of ``dtype``."""
    args = (("array", dtype, 2),) * _ARRAYS[function]
    return KernelSource("softmax", sums_module(dtype, _FUNCTIONS), function, args)
