"""``chunk_eval``: precision, recall and F1 of the chunks (named entities, phrases) a tagger
found, against the gold chunks, over a padded batch.

Inference and Label [B, T] (or [B, T, 1]) hold tag ids ``type * K + tag`` where K is the
scheme's number of tags (IOB: B=0, I=1; IOE: I=0, E=1; IOBES: B=0, I=1, E=2, S=3; plain:
one tag, a chunk is a run of one type), and ``num_chunk_types * K`` is the outside tag O.
SeqLength [B] (or [B, 1]) gives each row's length (without it every row is full length);
chunks never cross it. A chunk counts as correct when both sides have it with the same
start, end and type; ``excluded_chunk_types`` are left out of every count. The rules of
where a chunk starts and ends are Paddle's; the kernel finds every start and end at once
(each depends on two neighbouring tags only) instead of walking each sequence.

Outputs: Precision, Recall, F1-Score (0-d float32; 0 where a count is 0), and
NumInferChunks, NumLabelChunks, NumCorrectChunks (0-d int64).
"""
from __future__ import annotations

from typing import Any

from ..ir.text import format_shape as fmt
from .loss_common import (
    check_int,
    check_lengths,
    check_range,
    row_lengths,
    running_max,
    scalars_into,
    time_mask,
)
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, dims_compatible, slots

#: scheme -> (K, begin, inside, end, single); -1 where the scheme has no such tag
SCHEMES = {"IOB": (2, 0, 1, -1, -1), "IOE": (2, -1, 0, 1, -1), "IOBES": (4, 0, 1, 2, 3),
           "plain": (1, -1, -1, -1, -1)}
_ATTRS = {"num_chunk_types": 1, "chunk_scheme": "IOB", "excluded_chunk_types": []}
_OUTS = ("Precision", "Recall", "F1-Score", "NumInferChunks", "NumLabelChunks",
         "NumCorrectChunks")


def _infer(ctx: InferContext) -> None:
    if ctx.attrs["chunk_scheme"] not in SCHEMES:
        ctx.fail(f"chunk_scheme must be one of {', '.join(map(repr, SCHEMES))}, got "
                 f"{ctx.attrs['chunk_scheme']!r}")
    if int(ctx.attrs["num_chunk_types"]) < 1:
        ctx.fail(f"num_chunk_types must be >= 1, got {ctx.attrs['num_chunk_types']!r}")
    x, lab = ctx.input("Inference"), ctx.input("Label")
    for t, what in ((x, "Inference"), (lab, "Label")):
        check_int(ctx, t, f"chunk_eval: {what}")
        if not (t.rank == 2 or (t.rank == 3 and dims_compatible(t.shape[2], 1))):
            ctx.fail(f"chunk_eval: {what} must be tag ids [B, T] (or [B, T, 1]), got "
                     f"{fmt(t.shape)}")
    if not all(dims_compatible(a, b) for a, b in zip(x.shape[:2], lab.shape[:2])):
        ctx.fail(f"chunk_eval: Inference {fmt(x.shape)} and Label {fmt(lab.shape)} must have "
                 f"the same [B, T]")
    check_lengths(ctx, "SeqLength", x.shape[0], "chunk_eval")
    for slot in _OUTS:
        ctx.set_output(slot, (), "float32" if slot in _OUTS[:3] else "int64")


class _Chunks:
    """Where chunks start and end in a batch of tag ids, under one scheme."""

    def __init__(self, xp: Any, scheme: str, num_types: int):
        self.xp = xp
        self.k, self.begin, self.inside, self.end, self.single = SCHEMES[scheme]
        self.other = num_types

    def split(self, ids: Any, valid: Any) -> tuple[Any, Any]:
        """(tag, type) [B, T + 1]; padded positions and a last extra column are O."""
        xp = self.xp
        b = ids.shape[0]
        typ = xp.full((b, ids.shape[1] + 1), self.other, dtype="int64")
        tag = xp.full(typ.shape, -1, dtype="int64")
        typ[:, :-1] = xp.where(valid, ids // self.k, self.other)
        tag[:, :-1] = xp.where(valid, ids % self.k, -1)
        return tag, typ

    def _is(self, tag: Any, *which: int) -> Any:
        hit = self.xp.zeros(tag.shape, dtype=bool)
        for w in which:
            if w >= 0:
                hit |= tag == w
        return hit

    def ends(self, pt: Any, pty: Any, t: Any, ty: Any) -> Any:
        """A chunk that the previous position is in ends there."""
        xp, o = self.xp, self.other
        by_tag = xp.where(self._is(pt, self.begin, self.inside), self._is(t, self.begin,
                                                                          self.single),
                          self._is(pt, self.end, self.single))
        return (pty != o) & ((ty == o) | (ty != pty) | by_tag)

    def starts(self, pt: Any, pty: Any, t: Any, ty: Any) -> Any:
        o = self.other
        after_end = self._is(pt, self.end, self.single)
        by_tag = self._is(t, self.begin, self.single) | \
            (self._is(t, self.inside, self.end) & after_end)
        return (ty != o) & ((pty == o) | (ty != pty) | by_tag)

    def find(self, ids: Any, valid: Any) -> tuple[Any, Any, Any]:
        """(ends [B, T]: a chunk ends at t, its start, its type) for each position."""
        xp = self.xp
        tag, typ = self.split(ids, valid)
        first_t = xp.full((ids.shape[0], 1), -1, dtype="int64")
        first_ty = xp.full((ids.shape[0], 1), self.other, dtype="int64")
        pt = xp.concatenate([first_t, tag[:, :-1]], axis=1)
        pty = xp.concatenate([first_ty, typ[:, :-1]], axis=1)
        begins = self.starts(pt, pty, tag, typ)[:, :-1]
        ends = self.ends(pt, pty, tag, typ)[:, 1:]          # ends at t-1, seen at t
        steps = xp.arange(ids.shape[1]).reshape(1, -1)
        start = running_max(xp, xp.where(begins, steps, -1), axis=1)
        return ends, start, typ[:, :-1]


def _kernel(ctx: KernelContext):
    xp = ctx.xp
    b, t = ctx.input("Inference").shape[:2]
    num_types = int(ctx.attrs["num_chunk_types"])
    chunks = _Chunks(xp, ctx.attrs["chunk_scheme"], num_types)
    excluded = [int(v) for v in ctx.attrs["excluded_chunk_types"]]
    has_len = ctx.has_input("SeqLength")
    bufs = [ctx.buffer(s) for s in _OUTS]
    top = num_types * chunks.k + 1

    def kept(typ: Any) -> Any:
        keep = xp.ones(typ.shape, dtype=bool)
        for e in excluded:
            keep &= typ != e
        return keep

    def fn(inference, label, *length):
        n = row_lengths(xp, length[0], b, t, "chunk_eval") if has_len else \
            xp.full((b,), t, dtype="int64")
        valid = time_mask(xp, n, t)
        found = []
        for ids in (inference.reshape(b, t), label.reshape(b, t)):
            check_range(xp, xp.where(valid, ids, 0), top, "chunk_eval: tag id")
            found.append(chunks.find(ids, valid))
        (e_o, s_o, ty_o), (e_l, s_l, ty_l) = found
        n_infer = (e_o & kept(ty_o)).sum()
        n_label = (e_l & kept(ty_l)).sum()
        n_correct = (e_o & e_l & (s_o == s_l) & (ty_o == ty_l) & kept(ty_o)).sum()
        return _scores(xp, bufs, n_infer, n_label, n_correct)
    return fn


def _scores(xp: Any, bufs: list, n_infer: Any, n_label: Any, n_correct: Any) -> tuple:
    """Precision, recall, F1 (0 where undefined) and the counts, on the device."""
    c = n_correct.astype("float64")
    p = xp.where(n_infer > 0, c / xp.maximum(n_infer, 1), 0.0)
    r = xp.where(n_label > 0, c / xp.maximum(n_label, 1), 0.0)
    f1 = xp.where(n_correct > 0, 2 * p * r / xp.where(p + r > 0, p + r, 1), 0.0)
    return scalars_into(xp, bufs, (p, r, f1, n_infer, n_label, n_correct),
                        ("float32",) * 3 + ("int64",) * 3)


register(OpSpec("chunk_eval", slots("Inference", "Label", "SeqLength?"), slots(*_OUTS), _infer,
                _kernel, None, attrs=_ATTRS,
                doc="Chunk precision, recall and F1 of the tag ids Inference against Label "
                    "[B, T] under chunk_scheme (IOB, IOE, IOBES, plain), over each row's "
                    "first SeqLength steps; the three scores 0-d float32, the counts of "
                    "inferred, gold and correct chunks 0-d int64."))
