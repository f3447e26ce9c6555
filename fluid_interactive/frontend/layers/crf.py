"""Sequence tagging: the linear-chain CRF loss, its Viterbi decoding and chunk evaluation.

Paddle 1.8 took LoD sequences or, with ``length``, padded batches; here the input is a
padded batch ``[B, T, D]`` of tag scores (an ``fc`` with ``num_flatten_dims=2`` over
``[B, T, H]`` gives it) and ``length`` (int64 ``[B]``) the rows' lengths, which may be left
out when every row is full length. Positions past a row's length never matter.
"""
from __future__ import annotations

from typing import Any

from ...errors import OpArgumentError, ShapeError
from ...ir.text import format_shape as dims
from ...ir.text import short_type
from ..param_attr import ParamAttr
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper
from .loss_checks import FLOATS, INTS, choice, int_list, integer, optional_var, var_of

__all__ = ["linear_chain_crf", "crf_decoding", "chunk_eval"]


def _emission(layer: str, input: Any) -> Variable:
    x = var_of(layer, input, "input", FLOATS)
    if len(x.shape) != 3 or x.shape[2] < 0:
        raise error_at(ShapeError, f"{layer}: input {x.name}:{short_type(x.desc)} must be a "
                                   f"padded batch of tag scores [B, T, D] with D known (pass "
                                   f"length for rows of different lengths)")
    return x


def _tags(layer: str, x: Variable, label: Any) -> Variable:
    lab = var_of(layer, label, "label", INTS)
    s = lab.shape
    ok = len(s) == 2 or (len(s) == 3 and s[2] in (1, -1))
    if not ok or any(a >= 0 and b >= 0 and a != b for a, b in zip(s[:2], x.shape[:2])):
        raise error_at(ShapeError, f"{layer}: label {lab.name}:{short_type(lab.desc)} must "
                                   f"hold one tag per step of input {dims(x.shape)}: "
                                   f"[B, T] or [B, T, 1]")
    return lab


def linear_chain_crf(input: Variable, label: Variable, param_attr: Any = None,
                     length: Variable | None = None) -> Variable:
    """The negative log-likelihood ``[B, 1]`` of the gold tags ``label`` (int64
    ``[B, T]``) under a linear-chain CRF over the tag scores ``input`` ``[B, T, D]``:
    ``log Z - score(gold path)``; average it with `mean` and minimise it.

    Its transition parameter ``[D + 2, D]`` (named by ``param_attr``; give the same name
    to `crf_decoding`) is laid out as Paddle lays it out: row 0 the start scores, row 1 the
    end scores, then ``[i, j]`` at row ``2 + i`` the score of tag i followed by tag j.
    ``length`` (int64 ``[B]``) bounds each row; an empty row's loss is 0.
    """
    layer = "linear_chain_crf"
    x = _emission(layer, input)
    lab = _tags(layer, x, label)
    n = optional_var(layer, length, "length", INTS)
    helper = LayerHelper(layer)
    pattr = helper.param_attr(param_attr, "param_attr")
    if pattr is None:
        raise error_at(OpArgumentError, f"{layer}: the transitions are a parameter; "
                                        f"param_attr=False is not allowed")
    d = x.shape[2]
    helper.context = f" (input {x.name}:{short_type(x.desc)})"
    transition = helper.create_parameter(pattr, [d + 2, d], x.dtype)
    outs = helper.append(layer, {"Emission": x, "Transition": transition, "Label": lab,
                                 "Length": n},
                         outputs={"Alpha": [helper.tmp()],
                                  "LogLikelihood": [helper.out_name()]}, final=False)
    return outs["LogLikelihood"][0]


def _transition(layer: str, helper: LayerHelper, param_attr: Any, x: Variable) -> Variable:
    name = param_attr.name if isinstance(param_attr, ParamAttr) else param_attr
    if not isinstance(name, str):
        raise error_at(OpArgumentError, f"{layer}: param_attr must name the transition "
                                        f"parameter of linear_chain_crf (a ParamAttr with a "
                                        f"name, or the name), got {param_attr!r}")
    var = helper.trace.find(name)
    if var is None or not var.is_parameter:
        raise error_at(OpArgumentError, f"{layer}: there is no parameter {name!r}; give "
                                        f"linear_chain_crf param_attr=fluid.ParamAttr(name="
                                        f"{name!r}) in a method traced before this one, or in "
                                        f"this one")
    d = x.shape[2]
    if tuple(var.shape) != (d + 2, d):
        raise error_at(ShapeError, f"{layer}: parameter {name!r} is {short_type(var)} but "
                                   f"input {dims(x.shape)} needs transitions {dims((d + 2, d))}")
    return Variable(helper.trace, name)


def crf_decoding(input: Variable, param_attr: Any, label: Variable | None = None,
                 length: Variable | None = None) -> Variable:
    """The best tag path ``[B, T]`` (int64, 0 past each row's length) of the tag scores
    ``input`` ``[B, T, D]`` under the transitions that `linear_chain_crf` trained, named by
    ``param_attr`` (a `fluid.ParamAttr` with a name, or the name). With ``label``
    (``[B, T]``), 1 where the path agrees with it and 0 elsewhere instead. No gradient."""
    layer = "crf_decoding"
    x = _emission(layer, input)
    lab = None if label is None else _tags(layer, x, label)
    n = optional_var(layer, length, "length", INTS)
    helper = LayerHelper(layer)
    transition = _transition(layer, helper, param_attr, x)
    return helper.append_one(layer, {"Emission": x, "Transition": transition, "Label": lab,
                                     "Length": n})


def chunk_eval(input: Variable, label: Variable, chunk_scheme: str, num_chunk_types: int,
               excluded_chunk_types: list[int] | None = None,
               seq_length: Variable | None = None) -> tuple[Variable, ...]:
    """Chunk-level precision, recall and F1 of predicted tag ids ``input`` against
    ``label`` (int64 ``[B, T]``), for named-entity or phrase chunking.

    A tag id is ``chunk_type * K + tag`` with K tags per chunk type in ``chunk_scheme``:
    'IOB' (B, I), 'IOE' (I, E), 'IOBES' (B, I, E, S) or 'plain' (a chunk is a run of one
    type); ``num_chunk_types * K`` is the outside tag O. ``seq_length`` (int64 ``[B]``)
    bounds each row. Returns ``(precision, recall, f1_score, num_infer_chunks,
    num_label_chunks, num_correct_chunks)``: three 0-d float32 and three 0-d int64 vars,
    the counts to accumulate over batches.
    """
    layer = "chunk_eval"
    x = var_of(layer, input, "input", ("int64",))
    lab = var_of(layer, label, "label", ("int64",))
    scheme = choice(layer, "chunk_scheme", chunk_scheme, ("IOB", "IOE", "IOBES", "plain"))
    types = integer(layer, "num_chunk_types", num_chunk_types, minimum=1)
    excluded = int_list(layer, "excluded_chunk_types", excluded_chunk_types)
    n = optional_var(layer, seq_length, "seq_length", INTS)
    helper = LayerHelper(layer)
    outs = helper.append(layer, {"Inference": x, "Label": lab, "SeqLength": n},
                         {"num_chunk_types": types, "chunk_scheme": scheme,
                          "excluded_chunk_types": excluded}, final=False)
    return tuple(outs[s][0] for s in ("Precision", "Recall", "F1-Score", "NumInferChunks",
                                      "NumLabelChunks", "NumCorrectChunks"))
