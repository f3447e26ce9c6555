"""One step of a beam search and the backtrack after the last step, over padded batches
(Paddle 1.x's ``beam_search`` and ``beam_search_decode``; docs/decoding.md maps the LoD
forms onto these).

B sources with ``beam_size`` hypotheses each are ``N = B * beam_size`` rows, the rows of
one source together: row ``b * beam_size + j`` is hypothesis j of source b. Paddle's LoD
let a source hold fewer rows and dropped a source once all its hypotheses had ended; here
every source keeps ``beam_size`` rows, and a row whose last id is ``end_id`` has ended: it
goes on with ``end_id`` at the score it ended with.

``beam_search``
    pre_ids [N, 1] int64 and pre_scores [N, 1] (float): each row's last id and its
    accumulated score; ids [N, K] int64 (optional: without it a candidate's id is its
    column) and scores [N, K]: each row's K candidates, with accumulated scores
    (``is_accumulated``) or probabilities (then ``pre_score + log(p)``). An ended row
    offers one candidate, ``end_id`` at its own score. Of each source's candidates the
    ``beam_size`` best are selected, listed by the row they extend (``parent_idx`` [N]
    int32, a row of the whole batch) and, within a row, best first, as Paddle lists them:
    selected_ids [N, 1] int64, selected_scores [N, 1]. Equal scores are not ordered.
``beam_search_decode``
    Ids and Scores: arrays of [N, 1] with one element per step (the first holds the start
    ids and their scores), ParentIdx: an array of each step's ``parent_idx`` (as many
    elements, or one fewer: the first step then has none). Each final row is traced back
    to the first step; an ended hypothesis keeps one ``end_id`` (Paddle drops the ones
    its finished rows repeat), with the score it ended with. SentenceIds [B, beam, T]
    int64 (padded with ``end_id``), SentenceScores [B, beam, T] (each step's accumulated
    score, padded with 0) and SentenceLengths [B, beam] int64, the hypotheses of a source
    sorted by their final score, best first (equal scores keep their row order).

Neither op has a gradient (Paddle's have none).
"""
from __future__ import annotations

from typing import Any

from ..ir.text import format_shape as _fmt
from .gather import check_bounds
from .registry import register
from .select import top_k_indices
from .spec import InferContext, KernelContext, OpSpec, slots
from .tensor_array import ARRAY

_FLOATS = ("float32", "float64")


def _rows(ctx: InferContext, slot: str, dtypes: tuple[str, ...], width: int | None
          ) -> tuple[int, ...]:
    t = ctx.input(slot)
    if t.dtype not in dtypes:
        ctx.fail_dtype(f"{slot} must be {' or '.join(dtypes)}, got {t.dtype}")
    if t.rank != 2 or (width is not None and t.shape[1] not in (width, -1)):
        want = f"[N, {width}]" if width is not None else "[N, K]"
        ctx.fail(f"{slot} must be {want} (one row per hypothesis), got {_fmt(t.shape)}")
    return t.shape


def _same_rows(ctx: InferContext, shapes: list[tuple[int, ...]], names: list[str]) -> int:
    known = {s[0] for s in shapes if s[0] >= 0}
    if len(known) > 1:
        listed = ", ".join(f"{n} {_fmt(s)}" for n, s in zip(names, shapes))
        ctx.fail(f"{listed} must have one row per hypothesis, as many each")
    return known.pop() if known else -1


def _check_beam(ctx: InferContext, rows: int) -> int:
    beam = ctx.attrs["beam_size"]
    if isinstance(beam, bool) or not isinstance(beam, int) or beam < 1:
        ctx.fail(f"beam_size must be a positive int, got {beam!r}")
    if rows >= 0 and rows % beam:
        ctx.fail(f"the {rows} rows are not whole sources of beam_size={beam} rows each; "
                 f"a padded batch holds batch_size * beam_size rows")
    return beam


def _beam_search_infer(ctx: InferContext) -> None:
    shapes = [_rows(ctx, "pre_ids", ("int64",), 1), _rows(ctx, "pre_scores", _FLOATS, 1)]
    names = ["pre_ids", "pre_scores", "scores"]
    scores = _rows(ctx, "scores", _FLOATS, None)
    if ctx.has_input("ids"):
        ids = _rows(ctx, "ids", ("int64",), None)
        if -1 not in (ids[1], scores[1]) and ids[1] != scores[1]:
            ctx.fail(f"ids {_fmt(ids)} and scores {_fmt(scores)} must list as many "
                     f"candidates per row")
        shapes.append(ids)
        names.append("ids")
    rows = _same_rows(ctx, shapes[:2] + [scores] + shapes[2:], names)
    _check_beam(ctx, rows)
    if ctx.attrs["level"] != 0:
        ctx.fail(f"level must be 0 (a padded batch has one level), got {ctx.attrs['level']!r}")
    ctx.set_output("selected_ids", (rows, 1), "int64")
    ctx.set_output("selected_scores", (rows, 1), ctx.input("pre_scores").dtype)
    if ctx.has_output("parent_idx"):
        ctx.set_output("parent_idx", (rows,), "int32")


def _beam_search_kernel(ctx: KernelContext):
    xp, a = ctx.xp, ctx.attrs
    beam, end, accumulated = int(a["beam_size"]), int(a["end_id"]), bool(a["is_accumulated"])
    has_ids, want_parents = ctx.has_input("ids"), ctx.has_output("parent_idx")
    n, k = ctx.input("scores").shape
    dtype = ctx.input("pre_scores").dtype
    groups = n // beam
    first = (xp.arange(k) == 0)[None, :]
    column = xp.broadcast_to(xp.arange(k, dtype="int64"), (n, k))
    starts = (xp.arange(groups, dtype="int64") * beam)[:, None]
    lowest = xp.asarray(-xp.inf, dtype)

    def beam_search(pre_ids: Any, pre_scores: Any, *rest: Any) -> tuple[Any, ...]:
        ids, scores = rest if has_ids else (column, rest[0])
        pre = pre_scores.astype(dtype, copy=False)
        cand = scores.astype(dtype, copy=False) if accumulated else pre + xp.log(scores)
        ended = pre_ids == end                                       # [N, 1]
        # an ended row offers one candidate: end_id at its own score
        cand = xp.where(ended, xp.where(first, pre, lowest), cand)
        cand_ids = xp.where(ended, end, ids)
        pick = top_k_indices(xp, cand.reshape(groups, beam * k), beam)  # best first
        row = pick // k
        order = xp.argsort(row, axis=1, kind="stable")   # by row, best first within one
        parent = (xp.take_along_axis(row, order, 1) + starts).reshape(n)
        col = xp.take_along_axis(pick % k, order, 1).reshape(n)
        outs = (cand_ids[parent, col].reshape(n, 1), cand[parent, col].reshape(n, 1))
        return outs + (parent.astype("int32"),) if want_parents else outs
    return beam_search


_BEAM_SEARCH = {"level": 0, "beam_size": 1, "end_id": 0, "is_accumulated": True}
register(OpSpec("beam_search", slots("pre_ids", "pre_scores", "ids?", "scores"),
                slots("selected_ids", "selected_scores", "parent_idx?"), _beam_search_infer,
                _beam_search_kernel, attrs=_BEAM_SEARCH,
                doc="the beam_size best candidates of each source's rows, listed by the row "
                    "they extend (parent_idx); an ended row offers end_id alone"))


# --- beam_search_decode ---------------------------------------------------------------------

def _array(ctx: InferContext, slot: str, dtypes: tuple[str, ...]) -> tuple[int, ...]:
    t = ctx.input(slot)
    if t.kind != ARRAY:
        ctx.fail(f"{slot} must be a tensor array holding one element per step, got a "
                 f"{t.kind}")
    if t.dtype not in dtypes:
        ctx.fail_dtype(f"{slot} must be an array of {' or '.join(dtypes)}, got {t.dtype}")
    return t.shape


def _decode_infer(ctx: InferContext) -> None:
    ids = _array(ctx, "Ids", ("int64",))
    scores = _array(ctx, "Scores", _FLOATS)
    parents = _array(ctx, "ParentIdx", ("int32", "int64"))
    for name, shape in (("Ids", ids), ("Scores", scores)):
        if len(shape) != 2 or shape[1] not in (1, -1):
            ctx.fail(f"the elements of {name} must be [N, 1] (a beam_search step's "
                     f"selected ids or scores), got {_fmt(shape)}")
    if len(parents) != 1:
        ctx.fail(f"the elements of ParentIdx must be [N] (a beam_search step's parent_idx), "
                 f"got {_fmt(parents)}")
    rows = _same_rows(ctx, [ids, scores, parents], ["Ids", "Scores", "ParentIdx"])
    beam = _check_beam(ctx, rows)
    sources = rows // beam if rows >= 0 else -1
    ctx.set_output("SentenceIds", (sources, beam, -1), "int64")
    ctx.set_output("SentenceScores", (sources, beam, -1), ctx.input("Scores").dtype)
    ctx.set_output("SentenceLengths", (sources, beam), "int64")


def _steps(xp: Any, ids: list, scores: list, parents: list, n: int) -> tuple[Any, Any, Any]:
    """The arrays stacked [T, N]; parents of the first step are the rows themselves."""
    if not ids or len(scores) != len(ids) or len(parents) not in (len(ids), len(ids) - 1):
        raise ValueError(f"beam_search_decode: Ids and Scores must hold one element per step "
                         f"(at least one), and ParentIdx as many or one fewer; got "
                         f"{len(ids)}, {len(scores)} and {len(parents)}")
    # lists of the elements: a tensor array is a sequence, not an array the device's stack
    # takes as it is
    stacked = [xp.stack(list(a)).reshape(len(a), n) for a in (ids, scores)]
    if len(parents) < len(ids):
        parents = [xp.arange(n)] + list(parents)
    return stacked[0], stacked[1], xp.stack(list(parents)).reshape(len(ids), n).astype("int64")


def _decode_kernel(ctx: KernelContext):
    xp = ctx.xp
    beam, end = int(ctx.attrs["beam_size"]), int(ctx.attrs["end_id"])
    n = ctx.input("Ids").shape[0]
    dtype = ctx.input("Scores").dtype

    def decode(ids_list: list, scores_list: list, parents_list: list) -> tuple[Any, Any, Any]:
        ids, scores, parents = _steps(xp, ids_list, scores_list, parents_list, n)
        steps = len(ids)
        check_bounds(xp, parents, n, "beam_search_decode: parent row")
        path_ids, path_scores = xp.empty((steps, n), "int64"), xp.empty((steps, n), dtype)
        row = xp.arange(n)
        for t in range(steps - 1, -1, -1):   # back through the steps, every row at once
            path_ids[t], path_scores[t] = ids[t, row], scores[t, row]
            row = parents[t, row]
        # an ended hypothesis repeats end_id: keep the last one, at the final score
        keep = path_ids != end
        keep[-1] = True
        lengths = keep.sum(axis=0)
        position = xp.cumsum(keep, axis=0) - 1
        out_ids, out_scores = xp.full((n, steps), end, "int64"), xp.zeros((n, steps), dtype)
        t_kept, r_kept = xp.nonzero(keep)
        out_ids[r_kept, position[t_kept, r_kept]] = path_ids[t_kept, r_kept]
        out_scores[r_kept, position[t_kept, r_kept]] = path_scores[t_kept, r_kept]
        order = xp.argsort(-path_scores[-1].reshape(-1, beam), axis=1, kind="stable")
        rows = (order + (xp.arange(n // beam) * beam)[:, None]).reshape(n)
        shape = (n // beam, beam, steps)
        return (out_ids[rows].reshape(shape), out_scores[rows].reshape(shape),
                lengths[rows].reshape(shape[:2]).astype("int64"))
    return decode


register(OpSpec("beam_search_decode", slots("Ids", "Scores", "ParentIdx"),
                slots("SentenceIds", "SentenceScores", "SentenceLengths"), _decode_infer,
                _decode_kernel, attrs={"beam_size": 1, "end_id": 0}, host_access="index",
                doc="each final row of a beam search traced back through ParentIdx: its ids "
                    "and scores per step, one end_id kept, sorted by final score"))
