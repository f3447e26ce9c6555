"""The last of Paddle 1.8's layers against the NumPy a careful person would write: cvm and
filter_by_instag as slices and a boolean row selection, prroi_pool as the separable
integral (dense per-roi weights over the image's rows and columns, two batched matrix
products), deformable_roi_pooling as a loop over the sample grid gathering the four
corners of every bin at once."""
from __future__ import annotations

import numpy as np

import fluid

from . import OpCase, f32, i64

L = fluid.layers


def _np_cvm(x, show_click):
    y = x.copy()
    y[:, 0] = np.log1p(x[:, 0])
    y[:, 1] = np.log1p(x[:, 1]) - y[:, 0]
    return y


def _np_instag(ins, tags):
    kept = np.isin(tags, [3, 7]).any(axis=1)
    out = ins[kept]
    return out, np.ones((len(out), 1), "float32")


def _boxes(n, r, size, seed):
    rng = np.random.default_rng(seed)
    corner = rng.uniform(0, size * 0.6, (r, 2))
    box = np.concatenate([corner, corner + rng.uniform(4, size * 0.4, (r, 2))], axis=1)
    return box.astype("float32"), np.sort(rng.integers(0, n, r))


IMAGES = f32(4, 64, 32, 32, low=0.0)
BOXES, BOX_IMAGE = _boxes(4, 96, 32, seed=1)
BOX_COUNTS = np.bincount(BOX_IMAGE, minlength=4).astype("int64")


def _hat_integral(u):
    u = np.clip(u, -1.0, 1.0)
    return np.where(u <= 0, 0.5 * (1 + u) ** 2, 1 - 0.5 * (1 - u) ** 2)


def _dense_weights(start, size, bins, limit):
    """[R, bins, limit]: each pixel's hat integrated over each bin."""
    a = start[:, None, None] + np.arange(bins)[:, None] * size[:, None, None]
    pixel = np.arange(limit)
    return _hat_integral(a + size[:, None, None] - pixel) - _hat_integral(a - pixel)


def _np_prroi(x, boxes, counts):
    image = np.repeat(np.arange(len(counts)), counts)
    bh = np.maximum(boxes[:, 3] - boxes[:, 1], 0) / 7
    bw = np.maximum(boxes[:, 2] - boxes[:, 0], 0) / 7
    rows = _dense_weights(boxes[:, 1], bh, 7, x.shape[2]).astype(x.dtype)
    cols = _dense_weights(boxes[:, 0], bw, 7, x.shape[3]).astype(x.dtype)
    out = rows[:, None] @ x[image] @ cols[:, None].transpose(0, 1, 3, 2)
    return out / (bh * bw)[:, None, None, None]


def _np_deformable(x, boxes, trans, lod):
    """Paddle's defaults but 4 x 4 samples of 7 x 7 bins, trans_std 0.1."""
    n, c, h, w = x.shape
    image = np.repeat(np.arange(len(lod) - 1), np.diff(lod))
    rounded = np.sign(boxes) * np.floor(np.abs(boxes) + 0.5)
    x1, y1 = rounded[:, 0] - 0.5, rounded[:, 1] - 0.5
    rw = np.maximum(rounded[:, 2] + 0.5 - x1, 0.1)[:, None, None, None]
    rh = np.maximum(rounded[:, 3] + 0.5 - y1, 0.1)[:, None, None, None]
    w0 = np.arange(7) * rw / 7 + x1[:, None, None, None] + trans[:, None, 0] * 0.1 * rw
    h0 = np.arange(7)[:, None] * rh / 7 + y1[:, None, None, None] + trans[:, None, 1] * 0.1 * rh
    plane = (image[:, None, None, None] * c + np.arange(c)[:, None, None]) * h * w
    flat, total, count = x.reshape(-1), 0, 0
    for u in range(4):
        hs = h0 + u * rh / 28
        for v in range(4):
            ws = w0 + v * rw / 28
            inside = (hs >= -0.5) & (hs <= h - 0.5) & (ws >= -0.5) & (ws <= w - 0.5)
            hc, wc = np.clip(hs, 0, h - 1), np.clip(ws, 0, w - 1)
            y0, x0 = np.floor(hc), np.floor(wc)
            fy, fx = hc - y0, wc - x0
            y0, x0 = y0.astype(np.int64), x0.astype(np.int64)
            y1_, x1_ = np.ceil(hc).astype(np.int64), np.ceil(wc).astype(np.int64)
            top, bottom = plane + y0 * w, plane + y1_ * w
            value = ((1 - fy) * ((1 - fx) * flat[top + x0] + fx * flat[top + x1_])
                     + fy * ((1 - fx) * flat[bottom + x0] + fx * flat[bottom + x1_]))
            total = total + np.where(inside, value, 0)
            count = count + inside
    return np.where(count > 0, total / np.maximum(count, 1), 0)


TRANS = f32(96, 2, 7, 7, seed=3)
LOD = np.concatenate([[0], np.cumsum(BOX_COUNTS)]).astype("int64")

CASES = [
    OpCase("continuous_value_model", {"x": f32(32768, 12, low=0.0), "sc": f32(32768, 2)},
           lambda x, sc: L.continuous_value_model(x, sc, True), _np_cvm),
    OpCase("filter_by_instag", {"ins": f32(16384, 32), "tags": i64(16384, 4, high=64)},
           lambda ins, tags: tuple(L.filter_by_instag(ins, tags, [3, 7], False)), _np_instag),
    OpCase("prroi_pool", {"x": IMAGES, "boxes": BOXES, "counts": BOX_COUNTS},
           lambda x, b, n: L.prroi_pool(x, b, 1.0, 7, 7, batch_roi_nums=n), _np_prroi,
           rtol=1e-4, atol=1e-5),
    OpCase("deformable_roi_pooling", {"x": IMAGES, "boxes": BOXES, "trans": TRANS, "lod": LOD},
           lambda x, b, t, lod: L.deformable_roi_pooling(
               x, b, t, pooled_height=7, pooled_width=7, sample_per_part=4, rois_lod=lod),
           _np_deformable, rtol=1e-4, atol=1e-5),
]
