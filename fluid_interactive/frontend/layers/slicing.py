"""Layers that cut a box out of a tensor or pad one around it: strided_slice, crop,
crop_tensor, pad2d, pad_constant_like.

Lists of starts, shapes, offsets and paddings may be given as int Variables, as Paddle 1.8
allows: the sizes they decide are then known when the method runs (``?`` while tracing).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import OpArgumentError
from ..tracing import error_at
from ..variable import Variable
from .helpers import append_simple, as_variable
from .list_args import list_arg
from .tensor import _infer_flags, _ints

__all__ = ["strided_slice", "crop", "crop_tensor", "pad2d", "pad_constant_like"]

IntsOrVar = Sequence[int | Variable] | Variable


def strided_slice(input: Variable, axes: Sequence[int], starts: IntsOrVar, ends: IntsOrVar,
                  strides: IntsOrVar) -> Variable:
    """``input[starts[i]:ends[i]:strides[i]]`` along each dim ``axes[i]``, clamped as
    Python slices are; a negative stride walks backwards (``starts=[-1], ends=[-1000],
    strides=[-1]`` reverses a dim). ``starts``, ``ends`` and ``strides`` may be int
    Variables, or lists holding some."""
    x = as_variable(input, "strided_slice: input")
    axes_list = _ints(axes, "axes", "strided_slice")
    lists = [list_arg(v, what, "strided_slice", every_entry=True)
             for v, what in ((starts, "starts"), (ends, "ends"), (strides, "strides"))]
    inputs: dict[str, Any] = {"Input": x}
    for arg, slot in zip(lists, ("Starts", "Ends", "Strides")):
        inputs.update(arg.inputs(slot + "Tensor", slot + "TensorList"))
    attrs = {"axes": axes_list, "starts": lists[0].values, "ends": lists[1].values,
             "strides": lists[2].values, "infer_flags": _infer_flags(len(axes_list), *lists)}
    return append_simple("strided_slice", inputs, attrs)


def _offsets(offsets: IntsOrVar | None, x: Variable, layer: str) -> tuple[list[int], dict]:
    if offsets is None:
        return [0] * len(x.shape), {}
    arg = list_arg(offsets, "offsets", layer)
    if any(v < 0 for v, t in zip(arg.values, arg.from_tensor) if not t):
        raise error_at(OpArgumentError, f"{layer}: offsets must be >= 0, got {arg.values}")
    return arg.values, arg.inputs("Offsets", "OffsetsTensor")


def crop_tensor(x: Variable, shape: IntsOrVar | None = None,
                offsets: IntsOrVar | None = None, name: str | None = None) -> Variable:
    """The box of ``x`` of the given ``shape`` starting at ``offsets`` (default: zeros), a
    view. A shape entry of -1 takes the rest of the dim after its offset. Both may be int
    Variables or lists holding some (sizes known when the method runs)."""
    xv = as_variable(x, "crop_tensor: x")
    if shape is None:
        raise error_at(OpArgumentError, "crop_tensor: give the shape of the box (a list of "
                                        "ints, -1 for the rest of a dim, or an int Variable)")
    box = list_arg(shape, "shape", "crop_tensor", every_entry=True)
    offset_values, offset_inputs = _offsets(offsets, xv, "crop_tensor")
    inputs = {"X": xv, **box.inputs("Shape", "ShapeTensor"), **offset_inputs}
    return append_simple("crop_tensor", inputs, {"shape": box.values,
                                                 "offsets": offset_values}, name=name)


def crop(x: Variable, shape: Sequence[int] | Variable | None = None,
         offsets: Sequence[int] | Variable | None = None, name: str | None = None
         ) -> Variable:
    """The box of ``x`` at ``offsets`` (a list of ints or an int Variable; default zeros)
    of ``shape``: a list of ints, or a Variable whose shape (not its values) is the box's.
    Paddle keeps it for older programs; `crop_tensor` is its successor."""
    xv = as_variable(x, "crop: x")
    offset_values, inputs = _offsets(offsets, xv, "crop")
    inputs["X"] = xv
    attrs: dict[str, Any] = {"offsets": offset_values}
    if isinstance(shape, Variable):
        inputs["Y"] = shape
    elif shape is None:
        raise error_at(OpArgumentError, "crop: give the shape of the box (a list of ints, or "
                                        "a Variable of that shape)")
    else:
        attrs["shape"] = _ints(shape, "shape", "crop")
    return append_simple("crop", inputs, attrs, name=name)


_MODES = ("constant", "reflect", "edge")


def pad2d(input: Variable, paddings: Sequence[int] | Variable = (0, 0, 0, 0),
          mode: str = "constant", pad_value: float = 0.0, data_format: str = "NCHW",
          name: str | None = None) -> Variable:
    """``input`` (4-D, ``data_format`` NCHW or NHWC) padded around its height and width by
    ``paddings`` ``[top, bottom, left, right]`` (ints, or an int Variable of 4): 'constant'
    fills with ``pad_value``, 'reflect' mirrors the rows and columns next to the edge,
    'edge' repeats the edge."""
    x = as_variable(input, "pad2d: input")
    if mode not in _MODES:
        raise error_at(OpArgumentError, f"pad2d: mode must be one of {', '.join(_MODES)}, "
                                        f"got {mode!r}")
    if data_format not in ("NCHW", "NHWC"):
        raise error_at(OpArgumentError, f"pad2d: data_format must be 'NCHW' or 'NHWC', got "
                                        f"{data_format!r}")
    attrs: dict[str, Any] = {"mode": mode, "pad_value": float(pad_value),
                             "data_format": data_format}
    inputs: dict[str, Any] = {"X": x}
    if isinstance(paddings, Variable):
        inputs["Paddings"], attrs["paddings"] = paddings, []
    else:
        attrs["paddings"] = _ints(list(paddings), "paddings", "pad2d")
        if len(attrs["paddings"]) != 4:
            raise error_at(OpArgumentError, f"pad2d: paddings must be [top, bottom, left, "
                                            f"right], got {attrs['paddings']}")
    return append_simple("pad2d", inputs, attrs, name=name)


def pad_constant_like(x: Variable, y: Variable, pad_value: float = 0.0,
                      name: str | None = None) -> Variable:
    """``y`` padded at the end of each dim with ``pad_value`` up to the shape of ``x``
    (whose values are not read). The gradient reaches ``y`` alone."""
    xv = as_variable(x, "pad_constant_like: x")
    yv = as_variable(y, "pad_constant_like: y")
    return append_simple("pad_constant_like", {"X": xv, "Y": yv},
                         {"pad_value": float(pad_value)}, name=name)
