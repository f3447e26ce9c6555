"""Ranking and metric-learning losses.

``rank_loss``          RankNet: Out = softplus(Left - Right) - Label * (Left - Right); each
                       of Label, Left, Right is [N] or [N, 1], Out has Label's shape
``margin_rank_loss``   Out = max(0, -Label * (X1 - X2) + margin), Activated = (Out > 0)
``bpr_loss``           Bayesian personalised ranking: Y [..., 1] = the mean over the other
                       classes j of softplus(X[j] - X[label])
``center_loss``        Loss [N, 1] = |X - Centers[label]|^2 / 2; with ``need_update`` in a
                       training step, each class centre moves by CenterUpdateRate times the
                       mean of its samples' differences (the count has 1 added, as Paddle
                       does); an inference call leaves the centres as they are
"""
from __future__ import annotations

from math import prod

from ..ir.text import format_shape as fmt
from .loss_common import check_float, check_int, check_range, into
from .loss_grads import register_with_grad
from .spec import (
    InferContext,
    KernelContext,
    TensorType,
    dims_compatible,
)


def _softplus(xp, d):
    """log(1 + exp(d)), without overflow for large d."""
    r = xp.log1p(xp.exp(-xp.abs(d)))
    r += xp.maximum(d, 0)
    return r


def _sigmoid(xp, d):
    e = xp.exp(-xp.abs(d))
    return xp.where(d >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _column(ctx: InferContext, t: TensorType, what: str) -> int:
    """The batch size of an input that is [N] or [N, 1]."""
    if not (t.rank == 1 or (t.rank == 2 and dims_compatible(t.shape[1], 1))):
        ctx.fail(f"{what} must be [N] or [N, 1] (one value per pair), got {fmt(t.shape)}")
    return t.shape[0]


def _same_batch(ctx: InferContext, slots_: tuple[str, ...], what: str) -> None:
    first = ctx.input(slots_[0])
    sizes = [_column(ctx, ctx.input(s), s) for s in slots_]
    known = {n for n in sizes if n >= 0}
    if len(known) > 1:
        ctx.fail(f"{what}: {', '.join(slots_)} must have the same batch size, got "
                 f"{', '.join(fmt(ctx.input(s).shape) for s in slots_)}")
    for s in slots_[1:]:
        if ctx.input(s).dtype != first.dtype:
            ctx.fail_dtype(f"{what}: {s} is {ctx.input(s).dtype} but {slots_[0]} is "
                           f"{first.dtype}")


# --- rank_loss --------------------------------------------------------------------------------

def _rank_infer(ctx: InferContext) -> None:
    lab = ctx.input("Label")
    check_float(ctx, lab, "rank_loss Label")
    _same_batch(ctx, ("Label", "Left", "Right"), "rank_loss")
    ctx.set_output("Out", lab.shape, lab.dtype)


def _rank_kernel(ctx: KernelContext):
    xp = ctx.xp
    lab = ctx.input("Label")
    n = lab.shape[0]
    out = ctx.buffer("Out")

    def fn(label, left, right):
        d = left.reshape(n) - right.reshape(n)
        r = _softplus(xp, d)
        r -= label.reshape(n) * d
        return into(xp, out, r.reshape(lab.shape))
    return fn


def _rank_grad_kernel(ctx: KernelContext):
    """dLeft = dOut * (sigmoid(Left - Right) - Label), dRight = -dLeft."""
    xp = ctx.xp
    n = ctx.input("Label").shape[0]
    wants = [(s, ctx.input(s).shape) for s in ("Left", "Right")
             if ctx.has_output(f"{s}@GRAD")]

    def fn(label, left, right, g):
        d = _sigmoid(xp, left.reshape(n) - right.reshape(n))
        d -= label.reshape(n)
        d *= g.reshape(n)
        res = [(d if s == "Left" else -d).reshape(shape) for s, shape in wants]
        return res[0] if len(res) == 1 else tuple(res)
    return fn


register_with_grad(
    "rank_loss", ("Label", "Left", "Right"), ("Out",), _rank_infer, _rank_kernel,
    _rank_grad_kernel, uses=("Label", "Left", "Right"), wrt=("Left", "Right"), out_slot="Out",
    doc="RankNet loss: Out = log(1 + exp(Left - Right)) - Label * (Left - Right), each input "
        "[N] or [N, 1]; Out has Label's shape.")


# --- margin_rank_loss -------------------------------------------------------------------------

def _margin_infer(ctx: InferContext) -> None:
    lab = ctx.input("Label")
    check_float(ctx, lab, "margin_rank_loss Label")
    for s in ("Label", "X1", "X2"):
        t = ctx.input(s)
        if t.rank != 2 or not dims_compatible(t.shape[1], 1):
            ctx.fail(f"margin_rank_loss: {s} must be [N, 1], got {fmt(t.shape)}")
    _same_batch(ctx, ("Label", "X1", "X2"), "margin_rank_loss")
    for slot in ("Out", "Activated"):
        ctx.set_output(slot, lab.shape, lab.dtype)


def _margin_kernel(ctx: KernelContext):
    xp = ctx.xp
    margin = float(ctx.attrs["margin"])
    out, act = ctx.buffer("Out"), ctx.buffer("Activated")

    def fn(label, x1, x2):
        r = xp.subtract(x2, x1, out=out)
        r *= label
        r += margin
        xp.maximum(r, 0, out=r)
        a = xp.greater(r, 0, out=act) if act is not None else (r > 0).astype(r.dtype)
        return r, a
    return fn


def _margin_grad_kernel(ctx: KernelContext):
    """dX1 = -dOut * Activated * Label, dX2 = -dX1."""
    xp = ctx.xp
    want_1, want_2 = ctx.has_output("X1@GRAD"), ctx.has_output("X2@GRAD")

    def fn(act, label, g):
        d = act * label
        d *= g
        res = ([xp.negative(d)] if want_1 else []) + ([d] if want_2 else [])
        return res[0] if len(res) == 1 else tuple(res)
    return fn


register_with_grad(
    "margin_rank_loss", ("Label", "X1", "X2"), ("Out", "Activated"), _margin_infer,
    _margin_kernel, _margin_grad_kernel, uses=("Activated", "Label"), wrt=("X1", "X2"),
    out_slot="Out", like={"X1": "Label", "X2": "Label"}, attrs={"margin": 0.0},
    doc="Out = max(0, -Label * (X1 - X2) + margin) and Activated = (Out > 0) as 0/1, all "
        "[N, 1]; Label holds +1 (X1 should rank higher) or -1.")


# --- bpr_loss ---------------------------------------------------------------------------------

def _bpr_infer(ctx: InferContext) -> None:
    x, lab = ctx.input("X"), ctx.input("Label")
    check_float(ctx, x, "bpr_loss input X")
    check_int(ctx, lab, "bpr_loss Label")
    want = x.shape[:-1] + (1,)
    if x.rank < 2 or lab.rank != x.rank or \
            not all(dims_compatible(a, b) for a, b in zip(lab.shape, want)):
        ctx.fail(f"bpr_loss: X {fmt(x.shape)} holds the scores of C classes in its last dim "
                 f"(C >= 2), so Label must be {fmt(want)}, got {fmt(lab.shape)}")
    if x.shape[-1] == 1:
        ctx.fail("bpr_loss needs at least 2 classes in X's last dim")
    ctx.set_output("Y", want, x.dtype)


class _Rows:
    """X [..., C] as rows [M, C] and their labels as [M]."""

    def __init__(self, ctx: KernelContext):
        x = ctx.input("X")
        self.xp, self.c = ctx.xp, x.shape[-1]
        self.m = prod(x.shape[:-1])
        self.rows = ctx.xp.arange(self.m)

    def split(self, x, label):
        lab = label.reshape(self.m)
        check_range(self.xp, lab, self.c, "bpr_loss: label")
        return x.reshape(self.m, self.c), lab


def _bpr_kernel(ctx: KernelContext):
    xp = ctx.xp
    rows = _Rows(ctx)
    out, shape = ctx.buffer("Y"), ctx.output("Y").shape

    def fn(x, label):
        x2, lab = rows.split(x, label)
        sp = _softplus(xp, x2 - x2[rows.rows, lab].reshape(rows.m, 1))
        # the label's own term is softplus(0) = log 2: take it out of the row sum
        loss = (sp.sum(axis=1) - sp[rows.rows, lab]) / (rows.c - 1)
        return into(xp, out, loss.reshape(shape))
    return fn


def _bpr_grad_kernel(ctx: KernelContext):
    """d/dX[j] = sigmoid(X[j] - X[label]) dY / (C - 1) for j != label; the label's own
    entry gets minus the sum of those."""
    xp = ctx.xp
    rows = _Rows(ctx)
    out = ctx.buffer("X@GRAD")

    def fn(x, label, g):
        x2, lab = rows.split(x, label)
        s = _sigmoid(xp, x2 - x2[rows.rows, lab].reshape(rows.m, 1))
        s[rows.rows, lab] = 0
        s *= g.reshape(rows.m, 1) / (rows.c - 1)
        s[rows.rows, lab] = -s.sum(axis=1)
        return into(xp, out, s.reshape(x.shape))
    return fn


register_with_grad(
    "bpr_loss", ("X", "Label"), ("Y",), _bpr_infer, _bpr_kernel, _bpr_grad_kernel,
    uses=("X", "Label"), wrt=("X",), out_slot="Y",
    doc="Y [..., 1] = mean over the classes j other than the label of "
        "log(1 + exp(X[j] - X[label])), X [..., C] scores.")


# --- center_loss ------------------------------------------------------------------------------

_CENTER_ATTRS = {"cluster_num": 1, "need_update": True}


def _center_infer(ctx: InferContext) -> None:
    x, lab, centers = ctx.input("X"), ctx.input("Label"), ctx.input("Centers")
    check_float(ctx, x, "center_loss input X")
    check_int(ctx, lab, "center_loss Label")
    if x.rank != 2:
        ctx.fail(f"center_loss: X must be features [N, D], got {fmt(x.shape)}")
    if not (lab.rank == 1 or (lab.rank == 2 and dims_compatible(lab.shape[1], 1))) or \
            not dims_compatible(lab.shape[0], x.shape[0]):
        ctx.fail(f"center_loss: Label must be [N, 1] class ids for X {fmt(x.shape)}, got "
                 f"{fmt(lab.shape)}")
    k = int(ctx.attrs["cluster_num"])
    want = (k, x.shape[1])
    if centers.rank != 2 or not all(dims_compatible(a, b) for a, b in zip(centers.shape, want)):
        ctx.fail(f"center_loss: Centers must be [cluster_num, D] = {fmt(want)}, got "
                 f"{fmt(centers.shape)}")
    rate = ctx.input("CenterUpdateRate")
    if rate.dtype != x.dtype or prod(rate.shape) != 1:
        ctx.fail(f"center_loss: CenterUpdateRate must be one {x.dtype} value, got "
                 f"{rate.dtype}{fmt(rate.shape)}")
    ctx.set_output("SampleCenterDiff", x.shape, x.dtype)
    ctx.set_output("Loss", (x.shape[0], 1), x.dtype)
    ctx.set_output("CentersOut", centers.shape, centers.dtype)


def _center_kernel(ctx: KernelContext):
    xp = ctx.xp
    n, _ = ctx.input("X").shape
    k = int(ctx.attrs["cluster_num"])
    update = bool(ctx.attrs["need_update"]) and not ctx.is_test
    diff_buf, loss_buf, cout = (ctx.buffer("SampleCenterDiff"), ctx.buffer("Loss"),
                                ctx.buffer("CentersOut"))

    def fn(x, label, centers, rate):
        lab = label.reshape(n)
        check_range(xp, lab, k, "center_loss: label")
        diff = xp.subtract(x, centers[lab], out=diff_buf)
        loss = (diff * diff).sum(axis=1, keepdims=True)
        loss *= 0.5
        new = cout if cout is not None else xp.empty(centers.shape, centers.dtype)
        xp.copyto(new, centers)
        if update:
            acc = xp.zeros(centers.shape, centers.dtype)
            xp.add.at(acc, lab, diff)
            count = xp.bincount(lab, minlength=k).astype(centers.dtype) + 1
            acc *= rate.reshape(1, 1) / count.reshape(k, 1)
            new += acc
        return diff, into(xp, loss_buf, loss), new
    return fn


def _center_grad_kernel(ctx: KernelContext):
    """dX = dLoss * (X - Centers[label]); the centres get no gradient (they move by the
    forward op's update)."""
    xp = ctx.xp
    out = ctx.buffer("X@GRAD")
    return lambda diff, g: xp.multiply(diff, g, out=out)


register_with_grad(
    "center_loss", ("X", "Label", "Centers", "CenterUpdateRate"),
    ("SampleCenterDiff", "Loss", "CentersOut"), _center_infer, _center_kernel,
    _center_grad_kernel, uses=("SampleCenterDiff",), wrt=("X",), out_slot="Loss",
    like={"X": "SampleCenterDiff"}, attrs=_CENTER_ATTRS, inert_in_test=True,
    doc="Loss [N, 1] = |X - Centers[label]|^2 / 2; in a training call with need_update, "
        "CentersOut = Centers + rate * (sum of the class's differences) / (its count + 1).")
