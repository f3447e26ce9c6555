"""Convolution layers over 2 or 3 spatial dims: conv2d, conv3d, conv2d_transpose and
conv3d_transpose (pooling: `pool.py`; the conv-then-pool blocks: `fluid.nets`)."""
from __future__ import annotations

import math
from typing import Any

from ...errors import OpArgumentError, ShapeError
from ...ir.text import short_type
from ..initializer import Normal
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable
from .image_args import (
    IntOrSeq,
    channel_axis,
    data_format,
    flag,
    image_input,
    is_int,
    padding,
    spatial_ints,
)


def _groups(layer: str, groups: Any, channels: int, num_filters: int) -> int:
    g = 1 if groups is None else groups
    if not is_int(g) or g < 1:
        raise error_at(OpArgumentError, f"{layer}: groups must be a positive int or None, "
                                        f"got {groups!r}")
    if channels % g or num_filters % g:
        raise error_at(ShapeError, f"{layer}: groups={g} must divide both the input's "
                                   f"{channels} channels and num_filters={num_filters}")
    return g


def _positive(layer: str, what: str, value: Any) -> int:
    if not is_int(value) or value <= 0:
        raise error_at(OpArgumentError, f"{layer}: {what} must be a positive int, got "
                                        f"{value!r}")
    return int(value)


def bias_and_act(helper: LayerHelper, pre: Variable, bias_attr: Any, num_filters: int,
                 act: str | None, axis: int = 1) -> Variable:
    """``act(pre + b)`` with a bias [num_filters] on the channel ``axis`` (none with
    ``bias_attr=False``)."""
    battr = helper.param_attr(bias_attr, "bias_attr")
    if battr is not None:
        b = helper.create_parameter(battr, [num_filters], pre.dtype, is_bias=True)
        pre = helper.append_one("elementwise_add", {"X": pre, "Y": b}, {"axis": axis},
                                final=act is None)
    return helper.activation(pre, act)


class _Window:
    """The window arguments of a convolution layer, checked, as the op's attrs."""

    def __init__(self, layer: str, x: Variable, rank: int, fmt: str, stride: Any,
                 pad: Any, dilation: Any, use_cudnn: Any):
        self.layer, self.rank, self.fmt = layer, rank, fmt
        self.channels = x.shape[channel_axis(fmt, rank)]
        self.spatial = [d for i, d in enumerate(x.shape[1:], 1) if i != channel_axis(fmt, rank)]
        self.strides = spatial_ints(layer, "stride", stride, rank, 1)
        self.paddings, self.algorithm = padding(layer, pad, rank, fmt)
        self.dilations = spatial_ints(layer, "dilation", dilation, rank, 1)
        self.use_cudnn = flag(layer, "use_cudnn", use_cudnn)

    def attrs(self, groups: int) -> dict[str, Any]:
        return {"strides": self.strides, "paddings": self.paddings,
                "dilations": self.dilations, "groups": groups, "use_cudnn": self.use_cudnn,
                "padding_algorithm": self.algorithm, "data_format": self.fmt}


def conv2d(input: Variable, num_filters: int, filter_size: IntOrSeq, stride: IntOrSeq = 1,
           padding: Any = 0, dilation: IntOrSeq = 1, groups: int | None = None,
           param_attr: Any = None, bias_attr: Any = None, use_cudnn: bool = True,
           act: str | None = None, name: str | None = None,
           data_format: str = "NCHW") -> Variable:
    """2-D convolution of an image batch: ``act(conv(input, W) + b)``.

    Shapes: input ``[N, C, H, W]`` (``data_format='NHWC'``: ``[N, H, W, C]``); filter ``W
    [num_filters, C / groups, kh, kw]``; output ``[N, num_filters, OH, OW]`` (NHWC: channels
    last) with ``OH = (H + pad_top + pad_bottom - dilation_h * (kh - 1) - 1) // stride_h +
    1`` (likewise OW). ``filter_size``, ``stride`` and ``dilation`` take an int or ``[h,
    w]``; ``padding`` an int, ``[pad_h, pad_w]``, ``[top, bottom, left, right]``, a
    ``[before, after]`` pair per input dim (``[0, 0]`` for batch and channel), or
    ``'SAME'`` (output ``ceil(H / stride)``, dilation 1) / ``'VALID'`` (no padding).

    The filter starts as Normal(0, sqrt(2 / (kh * kw * C))), Paddle's default; the bias
    ``[num_filters]`` (none with ``bias_attr=False``) starts at zero and is added on the
    channel axis. ``use_cudnn`` is accepted for Paddle compatibility.
    """
    return _conv("conv2d", 2, input, num_filters, filter_size, stride, padding, dilation,
                 groups, param_attr, bias_attr, use_cudnn, act, name, data_format)


def conv3d(input: Variable, num_filters: int, filter_size: IntOrSeq, stride: IntOrSeq = 1,
           padding: Any = 0, dilation: IntOrSeq = 1, groups: int | None = None,
           param_attr: Any = None, bias_attr: Any = None, use_cudnn: bool = True,
           act: str | None = None, name: str | None = None,
           data_format: str = "NCDHW") -> Variable:
    """3-D convolution of a batch of volumes: ``act(conv(input, W) + b)``.

    Shapes: input ``[N, C, D, H, W]`` (``data_format='NDHWC'``: channels last); filter
    ``W [num_filters, C / groups, kd, kh, kw]``; output ``[N, num_filters, OD, OH, OW]``,
    each dim as conv2d's. ``filter_size``, ``stride``, ``dilation`` take an int or ``[d,
    h, w]``; ``padding`` an int, three ints, six ``[front, back, top, bottom, left,
    right]``, a pair per input dim, or ``'SAME'`` / ``'VALID'``. The filter starts as
    Normal(0, sqrt(2 / (kd * kh * kw * C))); the bias as conv2d's.
    """
    return _conv("conv3d", 3, input, num_filters, filter_size, stride, padding, dilation,
                 groups, param_attr, bias_attr, use_cudnn, act, name, data_format)


def _conv(layer: str, rank: int, input: Any, num_filters: Any, filter_size: Any, stride: Any,
          pad: Any, dilation: Any, groups: Any, param_attr: Any, bias_attr: Any,
          use_cudnn: Any, act: str | None, name: str | None, fmt: Any) -> Variable:
    helper, pre = convolve(layer, rank, input, num_filters, filter_size, stride, pad,
                           dilation, groups, param_attr, use_cudnn, name, fmt,
                           final=bias_attr is False and act is None)
    return bias_and_act(helper, pre, bias_attr, int(num_filters), act,
                        channel_axis(fmt, rank))


def convolve(layer: str, rank: int, input: Any, num_filters: Any, filter_size: Any,
             stride: Any, pad: Any, dilation: Any, groups: Any, param_attr: Any,
             use_cudnn: Any, name: str | None, fmt: Any, final: bool
             ) -> tuple[LayerHelper, Variable]:
    """The convolution op of a conv layer with its filter, before any bias or
    activation."""
    helper = LayerHelper(layer, name)
    fmt = data_format(layer, fmt, rank)
    x = image_input(layer, input, rank, fmt)
    num_filters = _positive(layer, "num_filters", num_filters)
    window = _Window(layer, x, rank, fmt, stride, pad, dilation, use_cudnn)
    g = _groups(layer, groups, window.channels, num_filters)
    kernel = spatial_ints(layer, "filter_size", filter_size, rank, 1)
    pattr = helper.param_attr(param_attr, "param_attr")
    if pattr is None:
        raise error_at(OpArgumentError, f"{layer} needs a filter; param_attr=False is not "
                                        f"allowed")
    helper.context = f" (input {x.name}:{short_type(x.desc)}, num_filters={num_filters})"
    std = math.sqrt(2.0 / (math.prod(kernel) * window.channels))
    w = helper.create_parameter(pattr, [num_filters, window.channels // g, *kernel], x.dtype,
                                default_initializer=Normal(0.0, std))
    return helper, helper.append_one(layer, {"Input": x, "Filter": w}, window.attrs(g),
                                     final=final)


def conv2d_transpose(input: Variable, num_filters: int,
                     output_size: IntOrSeq | None = None,
                     filter_size: IntOrSeq | None = None, padding: Any = 0,
                     stride: IntOrSeq = 1, dilation: IntOrSeq = 1,
                     groups: int | None = None, param_attr: Any = None,
                     bias_attr: Any = None, use_cudnn: bool = True, act: str | None = None,
                     name: str | None = None, data_format: str = "NCHW") -> Variable:
    """Transposed 2-D convolution (a learnt upsampling, as in GAN generators).

    Shapes: input ``[N, C, H, W]`` (NHWC: channels last); filter ``W [C, num_filters /
    groups, kh, kw]``; output ``[N, num_filters, OH, OW]`` with ``OH = (H - 1) * stride_h -
    pad_top - pad_bottom + dilation_h * (kh - 1) + 1``. Give ``filter_size``, or
    ``output_size`` alone to derive the filter size from it (Paddle's rule); with both,
    ``output_size`` may exceed the computed size by up to ``stride - 1`` to pick between
    the sizes a stride makes ambiguous. ``padding`` as conv2d's.

    The filter starts Xavier-uniform and the bias ``[num_filters]`` (none with
    ``bias_attr=False``) at zero, added on the channel axis.
    """
    return _conv_transpose("conv2d_transpose", 2, input, num_filters, output_size,
                           filter_size, padding, stride, dilation, groups, param_attr,
                           bias_attr, use_cudnn, act, name, data_format)


def conv3d_transpose(input: Variable, num_filters: int,
                     output_size: IntOrSeq | None = None,
                     filter_size: IntOrSeq | None = None, padding: Any = 0,
                     stride: IntOrSeq = 1, dilation: IntOrSeq = 1,
                     groups: int | None = None, param_attr: Any = None,
                     bias_attr: Any = None, use_cudnn: bool = True, act: str | None = None,
                     name: str | None = None, data_format: str = "NCDHW") -> Variable:
    """Transposed 3-D convolution: conv2d_transpose over volumes ``[N, C, D, H, W]``
    (NDHWC: channels last), filter ``[C, num_filters / groups, kd, kh, kw]``, each output
    dim as conv2d_transpose's."""
    return _conv_transpose("conv3d_transpose", 3, input, num_filters, output_size,
                           filter_size, padding, stride, dilation, groups, param_attr,
                           bias_attr, use_cudnn, act, name, data_format)


def _conv_transpose(layer: str, rank: int, input: Any, num_filters: Any, output_size: Any,
                    filter_size: Any, pad: Any, stride: Any, dilation: Any, groups: Any,
                    param_attr: Any, bias_attr: Any, use_cudnn: Any, act: str | None,
                    name: str | None, fmt: Any) -> Variable:
    helper = LayerHelper(layer, name)
    fmt = data_format(layer, fmt, rank)
    x = image_input(layer, input, rank, fmt)
    num_filters = _positive(layer, "num_filters", num_filters)
    window = _Window(layer, x, rank, fmt, stride, pad, dilation, use_cudnn)
    g = _groups(layer, groups, window.channels, num_filters)
    attrs = window.attrs(g)
    out = spatial_ints(layer, "output_size", output_size, rank, 1) \
        if output_size is not None else None
    if filter_size is None:
        kernel = _filter_from_output_size(layer, x, out, window)
    else:
        kernel = spatial_ints(layer, "filter_size", filter_size, rank, 1)
    if out is not None:
        attrs["output_size"] = out
    pattr = helper.param_attr(param_attr, "param_attr")
    if pattr is None:
        raise error_at(OpArgumentError, f"{layer} needs a filter; param_attr=False is not "
                                        f"allowed")
    helper.context = f" (input {x.name}:{short_type(x.desc)}, num_filters={num_filters})"
    w = helper.create_parameter(pattr, [window.channels, num_filters // g, *kernel], x.dtype)
    battr_none = helper.param_attr(bias_attr, "bias_attr") is None
    pre = helper.append_one(layer, {"Input": x, "Filter": w}, attrs,
                            final=battr_none and act is None)
    return bias_and_act(helper, pre, bias_attr, num_filters, act, channel_axis(fmt, rank))


def _filter_from_output_size(layer: str, x: Variable, out: list[int] | None,
                             window: _Window) -> list[int]:
    """Paddle's rule for a transposed convolution given only ``output_size``: the filter
    size that maps the input's spatial dims onto it (with the explicit paddings)."""
    if out is None:
        raise error_at(OpArgumentError, f"{layer}: give filter_size, or output_size to "
                                        f"derive it from")
    if any(d < 0 for d in window.spatial):
        raise error_at(ShapeError, f"{layer}: deriving filter_size from output_size needs "
                                   f"the input's spatial dims, but input "
                                   f"{x.name}:{short_type(x.desc)} has unknown ones")
    pads = window.paddings
    if len(pads) == window.rank:
        pads = [p for p in pads for _ in (0, 1)]
    ks = []
    for i, size in enumerate(window.spatial):
        s, d = window.strides[i], window.dilations[i]
        k = (out[i] - (size - 1) * s + pads[2 * i] + pads[2 * i + 1] - 1) // d + 1
        if k < 1:
            raise error_at(ShapeError, f"{layer}: output_size {out} is too small for "
                                       f"input {x.name}:{short_type(x.desc)} with stride "
                                       f"{window.strides} and padding {window.paddings}")
        ks.append(k)
    return ks


def deformable_conv(input: Variable, offset: Variable, mask: Variable | None,
                    num_filters: int, filter_size: IntOrSeq, stride: IntOrSeq = 1,
                    padding: IntOrSeq = 0, dilation: IntOrSeq = 1, groups: int | None = None,
                    deformable_groups: int | None = None, im2col_step: int | None = None,
                    param_attr: Any = None, bias_attr: Any = None, modulated: bool = True,
                    name: str | None = None) -> Variable:
    """Deformable convolution: conv2d whose taps sample ``input`` ``[N, C, H, W]``
    bilinearly at their place moved by ``offset`` ``[N, 2 * dg * kh * kw, OH, OW]`` (a
    (dh, dw) pair per deformable group and tap), times ``mask`` ``[N, dg * kh * kw, OH,
    OW]`` when ``modulated`` (DCN v2; ``mask`` None and ``modulated=False``: DCN v1).
    Filter ``[num_filters, C / groups, kh, kw]`` from Normal(0, sqrt(2 / (kh * kw * C))),
    then a bias on the channel axis. ``im2col_step`` is accepted for Paddle
    compatibility."""
    layer = "deformable_conv"
    helper = LayerHelper(layer, name)
    x = image_input(layer, input, 2, "NCHW")
    num_filters = _positive(layer, "num_filters", num_filters)
    window = _Window(layer, x, 2, "NCHW", stride, padding, dilation, True)
    if window.algorithm != "EXPLICIT":
        raise error_at(OpArgumentError, f"{layer}: padding must be ints, not "
                                        f"{window.algorithm!r}")
    g = _groups(layer, groups, window.channels, num_filters)
    dg = 1 if deformable_groups is None else deformable_groups
    if not is_int(dg) or dg < 1 or window.channels % dg:
        raise error_at(OpArgumentError, f"{layer}: deformable_groups must be a positive int "
                                        f"dividing the {window.channels} channels, got "
                                        f"{deformable_groups!r}")
    kernel = spatial_ints(layer, "filter_size", filter_size, 2, 1)
    inputs: dict[str, Any] = {"Input": x, "Offset": as_variable(offset, f"{layer} offset")}
    if modulated:
        if mask is None:
            raise error_at(OpArgumentError, f"{layer}: modulated=True needs a mask (or pass "
                                            f"modulated=False)")
        inputs["Mask"] = as_variable(mask, f"{layer} mask")
    pattr = helper.param_attr(param_attr, "param_attr")
    if pattr is None:
        raise error_at(OpArgumentError, f"{layer} needs a filter; param_attr=False is not "
                                        f"allowed")
    std = math.sqrt(2.0 / (math.prod(kernel) * window.channels))
    inputs["Filter"] = helper.create_parameter(
        pattr, [num_filters, window.channels // g, *kernel], x.dtype,
        default_initializer=Normal(0.0, std))
    attrs = {"strides": window.strides, "paddings": window.paddings,
             "dilations": window.dilations, "groups": g, "deformable_groups": dg,
             "im2col_step": int(im2col_step or 64)}
    pre = helper.append_one("deformable_conv" if modulated else "deformable_conv_v1", inputs,
                            attrs, final=False)
    return bias_and_act(helper, pre, bias_attr, num_filters, None)


__all__ = ["conv2d", "conv3d", "conv2d_transpose", "conv3d_transpose", "deformable_conv"]
