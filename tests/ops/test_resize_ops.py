"""bilinear_interp, nearest_interp and trilinear_interp: forwards against a per-pixel
NumPy reference written from Paddle 1.8's test_bilinear_interp_op, test_nearest_interp_op
and test_trilinear_interp_op (their inputs and attributes), sizes given by attrs, scale,
OutSize, SizeTensor and Scale inputs, gradients against finite differences, and
PyTorch's F.interpolate where its modes mean the same."""
from itertools import product

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from ops.harness import check_grad, check_op, run_forward

from fluid_interactive.errors import ShapeError


def _taps(method, size, out, k, align_corners, align_mode):
    """[(index, weight)] of output index k along one dim, as Paddle's kernels compute."""
    ratio = 0.0
    if out > 1:
        ratio = (size - 1.0) / (out - 1.0) if align_corners else size / out
    if method == "nearest":
        return [(int(ratio * k + 0.5) if align_corners else int(ratio * k), 1.0)]
    half = align_mode == 0 and not align_corners
    src = max(ratio * (k + 0.5) - 0.5, 0) if half else ratio * k
    i = max(int(src), 0)
    lam = src - i
    return [(i, 1.0 - lam), (i + 1 if i < size - 1 else i, lam)]


def ref_interp(x, method, outs, align_corners=True, align_mode=1, layout="NCHW"):
    rank = len(outs)
    last = layout in ("NHWC", "NDHWC")
    if last:
        x = np.moveaxis(x, -1, 1)
    sizes = x.shape[2:]
    y = np.zeros(x.shape[:2] + tuple(outs))
    for pos in product(*(range(o) for o in outs)):
        taps = [_taps(method, sizes[d], outs[d], pos[d], align_corners, align_mode)
                for d in range(rank)]
        for combo in product(*taps):
            index = tuple(i for i, _ in combo)
            weight = np.prod([w for _, w in combo])
            y[(slice(None), slice(None)) + pos] += weight * x[(slice(None), slice(None)) + index]
    return np.moveaxis(y, 1, -1) if last else y


def attrs_of(method, outs=(), scale=0.0, align_corners=True, align_mode=1, layout="NCHW"):
    attrs = {"interp_method": method, "scale": scale, "align_corners": align_corners,
             "align_mode": align_mode, "data_layout": layout}
    attrs.update(zip(("out_d", "out_h", "out_w")[3 - len(outs):], outs))
    return attrs


# (input shape, output size, align_corners, align_mode, layout) of Paddle's tests
BILINEAR = [
    ((2, 3, 5, 5), (2, 2), True, 1, "NCHW"), ((4, 1, 7, 8), (1, 1), True, 1, "NCHW"),
    ((3, 3, 9, 6), (12, 12), True, 1, "NCHW"), ((1, 1, 32, 64), (64, 32), True, 1, "NCHW"),
    ((2, 5, 5, 3), (2, 2), True, 1, "NHWC"), ((3, 3, 9, 6), (12, 12), False, 1, "NCHW"),
    ((3, 3, 9, 6), (12, 12), False, 0, "NCHW"), ((3, 3, 9, 6), (5, 4), False, 0, "NCHW"),
]
NEAREST = [
    ((2, 3, 4, 5), (2, 2), True, 1, "NCHW"), ((4, 1, 7, 8), (1, 1), True, 1, "NCHW"),
    ((3, 3, 9, 6), (12, 12), True, 1, "NCHW"), ((1, 1, 32, 64), (64, 32), True, 1, "NCHW"),
    ((3, 3, 9, 6), (12, 12), False, 1, "NCHW"), ((2, 4, 5, 3), (7, 2), True, 1, "NHWC"),
]
TRILINEAR = [
    ((2, 3, 4, 4, 4), (2, 2, 2), True, 1, "NCHW"), ((2, 1, 7, 8, 9), (1, 1, 1), True, 1, "NCHW"),
    ((2, 3, 9, 6, 8), (12, 12, 12), True, 1, "NCHW"),
    ((3, 2, 16, 8, 4), (32, 16, 8), True, 1, "NCHW"),
    ((1, 3, 9, 6, 8), (13, 10, 9), False, 0, "NCHW"),
    ((2, 4, 4, 4, 3), (2, 3, 2), True, 1, "NHWC"),
]


@pytest.mark.parametrize("method,case", [("bilinear", c) for c in BILINEAR]
                         + [("nearest", c) for c in NEAREST]
                         + [("trilinear", c) for c in TRILINEAR])
def test_interp_forward_and_grad(rng, method, case):
    shape, outs, corners, mode, layout = case
    x = rng.random(shape)
    attrs = attrs_of(method, outs, 0.0, corners, mode, layout)
    check_op(f"{method}_interp", {"X": x}, attrs,
             reference=lambda X, **_: ref_interp(X, method, outs, corners, mode, layout),
             rtol=1e-12, atol=1e-12)
    small = x[:1, :1] if layout == "NCHW" else x[:1, ..., :1]
    check_grad(f"{method}_interp", {"X": small}, attrs, max_elements=30)


@pytest.mark.parametrize("method,shape,scale", [("bilinear", (2, 3, 5, 7), 2.0),
                                                ("bilinear", (2, 3, 5, 7), 1.5),
                                                ("nearest", (2, 3, 5, 7), 1.5),
                                                ("trilinear", (1, 2, 3, 5, 4), 1.7)])
def test_interp_by_scale_attr(rng, method, shape, scale):
    x = rng.random(shape)
    outs = tuple(int(s * scale) for s in shape[2:])
    check_op(f"{method}_interp", {"X": x}, attrs_of(method, scale=scale),
             reference=lambda X, **_: ref_interp(X, method, outs), rtol=1e-12)


def test_interp_sizes_from_tensors_follow_paddles_order(rng):
    x = rng.random((2, 3, 5, 5))
    attrs = attrs_of("bilinear", (2, 2))
    by_out = run_forward("bilinear_interp", {"X": x, "OutSize": np.array([3, 4], np.int32)},
                         attrs)["Out"][0]
    np.testing.assert_allclose(by_out, ref_interp(x, "bilinear", (3, 4)), rtol=1e-12)
    listed = run_forward("bilinear_interp", {"X": x,
                                             "OutSize": np.array([3, 4], np.int32),
                                             "SizeTensor": [np.array([6], np.int32),
                                                            np.array([2], np.int32)]},
                         attrs)["Out"][0]
    np.testing.assert_allclose(listed, ref_interp(x, "bilinear", (6, 2)), rtol=1e-12)
    scaled = run_forward("nearest_interp", {"X": x, "Scale": np.array([1.6], np.float32)},
                         attrs_of("nearest", (2, 2)))["Out"][0]
    np.testing.assert_allclose(scaled, ref_interp(x, "nearest", (8, 8)), rtol=1e-12)


def test_interp_gradient_with_a_size_tensor(rng):
    x = rng.random((1, 2, 4, 3))
    check_grad("bilinear_interp", {"X": x, "OutSize": np.array([7, 5], np.int32)},
               attrs_of("bilinear", (2, 2), align_corners=False, align_mode=0))


@pytest.mark.parametrize("mode,shape,outs,corners", [
    ("bilinear", (2, 3, 5, 7), (9, 4), True), ("bilinear", (2, 3, 5, 7), (9, 4), False),
    ("nearest", (2, 3, 5, 7), (11, 3), False),
    ("trilinear", (1, 2, 4, 5, 3), (7, 3, 6), True),
    ("trilinear", (1, 2, 4, 5, 3), (7, 3, 6), False),
])
def test_interp_matches_torch(rng, mode, shape, outs, corners):
    x = rng.standard_normal(shape)
    attrs = attrs_of(mode, outs, align_corners=corners, align_mode=0)
    got = run_forward(f"{mode}_interp", {"X": x}, attrs)["Out"][0]
    kw = {} if mode == "nearest" else {"align_corners": corners}
    want = F.interpolate(torch.tensor(x), size=outs, mode=mode, **kw)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op,shape,attrs,match", [
    ("bilinear_interp", (2, 3, 4, 4, 4), attrs_of("bilinear", (2, 2)), "must be a 4-D"),
    ("trilinear_interp", (2, 3, 4, 4), attrs_of("trilinear", (2, 2, 2)), "must be a 5-D"),
    ("bilinear_interp", (2, 3, 4, 4), attrs_of("bilinear"), r"output size \[-1, -1\]"),
    ("bilinear_interp", (2, 3, 4, 4), attrs_of("bilinear", (2, 2), align_mode=2),
     "align_mode must be 0 or 1"),
])
def test_interp_errors(rng, op, shape, attrs, match):
    with pytest.raises(ShapeError, match=match):
        run_forward(op, {"X": rng.random(shape)}, attrs)
