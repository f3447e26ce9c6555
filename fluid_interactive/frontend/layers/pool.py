"""Pooling layers over 2 or 3 spatial dims: pool2d, pool3d, adaptive_pool2d and
adaptive_pool3d."""
from __future__ import annotations

from typing import Any

from ...errors import OpArgumentError
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper
from .image_args import IntOrSeq, data_format, flag, image_input, padding, spatial_ints


def _pool_type(layer: str, pool_type: Any) -> str:
    if pool_type not in ("max", "avg"):
        raise error_at(OpArgumentError, f"{layer}: pool_type must be 'max' or 'avg', got "
                                        f"{pool_type!r}")
    return str(pool_type)


def pool2d(input: Variable, pool_size: IntOrSeq = -1, pool_type: str = "max",
           pool_stride: IntOrSeq = 1, pool_padding: Any = 0,
           global_pooling: bool = False, use_cudnn: bool = True, ceil_mode: bool = False,
           name: str | None = None, exclusive: bool = True,
           data_format: str = "NCHW") -> Variable:
    """Max or average pooling of an image batch.

    Shapes: input ``[N, C, H, W]`` (``data_format='NHWC'``: ``[N, H, W, C]``); output
    ``[N, C, OH, OW]`` (likewise) with ``OH = (H + pad_top + pad_bottom - pool_h) //
    stride_h + 1``, rounded up with ``ceil_mode`` (Paddle's rule: a last window that
    starts in the padding is kept; max gives -inf and avg 0 there); ``global_pooling``
    pools each whole plane to 1 x 1. ``pool_padding`` takes conv2d's forms, 'SAME' and
    'VALID' included. ``exclusive`` (avg): divide by the number of non-padding elements of
    each window rather than by ``pool_h * pool_w``. Paddle's argument order (``name``
    before ``exclusive``).
    """
    return _pool("pool2d", 2, input, pool_size, pool_type, pool_stride, pool_padding,
                 global_pooling, use_cudnn, ceil_mode, name, exclusive, data_format)


def pool3d(input: Variable, pool_size: IntOrSeq = -1, pool_type: str = "max",
           pool_stride: IntOrSeq = 1, pool_padding: Any = 0,
           global_pooling: bool = False, use_cudnn: bool = True, ceil_mode: bool = False,
           name: str | None = None, exclusive: bool = True,
           data_format: str = "NCDHW") -> Variable:
    """Max or average pooling of a batch of volumes ``[N, C, D, H, W]`` (``'NDHWC'``:
    channels last), each output dim as pool2d's; ``pool_size``, ``pool_stride`` take an
    int or ``[d, h, w]``, ``pool_padding`` conv3d's forms."""
    return _pool("pool3d", 3, input, pool_size, pool_type, pool_stride, pool_padding,
                 global_pooling, use_cudnn, ceil_mode, name, exclusive, data_format)


def _pool(layer: str, rank: int, input: Any, pool_size: Any, pool_type: Any,
          pool_stride: Any, pool_padding: Any, global_pooling: Any, use_cudnn: Any,
          ceil_mode: Any, name: str | None, exclusive: Any, fmt: Any) -> Variable:
    fmt = data_format(layer, fmt, rank)
    x = image_input(layer, input, rank, fmt, channels_known=False)
    attrs: dict[str, Any] = {
        "pooling_type": _pool_type(layer, pool_type),
        "global_pooling": flag(layer, "global_pooling", global_pooling),
        "ceil_mode": flag(layer, "ceil_mode", ceil_mode),
        "exclusive": flag(layer, "exclusive", exclusive),
        "use_cudnn": flag(layer, "use_cudnn", use_cudnn), "data_format": fmt}
    if global_pooling:
        attrs.update(ksize=[1] * rank if pool_size == -1 else spatial_ints(
            layer, "pool_size", pool_size, rank, 1), strides=[1] * rank, paddings=[0] * rank)
    else:
        if pool_size == -1:
            raise error_at(OpArgumentError, f"{layer}: pool_size is required unless "
                                            f"global_pooling=True")
        pads, algorithm = padding(layer, pool_padding, rank, fmt, "pool_padding")
        if algorithm == "VALID" and ceil_mode:
            raise error_at(OpArgumentError, f"{layer}: pool_padding='VALID' does not go "
                                            f"with ceil_mode=True")
        attrs.update(ksize=spatial_ints(layer, "pool_size", pool_size, rank, 1),
                     strides=spatial_ints(layer, "pool_stride", pool_stride, rank, 1),
                     paddings=pads, padding_algorithm=algorithm)
    return LayerHelper(layer, name).append_one(layer, {"X": x}, attrs)


def adaptive_pool2d(input: Variable, pool_size: IntOrSeq, pool_type: str = "max",
                    require_index: bool = False,
                    name: str | None = None) -> Variable | tuple[Variable, Variable]:
    """Pooling to a fixed output size: input ``[N, C, H, W]`` -> ``[N, C, *pool_size]``,
    output row i pooling input rows ``[floor(i * H / OH), ceil((i + 1) * H / OH))``
    (likewise columns), so windows may differ in size and overlap by one. With
    ``require_index`` (max only) also returns the int32 index ``h * W + w`` of each
    window's maximum in its plane."""
    return _adaptive("adaptive_pool2d", 2, input, pool_size, pool_type, require_index, name)


def adaptive_pool3d(input: Variable, pool_size: IntOrSeq, pool_type: str = "max",
                    require_index: bool = False,
                    name: str | None = None) -> Variable | tuple[Variable, Variable]:
    """adaptive_pool2d over volumes ``[N, C, D, H, W]`` -> ``[N, C, *pool_size]``; the
    index with ``require_index`` is ``(d * H + h) * W + w``."""
    return _adaptive("adaptive_pool3d", 3, input, pool_size, pool_type, require_index, name)


def _adaptive(layer: str, rank: int, input: Any, pool_size: Any, pool_type: Any,
              require_index: Any, name: str | None) -> Variable | tuple[Variable, Variable]:
    x = image_input(layer, input, rank, "NCHW" if rank == 2 else "NCDHW",
                    channels_known=False)
    ptype = _pool_type(layer, pool_type)
    flag(layer, "require_index", require_index)
    if ptype == "avg" and require_index:
        raise error_at(OpArgumentError, f"{layer}: require_index=True needs pool_type='max' "
                                        f"(an average has no index)")
    size = spatial_ints(layer, "pool_size", pool_size, rank, 1)
    helper = LayerHelper(layer, name)
    if ptype == "avg":
        return helper.append_one(f"pool{rank}d", {"X": x},
                                 {"pooling_type": "avg", "ksize": size, "adaptive": True})
    outs = helper.append(f"max_pool{rank}d_with_index", {"X": x},
                         {"ksize": size, "adaptive": True})
    return (outs["Out"][0], outs["Mask"][0]) if require_index else outs["Out"][0]


__all__ = ["pool2d", "pool3d", "adaptive_pool2d", "adaptive_pool3d"]
