"""Sequence layers over a padded batch ``input [B, T, ...]`` and optional int64 ``lengths``
``[B]`` (``fluid.layers.data(name='lengths', shape=[-1], dtype='int64',
append_batch_size=False)``). Positions at or past a row's length never change an output
and get no gradient; without ``lengths`` every row is full length.

Each layer keeps Paddle 1.8's parameters, in Paddle's order; ``lengths`` (Paddle's LoD)
comes after them, as a keyword. The layers that move, index and convolve sequences are in
`sequence_edit` and `sequence_conv`.
"""
from __future__ import annotations

from typing import Any

from ...errors import OpArgumentError
from ...ir.records import canonical_dtype
from ..hints import unpadded_pool
from ..tracing import current_trace, error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable

__all__ = ["sequence_mask", "sequence_pool", "sequence_last_step", "sequence_first_step",
           "sequence_softmax", "sequence_reverse"]

_POOL_TYPES = ("sum", "average", "sqrt", "max", "first", "last")


def with_lengths(inputs: dict, lengths: Any, slot: str = "Lengths") -> dict:
    """``inputs`` with ``lengths`` (when given) in ``slot``."""
    if lengths is not None:
        inputs[slot] = as_variable(lengths, "lengths")
        current_trace().lengths_given.add(inputs[slot].name)
    return inputs


def sequence_mask(x: Variable, maxlen: int | Variable | None = None, dtype: str = "int64",
                  name: str | None = None) -> Variable:
    """``mask[..., t] = t < x[...]`` for int lengths ``x`` of any rank: one more dim than
    ``x``, ``maxlen`` long, in ``dtype``. For lengths ``[B]``, a key-padding mask
    ``[B, maxlen]`` for `fluid.nets.scaled_dot_product_attention`, or a masked loss's
    weight.

    ``maxlen=None`` makes the mask as wide as the longest length, which is known only when
    the method runs; give ``maxlen`` (the padded length T, an int or an int var of shape
    [1]) for a mask that other layers use.
    """
    helper = LayerHelper("sequence_mask", name)
    inputs: dict[str, Any] = {"X": as_variable(x, "sequence_mask: x")}
    if isinstance(maxlen, Variable):
        inputs["MaxLenTensor"], maxlen = maxlen, -1
    elif maxlen is not None and (isinstance(maxlen, bool) or not isinstance(maxlen, int)
                                 or maxlen < 0):
        raise error_at(OpArgumentError, f"sequence_mask: maxlen must be a non-negative int, "
                                        f"an int Variable or None, got {maxlen!r}")
    try:
        out_dtype = canonical_dtype(dtype)
    except TypeError as e:
        raise error_at(OpArgumentError, f"sequence_mask: {e}") from None
    return helper.append_one("sequence_mask", inputs,
                             {"maxlen": -1 if maxlen is None else maxlen,
                              "out_dtype": out_dtype})


def sequence_pool(input: Variable, pool_type: str, is_test: bool = False,
                  pad_value: float = 0.0, lengths: Variable | None = None) -> Variable:
    """Pools each row over its valid positions: ``[B, T, ...] -> [B, ...]``.

    ``pool_type``: 'sum', 'average', 'sqrt' (sum / sqrt(length)), 'max', 'first' or
    'last'. A row of length 0 gives ``pad_value``. ``is_test`` changes nothing (Paddle
    kept the max pool's positions only for training; here the gradient always has them).
    """
    return _pool(input, pool_type, pad_value, lengths, "sequence_pool")


def _pool(input: Variable, pool_type: str, pad_value: float, lengths: Variable | None,
          layer: str) -> Variable:
    if not isinstance(pool_type, str) or pool_type.lower() not in _POOL_TYPES:
        raise error_at(OpArgumentError, f"sequence_pool: pool_type must be one of "
                                        f"{', '.join(_POOL_TYPES)}, got {pool_type!r}")
    kind = pool_type.upper()
    helper = LayerHelper("sequence_pool")
    inputs = with_lengths({"X": input}, lengths)
    outputs = {"MaxIndex": [helper.tmp()]} if kind == "MAX" else None
    outs = helper.append("sequence_pool", inputs,
                         {"pooltype": kind, "pad_value": float(pad_value)}, outputs=outputs)
    if kind != "FIRST":     # the first step is the same with or without padding
        unpadded_pool(helper.trace, layer, inputs["X"].name, lengths)
    return outs["Out"][0]


def sequence_last_step(input: Variable, lengths: Variable | None = None) -> Variable:
    """Each row's value at its last valid position: ``[B, T, ...] -> [B, ...]``."""
    return _pool(input, "last", 0.0, lengths, "sequence_last_step")


def sequence_first_step(input: Variable, lengths: Variable | None = None) -> Variable:
    """Each row's value at position 0: ``[B, T, ...] -> [B, ...]``."""
    return _pool(input, "first", 0.0, lengths, "sequence_first_step")


def sequence_softmax(input: Variable, use_cudnn: bool = False, name: str | None = None,
                     lengths: Variable | None = None) -> Variable:
    """Softmax over each row's valid positions of scores ``[B, T]`` (or ``[B, T, 1]``);
    zero at padding. ``use_cudnn`` changes nothing here."""
    helper = LayerHelper("sequence_softmax", name)
    return helper.append_one("sequence_softmax", with_lengths({"X": input}, lengths))


def of_dtypes(value: Any, layer: str, what: str, dtypes: tuple[str, ...]) -> Variable:
    """``value`` as a Variable of one of ``dtypes`` (Paddle's checks: a TypeError, as
    `OpArgumentError` is, otherwise)."""
    var = as_variable(value, f"{layer}: {what}")
    if var.dtype not in dtypes:
        raise error_at(OpArgumentError, f"{layer}: {what} {var.name} is {var.dtype}; it must "
                                        f"be {', '.join(dtypes[:-1])} or {dtypes[-1]}")
    return var


def sequence_reverse(x: Variable, name: str | None = None,
                     lengths: Variable | None = None) -> Variable:
    """Each row with its first ``lengths[b]`` positions reversed (all T without
    ``lengths``); padding stays where it is, so reversing twice gives ``x`` back."""
    helper = LayerHelper("sequence_reverse", name)
    x = of_dtypes(x, "sequence_reverse", "x", ("float32", "float64", "int8", "int32",
                                               "int64"))
    return helper.append_one("sequence_reverse", with_lengths({"X": x}, lengths))
