"""NumPy's pairwise summation, for compiled kernels whose values must be NumPy's bit for
bit (kernels/norm.py, kernels/softmax.py): ``np.sum(a, axis=-1)`` of a C-contiguous array
adds each row so, and a kernel that adds in another order gives other last bits.

These are plain Python functions; `sums_module` makes the text of a module of them, the
kernel's own functions and the constants below for one dtype (a generated module's
constants replace these defaults: float32).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .build import module_source, module_text

FLOAT = np.float32
ZERO = np.float32(0)
ONE = np.float32(1)
#: NumPy's block up to which a pairwise sum adds in eight interleaved partial sums
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


def sums_module(dtype: str, functions: Sequence[Callable]) -> str:
    """The text of a module of the sums and ``functions`` over arrays of ``dtype``, each
    compiled."""
    every: list[Callable] = [block_sum, pairwise, *functions]
    text = module_source(dtype, {"BLOCK": BLOCK, "DEPTH": DEPTH}, every) + \
        f"\n\nFLOAT = np.{dtype}\nZERO = FLOAT(0)\nONE = FLOAT(1)\n"
    return module_text(text, [f.__name__ for f in every])
