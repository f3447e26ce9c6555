"""col2im of batch-innermost images ([C, H, W, N], ops/layouts.py) in one pass, for the
compiled tier: each element of the image gradient is written once, as the sum of the
column entries of the windows that cover it, where NumPy zeroes the image and then adds
kh*kw strided views into it (each pass reading and writing the whole image).

The kernel's geometry (window, strides, dilations, the top and left padding) are
constants of the module text, generated per convolution. The sum of an element runs over
the window offsets (i, j) in row-major order, starting from zero, which is the order in
which the NumPy kernel's adds reach it: the values are the same, bit for bit. The loops
read within the arrays whatever shapes they are given.
"""
from __future__ import annotations

from .build import KernelSource, module_source, module_text

#: the geometry: a generated module's own values replace these
KH, KW, SH, SW, DH, DW, PT, PL = 2, 2, 1, 1, 1, 1, 0, 0


def col2im(d, dx):
    C = min(d.shape[0], dx.shape[0])
    N = min(d.shape[5], dx.shape[3])
    OH, OW = d.shape[3], d.shape[4]
    for c in range(C):
        for h in range(dx.shape[1]):
            for w in range(dx.shape[2]):
                for n in range(dx.shape[3]):
                    dx[c, h, w, n] = 0
                for i in range(min(KH, d.shape[1])):
                    hh = h + PT - i * DH
                    if hh < 0 or hh % SH != 0 or hh // SH >= OH:
                        continue
                    for j in range(min(KW, d.shape[2])):
                        ww = w + PL - j * DW
                        if ww < 0 or ww % SW != 0 or ww // SW >= OW:
                            continue
                        for n in range(N):
                            dx[c, h, w, n] += d[c, i, j, hh // SH, ww // SW, n]


def col2im_source(window: tuple[int, int], strides: tuple[int, int],
                  dilations: tuple[int, int], pads: tuple[int, int], dtype: str
                  ) -> KernelSource:
    """``col2im(d, dx)``: ``d`` the columns as [C, kh, kw, OH, OW, N], ``dx`` the image
    [C, H, W, N] it writes; ``pads`` the top and left padding."""
    geometry = dict(zip(("KH", "KW", "SH", "SW", "DH", "DW", "PT", "PL"),
                        (*window, *strides, *dilations, *pads)))
    text = module_source(dtype, geometry, (col2im,))
    return KernelSource("col2im", module_text(text, ["col2im"]), "col2im",
                        (("array", dtype, 6), ("array", dtype, 4)))
