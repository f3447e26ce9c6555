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

import numpy as np

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
    """Where chunks start and end in a batch of tag ids, under one scheme.

    Whether a position starts or ends a chunk by its tag depends on its tag and its
    predecessor's only, so both rules are tables over the (K + 1)^2 pairs of codes
    (tag + 1; 0: O or padding), built once; a batch then costs one lookup per rule."""

    def __init__(self, xp: Any, scheme: str, num_types: int):
        self.xp = xp
        self.k = SCHEMES[scheme][0]
        self.other = num_types
        ends, starts = _pair_rules(*SCHEMES[scheme])
        self.ends_by_tag, self.starts_by_tag = xp.asarray(ends), xp.asarray(starts)

    def split(self, ids: Any, valid: Any) -> tuple[Any, Any]:
        """(code, type) [B, T + 2]: an O column before and after the ids (so that shifted
        views give each position's predecessor), and O at padded positions (where
        ``valid`` is False; None: none are)."""
        xp = self.xp
        shape = (ids.shape[0], ids.shape[1] + 2)
        typ, code = xp.empty(shape, dtype="int64"), xp.empty(shape, dtype="int64")
        q, r = xp.divmod(ids, self.k)          # one pass for both
        r += 1
        if valid is not None:
            q, r = xp.where(valid, q, self.other), xp.where(valid, r, 0)
        typ[:, 1:-1], typ[:, 0], typ[:, -1] = q, self.other, self.other
        code[:, 1:-1], code[:, 0], code[:, -1] = r, 0, 0
        return code, typ

    def find(self, ids: Any, valid: Any) -> tuple[Any, Any, Any]:
        """(ends [B, T]: a chunk ends at t, its start, its type) for each position."""
        xp, o = self.xp, self.other
        code, typ = self.split(ids, valid)
        pty, ty = typ[:, :-1], typ[:, 1:]                      # [B, T + 1]
        pair = code[:, :-1] * (self.k + 1) + code[:, 1:]
        differs = ty != pty
        begins = ((ty != o) & ((pty == o) | differs | self.starts_by_tag[pair]))[:, :-1]
        # a chunk that the previous position is in ends there: seen at t, ends at t - 1
        ends = ((pty != o) & ((ty == o) | differs | self.ends_by_tag[pair]))[:, 1:]
        steps = xp.arange(ids.shape[1]).reshape(1, -1)
        start = running_max(xp, xp.where(begins, steps, -1), axis=1)
        return ends, start, typ[:, 1:-1]


def _pair_rules(k: int, begin: int, inside: int, end: int, single: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Paddle's rules by tag alone, over every (previous code, code) pair, flattened:
    (the previous position's chunk ends, this position starts one)."""
    codes = np.arange(k + 1)
    pc, c = np.meshgrid(codes, codes, indexing="ij")

    def is_(code: np.ndarray, *tags: int) -> np.ndarray:
        return np.isin(code, [t + 1 for t in tags if t >= 0])

    ends = np.where(is_(pc, begin, inside), is_(c, begin, single), is_(pc, end, single))
    starts = is_(c, begin, single) | (is_(c, inside, end) & is_(pc, end, single))
    return ends.ravel(), starts.ravel()


def _kernel(ctx: KernelContext):
    xp = ctx.xp
    b, t = ctx.input("Inference").shape[:2]
    num_types = int(ctx.attrs["num_chunk_types"])
    chunks = _Chunks(xp, ctx.attrs["chunk_scheme"], num_types)
    excluded = [int(v) for v in ctx.attrs["excluded_chunk_types"]]
    has_len = ctx.has_input("SeqLength")
    bufs = [ctx.buffer(s) for s in _OUTS]
    top = num_types * chunks.k + 1

    def kept(ends: Any, typ: Any) -> Any:
        """The chunk ends whose type is not excluded."""
        for e in excluded:
            ends = ends & (typ != e)
        return ends

    def fn(inference, label, *length):
        # without lengths every position is valid: no masks to build or apply
        valid = time_mask(xp, row_lengths(xp, length[0], b, t, "chunk_eval"), t) \
            if has_len else None
        found = []
        for ids in (inference.reshape(b, t), label.reshape(b, t)):
            check_range(xp, ids if valid is None else xp.where(valid, ids, 0), top,
                        "chunk_eval: tag id")
            found.append(chunks.find(ids, valid))
        (e_o, s_o, ty_o), (e_l, s_l, ty_l) = found
        e_o, e_l = kept(e_o, ty_o), kept(e_l, ty_l)
        n_correct = (e_o & e_l & (s_o == s_l) & (ty_o == ty_l)).sum()
        return _scores(xp, bufs, e_o.sum(), e_l.sum(), n_correct)
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
