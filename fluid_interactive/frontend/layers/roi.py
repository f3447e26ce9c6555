"""Pooling over regions of interest: roi_pool, roi_align, psroi_pool, prroi_pool and
deformable_roi_pooling.

``rois`` is a float Variable ``[R, 4]`` of boxes (x1, y1, x2, y2) in the input image's
pixels. Paddle kept which image each box belongs to in the rois' LoD; here ``rois_lod``
(an int64 Variable ``[N + 1]``: the offsets of each image's boxes, Paddle 1.8's own
argument of roi_pool and roi_align) says it, and without it every box is of image 0.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import OpArgumentError, ShapeError
from ...ir.records import INT_DTYPES
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable, float_input
from .image_args import flag, image_input, is_int


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


def prroi_pool(input: Variable, rois: Variable, spatial_scale: float = 1.0,
               pooled_height: int = 1, pooled_width: int = 1,
               batch_roi_nums: Variable | None = None, name: str | None = None,
               rois_lod: Variable | None = None) -> Variable:
    """Precise roi pooling: each of a box's ``pooled_height x pooled_width`` bins is the
    integral over the bin of the input's bilinear interpolation (0 outside the image),
    divided by the bin's area: ``[R, C, ph, pw]``. The boxes are scaled by
    ``spatial_scale`` (a float), not rounded. Which image each box is of comes from
    ``batch_roi_nums`` (int64 ``[N]``, the number of boxes of each image) or ``rois_lod``
    (the offsets, as roi_pool's). Gradients reach the input and the boxes."""
    layer = "prroi_pool"
    if not isinstance(spatial_scale, float):
        raise error_at(OpArgumentError, f"prroi_pool: spatial_scale must be a float (as "
                                        f"Paddle requires), got {spatial_scale!r}")
    attrs = _attrs(layer, pooled_height, pooled_width, spatial_scale)
    inputs: dict[str, Any] = _inputs(layer, input, rois, rois_lod)
    if batch_roi_nums is not None:
        if rois_lod is not None:
            raise error_at(OpArgumentError, "prroi_pool: give batch_roi_nums or rois_lod, "
                                            "not both")
        nums = as_variable(batch_roi_nums, "prroi_pool batch_roi_nums")
        if nums.dtype not in INT_DTYPES or len(nums.shape) != 1:
            raise error_at(OpArgumentError, f"prroi_pool: batch_roi_nums must be an int64 "
                                            f"[N] of counts, got {nums.name}:"
                                            f"{short_type(nums.desc)}")
        inputs["BatchRoINums"] = nums
    return LayerHelper(layer, name).append_one(layer, inputs, attrs)


def _int_pair(layer: str, what: str, value: Any) -> list[int]:
    if not isinstance(value, (list, tuple)) or len(value) != 2 or \
            not all(is_int(v) and v >= 1 for v in value):
        raise error_at(OpArgumentError, f"{layer}: {what} must be a list or tuple of two "
                                        f"positive ints [height, width], got {value!r}")
    return [int(v) for v in value]


def _output_dim(layer: str, x: Variable, position_sensitive: bool, ph: int, pw: int) -> int:
    """Paddle's output channels: the input's, or with ``position_sensitive`` the input's
    over ``ph * pw``."""
    c = x.shape[1]
    if c < 0:
        raise error_at(ShapeError, f"{layer}: input {x.name}:{short_type(x.desc)} has an "
                                   f"unknown channel count; it must be known")
    if not position_sensitive:
        return c
    if c % (ph * pw):
        raise error_at(ShapeError, f"{layer}: with position_sensitive the input's {c} "
                                   f"channels must be a multiple of pooled_height * "
                                   f"pooled_width = {ph * pw}")
    return c // (ph * pw)


def deformable_roi_pooling(input: Variable, rois: Variable, trans: Variable,
                           no_trans: bool = False, spatial_scale: float = 1.0,
                           group_size: Sequence[int] = (1, 1), pooled_height: int = 1,
                           pooled_width: int = 1, part_size: Sequence[int] | None = None,
                           sample_per_part: int = 1, trans_std: float = 0.1,
                           position_sensitive: bool = False, name: str | None = None,
                           rois_lod: Variable | None = None) -> Variable:
    """Deformable (position-sensitive) roi pooling: each box (corners rounded, scaled,
    centred on pixels) split into ``pooled_height x pooled_width`` bins, each bin moved by
    a learned offset ``trans_std * trans[r, 2k (+1), part] * box size`` (``trans`` ``[R, 2 *
    classes, part_h, part_w]``, x then y; ``part_size`` defaults to the pooled size) unless
    ``no_trans``, and averaged over ``sample_per_part`` squared bilinear samples:
    ``[R, output_dim, ph, pw]``. ``output_dim`` is the input's channel count, or with
    ``position_sensitive`` that over ``pooled_height * pooled_width``; output channel c
    reads input channel ``(c * gh + gi) * gw + gj`` of its bin's cell (gi, gj) of the
    ``group_size`` grid. ``rois_lod`` as roi_pool's. Gradients reach the input and
    ``trans``."""
    layer = "deformable_roi_pooling"
    x = float_input(input, f"{layer}: input")
    r = float_input(rois, f"{layer}: rois")
    t = float_input(trans, f"{layer}: trans")
    attrs = _attrs(layer, pooled_height, pooled_width, spatial_scale)
    ph, pw = attrs["pooled_height"], attrs["pooled_width"]
    if not is_int(sample_per_part) or sample_per_part < 1:
        raise error_at(OpArgumentError, f"{layer}: sample_per_part must be a positive int, "
                                        f"got {sample_per_part!r}")
    if isinstance(trans_std, bool) or not isinstance(trans_std, (int, float)) or trans_std < 0:
        raise error_at(OpArgumentError, f"{layer}: trans_std must be a number >= 0, got "
                                        f"{trans_std!r}")
    attrs.update(no_trans=flag(layer, "no_trans", no_trans),
                 output_dim=_output_dim(layer, x, flag(layer, "position_sensitive",
                                                       position_sensitive), ph, pw),
                 group_size=_int_pair(layer, "group_size", group_size),
                 part_size=_int_pair(layer, "part_size",
                                     [ph, pw] if part_size is None else part_size),
                 sample_per_part=sample_per_part, trans_std=float(trans_std))
    checked = _inputs(layer, x, r, rois_lod)
    inputs = {"Input": checked["X"], "ROIs": checked["ROIs"], "Trans": t,
              "RoisLod": checked.get("RoisLod")}
    return LayerHelper(layer, name).append_one("deformable_psroi_pooling", inputs, attrs)


__all__ = ["roi_pool", "roi_align", "psroi_pool", "prroi_pool", "deformable_roi_pooling"]
