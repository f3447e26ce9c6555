"""``auc``: the area under the ROC or precision-recall curve of binary predictions,
accumulated in bucketed counts that outlive a call.

Predict [N, 1] or [N, 2] holds probabilities in [0, 1] (the last column is the positive
class's), Label [N] or [N, 1] ints (> 0 positive, 0 negative, others ignored). Each
prediction falls in bucket ``int(p * num_thresholds)``. StatPos / StatNeg hold the counts
of positives and negatives per bucket and are written back (StatPosOut / StatNegOut, the
same persistable vars):

* ``slide_steps == 0``: [1, num_thresholds + 1] counts over every call so far;
* ``slide_steps > 0``: the last ``slide_steps`` calls' counts, one row each, then their
  sum, then the call counter that picks the row the next call replaces (Paddle's layout:
  (slide_steps + 1) * (num_thresholds + 1) + 1 values). The AUC is over the sum row.

AUC (0-d float64): for 'ROC', the trapezoidal area under true positives against false
positives over the buckets from the top, divided by P * N (0 without both classes), as
Paddle computes it; for 'PR', the trapezoidal area under precision against recall from
(recall 0, precision 1), as TensorFlow 1's ``tf.metrics.auc(curve='PR')`` computes it
(Paddle 1.8's kernel ignored ``curve`` and always gave the ROC area).
"""
from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from ..ir.text import format_shape as fmt
from .loss_common import check_float, check_int
from .registry import register
from .spec import InferContext, KeptFrom, KernelContext, OpSpec, dims_compatible, slots

_ATTRS = {"curve": "ROC", "num_thresholds": 4095, "slide_steps": 1}


def stat_shape(num_thresholds: int, slide_steps: int) -> tuple[int, ...]:
    buckets = num_thresholds + 1
    return ((1 + slide_steps) * buckets + 1,) if slide_steps else (1, buckets)


def _infer(ctx: InferContext) -> None:
    p, lab = ctx.input("Predict"), ctx.input("Label")
    check_float(ctx, p, "auc: Predict")
    check_int(ctx, lab, "auc: Label")
    if p.rank != 2 or p.shape[1] not in (1, 2, -1):
        ctx.fail(f"auc: Predict must be probabilities [N, 1] or [N, 2] (binary "
                 f"classification), got {fmt(p.shape)}")
    if not (lab.rank == 1 or (lab.rank == 2 and dims_compatible(lab.shape[1], 1))) or \
            not dims_compatible(lab.shape[0], p.shape[0]):
        ctx.fail(f"auc: Label must be one 0/1 label per row of Predict {fmt(p.shape)}: "
                 f"[N, 1], got {fmt(lab.shape)}")
    nt, slide = int(ctx.attrs["num_thresholds"]), int(ctx.attrs["slide_steps"])
    if nt < 1 or slide < 0:
        ctx.fail(f"auc: num_thresholds must be >= 1 and slide_steps >= 0, got {nt} and "
                 f"{slide}")
    if ctx.attrs["curve"] not in ("ROC", "PR"):
        ctx.fail(f"auc: curve must be 'ROC' or 'PR', got {ctx.attrs['curve']!r}")
    want = stat_shape(nt, slide)
    for slot in ("StatPos", "StatNeg"):
        s = ctx.input(slot)
        if s.dtype != "int64" or prod(s.shape) != prod(want):
            ctx.fail(f"auc: {slot} must be int64 counts {fmt(want)} for num_thresholds={nt} "
                     f"and slide_steps={slide}, got {s.dtype}{fmt(s.shape)}")
        ctx.set_output(f"{slot}Out", s.shape, "int64")
    ctx.set_output("AUC", (), "float64")


def area(xp: Any, pos: Any, neg: Any, curve: str) -> Any:
    """The area from bucket counts [buckets] (ascending thresholds), as a 0-d float64."""
    pos = pos[::-1].astype("float64")
    neg = neg[::-1].astype("float64")
    tp, fp = xp.cumsum(pos), xp.cumsum(neg)
    total_p, total_n = tp[-1], fp[-1]
    if curve == "ROC":
        s = (neg * (2 * tp - pos)).sum() / 2            # trapezoids: d(fp) * (tp + tp_prev)/2
        both = (total_p > 0) & (total_n > 0)
        return xp.where(both, s / xp.where(both, total_p * total_n, 1), s)
    seen = tp + fp
    prec = xp.where(seen > 0, tp / xp.maximum(seen, 1), 1.0)
    recall = tp / xp.maximum(total_p, 1)
    prev_p = xp.concatenate([xp.ones(1), prec[:-1]])
    prev_r = xp.concatenate([xp.zeros(1), recall[:-1]])
    return ((recall - prev_r) * (prec + prev_p)).sum() / 2


def _kernel(ctx: KernelContext):
    xp = ctx.xp
    p_type = ctx.input("Predict")
    n = p_type.shape[0]
    nt, slide = int(ctx.attrs["num_thresholds"]), int(ctx.attrs["slide_steps"])
    curve = ctx.attrs["curve"]
    buckets = nt + 1
    out_bufs = (ctx.buffer("AUC"), ctx.buffer("StatPosOut"), ctx.buffer("StatNegOut"))
    rows = xp.arange(slide).reshape(slide, 1) if slide else None
    # the batch AUC and the global AUC of one layer count the same predictions: the second
    # op takes the first one's counts (kept with the Predict array they came from)
    kept = ctx.shared(KeptFrom, (ctx.input_name("Predict"), ctx.input_name("Label"), nt))

    def counts(predict: Any, label: Any) -> tuple[Any, Any]:
        again = kept.get(predict)
        if again is not None:
            return again
        prob = predict[:, -1]
        if xp is np and n and (float(prob.min()) < 0 or float(prob.max()) > 1):
            raise ValueError("auc: predictions must lie in [0, 1] (probabilities, e.g. a "
                             "softmax or sigmoid output)")
        bins = (prob * nt).astype("int64")
        if xp is not np:
            bins = xp.clip(bins, 0, nt)            # unchecked on a device
        lab = label.reshape(n)
        # one count over (bucket, positive?) pairs; a label < 0 counts in an extra slot
        key = xp.where(lab < 0, 2 * buckets, 2 * bins + (lab > 0))
        both = xp.bincount(key, minlength=2 * buckets + 1)
        return kept.keep(predict, (both[1:2 * buckets:2], both[0:2 * buckets:2]))

    def update(stat: Any, new: Any, out: Any) -> tuple[Any, Any]:
        """The stats with this call's counts in; returns (new stats, the summed counts)."""
        res = out if out is not None else xp.empty(stat.shape, "int64")
        flat_in, flat = stat.reshape(-1), res.reshape(-1)
        if not slide:
            xp.add(flat_in, new, out=flat)
            return res, flat
        table = flat_in[:slide * buckets].reshape(slide, buckets)
        here = rows == flat_in[-1] % slide                        # the row this call takes
        replaced = (table * here).sum(axis=0)
        flat[:slide * buckets] = xp.where(here, new, table).reshape(-1)
        total = flat_in[slide * buckets:-1] - replaced + new
        flat[slide * buckets:-1] = total
        flat[-1] = flat_in[-1] + 1
        return res, total

    def fn(predict, label, stat_pos, stat_neg):
        pos, neg = counts(predict, label)
        pos_out, pos_sum = update(stat_pos, pos, out_bufs[1])
        neg_out, neg_sum = update(stat_neg, neg, out_bufs[2])
        value = area(xp, pos_sum, neg_sum, curve)
        auc = out_bufs[0]
        if auc is None:
            return xp.asarray(value, dtype="float64"), pos_out, neg_out
        auc[...] = value
        return auc, pos_out, neg_out
    return fn


register(OpSpec("auc", slots("Predict", "Label", "StatPos", "StatNeg"),
                slots("AUC", "StatPosOut", "StatNegOut"), _infer, _kernel, attrs=_ATTRS,
                doc="Area under the ROC (or PR) curve of probabilities Predict against 0/1 "
                    "Label, from per-bucket counts accumulated in StatPos/StatNeg (all "
                    "calls with slide_steps 0, the last slide_steps calls otherwise), "
                    "written back to StatPosOut/StatNegOut; AUC is 0-d float64."))
