"""roi_pool, roi_align and psroi_pool: forwards against per-bin NumPy references written
from Paddle 1.8's test_roi_pool_op, test_roi_align_op and test_psroi_pool_op on their
inputs (boxes drawn as those tests draw them, image b holding b + 1 boxes), gradients
against finite differences, and the layers in a compiled program. PyTorch's roi ops live
in torchvision, which is not installed: NumPy only."""
import math

import numpy as np
import pytest
from ops.harness import check_block, check_grad, check_op, run_forward

import fluid
from fluid_interactive.errors import ShapeError


def make_rois(rng, batch, height, width, scale, ph, pw):
    """([R, 4] boxes, int64 [batch + 1] offsets), image b holding b + 1 boxes."""
    rois, lod = [], [0]
    for b in range(batch):
        for _ in range(b + 1):
            x1 = rng.integers(0, width // scale - pw + 1)
            y1 = rng.integers(0, height // scale - ph + 1)
            x2 = rng.integers(x1 + pw, width // scale + 1)
            y2 = rng.integers(y1 + ph, height // scale + 1)
            rois.append([x1, y1, x2, y2])
        lod.append(len(rois))
    return np.array(rois, np.float64), np.array(lod, np.int64)


def _image_of(lod):
    return np.repeat(np.arange(len(lod) - 1), np.diff(lod))


def ref_roi_pool(X, ROIs, RoisLod, spatial_scale, pooled_height, pooled_width, **_):
    n, c, h, w = X.shape
    out = np.zeros((len(ROIs), c, pooled_height, pooled_width))
    arg = np.full(out.shape, -1, np.int64)
    for r, (roi, b) in enumerate(zip(ROIs, _image_of(RoisLod))):
        sw, sh, ew, eh = (int(math.floor(v * spatial_scale + 0.5)) for v in roi)
        bh = max(eh - sh + 1, 1) / pooled_height
        bw = max(ew - sw + 1, 1) / pooled_width
        for i in range(pooled_height):
            for j in range(pooled_width):
                h0 = min(max(int(math.floor(i * bh)) + sh, 0), h)
                h1 = min(max(int(math.ceil((i + 1) * bh)) + sh, 0), h)
                w0 = min(max(int(math.floor(j * bw)) + sw, 0), w)
                w1 = min(max(int(math.ceil((j + 1) * bw)) + sw, 0), w)
                if h1 <= h0 or w1 <= w0:
                    continue
                win = X[b, :, h0:h1, w0:w1].reshape(c, -1)
                first = win.argmax(axis=1)
                out[r, :, i, j] = win.max(axis=1)
                arg[r, :, i, j] = (h0 + first // (w1 - w0)) * w + w0 + first % (w1 - w0)
    return {"Out": out, "Argmax": arg}


def _bilinear(img, y, x):
    h, w = img.shape[1:]
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    y1, x1 = (y0 + 1, x0 + 1)
    if y0 >= h - 1:
        y = y0 = y1 = h - 1
    if x0 >= w - 1:
        x = x0 = x1 = w - 1
    ly, lx = y - y0, x - x0
    return ((1 - ly) * (1 - lx) * img[:, y0, x0] + (1 - ly) * lx * img[:, y0, x1]
            + ly * (1 - lx) * img[:, y1, x0] + ly * lx * img[:, y1, x1])


def ref_roi_align(X, ROIs, RoisLod, spatial_scale, pooled_height, pooled_width,
                  sampling_ratio, **_):
    out = np.zeros((len(ROIs), X.shape[1], pooled_height, pooled_width))
    for r, (roi, b) in enumerate(zip(ROIs, _image_of(RoisLod))):
        x1, y1, x2, y2 = roi * spatial_scale
        rw, rh = max(x2 - x1, 1), max(y2 - y1, 1)
        bh, bw = rh / pooled_height, rw / pooled_width
        gh = sampling_ratio if sampling_ratio > 0 else math.ceil(rh / pooled_height)
        gw = sampling_ratio if sampling_ratio > 0 else math.ceil(rw / pooled_width)
        for i in range(pooled_height):
            for j in range(pooled_width):
                total = 0.0
                for iy in range(gh):
                    for ix in range(gw):
                        total = total + _bilinear(X[b], y1 + i * bh + (iy + 0.5) * bh / gh,
                                                  x1 + j * bw + (ix + 0.5) * bw / gw)
                out[r, :, i, j] = total / (gh * gw)
    return out


def ref_psroi_pool(X, ROIs, RoisLod, spatial_scale, pooled_height, pooled_width,
                   output_channels, **_):
    n, c, h, w = X.shape
    out = np.zeros((len(ROIs), output_channels, pooled_height, pooled_width))
    for r, (roi, b) in enumerate(zip(ROIs, _image_of(RoisLod))):
        sw, sh = np.round(roi[0]) * spatial_scale, np.round(roi[1]) * spatial_scale
        ew, eh = (np.round(roi[2]) + 1) * spatial_scale, (np.round(roi[3]) + 1) * spatial_scale
        bh = max(eh - sh, 0.1) / pooled_height
        bw = max(ew - sw, 0.1) / pooled_width
        for k in range(output_channels):
            for i in range(pooled_height):
                for j in range(pooled_width):
                    h0 = min(max(int(math.floor(i * bh + sh)), 0), h)
                    h1 = min(max(int(math.ceil((i + 1) * bh + sh)), 0), h)
                    w0 = min(max(int(math.floor(j * bw + sw)), 0), w)
                    w1 = min(max(int(math.ceil((j + 1) * bw + sw)), 0), w)
                    ch = (k * pooled_height + i) * pooled_width + j
                    if h1 > h0 and w1 > w0:
                        out[r, k, i, j] = X[b, ch, h0:h1, w0:w1].mean()
    return out


def test_roi_pool_forward_argmax_and_grad(rng):
    x = rng.random((3, 3, 6, 4))
    rois, lod = make_rois(rng, 3, 6, 4, 0.25, 2, 2)
    attrs = {"spatial_scale": 0.25, "pooled_height": 2, "pooled_width": 2}
    inputs = {"X": x, "ROIs": rois, "RoisLod": lod}
    check_op("roi_pool", inputs, attrs, reference=ref_roi_pool, rtol=0, atol=0,
             batch_unknown=False)
    check_grad("roi_pool", inputs, attrs, through=["Out"])


@pytest.mark.parametrize("ratio", [-1, 2])
def test_roi_align_forward_and_grad(rng, ratio):
    x = rng.random((3, 3, 8, 6))
    rois, lod = make_rois(rng, 3, 8, 6, 0.5, 2, 2)
    attrs = {"spatial_scale": 0.5, "pooled_height": 2, "pooled_width": 2,
             "sampling_ratio": ratio}
    inputs = {"X": x, "ROIs": rois, "RoisLod": lod}
    check_op("roi_align", inputs, attrs, reference=ref_roi_align, rtol=1e-10, atol=1e-12,
             batch_unknown=False)
    check_grad("roi_align", inputs, attrs)


def test_roi_align_samples_past_the_border_count_zero(rng):
    x = rng.random((1, 2, 5, 5))
    rois = np.array([[-6.0, -6.0, 2.0, 3.0], [2.0, 1.0, 9.0, 11.0]])
    attrs = {"spatial_scale": 1.0, "pooled_height": 3, "pooled_width": 2, "sampling_ratio": 2}
    check_op("roi_align", {"X": x, "ROIs": rois}, attrs,
             reference=lambda X, ROIs, **a: ref_roi_align(X, ROIs, np.array([0, 2]), **a),
             rtol=1e-10, batch_unknown=False)


def test_psroi_pool_forward_and_grad(rng):
    x = rng.random((3, 12, 6, 4))
    rois, lod = make_rois(rng, 3, 6, 4, 0.25, 2, 2)
    attrs = {"spatial_scale": 0.25, "pooled_height": 2, "pooled_width": 2,
             "output_channels": 3}
    inputs = {"X": x, "ROIs": rois, "RoisLod": lod}
    check_op("psroi_pool", inputs, attrs, reference=ref_psroi_pool, rtol=1e-12,
             batch_unknown=False)
    check_grad("psroi_pool", inputs, attrs)


def test_roi_layers_in_a_program(rng):
    rois, lod = make_rois(rng, 2, 8, 6, 0.5, 2, 2)

    def build():
        L = fluid.layers
        x = L.data("x", [2, 12, 8, 6], "float64", append_batch_size=False,
                   stop_gradient=False)
        r = L.data("rois", [-1, 4], "float64", append_batch_size=False)
        lo = L.data("lod", [3], "int64", append_batch_size=False)
        return [L.roi_align(x, r, 2, 3, 0.5, rois_lod=lo),
                L.roi_pool(x, r, 3, 2, 0.5, rois_lod=lo),
                L.psroi_pool(x, r, 2, 0.5, 2, 3, rois_lod=lo)]
    aligned, pooled, ps = check_block(build, {"x": rng.random((2, 12, 8, 6)), "rois": rois,
                                              "lod": lod}, wrt=["x"])
    assert aligned.shape == (3, 12, 2, 3) and pooled.shape == (3, 12, 3, 2)
    assert ps.shape == (3, 2, 2, 3)


@pytest.mark.parametrize("op,inputs,attrs,match", [
    ("roi_align", {"X": np.zeros((1, 2, 4, 4)), "ROIs": np.zeros((3, 5))}, {},
     r"ROIs must be \[R, 4\]"),
    ("psroi_pool", {"X": np.zeros((1, 5, 4, 4)), "ROIs": np.zeros((3, 4))},
     {"output_channels": 2, "pooled_height": 2, "pooled_width": 1}, "needs output_channels"),
])
def test_roi_errors(op, inputs, attrs, match):
    with pytest.raises(ShapeError, match=match):
        run_forward(op, inputs, attrs)
