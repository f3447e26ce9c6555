"""The detection ops in ONNX (`onnx/export_detect.py`): roi_align as RoiAlign, roi_pool as
MaxRoiPool (each roi's image index from RoisLod), psroi_pool as masked sums and
deformable_conv as DeformConv (opset 19); onnxruntime and the imported file give what
``infer`` gives at two batch sizes (for the rois: two numbers of images, RoisLod made from
each image's count of rois)."""
from __future__ import annotations

import numpy as np
import pytest

import fluid
from tests.onnx_io.helpers import check_exported

L = fluid.layers
R = 5


class Boxes(fluid.Program):
    @fluid.network("img", "rois", "counts")
    def infer(self, img, rois, counts):
        img = L.data("img", shape=[3, 8, 9])
        rois = L.data("rois", shape=[R, 4], append_batch_size=False)
        counts = L.data("counts", shape=[-1], dtype="int64", append_batch_size=False)
        lod = L.concat([L.fill_constant([1], "int64", 0), L.cumsum(counts)])
        return (L.roi_align(img, rois, 3, 2, 0.5, rois_lod=lod),
                L.roi_align(img, rois, 2, 2, 1.0, 2, rois_lod=lod),
                L.roi_align(img, rois, 2, 3, 0.25),
                L.roi_pool(img, rois, 3, 3, 0.5, rois_lod=lod),
                L.roi_pool(img, rois, 2, 4, 1.0),
                L.psroi_pool(img, rois, 1, 0.5, 3, 1, rois_lod=lod),
                L.psroi_pool(L.concat([img, img * 2.0, -img], axis=1), rois, 1, 1.0, 3, 3))


def _boxes(rng, images: int) -> dict:
    x1, y1 = rng.uniform(0, 8, R), rng.uniform(0, 7, R)
    rois = np.stack([x1, y1, x1 + rng.uniform(0, 9, R), y1 + rng.uniform(0, 9, R)], 1)
    cuts = np.concatenate([[0], np.sort(rng.integers(0, R + 1, images - 1)), [R]])
    return {"img": rng.standard_normal((images, 3, 8, 9)).astype(np.float32),
            "rois": rois.astype(np.float32), "counts": np.diff(cuts).astype(np.int64)}


def test_roi_ops_match_onnxruntime_and_import_back(tmp_path, rng):
    check_exported(Boxes().Compile(seed=0), str(tmp_path / "boxes.onnx"),
                   [_boxes(rng, images) for images in (2, 3)], rtol=1e-5, atol=1e-5)


class Deformed(fluid.Program):
    @fluid.network("x", "offset", "mask")
    def infer(self, x, offset, mask):
        x = L.data("x", shape=[4, 6, 7])
        offset = L.data("offset", shape=[2 * 2 * 9, 6, 7])
        mask = L.data("mask", shape=[2 * 9, 6, 7])
        return (L.deformable_conv(x, offset, mask, 6, 3, padding=1, deformable_groups=2),
                L.deformable_conv(x, offset, None, 4, 3, padding=1, deformable_groups=2,
                                  groups=2, modulated=False, bias_attr=False),
                L.deformable_conv(x, offset[:, :18, 1:5, 1:6], mask[:, :9, 1:5, 1:6], 3, 3,
                                  stride=1, padding=0, dilation=1, deformable_groups=1))


def test_deformable_conv_matches_onnxruntime_and_imports_back(tmp_path, rng):
    feeds = [{"x": rng.standard_normal((b, 4, 6, 7)).astype(np.float32),
              "offset": (2 * rng.standard_normal((b, 36, 6, 7))).astype(np.float32),
              "mask": rng.uniform(0, 1, (b, 18, 6, 7)).astype(np.float32)} for b in (1, 3)]
    check_exported(Deformed().Compile(seed=0), str(tmp_path / "deformed.onnx"), feeds,
                   opset=19, atol=1e-5)


def test_deformable_conv_before_opset_19_says_which_opset():
    with pytest.raises(fluid.OnnxError, match="opset 19"):
        fluid.export_onnx(Deformed().Compile(seed=0), None, opset=18)
