"""``edit_distance``: the Levenshtein distance between padded token sequences.

Hyps [B, Th] and Refs [B, Tr] int64 with HypsLength and RefsLength [B] (or [B, 1];
without them every row is full). Tokens listed in ``ignored_tokens`` are taken out of both
sides first. Out [B, 1] float32: the number of insertions, deletions and substitutions
turning each hypothesis into its reference, divided by the reference's length with
``normalized`` (an empty reference is then an error with NumPy, inf on a device);
SequenceNum (0-d int64) the number of rows.

The dynamic program runs over every row at once, one hypothesis token at a time: a row
of the table is the minimum of a deletion and a substitution from the row above, then the
insertions along it, which are a running minimum (row[j] = j + min over k <= j of
(a[k] - k)).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.text import format_shape as fmt
from .loss_common import check_int, check_length_pair, row_lengths, running_max, time_mask
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, dims_compatible, slots

_ATTRS = {"normalized": False, "ignored_tokens": []}


def _infer(ctx: InferContext) -> None:
    h, r = ctx.input("Hyps"), ctx.input("Refs")
    for t, what in ((h, "Hyps"), (r, "Refs")):
        check_int(ctx, t, f"edit_distance: {what}")
        if t.rank != 2:
            ctx.fail(f"edit_distance: {what} must be padded token sequences [B, T], got "
                     f"{fmt(t.shape)}")
    if not dims_compatible(h.shape[0], r.shape[0]):
        ctx.fail(f"edit_distance: Hyps {fmt(h.shape)} and Refs {fmt(r.shape)} must have the "
                 f"same number of rows")
    check_length_pair(ctx, ("HypsLength", "RefsLength"), h.shape[0], "edit_distance")
    ctx.set_output("Out", (h.shape[0], 1), "float32")
    ctx.set_output("SequenceNum", (), "int64")


def _erase(xp: Any, x: Any, n: Any, tokens: list[int]) -> tuple[Any, Any]:
    """Each row with ``tokens`` taken out, shifted left, and its new length."""
    b, t = x.shape
    keep = time_mask(xp, n, t)
    for tok in tokens:
        keep &= x != tok
    place = xp.where(keep, xp.cumsum(keep, axis=1) - 1, t)
    wide = xp.zeros((b, t + 1), dtype=x.dtype)
    wide[xp.arange(b)[:, None], place] = x
    return wide[:, :t], keep.sum(axis=1)


def levenshtein(xp: Any, hyp: Any, ref: Any, m: Any, n: Any) -> Any:
    """Distances [B] between hyp[b, :m[b]] and ref[b, :n[b]]."""
    b, tr = ref.shape
    cols = xp.arange(tr + 1, dtype="int64")[None, :]
    rows = xp.arange(b)
    row = xp.broadcast_to(cols, (b, tr + 1)).copy()          # D[0][j] = j
    dist = row[rows, n]
    for i in range(1, hyp.shape[1] + 1):
        cost = (hyp[:, i - 1:i] != ref).astype("int64")         # [B, Tr]
        a = xp.empty_like(row)
        a[:, 0] = i
        a[:, 1:] = xp.minimum(row[:, 1:] + 1, row[:, :-1] + cost)
        row = cols - running_max(xp, cols - a, axis=1)         # j + running min of a - j
        dist = xp.where(m == i, row[rows, n], dist)
    return dist


def _kernel(ctx: KernelContext):
    xp = ctx.xp
    b, th = ctx.input("Hyps").shape
    tr = ctx.input("Refs").shape[1]
    normalized = bool(ctx.attrs["normalized"])
    tokens = [int(v) for v in ctx.attrs["ignored_tokens"]]
    has_len = ctx.has_input("HypsLength")
    out, num = ctx.buffer("Out"), ctx.buffer("SequenceNum")
    count = xp.asarray(b, dtype="int64")

    def fn(hyps, refs, *lengths):
        m = row_lengths(xp, lengths[0], b, th, "edit_distance: HypsLength") if has_len \
            else xp.full((b,), th, dtype="int64")
        n = row_lengths(xp, lengths[1], b, tr, "edit_distance: RefsLength") if has_len \
            else xp.full((b,), tr, dtype="int64")
        if tokens:
            hyps, m = _erase(xp, hyps, m, tokens)
            refs, n = _erase(xp, refs, n, tokens)
        d = levenshtein(xp, hyps, refs, m, n).astype("float32")
        if normalized:
            if xp is np and n.size and int(n.min()) == 0:
                raise ValueError("edit_distance: a reference is empty, so its distance "
                                 "cannot be normalized by its length; pass "
                                 "normalized=False")
            d = xp.where(n > 0, d / xp.maximum(n, 1), np.inf).astype("float32")
        res = out if out is not None else xp.empty((b, 1), "float32")
        res[:, 0] = d
        if num is None:
            return res, count
        num[...] = count
        return res, num
    return fn


register(OpSpec("edit_distance", slots("Hyps", "Refs", "HypsLength?", "RefsLength?"),
                slots("Out", "SequenceNum"), _infer, _kernel, attrs=_ATTRS,
                doc="Levenshtein distance [B, 1] float32 between each row's first "
                    "HypsLength tokens of Hyps and first RefsLength tokens of Refs (after "
                    "taking out ignored_tokens), divided by the reference length if "
                    "normalized; SequenceNum: B."))
