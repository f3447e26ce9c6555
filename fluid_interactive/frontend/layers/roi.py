"""Pooling over regions of interest: roi_pool, roi_align and psroi_pool.

``rois`` is a float Variable ``[R, 4]`` of boxes (x1, y1, x2, y2) in the input image's
pixels. Paddle kept which image each box belongs to in the rois' LoD; here ``rois_lod``
(an int64 Variable ``[N + 1]``: the offsets of each image's boxes, Paddle 1.8's own
argument of roi_pool and roi_align) says it, and without it every box is of image 0.
"""
from __future__ import annotations

from typing import Any

from ...errors import OpArgumentError, ShapeError
from ...ir.records import INT_DTYPES
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable
from .image_args import image_input, is_int


def _inputs(layer: str, input: Any, rois: Any, rois_lod: Any) -> dict[str, Variable]:
    x = image_input(layer, input, 2, "NCHW", channels_known=False)
    r = as_variable(rois, f"{layer} rois")
    if len(r.shape) != 2 or r.shape[1] != 4 or r.dtype != x.dtype:
        raise error_at(ShapeError, f"{layer}: rois {r.name}:{short_type(r.desc)} must be [R, 4] "
                                   f"boxes (x1, y1, x2, y2) of the input's dtype {x.dtype}")
    inputs = {"X": x, "ROIs": r}
    if rois_lod is not None:
        lod = as_variable(rois_lod, f"{layer} rois_lod")
        if lod.dtype not in INT_DTYPES or len(lod.shape) != 1:
            raise error_at(OpArgumentError, f"{layer}: rois_lod must be an int64 [N + 1] of "
                                            f"offsets, got {lod.name}:{short_type(lod.desc)}")
        inputs["RoisLod"] = lod
    return inputs


def _attrs(layer: str, pooled_height: Any, pooled_width: Any, spatial_scale: Any) -> dict:
    for what, v in (("pooled_height", pooled_height), ("pooled_width", pooled_width)):
        if not is_int(v) or v < 1:
            raise error_at(OpArgumentError, f"{layer}: {what} must be a positive int, got "
                                            f"{v!r}")
    if isinstance(spatial_scale, bool) or not isinstance(spatial_scale, (int, float)) or \
            spatial_scale <= 0:
        raise error_at(OpArgumentError, f"{layer}: spatial_scale must be a positive number, "
                                        f"got {spatial_scale!r}")
    return {"pooled_height": pooled_height, "pooled_width": pooled_width,
            "spatial_scale": float(spatial_scale)}


def roi_pool(input: Variable, rois: Variable, pooled_height: int = 1, pooled_width: int = 1,
             spatial_scale: float = 1.0, rois_lod: Variable | None = None) -> Variable:
    """Max pooling of each box (rounded to the input's pixels after ``spatial_scale``)
    over a ``pooled_height x pooled_width`` grid of bins: ``[R, C, ph, pw]``; an empty
    bin gives 0."""
    helper = LayerHelper("roi_pool")
    return helper.append("roi_pool", _inputs("roi_pool", input, rois, rois_lod),
                         _attrs("roi_pool", pooled_height, pooled_width,
                                spatial_scale))["Out"][0]


def roi_align(input: Variable, rois: Variable, pooled_height: int = 1, pooled_width: int = 1,
              spatial_scale: float = 1.0, sampling_ratio: int = -1, name: str | None = None,
              rois_lod: Variable | None = None) -> Variable:
    """Each box (scaled, not rounded) split into ``pooled_height x pooled_width`` bins,
    each the mean of a grid of bilinear samples: ``sampling_ratio`` per dim, or
    ``ceil(box size / pooled size)`` when it is <= 0. Output ``[R, C, ph, pw]``."""
    attrs = _attrs("roi_align", pooled_height, pooled_width, spatial_scale)
    if not is_int(sampling_ratio):
        raise error_at(OpArgumentError, f"roi_align: sampling_ratio must be an int, got "
                                        f"{sampling_ratio!r}")
    attrs["sampling_ratio"] = sampling_ratio
    return LayerHelper("roi_align", name).append_one(
        "roi_align", _inputs("roi_align", input, rois, rois_lod), attrs)


def psroi_pool(input: Variable, rois: Variable, output_channels: int, spatial_scale: float,
               pooled_height: int, pooled_width: int, name: str | None = None,
               rois_lod: Variable | None = None) -> Variable:
    """Position-sensitive roi pooling (R-FCN): the input has ``output_channels *
    pooled_height * pooled_width`` channels, and output (c, i, j) of a box averages bin (i,
    j) of channel ``(c * pooled_height + i) * pooled_width + j``: ``[R, output_channels,
    ph, pw]``. ``rois_lod`` as roi_pool's (a keyword after Paddle's arguments)."""
    layer = "psroi_pool"
    if not is_int(output_channels) or output_channels < 1:
        raise error_at(OpArgumentError, f"psroi_pool: output_channels must be a positive int, "
                                        f"got {output_channels!r}")
    attrs = _attrs(layer, pooled_height, pooled_width, spatial_scale)
    attrs["output_channels"] = output_channels
    return LayerHelper(layer, name).append_one(layer, _inputs(layer, input, rois, rois_lod),
                                               attrs)


__all__ = ["roi_pool", "roi_align", "psroi_pool"]
