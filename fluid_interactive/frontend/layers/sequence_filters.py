"""Convolutions along the time axis of a padded batch ``[B, T, D]`` with optional int64
``lengths`` ``[B]``: `sequence_conv`, `row_conv` (lookahead) and `add_position_encoding`.
A step outside a row reads zeros; what padding holds never reaches a valid output.
"""
from __future__ import annotations

from typing import Any

from ...errors import OpArgumentError, ShapeError
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable
from .sequence import with_lengths
from .sequence_edit import int_at_least

__all__ = ["sequence_conv", "row_conv", "add_position_encoding"]


def _batch(input: Any, layer: str) -> Variable:
    x = as_variable(input, f"{layer}: input")
    if len(x.shape) != 3 or x.shape[2] < 1:
        raise error_at(ShapeError, f"{layer}: input {x.name}:{short_type(x.desc)} must be a "
                                   f"padded batch [B, T, D] with D known")
    return x


def sequence_conv(input: Variable, num_filters: int, filter_size: int = 3,
                  filter_stride: int = 1, padding: bool = True,
                  padding_start: int | None = None, bias_attr: Any = None,
                  param_attr: Any = None, act: str | None = None, name: str | None = None,
                  lengths: Variable | None = None) -> Variable:
    """A convolution over each row's steps: ``[B, T, D] -> [B, T, num_filters]``.

    Step t sees steps ``t + padding_start`` ... ``t + padding_start + filter_size - 1``
    (``padding_start`` defaults to ``-(filter_size // 2)``, a centred window); a step
    outside the row reads zeros. The filter is ``[filter_size * D, num_filters]``, the bias
    ``[num_filters]`` (``bias_attr=False``: none). ``filter_stride`` must be 1 and
    ``padding`` changes nothing, as in Paddle. The bias and ``act`` apply at every step,
    padding included (there they never reach a valid step).
    """
    layer = "sequence_conv"
    x = _batch(input, layer)
    int_at_least(num_filters, "num_filters", layer, 1)
    int_at_least(filter_size, "filter_size", layer, 1)
    if filter_stride != 1:
        raise error_at(OpArgumentError, f"sequence_conv: filter_stride must be 1, got "
                                        f"{filter_stride!r}")
    start = -(filter_size // 2) if padding_start is None else padding_start
    int_at_least(start, "padding_start", layer, -(2 ** 31))
    helper = LayerHelper(layer, name)
    pattr = helper.param_attr(param_attr, "param_attr")
    if pattr is None:
        raise error_at(OpArgumentError, "sequence_conv needs a filter; param_attr=False is not "
                                        "allowed")
    helper.context = f" (input {x.name}:{short_type(x.desc)})"
    w = helper.create_parameter(pattr, [filter_size * x.shape[2], num_filters], x.dtype)
    battr = helper.param_attr(bias_attr, "bias_attr")
    out = helper.append_one("sequence_conv", with_lengths({"X": x, "Filter": w}, lengths),
                            {"contextLength": filter_size, "contextStart": start,
                             "contextStride": 1}, final=battr is None and act is None)
    if battr is not None:
        b = helper.create_parameter(battr, [num_filters], x.dtype, is_bias=True)
        out = helper.append_one("elementwise_add", {"X": out, "Y": b}, {"axis": 2},
                                final=act is None)
    return helper.activation(out, act)


def row_conv(input: Variable, future_context_size: int, param_attr: Any = None,
             act: str | None = None, lengths: Variable | None = None) -> Variable:
    """A lookahead convolution: ``out[b, t] = sum_k input[b, t + k] * W[k]`` for ``k`` in
    ``0 .. future_context_size`` over the steps inside row b, ``W`` ``[future_context_size
    + 1, D]`` elementwise. ``[B, T, D] -> [B, T, D]``."""
    layer = "row_conv"
    x = _batch(input, layer)
    int_at_least(future_context_size, "future_context_size", layer, 0)
    helper = LayerHelper(layer)
    pattr = helper.param_attr(param_attr, "param_attr")
    if pattr is None:
        raise error_at(OpArgumentError, "row_conv needs a filter; param_attr=False is not "
                                        "allowed")
    helper.context = f" (input {x.name}:{short_type(x.desc)})"
    w = helper.create_parameter(pattr, [future_context_size + 1, x.shape[2]], x.dtype)
    out = helper.append_one("row_conv", with_lengths({"X": x, "Filter": w}, lengths),
                            final=act is None)
    return helper.activation(out, act)


def add_position_encoding(input: Variable, alpha: float, beta: float,
                          name: str | None = None, lengths: Variable | None = None
                          ) -> Variable:
    """``alpha * input + beta * PE``, PE the sinusoid encoding of each step's position in
    its row (sines in the first half of D, cosines in the second); zero at padding."""
    x = _batch(input, "add_position_encoding")
    helper = LayerHelper("add_position_encoding", name)
    return helper.append_one("add_position_encoding", with_lengths({"X": x}, lengths),
                             {"alpha": float(alpha), "beta": float(beta)})
