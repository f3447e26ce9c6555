"""deformable_conv and deformable_conv_v1: forwards against a per-position NumPy reference
written from Paddle 1.8's test_deformable_conv_op and test_deformable_conv_v1_op on their
inputs, every gradient (input, offset, mask, filter) against finite differences, and the
layer in a compiled program. PyTorch's deformable convolution is torchvision's, which is
not installed: NumPy only."""
import numpy as np
import pytest
from ops.harness import check_block, check_grad, check_op, run_forward

import fluid
from fluid_interactive.errors import ShapeError


def _bilinear(img, h, w):
    height, width = img.shape
    h0, w0 = int(np.floor(h)), int(np.floor(w))
    lh, lw = h - h0, w - w0

    def at(a, b):
        return img[a, b] if 0 <= a < height and 0 <= b < width else 0.0
    return ((1 - lh) * (1 - lw) * at(h0, w0) + (1 - lh) * lw * at(h0, w0 + 1)
            + lh * (1 - lw) * at(h0 + 1, w0) + lh * lw * at(h0 + 1, w0 + 1))


def ref_deformable_conv(Input, Offset, Filter, strides, paddings, dilations, groups,
                        deformable_groups, Mask=None, **_):
    n, c, h, w = Input.shape
    o, cg, kh, kw = Filter.shape
    oh = (h + 2 * paddings[0] - (dilations[0] * (kh - 1) + 1)) // strides[0] + 1
    ow = (w + 2 * paddings[1] - (dilations[1] * (kw - 1) + 1)) // strides[1] + 1
    k, dg = kh * kw, deformable_groups
    cols = np.zeros((n, c, k, oh * ow))
    for b, ch, i, j, t in np.ndindex(n, c, oh, ow, k):
        d = ch // (c // dg)
        ki, kj = divmod(t, kw)
        y = i * strides[0] - paddings[0] + ki * dilations[0] + Offset[b, 2 * (d * k + t), i, j]
        x = j * strides[1] - paddings[1] + kj * dilations[1] + \
            Offset[b, 2 * (d * k + t) + 1, i, j]
        val = _bilinear(Input[b, ch], y, x) if -1 < y < h and -1 < x < w else 0.0
        cols[b, ch, t, i * ow + j] = val * (1.0 if Mask is None else Mask[b, d * k + t, i, j])
    out = np.zeros((n, o, oh * ow))
    og = o // groups
    for b, g in np.ndindex(n, groups):
        out[b, g * og:(g + 1) * og] = Filter[g * og:(g + 1) * og].reshape(og, -1) @ \
            cols[b, g * cg:(g + 1) * cg].reshape(-1, oh * ow)
    return out.reshape(n, o, oh, ow)


CASES = [   # (input, filter, pads, strides, dilations, groups, deformable groups)
    ((2, 8, 4, 4), (4, 8, 3, 3), [1, 1], [1, 1], [1, 1], 1, 1),
    ((2, 3, 5, 5), (6, 3, 3, 3), [3, 3], [2, 2], [1, 1], 1, 1),
    ((4, 3, 4, 4), (6, 3, 3, 3), [2, 2], [1, 1], [2, 2], 1, 1),
    ((2, 4, 5, 5), (6, 2, 3, 3), [1, 1], [1, 1], [1, 1], 2, 2),
]


def _inputs(rng, xs, fs, pads, strides, dils, dg):
    n, c, h, w = xs
    oh = (h + 2 * pads[0] - (dils[0] * (fs[2] - 1) + 1)) // strides[0] + 1
    ow = (w + 2 * pads[1] - (dils[1] * (fs[3] - 1) + 1)) // strides[1] + 1
    k = fs[2] * fs[3]
    return {"Input": rng.random(xs), "Offset": 3 * rng.random((n, 2 * dg * k, oh, ow)) - 1.5,
            "Mask": rng.random((n, dg * k, oh, ow)), "Filter": rng.random(fs)}


@pytest.mark.parametrize("xs,fs,pads,strides,dils,groups,dg", CASES)
@pytest.mark.parametrize("modulated", [True, False])
def test_deformable_conv_forward_and_grads(rng, xs, fs, pads, strides, dils, groups, dg,
                                           modulated):
    inputs = _inputs(rng, xs, fs, pads, strides, dils, dg)
    op = "deformable_conv"
    if not modulated:
        del inputs["Mask"]
        op = "deformable_conv_v1"
    attrs = {"paddings": pads, "strides": strides, "dilations": dils, "groups": groups,
             "deformable_groups": dg}
    check_op(op, inputs, attrs, reference=ref_deformable_conv, rtol=1e-10, atol=1e-10)
    check_grad(op, inputs, attrs, wrt=list(inputs), max_elements=16)


def test_deformable_conv_with_zero_offsets_is_a_convolution(rng):
    x, f = rng.random((2, 3, 6, 5)), rng.random((4, 3, 3, 3))
    attrs = {"paddings": [1, 1], "strides": [1, 1], "dilations": [1, 1], "groups": 1,
             "deformable_groups": 1}
    got = run_forward("deformable_conv_v1", {"Input": x, "Offset": np.zeros((2, 18, 6, 5)),
                                             "Filter": f}, attrs)["Output"][0]
    want = run_forward("conv2d", {"Input": x, "Filter": f},
                       {"paddings": [1, 1], "strides": [1, 1]})["Output"][0]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_deformable_conv_layer_in_a_program(rng):
    def build():
        L = fluid.layers
        x = L.data("x", [2, 4, 5, 5], "float64", append_batch_size=False, stop_gradient=False)
        off = L.data("off", [2, 36, 5, 5], "float64", append_batch_size=False,
                     stop_gradient=False)
        mask = L.sigmoid(L.data("mask", [2, 18, 5, 5], "float64", append_batch_size=False))
        return L.deformable_conv(x, off, mask, num_filters=4, filter_size=3, padding=1,
                                 groups=2, deformable_groups=2)
    (out,) = check_block(build, {"x": rng.random((2, 4, 5, 5)),
                                 "off": rng.random((2, 36, 5, 5)) - 0.5,
                                 "mask": rng.random((2, 18, 5, 5))}, wrt=["x", "off"])
    assert out.shape == (2, 4, 5, 5)


def test_deformable_conv_error_names_the_offset_shape(rng):
    with pytest.raises(ShapeError, match=r"Offset must be \[N, 18, 4, 4\]"):
        run_forward("deformable_conv_v1", {"Input": rng.random((1, 2, 4, 4)),
                                           "Offset": rng.random((1, 9, 4, 4)),
                                           "Filter": rng.random((3, 2, 3, 3))},
                    {"paddings": [1, 1]})
