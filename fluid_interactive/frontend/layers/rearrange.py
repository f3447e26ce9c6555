"""Layers that move elements around: stack, unstack, expand, expand_as, t, flip, roll, and
the image rearrangements space_to_depth, pixel_shuffle, shuffle_channel, temporal_shift.

None of them does arithmetic; each has a gradient that moves dOut back (summing the copies
of expand and expand_as).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import OpArgumentError
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, append_simple, as_variable
from .index import check_int
from .list_args import list_arg
from .tensor import _ints
from .tensor_array import tensor_array_to_tensor

__all__ = ["stack", "unstack", "expand", "expand_as", "t", "flip", "roll", "space_to_depth",
           "pixel_shuffle", "shuffle_channel", "temporal_shift"]


def stack(x: Variable | Sequence[Variable], axis: int = 0) -> Variable:
    """The Variables of ``x`` (one shape and dtype) stacked along a new dim ``axis``:
    ``n`` inputs of shape ``[a, b]`` give ``[n, a, b]`` for axis 0. ``x`` may be one
    Variable, or a tensor array whose elements are stacked."""
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    if not xs:
        raise error_at(OpArgumentError, "stack: x must hold at least one Variable")
    first = as_variable(xs[0], "stack: x[0]")
    if first.desc.kind == "tensor_array":
        if len(xs) != 1:
            raise error_at(OpArgumentError, f"stack: a tensor array must be stacked alone, "
                                            f"got {len(xs)} inputs")
        return tensor_array_to_tensor(first, axis=check_int(axis, "axis", "stack"),
                                      use_stack=True)[0]
    return append_simple("stack", {"X": [as_variable(v, "stack: x") for v in xs]},
                         {"axis": check_int(0 if axis is None else axis, "axis", "stack")})


def unstack(x: Variable, axis: int = 0, num: int | None = None) -> list[Variable]:
    """``x`` cut along ``axis`` into its ``num`` slices (by default x's size there, which
    must then be known while tracing), each without that dim: views."""
    xv = as_variable(x, "unstack: x")
    axis = check_int(axis, "axis", "unstack")
    if num is None:
        rank = len(xv.shape)
        size = xv.shape[axis] if -rank <= axis < rank else -1
        if size <= 0:
            raise error_at(OpArgumentError, f"unstack: x {list(xv.shape)} has no known size "
                                            f"along axis {axis}; give num")
        num = size
    num = check_int(num, "num", "unstack", minimum=1)
    helper = LayerHelper("unstack")
    outs = helper.append("unstack", {"X": xv}, {"axis": axis, "num": num},
                         outputs={"Y": [helper.tmp() for _ in range(num)]})
    return outs["Y"]


def expand(x: Variable, expand_times: Sequence[int | Variable] | Variable,
           name: str | None = None) -> Variable:
    """``x`` tiled ``expand_times[i]`` times along each dim i (NumPy's ``tile``): a
    ``[2, 3]`` x with ``[2, 1]`` gives ``[4, 3]``. ``expand_times`` may be an int Variable,
    or a list holding some (those dims are then known when the method runs)."""
    xv = as_variable(x, "expand: x")
    times = list_arg(expand_times, "expand_times", "expand")
    if any(v < 1 for v, f in zip(times.values, times.from_tensor) if not f):
        raise error_at(OpArgumentError, f"expand: expand_times {times.values} must be "
                                        f"positive")
    inputs = {"X": xv, **times.inputs("ExpandTimes", "expand_times_tensor")}
    return append_simple("expand", inputs, {"expand_times": times.values}, name=name)


def expand_as(x: Variable, target_tensor: Variable, name: str | None = None) -> Variable:
    """``x`` tiled to the shape of ``target_tensor`` (whose values are not read), each of
    whose dims must be a multiple of x's."""
    xv = as_variable(x, "expand_as: x")
    target = as_variable(target_tensor, "expand_as: target_tensor")
    return append_simple("expand_as", {"X": xv, "target_tensor": target}, name=name)


def t(input: Variable, name: str | None = None) -> Variable:
    """The transpose of a matrix (rank 2); a rank-0 or rank-1 ``input`` is returned as it
    is. Higher ranks: use `transpose` with a permutation."""
    x = as_variable(input, "t: input")
    if len(x.shape) > 2:
        raise error_at(OpArgumentError, f"t: input {x.name!r} has rank {len(x.shape)}; t "
                                        f"takes rank <= 2, use fluid.layers.transpose")
    if len(x.shape) < 2:
        return x
    return append_simple("transpose", {"X": x}, {"axis": [1, 0]}, layer="t", name=name)


def flip(input: Variable, dims: Sequence[int], name: str | None = None) -> Variable:
    """``input`` reversed along each of ``dims`` (a list; negative counts from the end):
    a view."""
    x = as_variable(input, "flip: input")
    if not isinstance(dims, (list, tuple)) or not dims:
        raise error_at(OpArgumentError, f"flip: dims must be a non-empty list of ints, got "
                                        f"{dims!r:.40}")
    return append_simple("flip", {"X": x}, {"dims": _ints(list(dims), "dims", "flip")},
                         name=name)


def roll(input: Variable, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None
         ) -> Variable:
    """``input`` shifted by ``shifts`` along ``dims``, elements leaving one end coming back
    at the other; without ``dims`` the elements are shifted as one flat list and keep
    ``input``'s shape."""
    x = as_variable(input, "roll: input")
    attrs = {"shifts": _ints(shifts, "shifts", "roll"),
             "dims": [] if dims is None else _ints(dims, "dims", "roll")}
    return append_simple("roll", {"X": x}, attrs)


def _image_op(op_type: str, x: Any, attr: str, value: Any, name: str | None,
              minimum: int) -> Variable:
    xv = as_variable(x, f"{op_type}: x")
    return append_simple(op_type, {"X": xv}, {attr: check_int(value, attr, op_type, minimum)},
                         name=name)


def space_to_depth(x: Variable, blocksize: int, name: str | None = None) -> Variable:
    """Paddle's (YOLOv2 reorg) rearrangement of ``x`` [N, C, H, W] into
    [N, C * blocksize**2, H / blocksize, W / blocksize]; C must divide by blocksize**2
    and H and W by blocksize."""
    return _image_op("space_to_depth", x, "blocksize", blocksize, name, 2)


def pixel_shuffle(x: Variable, upscale_factor: int) -> Variable:
    """``x`` [N, C * r**2, H, W] as [N, C, H * r, W * r] (r = ``upscale_factor``): each
    group of r**2 channels becomes r x r blocks of pixels (sub-pixel upscaling)."""
    return _image_op("pixel_shuffle", x, "upscale_factor", upscale_factor, None, 1)


def shuffle_channel(x: Variable, group: int, name: str | None = None) -> Variable:
    """``x`` [N, C, H, W] with its channels, split into ``group`` groups, interleaved
    (ShuffleNet's channel shuffle)."""
    return _image_op("shuffle_channel", x, "group", group, name, 1)


def temporal_shift(x: Variable, seg_num: int, shift_ratio: float = 0.25,
                   name: str | None = None) -> Variable:
    """``x`` [N * seg_num, C, H, W] (N clips of seg_num frames) with the first
    ``C * shift_ratio`` channels taken from each frame's predecessor and the next as many
    from its successor (zeros at a clip's ends): TSM's temporal shift."""
    xv = as_variable(x, "temporal_shift: x")
    attrs = {"seg_num": check_int(seg_num, "seg_num", "temporal_shift", 1),
             "shift_ratio": float(shift_ratio)}
    return append_simple("temporal_shift", {"X": xv}, attrs, name=name)
