"""``mean_iou`` (the mean intersection-over-union of class predictions) and
``similarity_focus`` (a mask of the most similar positions). Neither has a gradient,
as in Paddle.

``mean_iou``  Predictions and Labels are int class ids of one shape. Per class c:
    correct[c] = #(pred == label == c), wrong[c] = #(pred == c != label) + #(label == c
    != pred); IoU[c] = correct / (correct + wrong), averaged over the classes that occur.
    InWrongs / InCorrects / InMeanIou (optional lists) are added in first, so a running
    metric can be carried across batches. Outputs: OutMeanIou [1] float32, OutWrong and
    OutCorrect [num_classes] int32.
``similarity_focus``  X [B, d1, d2, d3]; for each index i of ``indexes`` the slice
    X[b, ..., i, ...] along ``axis`` (1, 2 or 3) is a 2-D table; its largest values are
    taken greedily, each time from a row and a column not taken yet, min(rows, cols)
    times; Out is 1 along ``axis`` at every position taken (for any index), else 0.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir.text import format_shape as _fmt
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, Slot, slots

_INTS = ("int32", "int64")


def _iou_infer(ctx: InferContext) -> None:
    p, label = ctx.input("Predictions"), ctx.input("Labels")
    if p.dtype not in _INTS or label.dtype not in _INTS:
        ctx.fail_dtype(f"Predictions and Labels must be int32 or int64 class ids, got "
                       f"{p.dtype} and {label.dtype}")
    n = ctx.attrs["num_classes"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        ctx.fail(f"num_classes must be a positive int, got {n!r}")
    ctx.set_output("OutMeanIou", (1,), "float32")
    ctx.set_output("OutWrong", (n,), "int32")
    ctx.set_output("OutCorrect", (n,), "int32")


def _iou_kernel(ctx: KernelContext) -> Callable:
    xp, n = ctx.xp, int(ctx.attrs["num_classes"])
    counts = [len(ctx.inputs(s)) for s in ("InWrongs", "InCorrects", "InMeanIou")]

    def fn(pred, label, *carried):
        p, t = pred.reshape(-1), label.reshape(-1)
        if p.size and (int(xp.minimum(p.min(), t.min())) < 0 or
                       int(xp.maximum(p.max(), t.max())) >= n):
            raise IndexError(f"mean_iou: class ids must lie in [0, {n}), got "
                             f"[{int(xp.minimum(p.min(), t.min()))}, "
                             f"{int(xp.maximum(p.max(), t.max()))}]")
        hit = p == t
        correct = xp.bincount(p[hit], minlength=n).astype("int32")
        wrong = (xp.bincount(p[~hit], minlength=n) +
                 xp.bincount(t[~hit], minlength=n)).astype("int32")
        wrongs, corrects, means = _split(carried, counts)
        for w in wrongs:
            wrong += w.astype("int32")
        for c in corrects:
            correct += c.astype("int32")
        total = wrong + correct
        valid = xp.sum(total > 0)
        iou = xp.sum(correct / xp.maximum(total, 1).astype("float32"), dtype="float32")
        mean = iou / xp.maximum(valid, 1).astype("float32")
        for m in means:
            mean = mean + m.reshape(())
        return xp.asarray(mean, dtype="float32").reshape(1), wrong, correct
    return fn


def _split(values: tuple, counts: list[int]) -> list[tuple]:
    out, start = [], 0
    for k in counts:
        out.append(values[start:start + k])
        start += k
    return out


_CARRIED = tuple(Slot(name, duplicable=True, optional=True)
                 for name in ("InWrongs", "InCorrects", "InMeanIou"))
register(OpSpec("mean_iou", slots("Predictions", "Labels") + _CARRIED,
                slots("OutMeanIou", "OutWrong", "OutCorrect"), _iou_infer, _iou_kernel, None,
                attrs={"num_classes": 2}, host_access="reads",
                doc="The mean IoU of int class predictions against labels, with the "
                    "per-class wrong and correct counts."))


# --- similarity_focus ------------------------------------------------------------------------

def _focus_check(ctx: Any, shape: tuple[int, ...]) -> tuple[int, list[int]]:
    axis, indexes = ctx.attrs["axis"], list(ctx.attrs["indexes"])
    if len(shape) != 4:
        ctx.fail(f"similarity_focus takes X of rank 4, got X {_fmt(shape)}")
    if axis not in (1, 2, 3):
        ctx.fail(f"axis must be 1, 2 or 3, got {axis!r}")
    if not indexes:
        ctx.fail("indexes must name at least one index along axis")
    if shape[axis] >= 0 and any(not 0 <= i < shape[axis] for i in indexes):
        ctx.fail(f"indexes {indexes} must lie in [0, {shape[axis]}) (dim {axis} of X "
                 f"{_fmt(shape)})")
    return axis, indexes


def _focus_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.dtype not in ("float32", "float64"):
        ctx.fail_dtype(f"X must be float32 or float64, got {x.dtype}")
    _focus_check(ctx, x.shape)
    ctx.set_output("Out", x.shape, x.dtype)


def _focus_kernel(ctx: KernelContext) -> Callable:
    xp, out = ctx.xp, ctx.buffer("Out")
    shape = ctx.input("X").shape
    axis, indexes = _focus_check(ctx, shape)
    rows, cols = [shape[d] for d in (1, 2, 3) if d != axis]
    steps = min(rows, cols)
    where = xp.asarray(indexes)

    def fn(x):
        # [B, len(indexes), rows, cols]: the tables, taken from greatest to least
        tables = xp.moveaxis(xp.take(x, where, axis=axis), axis, 1).copy()
        b, k = tables.shape[:2]
        flat = tables.reshape(b, k, rows * cols)
        picked = xp.zeros((b, rows, cols), dtype=bool)
        for _ in range(steps):   # one greedy step for every table at once
            best = xp.argmax(flat, axis=2)
            r, c = best // cols, best % cols
            bi = xp.arange(b)[:, None]
            picked[bi, r, c] = True
            ki = xp.arange(k)[None, :]
            tables[bi, ki, r, :] = -xp.inf
            tables[bi, ki, :, c] = -xp.inf
        mask = xp.expand_dims(picked, axis).astype(x.dtype)
        r = xp.broadcast_to(mask, shape)
        if out is None:
            return r.copy()
        xp.copyto(out, r)
        return out
    return fn


register(OpSpec("similarity_focus", slots("X"), slots("Out"), _focus_infer, _focus_kernel,
                None, attrs={"axis": 1, "indexes": [0]},
                doc="A 0/1 mask of the positions taken greedily (largest first, one per row "
                    "and column) from X's slices at indexes along axis."))
