"""Ops without gradients that measure: argmax, argmin, accuracy.

``argmax``    Out (int64) = the index of the largest entry along ``axis``, which is removed
              from the shape; ties go to the first index. ``argmin`` likewise, the
              smallest.
``accuracy``  The fraction of samples whose label is among their top ``k`` classes.
              Accuracy is a 0-d float32 (like ``mean``; a compiled method returns it as a
              Python float); Correct and Total are 0-d int64 counts.
"""
from __future__ import annotations

from ..ir.text import format_shape as _shape
from .loss_common import scalars_into
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, dims_compatible, slots

_FLOATS = ("float16", "float32", "float64")
_INTS = ("int8", "uint8", "int16", "int32", "int64")


# --- argmax -------------------------------------------------------------------------------------

def _argmax_axis(ctx, rank: int) -> int:
    axis = int(ctx.attrs["axis"])
    if not -rank <= axis < rank:
        ctx.fail(f"axis={axis} is out of range for a rank-{rank} input; use an axis in "
                 f"[{-rank}, {rank - 1}]")
    return axis + rank if axis < 0 else axis


def _argmax_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.dtype not in _FLOATS + _INTS:
        ctx.fail_dtype(f"{ctx.spec.type} needs a numeric input, got {x.dtype}")
    if x.rank == 0:
        ctx.fail(f"{ctx.spec.type} needs an input of rank >= 1, got a 0-d value")
    ax = _argmax_axis(ctx, x.rank)
    if x.shape[ax] == 0:
        ctx.fail(f"{ctx.spec.type} over axis {ax} of X {_shape(x.shape)}: that axis is empty")
    ctx.set_output("Out", x.shape[:ax] + x.shape[ax + 1:], "int64")


def _arg_kernel(find: str):
    """The kernel of argmax / argmin: ``xp.<find>`` along the axis, as int64."""
    def kernel(ctx: KernelContext):
        xp = ctx.xp
        fn = getattr(xp, find)
        ax = _argmax_axis(ctx, ctx.input("X").rank)
        out = ctx.buffer("Out")
        if out is not None and out.dtype == xp.dtype(xp.intp) and out.ndim > 0:
            return lambda a: fn(a, axis=ax, out=out)
        return lambda a: xp.asarray(fn(a, axis=ax)).astype("int64", copy=False)
    return kernel


register(OpSpec("argmax", slots("X"), slots("Out"), _argmax_infer, _arg_kernel("argmax"), None,
                attrs={"axis": -1},
                doc="Out = index of the largest entry of X along axis (int64; axis removed)"))
register(OpSpec("argmin", slots("X"), slots("Out"), _argmax_infer, _arg_kernel("argmin"), None,
                attrs={"axis": -1},
                doc="Out = index of the smallest entry of X along axis (int64; axis removed)"))


# --- accuracy -----------------------------------------------------------------------------------

def _accuracy_infer(ctx: InferContext) -> None:
    label = ctx.input("Label")
    k = ctx.attrs["k"]
    if not isinstance(k, int) or k < 1:
        ctx.fail(f"k must be a positive int, got {k!r}")
    if ctx.has_input("Indices"):
        scores, what = ctx.input("Indices"), "Indices"
        if scores.dtype not in _INTS:
            ctx.fail_dtype(f"Indices must be integer class indices, got {scores.dtype}")
    elif ctx.has_input("Out"):
        scores, what = ctx.input("Out"), "Out"
        if scores.dtype not in _FLOATS:
            ctx.fail_dtype(f"Out must be float scores, got {scores.dtype}")
    else:
        ctx.fail("accuracy needs class scores (Out) or top-k indices (Indices)")
    if scores.rank != 2:
        ctx.fail(f"{what} must be 2-D [N, C], got shape {_shape(scores.shape)}")
    if label.dtype not in _INTS:
        ctx.fail_dtype(f"Label must be int64 class indices, got {label.dtype}")
    if label.rank != 2 or not dims_compatible(label.shape[1], 1) or \
            not dims_compatible(label.shape[0], scores.shape[0]):
        ctx.fail(f"Label has shape {_shape(label.shape)} but {what} {_shape(scores.shape)} "
                 f"needs {_shape((scores.shape[0], 1))}: one class index per sample")
    ctx.set_output("Accuracy", (), "float32")
    ctx.set_output("Correct", (), "int64")
    ctx.set_output("Total", (), "int64")


def _accuracy_kernel(ctx: KernelContext):
    xp = ctx.xp
    k = int(ctx.attrs["k"])
    use_indices = ctx.has_input("Indices")
    scores = ctx.input("Indices" if use_indices else "Out")
    n, c = scores.shape
    bufs = [ctx.buffer("Accuracy"), ctx.buffer("Correct"), ctx.buffer("Total")]
    inv_n = 1.0 / n if n else 0.0
    total = xp.asarray(n, dtype="int64")   # made once: no host value crosses per call
    cols = xp.arange(c).reshape(1, c)
    rows = xp.arange(n)

    def count(a, label):
        lab = label.reshape(n)
        if use_indices:                      # the label is one of the listed indices
            return (a == lab.reshape(n, 1)).any(axis=1).sum()
        if k == 1:                           # the first largest score is the label's
            return (xp.argmax(a, axis=1) == lab).sum()
        # Rank of the label's score when sorting descending, ties broken by class index
        # (the order argmax uses); out-of-range labels never count.
        valid = (lab >= 0) & (lab < c)
        safe = xp.where(valid, lab, 0)
        s = a[rows, safe].reshape(n, 1)
        ahead = (a > s) | ((a == s) & (cols < safe.reshape(n, 1)))
        return ((ahead.sum(axis=1) < k) & valid).sum()

    def fn(*args):
        label = args[-1]
        correct = count(args[-2] if use_indices else args[0], label)
        return scalars_into(xp, bufs, (correct * inv_n, correct, total),
                            ("float32", "int64", "int64"))
    return fn


register(OpSpec("accuracy", slots("Out?", "Indices?", "Label"),
                slots("Accuracy", "Correct", "Total"), _accuracy_infer, _accuracy_kernel,
                None, attrs={"k": 1},
                doc="Fraction of rows whose Label [N, 1] is among the top k of the scores Out "
                    "[N, C] (ties go to the lower class index), or among the given top-k "
                    "Indices [N, k]. Accuracy: 0-d float32; Correct, Total: 0-d int64."))
