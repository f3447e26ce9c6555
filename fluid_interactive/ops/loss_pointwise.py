"""Losses computed element by element (or row by row) from a prediction and a target.

``huber_loss``       Residual = Y - X; Out = 0.5 r^2 where |r| <= delta, else
                     delta (|r| - delta / 2)
``smooth_l1_loss``   Diff = (X - Y) * InsideWeight; Out [N, 1] = per-row sum of
                     OutsideWeight * (0.5 sigma^2 d^2 where |d| < 1/sigma^2, else
                     |d| - 0.5/sigma^2); the weights come both or not at all
``kldiv_loss``       Target * (log Target - X) where Target > 0, else 0; reduced by
                     ``reduction``: 'none' (X's shape), 'mean', 'sum', 'batchmean' (sum / N),
                     the last three 0-d
``log_loss``         -L log(P + eps) - (1 - L) log(1 - P + eps), P and L [N, 1]
``teacher_student_sigmoid_loss``  the click and teacher-value logistic loss of Paddle's
                     CTR models on one logit X [N, 1] and an encoded Label [N, 1]; the
                     gradient is 0 where X leaves [soft_max_lower_bound, soft_max_up_bound]
``label_smooth``     Out = (1 - epsilon) X + epsilon / K (K: X's last dim), or
                     + epsilon PriorDist with a prior of K values
"""
from __future__ import annotations

from math import prod
from typing import Any

from ..ir.text import format_shape as fmt
from .loss_common import check_float, check_same, into
from .loss_grads import register_with_grad
from .spec import InferContext, KernelContext

# --- huber_loss -------------------------------------------------------------------------------


def _huber_infer(ctx: InferContext) -> None:
    x, y = ctx.input("X"), ctx.input("Y")
    check_float(ctx, x, "huber_loss input X")
    check_same(ctx, x, y, "input X", "label Y")
    for slot in ("Residual", "Out"):
        ctx.set_output(slot, y.shape, x.dtype)


def _huber_kernel(ctx: KernelContext):
    xp, delta = ctx.xp, float(ctx.attrs["delta"])
    out, res = ctx.buffer("Out"), ctx.buffer("Residual")

    def fn(x, y):
        r = xp.subtract(y, x, out=res)
        a = xp.abs(r)
        quad = xp.multiply(r, r)
        quad *= 0.5
        lin = a - 0.5 * delta
        lin *= delta
        return into(xp, out, xp.where(a <= delta, quad, lin)), r
    return fn


def _huber_grad_kernel(ctx: KernelContext):
    """dY = clip(r, -delta, delta) * dOut, dX = -dY (r = Y - X: the residual)."""
    xp = ctx.xp
    delta = float(ctx.attrs["delta"])
    want_x, want_y = ctx.has_output("X@GRAD"), ctx.has_output("Y@GRAD")

    def fn(r, g):
        dy = xp.clip(r, -delta, delta)
        dy *= g
        res = []
        if want_x:
            res.append(xp.negative(dy))
        if want_y:
            res.append(dy)
        return res[0] if len(res) == 1 else tuple(res)
    return fn


register_with_grad(
    "huber_loss", ("X", "Y"), ("Out", "Residual"), _huber_infer, _huber_kernel,
    _huber_grad_kernel, uses=("Residual",), wrt=("X", "Y"), out_slot="Out",
    like={"X": "Residual", "Y": "Residual"}, attrs={"delta": 1.0},
    doc="Residual = Y - X; Out = 0.5 r^2 where |r| <= delta, else delta * (|r| - delta / 2), "
        "elementwise.")


# --- smooth_l1_loss ---------------------------------------------------------------------------

def _smooth_l1_infer(ctx: InferContext) -> None:
    x, y = ctx.input("X"), ctx.input("Y")
    check_float(ctx, x, "smooth_l1_loss input X")
    check_same(ctx, x, y, "X", "Y")
    if x.rank < 2:
        ctx.fail(f"X must have rank >= 2 (a batch of samples [N, ...]), got {fmt(x.shape)}")
    if ctx.has_input("InsideWeight") != ctx.has_input("OutsideWeight"):
        ctx.fail("give both InsideWeight and OutsideWeight, or neither")
    for slot in ("InsideWeight", "OutsideWeight"):
        if ctx.has_input(slot):
            check_same(ctx, x, ctx.input(slot), "X", slot)
    ctx.set_output("Diff", x.shape, x.dtype)
    ctx.set_output("Out", (x.shape[0], 1), x.dtype)


def _smooth_l1_kernel(ctx: KernelContext):
    xp = ctx.xp
    x = ctx.input("X")
    s2 = float(ctx.attrs["sigma"]) ** 2
    weighted = ctx.has_input("InsideWeight")
    n = x.shape[0]
    diff_buf, out = ctx.buffer("Diff"), ctx.buffer("Out")

    def fn(a, b, *weights):
        d = xp.subtract(a, b, out=diff_buf)
        if weighted:
            xp.multiply(d, weights[0], out=d)
        m = xp.minimum(xp.abs(d), 1.0 / s2)      # 0.5 s2 m^2 + (|d| - m): both pieces
        err = xp.abs(d)
        err -= m
        m *= m
        m *= 0.5 * s2
        err += m
        if weighted:
            err *= weights[1]
        return d, into(xp, out, err.reshape(n, -1).sum(axis=1, keepdims=True))
    return fn


def _smooth_l1_grad_kernel(ctx: KernelContext):
    """d/dX = dOut * InsideWeight * OutsideWeight * f'(Diff), f' = sigma^2 d inside the
    quadratic part, sign(d) outside; d/dY = -d/dX."""
    xp = ctx.xp
    s2 = float(ctx.attrs["sigma"]) ** 2
    weighted = ctx.has_input("InsideWeight")
    want_x, want_y = ctx.has_output("X@GRAD"), ctx.has_output("Y@GRAD")
    d_type = ctx.input("Diff")
    n = d_type.shape[0]

    def fn(*args):
        d, g = args[-2], args[-1]
        slope = xp.clip(d * s2, -1.0, 1.0)       # sigma^2 d, or sign(d) past 1/sigma^2
        if weighted:
            slope *= args[0]
            slope *= args[1]
        flat = slope.reshape(n, -1)
        flat *= g.reshape(n, 1)
        res = []
        if want_x:
            res.append(slope)
        if want_y:
            res.append(xp.negative(slope))
        return res[0] if len(res) == 1 else tuple(res)
    return fn


_SL1_ATTRS = {"sigma": 1.0}
register_with_grad(
    "smooth_l1_loss", ("X", "Y", "InsideWeight?", "OutsideWeight?"), ("Diff", "Out"),
    _smooth_l1_infer, _smooth_l1_kernel, _smooth_l1_grad_kernel,
    uses=("InsideWeight?", "OutsideWeight?", "Diff"), wrt=("X", "Y"), out_slot="Out",
    like={"X": "Diff", "Y": "Diff"}, attrs=_SL1_ATTRS,
    doc="Diff = (X - Y) * InsideWeight; Out [N, 1] = per-row sum of OutsideWeight * "
        "smooth_l1(Diff) with the quadratic part inside |d| < 1 / sigma^2.")


# --- kldiv_loss -------------------------------------------------------------------------------

REDUCTIONS = ("none", "batchmean", "mean", "sum")


def _reduction(ctx: Any) -> str:
    r = ctx.attrs["reduction"]
    if r not in REDUCTIONS:
        ctx.fail(f"reduction must be one of {', '.join(map(repr, REDUCTIONS))}, got {r!r}")
    return r


def _kldiv_infer(ctx: InferContext) -> None:
    x, t = ctx.input("X"), ctx.input("Target")
    check_float(ctx, x, "kldiv_loss input X")
    check_same(ctx, x, t, "X", "Target")
    r = _reduction(ctx)
    ctx.set_output("Loss", x.shape if r == "none" else (), x.dtype)


def _kldiv_divisor(reduction: str, shape: tuple[int, ...]) -> float:
    if reduction == "mean":
        return float(max(prod(shape), 1))
    if reduction == "batchmean":
        return float(shape[0]) if shape else 1.0
    return 1.0


def _kldiv_kernel(ctx: KernelContext):
    xp = ctx.xp
    x = ctx.input("X")
    r = ctx.attrs["reduction"]
    div = _kldiv_divisor(r, x.shape)
    out = ctx.buffer("Loss")

    def fn(a, t):
        pos = t > 0
        logt = xp.log(xp.where(pos, t, 1))       # log 1 = 0 where the target is not > 0
        logt -= a
        logt *= t
        elem = xp.where(pos, logt, 0)
        if r == "none":
            return into(xp, out, elem.astype(x.dtype, copy=False))
        total = elem.sum(dtype=x.dtype)
        return xp.asarray(total / div if div != 1.0 else total, dtype=x.dtype)
    return fn


def _kldiv_grad_kernel(ctx: KernelContext):
    """dX = -Target * dLoss where Target > 0 (divided as the reduction divides)."""
    xp = ctx.xp
    t = ctx.input("Target")
    div = _kldiv_divisor(ctx.attrs["reduction"], t.shape)
    out = ctx.buffer("X@GRAD")

    def fn(target, g):
        d = xp.multiply(target, g, out=out)
        xp.negative(d, out=d)
        if div != 1.0:
            d /= div
        return xp.multiply(d, target > 0, out=d)
    return fn


register_with_grad(
    "kldiv_loss", ("X", "Target"), ("Loss",), _kldiv_infer, _kldiv_kernel, _kldiv_grad_kernel,
    uses=("Target",), wrt=("X",), out_slot="Loss", like={"X": "Target"},
    attrs={"reduction": "mean"},
    doc="Target * (log Target - X) where Target > 0, else 0; reduction 'none' keeps X's "
        "shape, 'mean' / 'sum' / 'batchmean' (sum / N) give a 0-d loss. X holds "
        "log-probabilities.")


# --- log_loss ---------------------------------------------------------------------------------

def _log_loss_infer(ctx: InferContext) -> None:
    p, lab = ctx.input("Predicted"), ctx.input("Labels")
    check_float(ctx, p, "log_loss input Predicted")
    check_same(ctx, p, lab, "Predicted", "Labels")
    if p.rank != 2 or p.shape[1] not in (1, -1):
        ctx.fail(f"Predicted must be [N, 1], one probability per sample, got {fmt(p.shape)}")
    ctx.set_output("Loss", p.shape, p.dtype)


def _log_loss_kernel(ctx: KernelContext):
    xp = ctx.xp
    eps = float(ctx.attrs["epsilon"])
    out = ctx.buffer("Loss")

    def fn(p, lab):
        a = xp.log(p + eps)
        a *= lab
        b = xp.log(1.0 - p + eps)
        b *= 1.0 - lab
        a += b
        return xp.negative(a, out=out)
    return fn


def _log_loss_grad_kernel(ctx: KernelContext):
    """dP = dLoss * (-L / (P + eps) + (1 - L) / (1 - P + eps))."""
    xp = ctx.xp
    eps = float(ctx.attrs["epsilon"])
    out = ctx.buffer("Predicted@GRAD")

    def fn(p, lab, g):
        a = (1.0 - lab) / (1.0 - p + eps)
        a -= lab / (p + eps)
        return xp.multiply(a, g, out=out)
    return fn


register_with_grad(
    "log_loss", ("Predicted", "Labels"), ("Loss",), _log_loss_infer, _log_loss_kernel,
    _log_loss_grad_kernel, uses=("Predicted", "Labels"), wrt=("Predicted",), out_slot="Loss",
    attrs={"epsilon": 1e-4},
    doc="Loss = -L log(P + eps) - (1 - L) log(1 - P + eps), P and L [N, 1].")


# --- teacher_student_sigmoid_loss -------------------------------------------------------------

_TS_ATTRS = {"soft_max_up_bound": 15.0, "soft_max_lower_bound": -15.0}


def _ts_infer(ctx: InferContext) -> None:
    x, lab = ctx.input("X"), ctx.input("Label")
    check_float(ctx, x, "teacher_student_sigmoid_loss input X")
    if x.rank != 2 or lab.rank != 2:
        ctx.fail(f"X and Label must be [N, 1], got X {fmt(x.shape)} and Label "
                 f"{fmt(lab.shape)}")
    check_same(ctx, x, lab, "X", "Label")
    ctx.set_output("Y", (x.shape[0], 1), x.dtype)


def _ts_kernel(ctx: KernelContext):
    """Label < -1: no teacher value, no click: softplus(x). -1 <= Label < 0: a click
    without a teacher value: softplus(x) - x. Label >= 0: (click + teacher value z') both:
    2 softplus(x) - x * Label."""
    xp = ctx.xp
    out = ctx.buffer("Y")

    def fn(x, lab):
        sp = xp.log1p(xp.exp(-xp.abs(x)))
        sp += xp.maximum(x, 0)
        no_teacher = lab < 0
        r = xp.where(no_teacher, sp, 2 * sp - x * lab)
        r -= x * ((lab >= -1) & no_teacher)
        return into(xp, out, r)
    return fn


def _ts_grad_kernel(ctx: KernelContext):
    xp = ctx.xp
    up, low = float(ctx.attrs["soft_max_up_bound"]), float(ctx.attrs["soft_max_lower_bound"])
    out = ctx.buffer("X@GRAD")

    def fn(x, lab, g):
        s = xp.clip(x, low, up)
        pred = 1.0 / (1.0 + xp.exp(-s))
        d = xp.where(lab < -1, pred, xp.where(lab < 0, pred - 1.0, 2.0 * pred - lab))
        d = xp.where((s >= up) | (s <= low), 0, d)
        return xp.multiply(d, g, out=out)
    return fn


register_with_grad(
    "teacher_student_sigmoid_loss", ("X", "Label"), ("Y",), _ts_infer, _ts_kernel,
    _ts_grad_kernel, uses=("X", "Label"), wrt=("X",), out_slot="Y", attrs=_TS_ATTRS,
    doc="Logistic loss of one logit X [N, 1] against a click and an optional teacher value "
        "encoded in Label: -2 / -1 no teacher value (no click / click), z' / 1 + z' a "
        "teacher value z' in [0, 1] (no click / click).")


# --- label_smooth -----------------------------------------------------------------------------

def _smooth_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    check_float(ctx, x, "label_smooth input X (one-hot labels)")
    if x.rank < 1:
        ctx.fail("label_smooth needs labels of rank >= 1 ([N, K] one-hot rows)")
    eps = ctx.attrs["epsilon"]
    if not 0.0 <= float(eps) <= 1.0:
        ctx.fail(f"epsilon must lie in [0, 1], got {eps!r}")
    if ctx.has_input("PriorDist"):
        prior = ctx.input("PriorDist")
        if prior.dtype != x.dtype:
            ctx.fail_dtype(f"PriorDist is {prior.dtype} but the labels are {x.dtype}")
        k = prod(prior.shape)
        if x.shape[-1] >= 0 and min(prior.shape, default=1) >= 0 and k != x.shape[-1]:
            ctx.fail(f"PriorDist {fmt(prior.shape)} must hold one probability per class: "
                     f"{x.shape[-1]} values (the labels' last dim)")
    ctx.set_output("Out", x.shape, x.dtype)


def _smooth_kernel(ctx: KernelContext):
    xp = ctx.xp
    x = ctx.input("X")
    eps = float(ctx.attrs["epsilon"])
    has_prior = ctx.has_input("PriorDist")
    k = x.shape[-1]
    out = ctx.buffer("Out")

    def fn(lab, *prior):
        r = xp.multiply(lab, 1.0 - eps, out=out)
        if has_prior:
            r += eps * prior[0].reshape(k)
        else:
            r += eps / k
        return r
    return fn


def _smooth_grad_kernel(ctx: KernelContext):
    xp = ctx.xp
    eps = float(ctx.attrs["epsilon"])
    out = ctx.buffer("X@GRAD")
    return lambda g: xp.multiply(g, 1.0 - eps, out=out)


register_with_grad(
    "label_smooth", ("X", "PriorDist?"), ("Out",), _smooth_infer, _smooth_kernel,
    _smooth_grad_kernel, uses=(), wrt=("X",), out_slot="Out", like={"X": "Out@GRAD"},
    attrs={"epsilon": 0.0},
    doc="Out = (1 - epsilon) * X + epsilon / K, or + epsilon * PriorDist; K is X's last dim "
        "(the number of classes).")

