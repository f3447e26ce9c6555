"""Image layers that move pixels around: unfold and im2sequence (an image's patches as
data), affine_grid and grid_sampler (a spatial transformer's sampling)."""
from __future__ import annotations

from typing import Any

from ...errors import OpArgumentError, ShapeError
from ...ir.records import FLOAT_DTYPES, INT_DTYPES
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, append_simple, as_variable
from .image_args import IntOrSeq, image_input, is_int, spatial_ints


def _four_paddings(layer: str, value: Any) -> list[int]:
    """An int, [a, b] (meaning [a, b, a, b]) or four ints, each non-negative."""
    vals = [value] * 4 if is_int(value) else (list(value) if isinstance(value, (list, tuple))
                                               else None)
    if vals is not None and len(vals) == 2:
        vals = vals * 2
    if vals is None or len(vals) != 4 or not all(is_int(v) and v >= 0 for v in vals):
        raise error_at(OpArgumentError, f"{layer}: padding must be an int or 2 or 4 "
                                        f"non-negative ints, got {value!r}")
    return [int(v) for v in vals]


def unfold(x: Variable, kernel_sizes: IntOrSeq, strides: IntOrSeq = 1,
           paddings: IntOrSeq = 0, dilations: IntOrSeq = 1,
           name: str | None = None) -> Variable:
    """The sliding windows of ``x`` ``[N, C, H, W]`` as columns (im2col): ``[N, C * kh *
    kw, L]``, L the window positions in row-major order. ``paddings``: an int, ``[ph,
    pw]`` or ``[top, left, bottom, right]`` (Paddle's order for unfold)."""
    layer = "unfold"
    v = image_input(layer, x, 2, "NCHW", channels_known=False)
    attrs = {"kernel_sizes": spatial_ints(layer, "kernel_sizes", kernel_sizes, 2, 1),
             "strides": spatial_ints(layer, "strides", strides, 2, 1),
             "paddings": _four_paddings(layer, paddings),
             "dilations": spatial_ints(layer, "dilations", dilations, 2, 1)}
    return append_simple(layer, {"X": v}, attrs, name=name)


def im2sequence(input: Variable, filter_size: IntOrSeq = 1, stride: IntOrSeq = 1,
                padding: IntOrSeq = 0, input_image_size: Variable | None = None,
                out_stride: IntOrSeq = 1, name: str | None = None) -> Variable:
    """Each image of ``input`` ``[N, C, H, W]`` as the sequence of its ``filter_size``
    patches in row-major order: ``[N, OH * OW, C * kh * kw]``, one padded-batch row per
    image (all of one length, so no lengths are needed). Output dims are rounded up:
    ``OH = (H + up + down - kh + stride_h - 1) // stride_h + 1``; ``padding`` is an int,
    ``[up, left]`` or ``[up, left, down, right]``.

    ``input_image_size`` (each image's real size, which would give rows of different
    lengths) is not supported: resize or crop the images to one size first."""
    layer = "im2sequence"
    x = image_input(layer, input, 2, "NCHW", channels_known=False)
    if input_image_size is not None:
        raise error_at(OpArgumentError, "im2sequence: input_image_size (images of different "
                                        "real sizes) is not supported; resize or crop the "
                                        "images to one size first")
    attrs = {"kernels": spatial_ints(layer, "filter_size", filter_size, 2, 1),
             "strides": spatial_ints(layer, "stride", stride, 2, 1),
             "paddings": _four_paddings(layer, padding),
             "out_stride": spatial_ints(layer, "out_stride", out_stride, 2, 1)}
    return append_simple(layer, {"X": x}, attrs, name=name)


def affine_grid(theta: Variable, out_shape: Any, name: str | None = None) -> Variable:
    """The sampling grid of an affine map (a spatial transformer's): ``theta`` ``[N, 2,
    3]`` -> ``[N, H, W, 2]``, the (x, y) that ``theta`` takes each of H x W points evenly
    spaced over ``[-1, 1]`` to. ``out_shape`` ``[N, C, H, W]``: a list, or an int32
    Variable ``[4]`` (or ``[-1]`` holding 4 values; then H and W are known only when the
    method runs)."""
    layer = "affine_grid"
    t = as_variable(theta, f"{layer} theta")
    if t.dtype not in FLOAT_DTYPES or len(t.shape) != 3 or tuple(t.shape[1:]) != (2, 3):
        raise error_at(ShapeError, f"{layer}: theta {t.name}:{short_type(t.desc)} must be a "
                                   f"float [N, 2, 3]")
    if isinstance(out_shape, Variable):
        # Paddle takes any 1-D int var; one of unknown length must hold 4 values when it runs
        if out_shape.dtype not in INT_DTYPES or len(out_shape.shape) != 1 or \
                out_shape.shape[0] not in (4, -1):
            raise error_at(OpArgumentError, f"{layer}: out_shape as a Variable must be an "
                                            f"int [4], got {out_shape.name}:"
                                            f"{short_type(out_shape.desc)}")
        return append_simple(layer, {"Theta": t, "OutputShape": out_shape}, {}, name=name)
    if not isinstance(out_shape, (list, tuple)) or len(out_shape) != 4 or \
            not all(is_int(d) for d in out_shape) or min(out_shape[2:]) < 1:
        raise error_at(OpArgumentError, f"{layer}: out_shape must be [N, C, H, W] ints (H, W "
                                        f"positive) or an int Variable, got {out_shape!r}")
    return append_simple(layer, {"Theta": t}, {"output_shape": [int(d) for d in out_shape]},
                         name=name)


def grid_sampler(x: Variable, grid: Variable, name: str | None = None) -> Variable:
    """``x`` ``[N, C, H, W]`` sampled bilinearly at the points of ``grid`` ``[N, Hg, Wg,
    2]`` (x, y in ``[-1, 1]``, the ends on the first and last pixels' centres; what falls
    outside counts as 0): ``[N, C, Hg, Wg]``."""
    layer = "grid_sampler"
    v = image_input(layer, x, 2, "NCHW", channels_known=False)
    g = as_variable(grid, f"{layer} grid")
    if g.dtype not in FLOAT_DTYPES or len(g.shape) != 4 or g.shape[3] != 2:
        raise error_at(ShapeError, f"{layer}: grid {g.name}:{short_type(g.desc)} must be a "
                                   f"float [N, Hg, Wg, 2]")
    return LayerHelper(layer, name).append_one(layer, {"X": v, "Grid": g})


__all__ = ["unfold", "im2sequence", "affine_grid", "grid_sampler"]
