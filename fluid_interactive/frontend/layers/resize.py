"""Resizing layers: image_resize (and its alias interpolate), resize_bilinear,
resize_nearest, resize_trilinear and image_resize_short.

The output size is ``out_shape`` (ints, a Variable holding them, or a list mixing ints
and [1] Variables) or, without it, ``scale`` (a number, or a [1] float Variable) times the
input's size. A size given through Variables is known only when the method runs: the
output's spatial dims are -1 until then.
"""
from __future__ import annotations

from typing import Any

from ...errors import OpArgumentError, ShapeError
from ...ir.records import FLOAT_DTYPES, INT_DTYPES
from ...ir.text import short_type
from ...ops.layouts import is_channel_last
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable
from .image_args import data_format as data_format_of
from .image_args import flag, image_input

_METHODS = {"BILINEAR": "bilinear", "TRILINEAR": "trilinear", "NEAREST": "nearest"}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _size_var(layer: str, v: Any, what: str, dtypes: frozenset[str]) -> Variable:
    var = as_variable(v, f"{layer} {what}")
    if var.dtype not in dtypes:
        raise error_at(OpArgumentError, f"{layer}: {what} {var.name} is {var.dtype}; it must "
                                        f"be {'an int' if dtypes is INT_DTYPES else 'a float'}"
                                        f" var")
    return var


def _out_shape(helper: LayerHelper, layer: str, out_shape: Any, rank: int,
               inputs: dict[str, Any], attrs: dict[str, Any]) -> None:
    """``out_shape`` as the op's out_* attrs, or its OutSize / SizeTensor inputs."""
    if isinstance(out_shape, Variable):
        inputs["OutSize"] = _size_var(layer, out_shape, "out_shape", INT_DTYPES)
        return
    if not isinstance(out_shape, (list, tuple)) or len(out_shape) != rank:
        raise error_at(OpArgumentError, f"{layer}: out_shape must be {rank} sizes (a list or "
                                        f"tuple), or an int Variable holding them; got "
                                        f"{out_shape!r}")
    sizes = []
    for dim in out_shape:
        if isinstance(dim, Variable):
            sizes.append(-1)
        elif not _is_int(dim) or dim <= 0:
            raise error_at(OpArgumentError, f"{layer}: each size in out_shape must be a "
                                            f"positive int or an int Variable, got {dim!r}")
        else:
            sizes.append(int(dim))
    if any(isinstance(d, Variable) for d in out_shape):
        inputs["SizeTensor"] = [
            _size_var(layer, d, "out_shape entry", INT_DTYPES) if isinstance(d, Variable)
            else helper.append_one("fill_constant", {}, {"shape": [1], "dtype": "int32",
                                                         "value": int(d)}, final=False)
            for d in out_shape]
    attrs.update(zip(("out_d", "out_h", "out_w")[3 - rank:], sizes))


def image_resize(input: Variable, out_shape: Any = None, scale: Any = None,
                 name: str | None = None, resample: str = "BILINEAR",
                 actual_shape: Variable | None = None, align_corners: bool = True,
                 align_mode: int = 1, data_format: str = "NCHW") -> Variable:
    """Resize a batch of images (``'BILINEAR'``, ``'NEAREST'``: ``[N, C, H, W]``) or of
    volumes (``'TRILINEAR'``: ``[N, C, D, H, W]``) to ``out_shape``, or by ``scale``.

    ``align_corners`` maps the corner pixels of input and output onto each other (ratio
    ``(in - 1) / (out - 1)``); otherwise the ratio is ``in / out`` and ``align_mode`` says
    where a linear method samples: 0 at pixel centres (``(k + 0.5) * ratio - 0.5``, as
    PyTorch's ``align_corners=False``), 1 at ``k * ratio``. Nearest rounds the sample
    position with align_corners, else truncates it. ``actual_shape`` (deprecated in
    Paddle) is an int Variable taking ``out_shape``'s place when the method runs.
    """
    layer = "image_resize"
    if resample not in _METHODS:
        raise error_at(OpArgumentError, f"{layer}: resample must be 'BILINEAR', 'TRILINEAR' or "
                                        f"'NEAREST', got {resample!r}")
    rank = 3 if resample == "TRILINEAR" else 2
    fmt = data_format_of(layer, data_format, rank)
    x = image_input(layer, input, rank, fmt, channels_known=False)
    flag(layer, "align_corners", align_corners)
    if align_mode not in (0, 1) or isinstance(align_mode, bool):
        raise error_at(OpArgumentError, f"{layer}: align_mode must be 0 or 1, got "
                                        f"{align_mode!r}")
    if out_shape is None and scale is None:
        raise error_at(OpArgumentError, f"{layer}: give out_shape or scale")
    helper = LayerHelper(f"{_METHODS[resample]}_interp", name)
    inputs: dict[str, Any] = {"X": x}
    attrs: dict[str, Any] = {"interp_method": _METHODS[resample],
                             "align_corners": align_corners, "align_mode": int(align_mode),
                             "data_layout": "NHWC" if is_channel_last(fmt) else "NCHW"}
    if out_shape is not None:
        _out_shape(helper, layer, out_shape, rank, inputs, attrs)
    elif isinstance(scale, Variable):
        inputs["Scale"] = _size_var(layer, scale, "scale", FLOAT_DTYPES)
    elif isinstance(scale, (int, float)) and not isinstance(scale, bool) and scale > 0:
        attrs["scale"] = float(scale)
    else:
        raise error_at(OpArgumentError, f"{layer}: scale must be a positive number or a float "
                                        f"Variable, got {scale!r}")
    if actual_shape is not None:
        inputs["OutSize"] = _size_var(layer, actual_shape, "actual_shape", INT_DTYPES)
    return helper.append_one(f"{_METHODS[resample]}_interp", inputs, attrs)


def interpolate(input: Variable, out_shape: Any = None, scale: Any = None,
                name: str | None = None, resample: str = "BILINEAR",
                actual_shape: Variable | None = None, align_corners: bool = True,
                align_mode: int = 1, data_format: str = "NCHW") -> Variable:
    """image_resize under Paddle 1.8's other name (the same arguments)."""
    return image_resize(input, out_shape, scale, name, resample, actual_shape, align_corners,
                        align_mode, data_format)


def resize_bilinear(input: Variable, out_shape: Any = None, scale: Any = None,
                    name: str | None = None, actual_shape: Variable | None = None,
                    align_corners: bool = True, align_mode: int = 1,
                    data_format: str = "NCHW") -> Variable:
    """``image_resize(..., resample='BILINEAR')`` of ``[N, C, H, W]`` images."""
    return image_resize(input, out_shape, scale, name, "BILINEAR", actual_shape,
                        align_corners, align_mode, data_format)


def resize_trilinear(input: Variable, out_shape: Any = None, scale: Any = None,
                     name: str | None = None, actual_shape: Variable | None = None,
                     align_corners: bool = True, align_mode: int = 1,
                     data_format: str = "NCDHW") -> Variable:
    """``image_resize(..., resample='TRILINEAR')`` of ``[N, C, D, H, W]`` volumes."""
    return image_resize(input, out_shape, scale, name, "TRILINEAR", actual_shape,
                        align_corners, align_mode, data_format)


def resize_nearest(input: Variable, out_shape: Any = None, scale: Any = None,
                   name: str | None = None, actual_shape: Variable | None = None,
                   align_corners: bool = True, data_format: str = "NCHW") -> Variable:
    """``image_resize(..., resample='NEAREST')`` of ``[N, C, H, W]`` images."""
    return image_resize(input, out_shape, scale, name, "NEAREST", actual_shape,
                        align_corners, 1, data_format)


def image_resize_short(input: Variable, out_short_len: int,
                       resample: str = "BILINEAR") -> Variable:
    """Resize ``[N, C, H, W]`` images so that their shorter side is ``out_short_len``,
    keeping the aspect ratio (the longer side rounded to the nearest int)."""
    x = as_variable(input, "image_resize_short input")
    if len(x.shape) != 4 or min(x.shape[2:]) < 0:
        raise error_at(ShapeError, f"image_resize_short: input {x.name}:{short_type(x.desc)} "
                                   f"must be [N, C, H, W] with H and W known")
    if not _is_int(out_short_len) or out_short_len <= 0:
        raise error_at(OpArgumentError, f"image_resize_short: out_short_len must be a "
                                        f"positive int, got {out_short_len!r}")
    hw = list(x.shape[2:])
    short = hw.index(min(hw))
    out = list(hw)
    out[short] = out_short_len
    out[1 - short] = int(hw[1 - short] * (out_short_len / hw[short]) + 0.5)
    return image_resize(x, out_shape=out, resample=resample)


__all__ = ["image_resize", "interpolate", "resize_bilinear", "resize_trilinear",
           "resize_nearest", "image_resize_short"]
