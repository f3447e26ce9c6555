"""Sequence layers that move and index a padded batch ``[B, T, ...]`` with optional int64
``lengths`` ``[B]`` (Paddle's LoD): pad and unpad, expand, slice, concatenate, enumerate,
reshape and scatter. Paddle 1.8's parameters come first, in its order; the lengths come
after them as keywords. What each output's lengths are is in docs/sequences.md: where
they are new (`sequence_concat`, `sequence_reshape` with ``lengths``) the layer returns
``(out, out_lengths)``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import OpArgumentError
from ...ir.records import INT_DTYPES
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable
from .sequence import of_dtypes, with_lengths

__all__ = ["sequence_pad", "sequence_unpad", "sequence_expand", "sequence_expand_as",
           "sequence_slice", "sequence_concat", "sequence_enumerate", "sequence_reshape",
           "sequence_scatter"]


def int_at_least(value: Any, what: str, layer: str, low: int) -> int:
    """``value`` when it is an int >= ``low``, else an error at the user's line."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise error_at(OpArgumentError, f"{layer}: {what} must be an int >= {low}, got "
                                        f"{value!r}")
    return value


def sequence_pad(x: Variable, pad_value: Variable, maxlen: int | None = None,
                 name: str | None = None, lengths: Variable | None = None
                 ) -> tuple[Variable, Variable]:
    """``(out, length)``: each row's valid steps of ``x`` ``[B, T, ...]``, then
    ``pad_value`` (a var of shape [1] or one step's shape) up to ``maxlen`` steps
    (``None``: the longest length, known only when the method runs); ``length`` is int64
    ``[B]``, the lengths (T for every row without ``lengths``)."""
    helper = LayerHelper("sequence_pad", name)
    pad = as_variable(pad_value, "sequence_pad: pad_value")
    if maxlen is not None:
        int_at_least(maxlen, "maxlen", "sequence_pad", 0)
    outs = helper.append("sequence_pad", with_lengths({"X": x, "PadValue": pad}, lengths),
                         {"padded_length": -1 if maxlen is None else maxlen})
    return outs["Out"][0], outs["Length"][0]


def sequence_unpad(x: Variable, length: Variable, name: str | None = None) -> Variable:
    """``x`` ``[B, T, ...]`` with zeros at and past ``length[b]`` in each row: the padded
    form of the sequences ``x[b, :length[b]]``, whose lengths are ``length``."""
    helper = LayerHelper("sequence_unpad", name)
    return helper.append_one("sequence_unpad", {"X": x, "Lengths": length})


def sequence_expand(x: Variable, y: Variable, ref_level: int = -1, name: str | None = None,
                    x_lengths: Variable | None = None,
                    y_lengths: Variable | None = None) -> Variable:
    """Row b of ``x`` repeated ``y_lengths[b]`` times (y's lengths; its padded T without
    them): ``x`` ``[B, ...]`` gives ``[B, Ty, ...]``; with ``x_lengths``, ``x`` is a padded
    batch ``[B, Tx, ...]`` and the result ``[B, Ty, Tx, ...]`` holds the copies of each
    sequence. Zeros past the repeats. ``ref_level`` names which of y's LoD levels gave the
    repeats in Paddle; a padded y has one level, so it must be -1 or 0."""
    if ref_level not in (-1, 0):
        raise error_at(OpArgumentError, f"sequence_expand: ref_level must be -1 or 0 (a "
                                        f"padded y has one level of lengths), got {ref_level!r}")
    helper = LayerHelper("sequence_expand", name)
    inputs = with_lengths(with_lengths({"X": x, "Y": y}, x_lengths, "XLengths"), y_lengths,
                          "YLengths")
    return helper.append_one("sequence_expand", inputs, {"ref_level": ref_level})


def sequence_expand_as(x: Variable, y: Variable, name: str | None = None,
                       y_lengths: Variable | None = None) -> Variable:
    """Row b of ``x`` ``[B, ...]`` repeated as often as row b of ``y`` is long:
    ``[B, Ty, ...]``, zeros past ``y_lengths[b]``; its lengths are y's."""
    helper = LayerHelper("sequence_expand_as", name)
    x = of_dtypes(x, "sequence_expand_as", "x", ("float32", "float64", "int32", "int64"))
    return helper.append_one("sequence_expand",
                             with_lengths({"X": x, "Y": y}, y_lengths, "YLengths"))


def sequence_slice(input: Variable, offset: Variable, length: Variable,
                   name: str | None = None, lengths: Variable | None = None) -> Variable:
    """Row b's steps ``offset[b]`` to ``offset[b] + length[b]`` (int64 ``[B, 1]`` or
    ``[B]``), moved to the front of the row: ``[B, T, ...]``, zeros after; the result's
    lengths are ``length``. A slice past a row's end fails when the method runs."""
    helper = LayerHelper("sequence_slice", name)
    for what, v in (("offset", offset), ("length", length)):
        var = as_variable(v, f"sequence_slice: {what}")
        if var.dtype not in INT_DTYPES:
            raise error_at(OpArgumentError, f"sequence_slice: {what} {var.name}:"
                                            f"{short_type(var.desc)} must be int64")
    return helper.append_one("sequence_slice", with_lengths(
        {"X": input, "Offset": offset, "Length": length}, lengths))


def sequence_concat(input: Sequence[Variable], name: str | None = None,
                    lengths: Sequence[Variable] | None = None
                    ) -> Variable | tuple[Variable, Variable]:
    """Each row's sequences of the vars of ``input`` joined one after another: ``[B, T_1
    + T_2 + ..., ...]``. With ``lengths`` (one var per input) returns ``(out,
    out_lengths)``, the valid steps packed at the front of each row; without, the rows are
    full and it is a concatenation along T."""
    if not isinstance(input, (list, tuple)) or not input:
        raise error_at(OpArgumentError, "sequence_concat: input must be a non-empty list of "
                                        "Variables")
    xs = [as_variable(v, "sequence_concat: each input") for v in input]
    helper = LayerHelper("sequence_concat", name)
    inputs: dict[str, Any] = {"X": xs}
    if lengths is not None:
        if not isinstance(lengths, (list, tuple)) or len(lengths) != len(xs):
            raise error_at(OpArgumentError, f"sequence_concat: lengths must be a list of "
                                            f"{len(xs)} vars, one per input")
        inputs["Lengths"] = [as_variable(n, "sequence_concat: lengths") for n in lengths]
    outs = helper.append("sequence_concat", inputs)
    return outs["Out"][0] if lengths is None else (outs["Out"][0], outs["OutLengths"][0])


def sequence_enumerate(input: Variable, win_size: int, pad_value: int = 0,
                       name: str | None = None, lengths: Variable | None = None) -> Variable:
    """Every window of ``win_size`` ids: ``[B, T]`` (or ``[B, T, 1]``) int ids give
    ``[B, T, win_size]``, ``pad_value`` where a window passes the row's end."""
    helper = LayerHelper("sequence_enumerate", name)
    int_at_least(win_size, "win_size", "sequence_enumerate", 1)
    int_at_least(pad_value, "pad_value", "sequence_enumerate", -2 ** 62)
    return helper.append_one("sequence_enumerate", with_lengths({"X": input}, lengths),
                             {"win_size": win_size, "pad_value": pad_value})


def sequence_reshape(input: Variable, new_dim: int, lengths: Variable | None = None
                     ) -> Variable | tuple[Variable, Variable]:
    """Each row's valid values of ``input`` ``[B, T, D]`` in rows of ``new_dim``:
    ``[B, ceil(T * D / new_dim), new_dim]``. With ``lengths`` returns ``(out,
    out_lengths)``, ``out_lengths = lengths * D / new_dim`` (each must divide)."""
    helper = LayerHelper("sequence_reshape")
    int_at_least(new_dim, "new_dim", "sequence_reshape", 1)
    outs = helper.append("sequence_reshape", with_lengths({"X": input}, lengths),
                         {"new_dim": new_dim})
    return outs["Out"][0] if lengths is None else (outs["Out"][0], outs["OutLengths"][0])


def sequence_scatter(input: Variable, index: Variable, updates: Variable,
                     name: str | None = None, lengths: Variable | None = None) -> Variable:
    """``input`` ``[B, D]`` with ``updates[b, t]`` added at column ``index[b, t]`` of row
    b, for each valid step t of the padded ``index`` and ``updates`` (``[B, T]`` or
    ``[B, T, 1]``)."""
    helper = LayerHelper("sequence_scatter", name)
    return helper.append_one("sequence_scatter", with_lengths(
        {"X": input, "Ids": index, "Updates": updates}, lengths))
