"""Layers of click-through-rate models: continuous_value_model and filter_by_instag.

Paddle kept these models' instances in LoD tensors; here a batch of instances that have
several rows each is a padded batch ``[B, T, D]`` whose ``lengths`` (int64 ``[B]``) come as
a keyword after Paddle's own arguments, as for the sequence layers (docs/sequences.md).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import OpArgumentError, ShapeError
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable, float_input
from .image_args import flag, is_int
from .sequence import with_lengths
from .tensor import assign

__all__ = ["continuous_value_model", "filter_by_instag"]


def continuous_value_model(input: Variable, cvm: Variable, use_cvm: bool = True,
                           lengths: Variable | None = None) -> Variable:
    """``input`` ``[N, D]`` holds an item's show and click counts in its first two columns
    and its embedding after them; ``cvm`` ``[N, 2]`` is the (show, click) of each row. With
    ``use_cvm`` the result ``[N, D]`` has ``log(show + 1)`` and ``log(click + 1) -
    log(show + 1)`` in those columns; without, it is ``[N, D - 2]``, the embedding alone.

    A padded batch of sequences ``input`` ``[B, T, D]`` takes ``cvm`` ``[B, 2]`` (one per
    sequence) and ``lengths``; its padding gives zero rows.

    The gradient is Paddle's, not the derivative: the show and click columns of input's
    gradient receive ``cvm`` itself (what a parameter server adds into an embedding's
    counts), the other columns the output's gradient."""
    x = float_input(input, "continuous_value_model: input")
    c = as_variable(cvm, "continuous_value_model: cvm")
    if len(x.shape) not in (2, 3):
        raise error_at(ShapeError, f"continuous_value_model: input {x.name}:"
                                   f"{short_type(x.desc)} must be [N, D] (or a padded batch "
                                   f"[B, T, D] with lengths)")
    attrs = {"use_cvm": flag("continuous_value_model", "use_cvm", use_cvm)}
    return LayerHelper("cvm").append_one("cvm", with_lengths({"X": x, "CVM": c}, lengths),
                                         attrs)


def _filter_tag(value: Any) -> Variable:
    """The filter tags: an int Variable, or a list of ints recorded as a constant."""
    if isinstance(value, (list, tuple)) and value and all(is_int(v) for v in value):
        return assign(np.asarray(value, "int64"))
    if isinstance(value, (list, tuple, np.ndarray, int)):
        raise error_at(OpArgumentError, f"filter_by_instag: filter_tag must be an int64 "
                                        f"Variable or a non-empty list of ints, got "
                                        f"{value!r:.60}")
    return as_variable(value, "filter_by_instag: filter_tag")


def filter_by_instag(ins: Variable, ins_tag: Variable, filter_tag: Variable | Sequence[int],
                     is_lod: bool, out_val_if_empty: int = 0,
                     ins_lengths: Variable | None = None,
                     ins_tag_lengths: Variable | None = None) -> list[Variable]:
    """The instances of ``ins`` having a tag among ``filter_tag``'s: ``[out, loss_weight]``.

    ``ins`` is ``[B, D]`` (one row per instance), or with ``is_lod`` a padded batch
    ``[B, T, D]`` whose instance b holds ``ins_lengths[b]`` rows. ``ins_tag`` ``[B, K]``
    int64 lists each instance's tags (``ins_tag_lengths[b]`` of them; without it all K),
    and ``filter_tag`` the tags to keep (an int64 Variable or a list of ints). ``out``
    holds the kept instances in order, ``[K', D]`` or ``[K', T, D]`` with zeros past each
    one's rows; ``loss_weight`` is float32 ``[K', 1]`` of ones. When none is kept, ``out``
    is one row of ``out_val_if_empty`` and ``loss_weight`` ``[[0]]``. K' is known when the
    method runs. With ``ins_lengths`` the result is ``[out, loss_weight, out_lengths]``.

    The gradient reaches the kept instances' rows of ``ins``."""
    x = as_variable(ins, "filter_by_instag: ins")
    if not isinstance(is_lod, bool):
        raise error_at(OpArgumentError, f"filter_by_instag: is_lod must be True or False, "
                                        f"got {is_lod!r}")
    if len(x.shape) != (3 if is_lod else 2):
        form = "a padded batch [B, T, D] with is_lod=True" if is_lod else \
            "[B, D] (one row per instance) with is_lod=False"
        raise error_at(ShapeError, f"filter_by_instag: ins {x.name}:{short_type(x.desc)} must "
                                   f"be {form}")
    if not is_int(out_val_if_empty):
        raise error_at(OpArgumentError, f"filter_by_instag: out_val_if_empty must be an int, "
                                        f"got {out_val_if_empty!r}")
    inputs = {"Ins": x, "Ins_tag": as_variable(ins_tag, "filter_by_instag: ins_tag"),
              "Filter_tag": _filter_tag(filter_tag)}
    with_lengths(inputs, ins_lengths, "InsLengths")
    with_lengths(inputs, ins_tag_lengths, "InsTagLengths")
    helper = LayerHelper("filter_by_instag")
    outputs = {"OutLengths": [helper.tmp()]} if ins_lengths is not None else None
    outs = helper.append("filter_by_instag", inputs,
                         {"is_lod": is_lod, "out_val_if_empty": out_val_if_empty}, outputs)
    result = [outs["Out"][0], outs["LossWeight"][0]]
    return result + [outs["OutLengths"][0]] if ins_lengths is not None else result
