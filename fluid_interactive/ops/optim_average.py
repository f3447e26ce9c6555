"""Ops that keep averages or slow copies of parameters (role Optimize): average_accumulates
(`ModelAverage`), ema_accumulate (`ExponentialMovingAverage`) and lookahead
(`LookaheadOptimizer`).

Their conditions (a window that is full, a step that is a multiple of k) depend on one-element
counters, which the kernels read back (``host_access="reads"``) to do only the work the
step needs; a value that does not change is returned as it is (``aliases``).
"""
from __future__ import annotations

from typing import Any

from .optim import _check_like_param, _check_single
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, slots

#: Paddle moves sum_1 into sum_2 every this many updates, so that no sum grows too long.
MAX_NUM_ACCUMULATES = 16384


def _check_counter(ctx: InferContext, slot: str) -> None:
    t = ctx.input(slot)
    if t.dtype != "int64" or any(d not in (1, -1) for d in t.shape):
        ctx.fail(f"{slot} must be an int64 counter of shape [1], got {t.dtype}{list(t.shape)}")


def _set_outputs(ctx: InferContext, pairs: dict[str, str]) -> None:
    for out, src in pairs.items():
        t = ctx.input(src)
        ctx.set_output(out, t.shape, t.dtype)


# --- average_accumulates ----------------------------------------------------------------------

_SUMS = ("in_sum_1", "in_sum_2", "in_sum_3")
_COUNTS = ("in_num_accumulates", "in_old_num_accumulates", "in_num_updates")


def _average_infer(ctx: InferContext) -> None:
    p = ctx.input("param")
    for slot in _SUMS:
        t = ctx.input(slot)
        if t.shape != p.shape or t.dtype != p.dtype:
            ctx.fail(f"{slot} {t.dtype}{list(t.shape)} must have param's shape and dtype "
                     f"{p.dtype}{list(p.shape)}")
    for slot in _COUNTS:
        _check_counter(ctx, slot)
    if int(ctx.attrs["min_average_window"]) > int(ctx.attrs["max_average_window"]):
        ctx.fail(f"min_average_window ({ctx.attrs['min_average_window']}) must not exceed "
                 f"max_average_window ({ctx.attrs['max_average_window']})")
    _set_outputs(ctx, {s.replace("in_", "out_"): s for s in _SUMS + _COUNTS})


def average_accumulate(xp, window: float, min_window: int, max_window: int, out_s1, param,
                       s1, s2, s3, accumulates, old_accumulates, updates):
    """One step of Paddle's average_accumulates: sum_1 += param; every
    `MAX_NUM_ACCUMULATES` updates sum_2 takes sum_1 (the old sum_1: this step's param is
    dropped, as in Paddle); once the window holds ``max(min_window, min(max_window,
    updates * window))`` steps, sum_3 = sum_1 + sum_2 (the old ones), both restart at 0
    and the count moves to ``old_accumulates``. Returns the six new values; a sum that
    does not change is returned as it is (the op aliases); ``out_s1``: the buffer for the
    new sum_1 (or None)."""
    n_up = int(updates.reshape(-1)[0]) + 1
    n_acc = int(accumulates.reshape(-1)[0]) + 1
    old = int(old_accumulates.reshape(-1)[0])
    flush = n_up % MAX_NUM_ACCUMULATES == 0
    full = n_acc >= min_window and n_acc >= min(max_window, int(n_up * window))
    if full:
        new = (xp.zeros_like(s1), xp.zeros_like(s2), xp.add(s1, s2))
        old, n_acc = n_acc, 0
    elif flush:
        new = (xp.zeros_like(s1), xp.add(s2, s1), s3)
    else:
        new = (xp.add(s1, param, out=out_s1), s2, s3)

    def count(value):
        return xp.full(accumulates.shape, value, accumulates.dtype)
    return (*new, count(n_acc), count(old), count(n_up))


def _average_kernel(ctx: KernelContext):
    xp, a = ctx.xp, ctx.attrs
    window = float(a["average_window"])
    low, high = int(a["min_average_window"]), int(a["max_average_window"])
    out = ctx.buffer("out_sum_1")
    return lambda *args: average_accumulate(xp, window, low, high, out, *args)


register(OpSpec(
    "average_accumulates", slots("param", *_SUMS, *_COUNTS),
    slots(*(s.replace("in_", "out_") for s in _SUMS + _COUNTS)), _average_infer,
    _average_kernel, host_access="reads", aliases=True,
    attrs={"average_window": 0.0, "min_average_window": 10000, "max_average_window": 10000},
    doc="Paddle's ModelAverage sums: out_sum_1 = in_sum_1 + param; sums move on into "
        "sum_2 every 16384 updates and into sum_3 when the window is full, the counts "
        "following; the average is (sum_1 + sum_2 + sum_3) / (num_accumulates + "
        "old_num_accumulates)"))


# --- ema_accumulate ---------------------------------------------------------------------------

def _ema_infer(ctx: InferContext) -> None:
    _check_like_param(ctx, "Average")
    _check_single(ctx, "Decay")
    _set_outputs(ctx, {"AverageOut": "Average"})


def _ema_kernel(ctx: KernelContext):
    xp, p = ctx.xp, ctx.input("Param")
    out = ctx.buffer("AverageOut")
    scratch = xp.empty(p.shape, p.dtype)

    def fn(param, average, decay):
        a = xp.multiply(average, decay, out=out)
        xp.multiply(param, xp.subtract(1.0, decay), out=scratch)
        return xp.add(a, scratch, out=a)
    return fn


register(OpSpec(
    "ema_accumulate", slots("Param", "Average", "Decay"), slots("AverageOut"), _ema_infer,
    _ema_kernel,
    doc="AverageOut = Average * Decay + Param * (1 - Decay): one step of an exponential "
        "moving average of a parameter"))


# --- lookahead --------------------------------------------------------------------------------

def _lookahead_infer(ctx: InferContext) -> None:
    _check_like_param(ctx, "Slow")
    t = ctx.input("Step")
    if not t.dtype.startswith("int") or any(d not in (1, -1) for d in t.shape):
        ctx.fail(f"Step must be an integer counter of shape [1], got "
                 f"{t.dtype}{list(t.shape)}")
    if int(ctx.attrs["k"]) < 1:
        ctx.fail(f"k must be a positive number of steps, got {ctx.attrs['k']}")
    _set_outputs(ctx, {"ParamOut": "Param", "SlowOut": "Slow"})


def _lookahead_kernel(ctx: KernelContext):
    xp, p = ctx.xp, ctx.input("Param")
    alpha, k = float(ctx.attrs["alpha"]), int(ctx.attrs["k"])
    scratch = xp.empty(p.shape, p.dtype)

    def fn(param: Any, slow: Any, step: Any):
        if int(step.reshape(-1)[0]) % k:
            return param, slow       # not a k-th step: both as they are
        # a fresh array, the new value of both (an array the scope holds never changes)
        blend = xp.multiply(param, alpha)
        xp.add(blend, xp.multiply(slow, 1.0 - alpha, out=scratch), out=blend)
        return blend, blend
    return fn


register(OpSpec(
    "lookahead", slots("Param", "Slow", "Step"), slots("ParamOut", "SlowOut"),
    _lookahead_infer, _lookahead_kernel, attrs={"alpha": 0.5, "k": 5},
    host_access="reads", aliases=True,
    doc="Every k-th step (Step % k == 0) both the fast weights and the slow ones become "
        "alpha * Param + (1 - alpha) * Slow; other steps leave both as they are"))
