"""prroi_pool and deformable_psroi_pooling: forwards against NumPy references written from
Paddle 1.8's test_prroi_pool_op (its py_precise_roi_pool) and
test_deformable_psroi_pooling on their inputs (boxes drawn as those tests draw them, image
b holding b + 1 boxes), every gradient (the boxes' and the offsets' too) against finite
differences, the layers in compiled programs, and their errors. PyTorch's roi ops live in
torchvision, which is not installed: NumPy only."""
import math

import numpy as np
import pytest
from ops.harness import check_block, check_grad, check_op, run_forward

import fluid
from fluid_interactive.errors import OpArgumentError, ShapeError

L = fluid.layers


def paddle_boxes(rng, batch, height, width, scale, ph, pw, draw):
    """([R, 4], offsets [batch + 1]): test_prroi_pool_op's boxes (``draw`` = uniform) or
    test_deformable_psroi_pooling's (integers), image b holding b + 1."""
    rois, lod = [], [0]
    for b in range(batch):
        for _ in range(b + 1):
            x1 = draw(0, width // scale - pw)
            y1 = draw(0, height // scale - ph)
            rois.append([x1, y1, draw(x1 + pw, width // scale), draw(y1 + ph, height // scale)])
        lod.append(len(rois))
    return np.array(rois, np.float64), np.array(lod, np.int64)


def _image_of(lod):
    return np.repeat(np.arange(len(lod) - 1), np.diff(lod))


# --- prroi_pool -------------------------------------------------------------------------------

def _interpolate(img, y, x):
    """X's bilinear interpolation at (y, x), X taken as 0 outside the image: [C]."""
    h, w = img.shape[1:]
    total = np.zeros(img.shape[0])
    for i in (math.floor(y), math.floor(y) + 1):
        for j in (math.floor(x), math.floor(x) + 1):
            if 0 <= i < h and 0 <= j < w:
                total += max(0.0, 1 - abs(y - i)) * max(0.0, 1 - abs(x - j)) * img[:, i, j]
    return total


def _pieces(lo, hi):
    """[lo, hi] cut at the integers (on each piece the interpolation is bilinear)."""
    cuts = [lo] + list(range(math.floor(lo) + 1, math.ceil(hi))) + [hi]
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]


def _integral(img, y0, y1, x0, x1):
    """The integral of the interpolation over a box, exact: two Gauss-Legendre points
    per dim on each piece where it is bilinear."""
    total = np.zeros(img.shape[0])
    for a, b in _pieces(y0, y1):
        for c, d in _pieces(x0, x1):
            for u in (-1, 1):
                for v in (-1, 1):
                    y = (a + b) / 2 + u * (b - a) / (2 * math.sqrt(3))
                    x = (c + d) / 2 + v * (d - c) / (2 * math.sqrt(3))
                    total += _interpolate(img, y, x) * (b - a) * (d - c) / 4
    return total


def ref_prroi(X, ROIs, spatial_scale, pooled_height, pooled_width, RoisLod=None,
              BatchRoINums=None, **_):
    images = _image_of(RoisLod if BatchRoINums is None
                       else np.concatenate([[0], np.cumsum(BatchRoINums)]))
    out = np.zeros((len(ROIs), X.shape[1], pooled_height, pooled_width))
    for r, (roi, b) in enumerate(zip(ROIs * spatial_scale, images)):
        bh = max(roi[3] - roi[1], 0) / pooled_height
        bw = max(roi[2] - roi[0], 0) / pooled_width
        if bh * bw == 0:
            continue
        for i in range(pooled_height):
            for j in range(pooled_width):
                y0, x0 = roi[1] + i * bh, roi[0] + j * bw
                out[r, :, i, j] = _integral(X[b], y0, y0 + bh, x0, x0 + bw) / (bh * bw)
    return out


def _prroi_case(rng):
    """test_prroi_pool_op's case: [3, 12, 12, 16], spatial_scale 0.5, 4 x 4 bins."""
    x = rng.random((3, 12, 12, 16))
    rois, lod = paddle_boxes(rng, 3, 12, 16, 0.5, 4, 4, rng.uniform)
    return x, rois, lod, {"spatial_scale": 0.5, "pooled_height": 4, "pooled_width": 4}


@pytest.mark.parametrize("images", ["RoisLod", "BatchRoINums"])
def test_prroi_pool_on_paddles_inputs(rng, images):
    x, rois, lod, attrs = _prroi_case(rng)
    inputs = {"X": x, "ROIs": rois,
              images: lod if images == "RoisLod" else np.diff(lod)}
    check_op("prroi_pool", inputs, attrs, reference=ref_prroi, rtol=1e-10, atol=1e-12,
             batch_unknown=False)


def test_prroi_pool_gradients_of_the_input_and_the_boxes(rng):
    x, rois, lod, attrs = _prroi_case(rng)
    inputs = {"X": x[:, :3], "ROIs": rois, "RoisLod": lod}
    check_grad("prroi_pool", inputs, attrs, wrt=["X", "ROIs"], max_elements=60)


def test_prroi_pool_boxes_past_the_border_and_of_no_area(rng):
    x = rng.random((1, 2, 5, 6))
    rois = np.array([[-2.3, -1.6, 3.7, 2.2], [3.1, 2.9, 8.4, 7.3], [1.2, 1.0, 3.3, 1.0],
                     [4.4, 0.3, 4.1, 3.5], [-4.0, -3.0, -1.2, -0.5]])
    attrs = {"spatial_scale": 1.0, "pooled_height": 2, "pooled_width": 3}
    got = check_op("prroi_pool", {"X": x, "ROIs": rois}, attrs,
                   reference=lambda **a: ref_prroi(RoisLod=np.array([0, 5]), **a),
                   rtol=1e-10, atol=1e-12, batch_unknown=False)
    assert not got["Out"][0][2:4].any() and not got["Out"][0][4].any()
    check_grad("prroi_pool", {"X": x, "ROIs": rois[:2]}, attrs, wrt=["X", "ROIs"])


def test_prroi_pool_in_a_program(rng):
    x, rois, lod, _ = _prroi_case(rng)

    def build():
        xv = L.data("x", [3, 12, 12, 16], "float64", append_batch_size=False,
                    stop_gradient=False)
        r = L.data("rois", [-1, 4], "float64", append_batch_size=False, stop_gradient=False)
        nums = L.data("nums", [3], "int64", append_batch_size=False)
        lo = L.data("lod", [4], "int64", append_batch_size=False)
        return [L.prroi_pool(xv, r, 0.5, 2, 3, batch_roi_nums=nums),
                L.prroi_pool(xv, r, 0.25, rois_lod=lo)]
    a, b = check_block(build, {"x": x, "rois": rois, "nums": np.diff(lod), "lod": lod},
                       wrt=["x", "rois"])
    np.testing.assert_allclose(a, ref_prroi(x, rois, 0.5, 2, 3, RoisLod=lod), rtol=1e-10)
    assert b.shape == (6, 12, 1, 1)


# --- deformable_psroi_pooling ---------------------------------------------------------------

def _sample(img, h, w):
    """Bilinear at (h, w) inside the image, as the op reads it."""
    h0, w0 = math.floor(h), math.floor(w)
    h1, w1 = min(h0 + 1, img.shape[0] - 1), min(w0 + 1, img.shape[1] - 1)
    dh, dw = h - h0, w - w0
    return ((1 - dh) * (1 - dw) * img[h0, w0] + (1 - dh) * dw * img[h0, w1]
            + dh * (1 - dw) * img[h1, w0] + dh * dw * img[h1, w1])


def ref_deformable(Input, ROIs, Trans, no_trans, spatial_scale, output_dim, group_size,
                   pooled_height, pooled_width, part_size, sample_per_part, trans_std,
                   RoisLod, **_):
    """test_deformable_psroi_pooling's reference, output by output, with the op's group
    and class rules (that test uses one group and one class)."""
    _, _, height, width = Input.shape
    ph, pw, s = pooled_height, pooled_width, sample_per_part
    out = np.zeros((len(ROIs), output_dim, ph, pw))
    count = np.zeros_like(out)
    per_class = output_dim // (1 if no_trans else Trans.shape[1] // 2)
    for r, (roi, b) in enumerate(zip(ROIs, _image_of(RoisLod))):
        rounded = np.sign(roi) * np.floor(np.abs(roi) + 0.5)      # C's round: -4.5 -> -5
        x1, y1 = rounded[:2] * spatial_scale - 0.5
        x2, y2 = (rounded[2:] + 1) * spatial_scale - 0.5
        rw, rh = max(x2 - x1, 0.1), max(y2 - y1, 0.1)
        for c, i, j in np.ndindex(output_dim, ph, pw):
            pi, pj = i * part_size[0] // ph, j * part_size[1] // pw
            k = c // per_class
            tx = 0 if no_trans else Trans[r, 2 * k, pi, pj] * trans_std
            ty = 0 if no_trans else Trans[r, 2 * k + 1, pi, pj] * trans_std
            w0, h0 = j * rw / pw + x1 + tx * rw, i * rh / ph + y1 + ty * rh
            gi = min(i * group_size[0] // ph, group_size[0] - 1)
            gj = min(j * group_size[1] // pw, group_size[1] - 1)
            img = Input[b, (c * group_size[0] + gi) * group_size[1] + gj]
            values = []
            for u, v in np.ndindex(s, s):
                h, w = h0 + u * rh / ph / s, w0 + v * rw / pw / s
                if -0.5 <= h <= height - 0.5 and -0.5 <= w <= width - 0.5:
                    values.append(_sample(img, min(max(h, 0), height - 1),
                                          min(max(w, 0), width - 1)))
            count[r, c, i, j] = len(values)
            out[r, c, i, j] = np.mean(values) if values else 0.0
    return {"Output": out, "TopCount": count}


# test_deformable_psroi_pooling's four cases: (batch, no_trans, spatial_scale, pooled
# height and width, part_size, sample_per_part, trans_std); 12 channels of 12 x 12
PADDLE_DEFORMABLE = [(3, False, 0.25, 4, 4, [4, 4], 2, 0.1), (2, True, 0.5, 7, 7, [7, 7], 4, 0.1),
                     (2, False, 0.25, 3, 3, [3, 3], 3, 0.2), (2, True, 0.5, 6, 2, [6, 6], 6, 0.4)]


def _deformable_case(rng, batch, no_trans, scale, ph, pw, part, samples, std):
    x = rng.random((batch, 12, 12, 12))
    rois, lod = paddle_boxes(rng, batch, 12, 12, scale, ph, pw, rng.integers)
    inputs = {"Input": x, "ROIs": rois, "Trans": rng.random((len(rois), 2) + tuple(part)),
              "RoisLod": lod}
    attrs = {"no_trans": no_trans, "spatial_scale": scale, "output_dim": 12,
             "group_size": [1, 1], "pooled_height": ph, "pooled_width": pw, "part_size": part,
             "sample_per_part": samples, "trans_std": std}
    return inputs, attrs


@pytest.mark.parametrize("case", PADDLE_DEFORMABLE, ids=["case1", "case2", "case3", "case4"])
def test_deformable_psroi_pooling_on_paddles_inputs(rng, case):
    inputs, attrs = _deformable_case(rng, *case)
    check_op("deformable_psroi_pooling", inputs, attrs, reference=ref_deformable, rtol=1e-10,
             atol=1e-12, batch_unknown=False)


@pytest.mark.parametrize("case", [PADDLE_DEFORMABLE[0], PADDLE_DEFORMABLE[3]],
                         ids=["case1", "case4-no-trans"])
def test_deformable_psroi_pooling_gradients(rng, case):
    inputs, attrs = _deformable_case(rng, *case)
    check_grad("deformable_psroi_pooling", inputs, attrs, wrt=["Input", "Trans"],
               through=["Output"])


def test_deformable_psroi_pooling_groups_classes_and_boxes_past_the_border(rng):
    """2 x 2 groups, two classes of offsets, boxes not on the pixel grid, some leaving
    the image (their outside samples are skipped)."""
    x = rng.random((2, 3 * 4, 7, 9))
    rois = np.array([[-3.4, 1.2, 5.6, 6.3], [2.2, -4.5, 12.8, 3.1], [1.0, 1.6, 9.7, 8.8]])
    inputs = {"Input": x, "ROIs": rois, "Trans": rng.standard_normal((3, 4, 2, 3)),
              "RoisLod": np.array([0, 1, 3])}
    attrs = {"no_trans": False, "spatial_scale": 0.8, "output_dim": 2, "group_size": [2, 2],
             "pooled_height": 3, "pooled_width": 3, "part_size": [2, 3], "sample_per_part": 2,
             "trans_std": 0.3}
    got = check_op("deformable_psroi_pooling", inputs, attrs, reference=ref_deformable,
                   rtol=1e-10, atol=1e-12, batch_unknown=False)
    assert (got["TopCount"][0] < 4).any()
    check_grad("deformable_psroi_pooling", inputs, attrs, wrt=["Input", "Trans"],
               through=["Output"])


def test_deformable_roi_pooling_in_a_program(rng):
    inputs, _ = _deformable_case(rng, *PADDLE_DEFORMABLE[2])

    def build():
        x = L.data("x", [2, 12, 12, 12], "float64", append_batch_size=False,
                   stop_gradient=False)
        r = L.data("rois", [-1, 4], "float64", append_batch_size=False)
        t = L.data("trans", [-1, 2, 3, 3], "float64", append_batch_size=False,
                   stop_gradient=False)
        lo = L.data("lod", [3], "int64", append_batch_size=False)
        return [L.deformable_roi_pooling(x, r, t, spatial_scale=0.25, pooled_height=3,
                                         pooled_width=3, sample_per_part=3, trans_std=0.2,
                                         rois_lod=lo),
                L.deformable_roi_pooling(x, r, t, True, 0.25, [2, 2], 2, 2, [3, 3], 2,
                                         position_sensitive=True, rois_lod=lo)]
    a, b = check_block(build, {"x": inputs["Input"], "rois": inputs["ROIs"],
                               "trans": inputs["Trans"], "lod": inputs["RoisLod"]},
                       wrt=["x", "trans"])
    attrs = {"no_trans": False, "spatial_scale": 0.25, "output_dim": 12, "group_size": [1, 1],
             "pooled_height": 3, "pooled_width": 3, "part_size": [3, 3], "sample_per_part": 3,
             "trans_std": 0.2}
    np.testing.assert_allclose(a, ref_deformable(**inputs, **attrs)["Output"], rtol=1e-10)
    assert b.shape == (3, 3, 2, 2)


# --- errors -----------------------------------------------------------------------------------

_D_ATTRS = {"output_dim": 2, "pooled_height": 2, "pooled_width": 2, "part_size": [2, 2]}


def _d_inputs(c=8, trans=(3, 2, 2, 2), rois=(3, 4), dtype="float64"):
    return {"Input": np.zeros((1, c, 5, 5), dtype), "ROIs": np.zeros(rois),
            "Trans": np.zeros(trans)}


@pytest.mark.parametrize("op,inputs,attrs,match", [
    ("prroi_pool", {"X": np.zeros((2, 1, 4, 4)), "ROIs": np.zeros((3, 4)),
                    "RoisLod": np.array([0, 1, 3]), "BatchRoINums": np.array([1, 2])}, {},
     "give the rois' images once"),
    ("prroi_pool", {"X": np.zeros((2, 1, 4, 4)), "ROIs": np.zeros((3, 4)),
                    "BatchRoINums": np.array([1, 1, 1])}, {},
     r"BatchRoINums must be int64 \[N\] \(the number of rois of each of X's 2 images\)"),
    ("deformable_psroi_pooling", _d_inputs(), dict(_D_ATTRS, group_size=[1]),
     "group_size must be two positive ints"),
    ("deformable_psroi_pooling", _d_inputs(dtype="int64"), _D_ATTRS,
     "Input and Trans must be float"),
    ("deformable_psroi_pooling", _d_inputs(rois=(3, 5)), _D_ATTRS, r"ROIs must be \[R, 4\]"),
    ("deformable_psroi_pooling", _d_inputs(), dict(_D_ATTRS, trans_std=-0.1),
     "trans_std >= 0"),
    ("deformable_psroi_pooling", _d_inputs(c=7), dict(_D_ATTRS, group_size=[2, 2]),
     r"Input has 7 channels; output_dim 2 with group_size \[2, 2\] reads 8"),
    ("deformable_psroi_pooling", _d_inputs(trans=(2, 2, 2, 2)), _D_ATTRS,
     r"with R = 3 rois"),
    ("deformable_psroi_pooling", _d_inputs(trans=(3, 2, 1, 2)), _D_ATTRS,
     r"parts of at least part_size \[2, 2\]"),
    ("deformable_psroi_pooling", _d_inputs(trans=(3, 6, 2, 2)), _D_ATTRS,
     "output_dim 2 must be a positive multiple of the classes"),
])
def test_op_errors(op, inputs, attrs, match):
    with pytest.raises(ShapeError, match=match):
        run_forward(op, inputs, attrs)


def _trace(body):
    class P(fluid.Program):
        @fluid.network()
        def f(self):
            x = L.data("x", [2, 8, 6, 6], "float32", append_batch_size=False)
            xc = L.data("xc", [2, -1, 6, 6], "float32", append_batch_size=False)
            r = L.data("rois", [-1, 4], "float32", append_batch_size=False)
            t = L.data("trans", [-1, 2, 2, 2], "float32", append_batch_size=False)
            n = L.data("nums", [2], "int64", append_batch_size=False)
            return body(x, xc, r, t, n)
    return P().Compile()


@pytest.mark.parametrize("body,error,match", [
    # Paddle 1.8's own errors (test_prroi_pool_op, test_deformable_psroi_pooling)
    (lambda x, xc, r, t, n: L.prroi_pool(x, r, 2, 7, 7), OpArgumentError,
     "spatial_scale must be a float"),
    (lambda x, xc, r, t, n: L.prroi_pool(x, r, 0.25, 0.7, 7), OpArgumentError,
     "pooled_height must be a positive int"),
    (lambda x, xc, r, t, n: L.prroi_pool(x, r, 0.25, 7, 0.7), OpArgumentError,
     "pooled_width must be a positive int"),
    (lambda x, xc, r, t, n: L.deformable_roi_pooling([3, 4], r, t), OpArgumentError,
     "input must be a fluid Variable"),
    (lambda x, xc, r, t, n: L.deformable_roi_pooling(L.cast(x, "int32"), r, t),
     OpArgumentError, "must be float16, float32 or float64"),
    (lambda x, xc, r, t, n: L.deformable_roi_pooling(x, 2, t), OpArgumentError,
     "rois must be a fluid Variable"),
    (lambda x, xc, r, t, n: L.deformable_roi_pooling(x, r, [2]), OpArgumentError,
     "trans must be a fluid Variable"),
    (lambda x, xc, r, t, n: L.deformable_roi_pooling(x, r, t, group_size=1), OpArgumentError,
     "group_size must be a list or tuple of two positive ints"),
    (lambda x, xc, r, t, n: L.deformable_roi_pooling(x, r, t, part_size=8), OpArgumentError,
     "part_size must be a list or tuple of two positive ints"),
    # and fluid's
    (lambda x, xc, r, t, n: L.prroi_pool(x, r, batch_roi_nums=n, rois_lod=n), OpArgumentError,
     "give batch_roi_nums or rois_lod, not both"),
    (lambda x, xc, r, t, n: L.prroi_pool(x, r, batch_roi_nums=r), OpArgumentError,
     r"batch_roi_nums must be an int64 \[N\] of counts"),
    (lambda x, xc, r, t, n: L.deformable_roi_pooling(xc, r, t), ShapeError,
     "unknown channel count"),
    (lambda x, xc, r, t, n: L.deformable_roi_pooling(x, r, t, pooled_height=3,
                                                     position_sensitive=True), ShapeError,
     "channels must be a multiple of pooled_height \\* pooled_width = 3"),
    (lambda x, xc, r, t, n: L.deformable_roi_pooling(x, r, t, sample_per_part=0),
     OpArgumentError, "sample_per_part must be a positive int"),
    (lambda x, xc, r, t, n: L.deformable_roi_pooling(x, r, t, trans_std=-1.0),
     OpArgumentError, "trans_std must be a number >= 0"),
])
def test_layer_errors(body, error, match):
    with pytest.raises(error, match=match):
        _trace(body)
