"""Naive NumPy references of the windowed image ops over any number of spatial dims,
written from Paddle 1.8's definitions (its unit tests' formulas): one Python loop per
output position, float64, channel-first arrays. Used by test_vision_ops.py."""
from __future__ import annotations

from itertools import product
from math import ceil, floor

import numpy as np


def pads2(paddings, rank):
    """Paddings as (before, after) per spatial dim from one or two values per dim."""
    p = list(paddings)
    return [v for v in p for _ in (0, 1)] if len(p) == rank else p


def same_pads(sizes, ksize, strides):
    """Paddle's SAME padding: output ceil(size / stride), the odd pixel at the end."""
    out = []
    for size, k, s in zip(sizes, ksize, strides):
        total = max((-(-size // s) - 1) * s + k - size, 0)
        out += [total // 2, total - total // 2]
    return out


def ref_conv(x, w, strides, paddings, dilations, groups):
    """Convolution (cross-correlation) of x [N, C, *S] with w [O, C/G, *k]."""
    rank = x.ndim - 2
    p = pads2(paddings, rank)
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(p[2 * i], p[2 * i + 1])
                                                          for i in range(rank)])
    o, cg, *k = w.shape
    og = o // groups
    outs = [(xp.shape[2 + i] - dilations[i] * (k[i] - 1) - 1) // strides[i] + 1
            for i in range(rank)]
    y = np.zeros((x.shape[0], o, *outs))
    for pos in product(*(range(v) for v in outs)):
        window = tuple(slice(pos[i] * strides[i],
                             pos[i] * strides[i] + dilations[i] * (k[i] - 1) + 1, dilations[i])
                       for i in range(rank))
        for g in range(groups):
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + window]
            wg = w[g * og:(g + 1) * og].astype(np.float64)
            y[(slice(None), slice(g * og, (g + 1) * og)) + pos] = \
                patch.reshape(len(x), -1) @ wg.reshape(og, -1).T
    return y


def ref_conv_transpose(x, w, strides, paddings, dilations, groups, output_size=None):
    """Transposed convolution of x [N, C, *S] with w [C, O/G, *k]: each input value
    spreads its filter over the output, which is then cropped by the paddings."""
    rank = x.ndim - 2
    p = pads2(paddings, rank)
    c, og, *k = w.shape
    cg = c // groups
    full = [(x.shape[2 + i] - 1) * strides[i] + dilations[i] * (k[i] - 1) + 1 + strides[i]
            for i in range(rank)]
    y = np.zeros((x.shape[0], og * groups, *full))
    for pos in product(*(range(v) for v in x.shape[2:])):
        window = tuple(slice(pos[i] * strides[i],
                             pos[i] * strides[i] + dilations[i] * (k[i] - 1) + 1, dilations[i])
                       for i in range(rank))
        for g in range(groups):
            vals = x[(slice(None), slice(g * cg, (g + 1) * cg)) + pos].astype(np.float64)
            spread = np.einsum("nc,co...->no...", vals, w[g * cg:(g + 1) * cg])
            y[(slice(None), slice(g * og, (g + 1) * og)) + window] += spread
    sizes = [full[i] - strides[i] - p[2 * i] - p[2 * i + 1] for i in range(rank)]
    if output_size:
        sizes = list(output_size)
    return y[(slice(None), slice(None)) + tuple(slice(p[2 * i], p[2 * i] + sizes[i])
                                                for i in range(rank))]


def _bounds(i, size, k, s, p0, adaptive, out):
    if adaptive:
        return int(floor(i * size / out)), int(ceil((i + 1) * size / out))
    start = i * s - p0
    return max(start, 0), min(start + k, size)


def ref_pool(x, pooling_type, ksize, strides, paddings, global_pooling=False,
             ceil_mode=False, exclusive=True, adaptive=False, **_):
    """Paddle's pool2d / pool3d on a channel-first x."""
    rank = x.ndim - 2
    sizes = x.shape[2:]
    p = pads2(paddings, rank)
    if global_pooling:
        ksize, p = list(sizes), [0] * (2 * rank)
    if adaptive:
        outs = list(ksize)
    else:
        outs = [(sizes[i] - ksize[i] + p[2 * i] + p[2 * i + 1] + (strides[i] - 1 if ceil_mode
                                                                   else 0)) // strides[i] + 1
                for i in range(rank)]
    y = np.zeros(x.shape[:2] + tuple(outs))
    for pos in product(*(range(v) for v in outs)):
        b = [_bounds(pos[i], sizes[i], ksize[i], strides[i], p[2 * i], adaptive, outs[i])
             for i in range(rank)]
        win = x[(slice(None), slice(None)) + tuple(slice(a, e) for a, e in b)]
        win = win.reshape(x.shape[0], x.shape[1], -1).astype(np.float64)
        if pooling_type == "max":
            y[(slice(None), slice(None)) + pos] = win.max(axis=-1)
        else:
            count = win.shape[-1] if (exclusive or adaptive) else int(np.prod(ksize))
            y[(slice(None), slice(None)) + pos] = win.sum(axis=-1) / count
    return y


def ref_max_pool_with_index(x, ksize, strides, paddings, global_pooling=False,
                            adaptive=False, **_):
    """Paddle's max_pool{2,3}d_with_index: the maxima and the plane index of each
    window's first maximum."""
    rank = x.ndim - 2
    sizes = x.shape[2:]
    if global_pooling:
        ksize, paddings = list(sizes), [0] * rank
    outs = list(ksize) if adaptive else [(sizes[i] - ksize[i] + 2 * paddings[i]) // strides[i]
                                         + 1 for i in range(rank)]
    y = np.zeros(x.shape[:2] + tuple(outs))
    mask = np.zeros(x.shape[:2] + tuple(outs), np.int32)
    for pos in product(*(range(v) for v in outs)):
        b = [_bounds(pos[i], sizes[i], ksize[i], strides[i], paddings[i], adaptive, outs[i])
             for i in range(rank)]
        win = x[(slice(None), slice(None)) + tuple(slice(a, e) for a, e in b)]
        flat = win.reshape(x.shape[0], x.shape[1], -1)
        first = flat.argmax(axis=-1)
        local = np.unravel_index(first, win.shape[2:])
        where = np.ravel_multi_index(tuple(local[i] + b[i][0] for i in range(rank)), sizes)
        y[(slice(None), slice(None)) + pos] = flat.max(axis=-1)
        mask[(slice(None), slice(None)) + pos] = where
    return y, mask
