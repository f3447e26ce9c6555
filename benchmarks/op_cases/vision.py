"""The vision and normalisation layers against the NumPy a careful person would write:
window views and tensordot for convolutions, reshapes for pooling, gathers for resizing
and sampling, reductions over reshaped views for the normalisations. Parameters are given
through NumpyArray initializers, so both sides use the same values."""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

import fluid

from . import OpCase, f32

L = fluid.layers


def _fixed(value: np.ndarray) -> fluid.ParamAttr:
    return fluid.ParamAttr(initializer=fluid.initializer.NumpyArray(value))


X3 = f32(8, 4, 12, 12, 12)
W3 = f32(8, 4, 3, 3, 3, seed=1) * 0.2
IMG = f32(16, 8, 32, 32)
NHWC = np.ascontiguousarray(IMG.transpose(0, 2, 3, 1))
W2 = f32(16, 8, 3, 3, seed=2) * 0.2


def _conv3d(x, w):
    win = sliding_window_view(x, w.shape[2:], axis=(2, 3, 4))     # N C D H W kd kh kw
    return np.tensordot(win, w, axes=([1, 5, 6, 7], [1, 2, 3, 4])).transpose(0, 4, 1, 2, 3)


def _conv2d_nhwc(x, w):
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    win = sliding_window_view(xp, w.shape[2:], axis=(1, 2))       # N H W C kh kw
    return np.tensordot(win, w, axes=([3, 4, 5], [1, 2, 3]))


def _conv3d_transpose(x, w):
    # each input value spreads its filter over the output: one tensordot, then a shifted
    # add per kernel tap
    n, c, d, h, wd = x.shape
    k = w.shape[2]
    spread = np.tensordot(x, w, axes=([1], [0]))                  # N D H W O kd kh kw
    out = np.zeros((n, w.shape[1], d + k - 1, h + k - 1, wd + k - 1), x.dtype)
    for i in range(k):
        for j in range(k):
            for m in range(k):
                out[:, :, i:i + d, j:j + h, m:m + wd] += spread[..., i, j, m].transpose(
                    0, 4, 1, 2, 3)
    return out


def _pool3d_max(x):
    n, c, d, h, w = x.shape
    return x.reshape(n, c, d // 2, 2, h // 2, 2, w // 2, 2).max(axis=(3, 5, 7))


def _adaptive_avg(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, 8, h // 8, 8, w // 8).mean(axis=(3, 5))


def _bilinear_taps(size, out):
    src = np.arange(out) * ((size - 1) / (out - 1))
    i0 = np.minimum(src.astype(np.int64), size - 1)
    lam = (src - i0).astype(np.float32)
    return i0, np.minimum(i0 + 1, size - 1), lam


def _resize_bilinear(x):
    h0, h1, lh = _bilinear_taps(x.shape[2], 64)
    w0, w1, lw = _bilinear_taps(x.shape[3], 64)
    rows = x[:, :, h0] * (1 - lh)[:, None] + x[:, :, h1] * lh[:, None]
    return rows[..., w0] * (1 - lw) + rows[..., w1] * lw


def _resize_nearest(x):
    idx = (np.arange(64) * (31 / 63) + 0.5).astype(np.int64)
    return x[:, :, idx][:, :, :, idx]


def _group_norm(x):
    n, c, h, w = x.shape
    g = x.reshape(n, 4, -1)
    mean = g.mean(axis=2, keepdims=True)
    var = g.var(axis=2, keepdims=True)
    return ((g - mean) / np.sqrt(var + 1e-5)).reshape(x.shape)


def _instance_norm(x):
    mean = x.mean(axis=(2, 3), keepdims=True)
    var = x.var(axis=(2, 3), keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5)


def _lrn(x):
    sq = x * x
    pad = np.pad(sq, ((0, 0), (2, 2), (0, 0), (0, 0)))
    total = sum(pad[:, i:i + x.shape[1]] for i in range(5))
    return x * (1.0 + 1e-4 * total) ** -0.75


def _unfold(x):
    win = sliding_window_view(x, (3, 3), axis=(2, 3))             # N C OH OW 3 3
    n, c, oh, ow = win.shape[:4]
    return win.transpose(0, 1, 4, 5, 2, 3).reshape(n, c * 9, oh * ow)


def _grid_sampler(x, grid):
    n, c, h, w = x.shape
    gx, gy = (grid[..., 0] + 1) * 0.5 * (w - 1), (grid[..., 1] + 1) * 0.5 * (h - 1)
    x0, y0 = np.floor(gx).astype(np.int64), np.floor(gy).astype(np.int64)
    out = 0
    b = np.arange(n)[:, None, None]
    for cx, cy in ((x0, y0), (x0, y0 + 1), (x0 + 1, y0), (x0 + 1, y0 + 1)):
        inside = (cx >= 0) & (cx < w) & (cy >= 0) & (cy < h)
        weight = (1 - np.abs(gx - cx)) * (1 - np.abs(gy - cy)) * inside
        vals = x[b, :, np.clip(cy, 0, h - 1), np.clip(cx, 0, w - 1)]    # N Hg Wg C
        out = out + vals * weight[..., None]
    return out.transpose(0, 3, 1, 2)


def _adaptive_max(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, 8, h // 8, 8, w // 8).max(axis=(3, 5))


def _trilinear(x):
    out = x
    for axis in (2, 3, 4):
        i0, i1, lam = _bilinear_taps(out.shape[axis], 2 * out.shape[axis])
        shape = [1] * out.ndim
        shape[axis] = -1
        lam = lam.reshape(shape)
        out = np.take(out, i0, axis=axis) * (1 - lam) + np.take(out, i1, axis=axis) * lam
    return out


def _im2sequence(x):
    n, c, h, w = x.shape
    win = x.reshape(n, c, h // 2, 2, w // 2, 2)                  # N C OH 2 OW 2
    return win.transpose(0, 2, 4, 1, 3, 5).reshape(n, (h // 2) * (w // 2), c * 4)


def _affine_grid(theta):
    ys, xs = np.meshgrid(np.linspace(-1, 1, 64), np.linspace(-1, 1, 64), indexing="ij")
    base = np.stack([xs.ravel(), ys.ravel(), np.ones(64 * 64)], axis=1).astype(np.float32)
    return (base @ theta.transpose(0, 2, 1)).reshape(len(theta), 64, 64, 2)


def _data_norm(x):
    means = np.full(64, 1.0, np.float32) / 1e4
    return (x - means) * np.sqrt(1e4 / np.full(64, 1e4, np.float32))


GRID = f32(16, 24, 24, 2, seed=3, low=-1.1, high=1.1)
SCALE, BIAS = f32(8, seed=4), f32(8, seed=5)

CASES = [
    OpCase("conv3d", {"x": X3}, lambda x: L.conv3d(x, 8, 3, param_attr=_fixed(W3),
                                                   bias_attr=False),
           lambda x: _conv3d(x, W3), rtol=1e-4, atol=1e-4),
    OpCase("conv3d_transpose", {"x": X3[:, :, :8, :8, :8]},
           lambda x: L.conv3d_transpose(x, 4, filter_size=3, param_attr=_fixed(W3[:4, :4]),
                                        bias_attr=False),
           lambda x: _conv3d_transpose(x, W3[:4, :4]), rtol=1e-4, atol=1e-4),
    OpCase("conv2d_nhwc", {"x": NHWC}, lambda x: L.conv2d(x, 16, 3, padding=1,
                                                          param_attr=_fixed(W2),
                                                          bias_attr=False,
                                                          data_format="NHWC"),
           lambda x: _conv2d_nhwc(x, W2), rtol=1e-4, atol=1e-4),
    OpCase("pool3d", {"x": X3}, lambda x: L.pool3d(x, 2, "max", 2), _pool3d_max),
    OpCase("adaptive_pool2d", {"x": IMG}, lambda x: L.adaptive_pool2d(x, 8, "avg"),
           _adaptive_avg),
    OpCase("resize_bilinear", {"x": IMG}, lambda x: L.resize_bilinear(x, [64, 64]),
           _resize_bilinear),
    OpCase("resize_nearest", {"x": IMG}, lambda x: L.resize_nearest(x, [64, 64]),
           _resize_nearest),
    OpCase("group_norm", {"x": IMG}, lambda x: L.group_norm(x, 4), _group_norm, atol=1e-5),
    OpCase("instance_norm", {"x": IMG}, lambda x: L.instance_norm(x), _instance_norm,
           atol=1e-5),
    OpCase("lrn", {"x": IMG}, lambda x: L.lrn(x), _lrn),
    OpCase("unfold", {"x": IMG}, lambda x: L.unfold(x, 3), _unfold),
    OpCase("grid_sampler", {"x": IMG, "grid": GRID}, lambda x, g: L.grid_sampler(x, g),
           _grid_sampler, atol=1e-5),
    OpCase("adaptive_pool2d_max", {"x": IMG}, lambda x: L.adaptive_pool2d(x, 8, "max"),
           _adaptive_max),
    OpCase("adaptive_pool3d", {"x": X3}, lambda x: L.adaptive_pool3d(x, [6, 4, 3], "avg"),
           lambda x: x.reshape(8, 4, 6, 2, 4, 3, 3, 4).mean(axis=(3, 5, 7)), atol=1e-6),
    OpCase("resize_trilinear", {"x": X3}, lambda x: L.resize_trilinear(x, [24, 24, 24]),
           _trilinear, atol=1e-5),
    OpCase("affine_channel", {"x": IMG, "s": SCALE, "b": BIAS},
           lambda x, s, b: L.affine_channel(x, s, b),
           lambda x, s, b: x * s[:, None, None] + b[:, None, None]),
    OpCase("im2sequence", {"x": IMG}, lambda x: L.im2sequence(x, 2, 2), _im2sequence),
    OpCase("affine_grid", {"t": f32(64, 2, 3)}, lambda t: L.affine_grid(t, [64, 1, 64, 64]),
           _affine_grid, atol=1e-5),
    OpCase("data_norm", {"x": f32(4096, 64)},
           lambda x: L.data_norm(x, param_attr={"batch_sum": 1.0}), _data_norm),
]
