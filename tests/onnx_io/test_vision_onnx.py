"""ONNX export of the vision and normalisation ops: each case's file passes onnx.checker,
runs in onnxruntime with the outputs of ``infer`` on batches of 1 and 5, and imports back
to a program with the same outputs (the convolutions and pools as the same ops)."""
from __future__ import annotations

import numpy as np
import pytest

import fluid
from fluid_interactive.errors import OnnxError
from tests.onnx_io.helpers import canonical_ops, check_export, one_method

L = fluid.layers
F32 = "float32"


def _convs(v, x):
    a = L.conv3d(v, 3, [2, 3, 3], stride=[1, 2, 1], padding=[1, 0, 1], act="relu")
    b = L.conv3d(v, 2, 3, padding="SAME", groups=2)
    c = L.conv3d_transpose(v, 3, filter_size=2, stride=2, padding=[0, 1, 0, 0, 1, 0])
    return a, b, c, L.conv2d(L.transpose(x, [0, 3, 1, 2]), 2, 3, padding="SAME", stride=2)


def _pools(v, x):
    img = L.transpose(x, [0, 3, 1, 2])
    return (L.pool3d(v, 2, "max", 2, ceil_mode=True), L.pool3d(v, [2, 3, 2], "avg", 1, 1),
            L.pool3d(v, pool_type="avg", global_pooling=True),
            L.pool2d(img, 3, "max", 2, pool_padding="SAME"))


def _uneven(v, x):
    """Adaptive pools whose windows differ in size (their Slices' reductions take their
    axes as an attr before opset 18)."""
    img = L.transpose(x, [0, 3, 1, 2])
    return L.adaptive_pool2d(img, [4, 5], "avg"), L.adaptive_pool3d(v, [3, 4, 2], "max")


def _channel_last_and_adaptive(v, x):
    img = L.transpose(x, [0, 3, 1, 2])
    return (L.conv2d(x, 4, 3, padding="SAME", data_format="NHWC"),
            L.conv2d_transpose(x, 2, filter_size=3, stride=2, padding=1, output_size=[14, 12],
                               data_format="NHWC"),
            L.pool2d(x, 3, "max", 2, pool_padding="SAME", data_format="NHWC"),
            L.pool2d(x, 2, "avg", 2, data_format="NHWC", exclusive=False),
            L.adaptive_pool2d(img, [7, 3], "max"), L.adaptive_pool2d(img, [1, 2], "avg"),
            L.adaptive_pool3d(v, 1, "avg"), L.adaptive_pool2d(img, [4, 5], "max"),
            L.adaptive_pool2d(img, [5, 4], "avg"), L.adaptive_pool3d(v, [3, 4, 2], "avg"),
            L.adaptive_pool2d(img, [4, 4], "max", require_index=True)[0])


def _resizes(v, x):
    img = L.transpose(x, [0, 3, 1, 2])
    return (L.resize_bilinear(img, [11, 9]), L.resize_bilinear(img, scale=2.0,
                                                               align_corners=False),
            L.interpolate(img, [5, 4], align_corners=False, align_mode=0),
            L.resize_nearest(img, [9, 13]), L.resize_nearest(img, [3, 8], align_corners=False),
            L.resize_trilinear(v, [5, 9, 4]), L.resize_bilinear(x, [4, 10], data_format="NHWC"))


def _norms(v, x):
    img = L.transpose(x, [0, 3, 1, 2])
    return (L.group_norm(img, 3, param_attr=fluid.ParamAttr(), bias_attr=fluid.ParamAttr()),
            L.group_norm(x, 1, data_layout="NHWC"), L.instance_norm(v), L.lrn(img, n=3, k=2.0),
            L.lrn(x, data_format="NHWC"),
            L.affine_channel(img, scale=L.reduce_mean(img, dim=[0, 2, 3]),
                             bias=L.reduce_max(img, dim=[0, 2, 3])),
            L.spectral_norm(L.create_parameter([4, 3, 2], "float32"), dim=1, power_iters=3),
            L.data_norm(L.reshape(x, [0, -1]), enable_scale_and_shift=True))


def _samples(v, x):
    img = L.transpose(x, [0, 3, 1, 2])
    theta = L.reshape(L.reduce_mean(img, dim=[2, 3]), [0, 2, 3])
    grid = L.affine_grid(theta, [-1, 6, 4, 5])
    return (L.unfold(img, [2, 3], strides=[1, 2], paddings=[1, 0, 0, 1]),
            L.im2sequence(img, [3, 2], [2, 2], [0, 1, 1, 0]), grid,
            L.grid_sampler(img, grid * 1.2))


SPEC = {"v": ((2, 4, 6, 5), F32), "x": ((7, 6, 6), F32)}   # a volume, an NHWC image
CASES = {"convs": _convs, "pools": _pools, "uneven": _uneven,
         "channel_last": _channel_last_and_adaptive, "resizes": _resizes, "norms": _norms,
         "samples": _samples}
#: the cases whose ops all come back as themselves
EXACT_ROUND_TRIP = {"convs", "pools"}
OPSETS = {"resizes": 18, "samples": 17, "uneven": 17}


def _compiled(case):
    return one_method(CASES[case], SPEC, name=case.title())().Compile(seed=3)


@pytest.mark.parametrize("case", sorted(CASES))
def test_export_matches_onnxruntime_and_imports_back(case, tmp_path):
    net = _compiled(case)
    rng = np.random.default_rng(1)
    back = check_export(net, str(tmp_path / f"{case}.onnx"),
                        lambda batch: {n: rng.standard_normal((batch,) + s).astype(d)
                                       for n, (s, d) in SPEC.items()},
                        (1, 5), opset=OPSETS.get(case, 18), rtol=2e-5, atol=2e-5,
                        import_atol=2e-5)
    if case in EXACT_ROUND_TRIP:
        assert canonical_ops(back) == canonical_ops(net)


def _export_error(build, spec, opset=18):
    net = one_method(build, spec)().Compile(seed=0)
    with pytest.raises(OnnxError) as info:
        fluid.export_onnx(net, None, opset=opset)
    return str(info.value)


def test_what_onnx_cannot_express_is_refused_with_a_reason():
    img = {"x": ((3, 7, 5), F32)}
    assert "Mask (the index of each maximum) read" in _export_error(
        lambda x: L.adaptive_pool2d(x, [7, 5], require_index=True), img)
    assert "opset 18" in _export_error(lambda x: L.resize_bilinear(x, [4, 4]), img, opset=17)
    assert "slot_dim > 0" in _export_error(
        lambda x: L.data_norm(L.reshape(x, [0, -1]), slot_dim=5), img)
