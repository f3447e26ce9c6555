"""Convolution and pooling layers (NCHW): conv2d, conv2d_transpose, pool2d and
simple_img_conv_pool."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ...errors import OpArgumentError, ShapeError
from ...ir.records import FLOAT_DTYPES
from ...ir.text import short_type
from ..initializer import Normal
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable

IntOrPair = int | Sequence[int]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _pair(layer: str, what: str, value: Any, minimum: int) -> list[int]:
    """An int or a pair of ints as [h, w], each at least ``minimum``."""
    vals = [value, value] if _is_int(value) else (list(value) if isinstance(
        value, (list, tuple)) else None)
    if vals is None or len(vals) != 2 or not all(_is_int(v) and v >= minimum for v in vals):
        raise error_at(OpArgumentError, f"{layer}: {what} must be an int or a pair of ints "
                                        f">= {minimum}, got {value!r}")
    return [int(v) for v in vals]


def _padding(layer: str, value: Any) -> list[int]:
    """``padding``: an int, [pad_h, pad_w] or [top, bottom, left, right]."""
    if isinstance(value, (list, tuple)) and len(value) == 4:
        if all(_is_int(v) and v >= 0 for v in value):
            return [int(v) for v in value]
        raise error_at(OpArgumentError, f"{layer}: padding must hold non-negative ints, got "
                                        f"{value!r}")
    return _pair(layer, "padding", value, 0)


def _image_input(layer: str, input: Any) -> Variable:
    x = as_variable(input, f"{layer} input")
    if len(x.shape) != 4:
        raise error_at(ShapeError, f"{layer}: input {x.name}:{short_type(x.desc)} must be a "
                                   f"4-D NCHW batch [N, C, H, W]; reshape it first (e.g. "
                                   f"declare images with shape=[C, H, W])")
    if x.dtype not in FLOAT_DTYPES:
        raise error_at(OpArgumentError, f"{layer}: input {x.name} is {x.dtype}; it must be "
                                        f"float (cast it first)")
    if x.shape[1] < 0:
        raise error_at(ShapeError, f"{layer}: input {x.name}:{short_type(x.desc)} has an "
                                   f"unknown channel count; it must be known to size the "
                                   f"filter")
    return x


def _groups(layer: str, groups: Any, channels: int, num_filters: int) -> int:
    g = 1 if groups is None else groups
    if not _is_int(g) or g < 1:
        raise error_at(OpArgumentError, f"{layer}: groups must be a positive int or None, "
                                        f"got {groups!r}")
    if channels % g or num_filters % g:
        raise error_at(ShapeError, f"{layer}: groups={g} must divide both the input's "
                                   f"{channels} channels and num_filters={num_filters}")
    return g


def _positive(layer: str, what: str, value: Any) -> int:
    if not _is_int(value) or value <= 0:
        raise error_at(OpArgumentError, f"{layer}: {what} must be a positive int, got "
                                        f"{value!r}")
    return int(value)


def _bias_and_act(helper: LayerHelper, pre: Variable, bias_attr: Any, num_filters: int,
                  act: str | None) -> Variable:
    battr = helper.param_attr(bias_attr, "bias_attr")
    if battr is not None:
        b = helper.create_parameter(battr, [num_filters], pre.dtype, is_bias=True)
        pre = helper.append_one("elementwise_add", {"X": pre, "Y": b}, {"axis": 1},
                                final=act is None)
    return helper.activation(pre, act)


def conv2d(input: Variable, num_filters: int, filter_size: IntOrPair, stride: IntOrPair = 1,
           padding: IntOrPair = 0, dilation: IntOrPair = 1, groups: int | None = None,
           param_attr: Any = None, bias_attr: Any = None, use_cudnn: bool = True,
           act: str | None = None, name: str | None = None) -> Variable:
    """2-D convolution of an NCHW batch: ``act(conv(input, W) + b)``.

    Shapes: input ``[N, C, H, W]``; filter ``W [num_filters, C / groups, kh, kw]``; output
    ``[N, num_filters, OH, OW]`` with ``OH = (H + 2 * pad_h - dilation_h * (kh - 1) - 1) //
    stride_h + 1`` (likewise OW). ``filter_size``, ``stride``, ``padding`` and ``dilation``
    take an int or an ``[h, w]`` pair (``padding`` also ``[top, bottom, left, right]``).

    The filter starts as Normal(0, sqrt(2 / (kh * kh * C))), Paddle's default; the bias
    ``[num_filters]`` (none with ``bias_attr=False``) starts at zero and is added with
    ``elementwise_add(axis=1)``. ``use_cudnn`` is accepted for Paddle compatibility.
    """
    helper, pre = _convolve(input, num_filters, filter_size, stride, padding, dilation, groups,
                            param_attr, use_cudnn, name,
                            final=bias_attr is False and act is None)
    return _bias_and_act(helper, pre, bias_attr, int(num_filters), act)


def _convolve(input: Variable, num_filters: int, filter_size: IntOrPair, stride: IntOrPair,
              padding: IntOrPair, dilation: IntOrPair, groups: int | None,
              param_attr: Any, use_cudnn: bool, name: str | None, final: bool
              ) -> tuple[LayerHelper, Variable]:
    """The conv2d op of `conv2d` with its filter, before any bias or activation."""
    helper = LayerHelper("conv2d", name)
    x = _image_input("conv2d", input)
    num_filters = _positive("conv2d", "num_filters", num_filters)
    channels = x.shape[1]
    g = _groups("conv2d", groups, channels, num_filters)
    kh, kw = _pair("conv2d", "filter_size", filter_size, 1)
    attrs = {"strides": _pair("conv2d", "stride", stride, 1),
             "paddings": _padding("conv2d", padding),
             "dilations": _pair("conv2d", "dilation", dilation, 1), "groups": g,
             "use_cudnn": bool(use_cudnn)}
    pattr = helper.param_attr(param_attr, "param_attr")
    if pattr is None:
        raise error_at(OpArgumentError, "conv2d needs a filter; param_attr=False is not allowed")
    helper.context = f" (input {x.name}:{short_type(x.desc)}, num_filters={num_filters})"
    std = math.sqrt(2.0 / (kh * kh * channels))
    w = helper.create_parameter(pattr, [num_filters, channels // g, kh, kw], x.dtype,
                                default_initializer=Normal(0.0, std))
    return helper, helper.append_one("conv2d", {"Input": x, "Filter": w}, attrs, final=final)


def conv2d_transpose(input: Variable, num_filters: int,
                     output_size: IntOrPair | None = None,
                     filter_size: IntOrPair | None = None, padding: IntOrPair = 0,
                     stride: IntOrPair = 1, dilation: IntOrPair = 1,
                     groups: int | None = None, param_attr: Any = None,
                     bias_attr: Any = None, use_cudnn: bool = True, act: str | None = None,
                     name: str | None = None) -> Variable:
    """Transposed 2-D convolution (a learnt upsampling, as in GAN generators).

    Shapes: input ``[N, C, H, W]``; filter ``W [C, num_filters / groups, kh, kw]``; output
    ``[N, num_filters, OH, OW]`` with ``OH = (H - 1) * stride_h - 2 * pad_h + dilation_h *
    (kh - 1) + 1``. Give ``filter_size``, or ``output_size`` alone to derive the filter size
    from it (Paddle's rule); with both, ``output_size`` may exceed the computed size by up
    to ``stride - 1`` to pick between the sizes a stride makes ambiguous.

    The filter starts Xavier-uniform and the bias ``[num_filters]`` (none with
    ``bias_attr=False``) at zero, added with ``elementwise_add(axis=1)``.
    """
    layer = "conv2d_transpose"
    helper = LayerHelper(layer, name)
    x = _image_input(layer, input)
    num_filters = _positive(layer, "num_filters", num_filters)
    channels = x.shape[1]
    g = _groups(layer, groups, channels, num_filters)
    strides = _pair(layer, "stride", stride, 1)
    pads = _padding(layer, padding)
    dils = _pair(layer, "dilation", dilation, 1)
    attrs = {"strides": strides, "paddings": pads, "dilations": dils, "groups": g,
             "use_cudnn": bool(use_cudnn)}
    if filter_size is None:
        out = _pair(layer, "output_size", output_size, 1) if output_size is not None else None
        kh, kw = _filter_from_output_size(layer, x, out, strides, pads, dils)
        attrs["output_size"] = out
    else:
        kh, kw = _pair(layer, "filter_size", filter_size, 1)
        if output_size is not None:
            attrs["output_size"] = _pair(layer, "output_size", output_size, 1)
    pattr = helper.param_attr(param_attr, "param_attr")
    if pattr is None:
        raise error_at(OpArgumentError, f"{layer} needs a filter; param_attr=False is not "
                                        f"allowed")
    helper.context = f" (input {x.name}:{short_type(x.desc)}, num_filters={num_filters})"
    w = helper.create_parameter(pattr, [channels, num_filters // g, kh, kw], x.dtype)
    battr_none = helper.param_attr(bias_attr, "bias_attr") is None
    pre = helper.append_one(layer, {"Input": x, "Filter": w}, attrs,
                            final=battr_none and act is None)
    return _bias_and_act(helper, pre, bias_attr, num_filters, act)


def _filter_from_output_size(layer: str, x: Variable, out: list[int] | None,
                             strides: list[int], pads: list[int], dils: list[int]
                             ) -> tuple[int, int]:
    """Paddle's rule for a transposed convolution given only ``output_size``: the filter
    size that maps the input's height and width onto it."""
    if out is None:
        raise error_at(OpArgumentError, f"{layer}: give filter_size, or output_size to "
                                        f"derive it from")
    if x.shape[2] < 0 or x.shape[3] < 0:
        raise error_at(ShapeError, f"{layer}: deriving filter_size from output_size needs "
                                   f"the input's height and width, but input "
                                   f"{x.name}:{short_type(x.desc)} has unknown ones")
    pads4 = pads if len(pads) == 4 else [pads[0], pads[0], pads[1], pads[1]]
    ks = []
    for axis in (0, 1):
        size, s, d = x.shape[2 + axis], strides[axis], dils[axis]
        k = (out[axis] - (size - 1) * s + pads4[2 * axis] + pads4[2 * axis + 1] - 1) // d + 1
        if k < 1:
            raise error_at(ShapeError, f"{layer}: output_size {out} is too small for "
                                       f"input {x.name}:{short_type(x.desc)} with stride "
                                       f"{strides} and padding {pads}")
        ks.append(k)
    return ks[0], ks[1]


def pool2d(input: Variable, pool_size: IntOrPair = -1, pool_type: str = "max",
           pool_stride: IntOrPair = 1, pool_padding: IntOrPair = 0,
           global_pooling: bool = False, use_cudnn: bool = True, ceil_mode: bool = False,
           name: str | None = None, exclusive: bool = True) -> Variable:
    """Max or average pooling of an NCHW batch.

    Shapes: input ``[N, C, H, W]``; output ``[N, C, OH, OW]`` with ``OH = (H + 2 * pad_h -
    pool_h) // stride_h + 1`` (rounded up with ``ceil_mode``, where a last window holding
    only padding is dropped); ``global_pooling`` pools each whole plane to ``[N, C, 1, 1]``.
    ``exclusive`` (avg): divide by the number of non-padding elements of each window rather
    than by ``pool_h * pool_w``. Paddle's argument order (``name`` before ``exclusive``).
    """
    layer = "pool2d"
    x = _image_input(layer, input)
    if pool_type not in ("max", "avg"):
        raise error_at(OpArgumentError, f"pool2d: pool_type must be 'max' or 'avg', got "
                                        f"{pool_type!r}")
    attrs: dict[str, Any] = {"pooling_type": pool_type, "global_pooling": bool(global_pooling),
                             "ceil_mode": bool(ceil_mode), "exclusive": bool(exclusive),
                             "use_cudnn": bool(use_cudnn)}
    if global_pooling:
        attrs.update(ksize=[1, 1] if pool_size == -1 else _pair(layer, "pool_size", pool_size,
                                                                 1),
                     strides=[1, 1], paddings=[0, 0])
    else:
        if pool_size == -1:
            raise error_at(OpArgumentError, "pool2d: pool_size is required unless "
                                            "global_pooling=True")
        attrs.update(ksize=_pair(layer, "pool_size", pool_size, 1),
                     strides=_pair(layer, "pool_stride", pool_stride, 1),
                     paddings=_padding(layer, pool_padding))
    helper = LayerHelper(layer, name)
    return helper.append_one(layer, {"X": x}, attrs)


def simple_img_conv_pool(input: Variable, num_filters: int, filter_size: IntOrPair,
                         pool_size: IntOrPair, pool_stride: IntOrPair,
                         pool_padding: IntOrPair = 0, pool_type: str = "max",
                         global_pooling: bool = False, conv_stride: IntOrPair = 1,
                         conv_padding: IntOrPair = 0, conv_dilation: IntOrPair = 1,
                         conv_groups: int = 1, param_attr: Any = None, bias_attr: Any = None,
                         act: str | None = None, use_cudnn: bool = True) -> Variable:
    """``pool2d(conv2d(input, ..., act=act), ...)``: the conv-then-pool block of LeNet
    (Paddle's ``fluid.nets.simple_img_conv_pool``). Input ``[N, C, H, W]``; output ``[N,
    num_filters, OH', OW']`` after the convolution and the pooling. With max pooling and
    ``act`` None or ``'relu'`` the program pools the convolution first and adds the bias
    and the activation to the pooled array (the same values, a fraction of the work)."""
    def pool(x: Variable) -> Variable:
        return pool2d(x, pool_size=pool_size, pool_type=pool_type, pool_stride=pool_stride,
                      pool_padding=pool_padding, global_pooling=global_pooling,
                      use_cudnn=use_cudnn)

    if pool_type != "max" or act not in (None, "relu"):
        return pool(conv2d(input, num_filters, filter_size, stride=conv_stride,
                           padding=conv_padding, dilation=conv_dilation, groups=conv_groups,
                           param_attr=param_attr, bias_attr=bias_attr, use_cudnn=use_cudnn,
                           act=act))
    # max(relu(x + b)) == relu(max(x) + b) exactly for a per-channel bias (both are monotone
    # and round monotonically), so the bias and relu run on the pooled array: a quarter of
    # the work for 2x2 pooling, forward and backward. Gradients agree too, up to which of
    # several equal window maxima receives one.
    helper, pre = _convolve(input, num_filters, filter_size, conv_stride, conv_padding,
                            conv_dilation, conv_groups, param_attr, use_cudnn, None,
                            final=False)
    return _bias_and_act(helper, pool(pre), bias_attr, int(num_filters), act)


__all__ = ["conv2d", "conv2d_transpose", "pool2d", "simple_img_conv_pool"]
