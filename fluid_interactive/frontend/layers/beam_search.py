"""Paddle 1.x's low-level beam search over padded batches: `beam_search` (one step) and
`beam_search_decode` (the backtrack after the last step). A batch of B sources with
``beam_size`` hypotheses each is ``B * beam_size`` rows, a source's rows together::

    selected_ids, selected_scores, parent_idx = fluid.layers.beam_search(
        pre_ids, pre_scores, topk_ids, accumulated, beam_size, end_id,
        return_parent_idx=True)                         # each [B * beam_size, ...]
    ...
    ids, scores = fluid.layers.beam_search_decode(
        ids_array, scores_array, beam_size, end_id, parent_idx=parents_array)

`fluid.layers.BeamSearchDecoder` with `dynamic_decode` does all of it for an `RNNCell`;
docs/decoding.md maps Paddle's LoD forms onto these.
"""
from __future__ import annotations

from typing import Any

from ...errors import DTypeError, OpArgumentError
from ...ir.text import short_type
from ...ops.tensor_array import ARRAY
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable
from .index import check_bool, check_int

__all__ = ["beam_search", "beam_search_decode"]


def _typed(value: Any, what: str, dtypes: tuple[str, ...], layer: str,
           array: bool = False) -> Variable:
    """``value`` as a Variable of one of ``dtypes`` (a tensor array of them with
    ``array``), or an error at the user's line."""
    v = as_variable(value, f"{layer}: {what}")
    if array and v.desc.kind != ARRAY:
        raise error_at(OpArgumentError, f"{layer}: {what} must be a tensor array holding one "
                                        f"element per step (fluid.layers.create_array), got "
                                        f"{v.name}:{short_type(v.desc)}")
    if v.dtype not in dtypes:
        raise error_at(DTypeError, f"{layer}: {what} {v.name}:{short_type(v.desc)} must be "
                                   f"{' or '.join(dtypes)}; cast it first")
    return v


def _no_gradient(outs: list[Variable]) -> list[Variable]:
    for v in outs:
        v.stop_gradient = True
    return outs


def beam_search(pre_ids: Variable, pre_scores: Variable, ids: Variable | None,
                scores: Variable, beam_size: int, end_id: int, level: int = 0,
                is_accumulated: bool = True, name: str | None = None,
                return_parent_idx: bool = False) -> tuple[Variable, ...]:
    """One step of a beam search over ``B * beam_size`` rows.

    ``pre_ids`` int64 ``[N, 1]`` and ``pre_scores`` ``[N, 1]``: each hypothesis's last id
    and accumulated score; ``ids`` int64 ``[N, K]`` (None: a candidate's id is its column)
    and ``scores`` ``[N, K]``: its K candidates, with accumulated scores, or with
    probabilities when ``is_accumulated=False`` (the op adds ``log(p)`` to
    ``pre_scores``). A hypothesis whose last id is ``end_id`` has ended: it offers one
    candidate, ``end_id`` at its own score. Of each source's candidates the
    ``beam_size`` best are kept, listed by the hypothesis they extend and best first
    within one: ``(selected_ids, selected_scores)`` ``[N, 1]``, and with
    ``return_parent_idx`` the extended row of each, int32 ``[N]`` (for `gather` on the
    states). At the first step give the start ids to every row and a very low score
    (-1e9) to all but the first row of each source, so that the sources' copies do not
    compete. ``level`` must be 0. No gradient flows through it.
    """
    layer = "beam_search"
    pre_ids_v = _typed(pre_ids, "pre_ids", ("int64",), layer)
    pre_scores_v = _typed(pre_scores, "pre_scores", ("float32", "float64"), layer)
    ids_v = None if ids is None else _typed(ids, "ids", ("int64",), layer)
    scores_v = _typed(scores, "scores", ("float32", "float64"), layer)
    attrs = {"beam_size": check_int(beam_size, "beam_size", layer, minimum=1),
             "end_id": check_int(end_id, "end_id", layer, minimum=0),
             "level": check_int(level, "level", layer),
             "is_accumulated": check_bool(is_accumulated, "is_accumulated", layer)}
    if attrs["level"] != 0:
        raise error_at(OpArgumentError, f"{layer}: level must be 0: a padded batch has one "
                                        f"level (Paddle's LoD had two)")
    helper = LayerHelper(layer, name)
    outs = helper.append(layer, {"pre_ids": pre_ids_v, "pre_scores": pre_scores_v,
                                 "ids": ids_v, "scores": scores_v}, attrs,
                         outputs={"selected_ids": [helper.out_name()],
                                  "selected_scores": [helper.tmp()],
                                  "parent_idx": [helper.tmp()]})
    got = _no_gradient([outs["selected_ids"][0], outs["selected_scores"][0],
                        outs["parent_idx"][0]])
    return tuple(got) if return_parent_idx else tuple(got[:2])


def beam_search_decode(ids: Variable, scores: Variable, beam_size: int, end_id: int,
                       name: str | None = None, parent_idx: Variable | None = None,
                       return_length: bool = False) -> tuple[Variable, ...]:
    """The full hypotheses of a beam search, traced back from its last step.

    ``ids`` and ``scores``: tensor arrays with one element per step, each ``[N, 1]`` (the
    first the start ids and scores, then each step's `beam_search` results);
    ``parent_idx``: the array of each step's ``parent_idx`` (as many elements, or one
    fewer when the first step has none). Paddle read the parents off the LoD; a padded
    batch needs them given. Returns ``(sentence_ids, sentence_scores)``, int64 and float
    ``[B, beam_size, T]``: each source's hypotheses sorted by their final score, best
    first, with the start id and one ``end_id`` for one that ended (Paddle drops the end
    ids an ended hypothesis repeats), padded with ``end_id`` and 0; ``return_length``
    adds their lengths, int64 ``[B, beam_size]``. No gradient flows through it.
    """
    layer = "beam_search_decode"
    ids_v = _typed(ids, "ids", ("int64",), layer, array=True)
    scores_v = _typed(scores, "scores", ("float32", "float64"), layer, array=True)
    if parent_idx is None:
        raise error_at(OpArgumentError,
                       f"{layer}: a padded beam search needs parent_idx=, the tensor array "
                       f"of each step's parent rows (beam_search(..., return_parent_idx=True) "
                       f"gives them; array_write them beside the ids)")
    parents = _typed(parent_idx, "parent_idx", ("int32", "int64"), layer, array=True)
    attrs = {"beam_size": check_int(beam_size, "beam_size", layer, minimum=1),
             "end_id": check_int(end_id, "end_id", layer, minimum=0)}
    helper = LayerHelper(layer, name)
    outs = helper.append(layer, {"Ids": ids_v, "Scores": scores_v, "ParentIdx": parents},
                         attrs)
    got = _no_gradient([outs["SentenceIds"][0], outs["SentenceScores"][0],
                        outs["SentenceLengths"][0]])
    return tuple(got) if check_bool(return_length, "return_length", layer) else tuple(got[:2])
