"""`fluid.nets`' image blocks (Paddle 1.8's fluid/nets.py): simple_img_conv_pool, the
conv-then-pool block of LeNet, and img_conv_group, VGG's convolutions-then-pool block."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import OpArgumentError
from . import layers
from .layers.conv import bias_and_act, convolve
from .layers.image_args import IntOrSeq
from .tracing import error_at
from .variable import Variable


def simple_img_conv_pool(input: Variable, num_filters: int, filter_size: IntOrSeq,
                         pool_size: IntOrSeq, pool_stride: IntOrSeq,
                         pool_padding: Any = 0, pool_type: str = "max",
                         global_pooling: bool = False, conv_stride: IntOrSeq = 1,
                         conv_padding: Any = 0, conv_dilation: IntOrSeq = 1,
                         conv_groups: int = 1, param_attr: Any = None, bias_attr: Any = None,
                         act: str | None = None, use_cudnn: bool = True) -> Variable:
    """``pool2d(conv2d(input, ..., act=act), ...)``: the conv-then-pool block of LeNet.
    Input ``[N, C, H, W]``; output ``[N, num_filters, OH', OW']`` after the convolution and
    the pooling. With max pooling and ``act`` None or ``'relu'`` the program pools the
    convolution first and adds the bias and the activation to the pooled array (the same
    values, a fraction of the work)."""
    def pool(x: Variable) -> Variable:
        return layers.pool2d(x, pool_size=pool_size, pool_type=pool_type,
                             pool_stride=pool_stride, pool_padding=pool_padding,
                             global_pooling=global_pooling, use_cudnn=use_cudnn)

    if pool_type != "max" or act not in (None, "relu"):
        return pool(layers.conv2d(input, num_filters, filter_size, stride=conv_stride,
                                  padding=conv_padding, dilation=conv_dilation,
                                  groups=conv_groups, param_attr=param_attr,
                                  bias_attr=bias_attr, use_cudnn=use_cudnn, act=act))
    # max(relu(x + b)) == relu(max(x) + b) exactly for a per-channel bias (both are monotone
    # and round monotonically), so the bias and relu run on the pooled array: a quarter of
    # the work for 2x2 pooling, forward and backward. Gradients agree too, up to which of
    # several equal window maxima receives one.
    helper, pre = convolve("conv2d", 2, input, num_filters, filter_size, conv_stride,
                           conv_padding, conv_dilation, conv_groups, param_attr, use_cudnn,
                           None, "NCHW", final=False)
    return bias_and_act(helper, pool(pre), bias_attr, int(num_filters), act)


def _per_conv(what: str, value: Any, count: int) -> list[Any]:
    """One value for every convolution of the group, or a list of ``count`` of them."""
    if not isinstance(value, (list, tuple)):
        return [value] * count
    if len(value) != count:
        raise error_at(OpArgumentError, f"img_conv_group: {what} must be one value or "
                                        f"{count} (one per entry of conv_num_filter), got "
                                        f"{value!r}")
    return list(value)


def img_conv_group(input: Variable, conv_num_filter: Sequence[int], pool_size: IntOrSeq,
                   conv_padding: Any = 1, conv_filter_size: Any = 3,
                   conv_act: str | None = None, param_attr: Any = None,
                   conv_with_batchnorm: Any = False, conv_batchnorm_drop_rate: Any = 0.0,
                   pool_stride: IntOrSeq = 1, pool_type: str = "max",
                   use_cudnn: bool = True) -> Variable:
    """VGG's block: a conv2d for each entry of ``conv_num_filter`` (its number of
    filters), each followed by ``conv_act``, or by batch_norm with ``conv_act`` (and a
    dropout of ``conv_batchnorm_drop_rate`` when it is not 0) where ``conv_with_batchnorm``
    says so, then one pool2d. ``conv_padding``, ``conv_filter_size``, ``param_attr``,
    ``conv_with_batchnorm`` and ``conv_batchnorm_drop_rate`` take one value for all
    convolutions or a list with one per convolution."""
    if not isinstance(conv_num_filter, (list, tuple)) or not conv_num_filter:
        raise error_at(OpArgumentError, f"img_conv_group: conv_num_filter must be a list of "
                                        f"filter counts, got {conv_num_filter!r}")
    n = len(conv_num_filter)
    pads = _per_conv("conv_padding", conv_padding, n)
    sizes = _per_conv("conv_filter_size", conv_filter_size, n)
    attrs = _per_conv("param_attr", param_attr, n)
    with_bn = _per_conv("conv_with_batchnorm", conv_with_batchnorm, n)
    drops = _per_conv("conv_batchnorm_drop_rate", conv_batchnorm_drop_rate, n)
    h = input
    for i, filters in enumerate(conv_num_filter):
        h = layers.conv2d(h, num_filters=filters, filter_size=sizes[i], padding=pads[i],
                          param_attr=attrs[i], act=None if with_bn[i] else conv_act,
                          use_cudnn=use_cudnn)
        if with_bn[i]:
            h = layers.batch_norm(h, act=conv_act)
            if abs(drops[i]) > 1e-5:
                h = layers.dropout(h, dropout_prob=drops[i])
    return layers.pool2d(h, pool_size=pool_size, pool_type=pool_type,
                         pool_stride=pool_stride, use_cudnn=use_cudnn)


__all__ = ["simple_img_conv_pool", "img_conv_group"]
