"""Ops that keep averages or slow copies of parameters (role Optimize): average_accumulates
(`ModelAverage`), ema_accumulate (`ExponentialMovingAverage`) and lookahead
(`LookaheadOptimizer`).

Their conditions (a window that is full, a step that is a multiple of k) are 0-d arrays
computed where the values live, and choose between whole results, so no kernel reads a
device value back.
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


def average_accumulate(xp, window: float, min_window: int, max_window: int, param, s1, s2,
                       s3, accumulates, old_accumulates, updates):
    """One step of Paddle's average_accumulates: sum_1 += param; every
    `MAX_NUM_ACCUMULATES` updates sum_2 takes sum_1 (the old sum_1: this step's param is
    dropped, as in Paddle); once the window holds ``max(min_window, min(max_window,
    updates * window))`` steps, sum_3 = sum_1 + sum_2 (the old ones), both restart at 0
    and the count moves to ``old_accumulates``. Returns the six new values."""
    n_up = updates + 1
    n_acc = accumulates + 1
    flush = xp.equal(n_up % MAX_NUM_ACCUMULATES, 0).reshape(())
    limit = xp.minimum(max_window, (n_up * window).astype("int64"))
    full = xp.logical_and(n_acc >= min_window, n_acc >= limit).reshape(())
    zero = xp.zeros((), param.dtype)
    new_s1 = xp.where(xp.logical_or(flush, full), zero, s1 + param)
    new_s2 = xp.where(full, zero, xp.where(flush, s2 + s1, s2))
    new_s3 = xp.where(full, s1 + s2, s3)
    new_old = xp.where(full, n_acc, old_accumulates)
    new_acc = xp.where(full, xp.zeros_like(n_acc), n_acc)
    return new_s1, new_s2, new_s3, new_acc, new_old, n_up


def _average_kernel(ctx: KernelContext):
    xp, a = ctx.xp, ctx.attrs
    window = float(a["average_window"])
    low, high = int(a["min_average_window"]), int(a["max_average_window"])
    return lambda *args: average_accumulate(xp, window, low, high, *args)


register(OpSpec(
    "average_accumulates", slots("param", *_SUMS, *_COUNTS),
    slots(*(s.replace("in_", "out_") for s in _SUMS + _COUNTS)), _average_infer,
    _average_kernel,
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
    p_out, s_out = ctx.buffer("ParamOut"), ctx.buffer("SlowOut")
    blend = xp.empty(p.shape, p.dtype)

    def fn(param: Any, slow: Any, step: Any):
        sync = xp.equal(step % k, 0).reshape(())
        xp.multiply(param, alpha, out=blend)
        xp.add(blend, xp.multiply(slow, 1.0 - alpha), out=blend)
        fast = p_out if p_out is not None else xp.empty_like(param)
        new_slow = s_out if s_out is not None else xp.empty_like(slow)
        xp.copyto(fast, param)
        xp.copyto(fast, blend, where=sync)
        xp.copyto(new_slow, slow)
        xp.copyto(new_slow, blend, where=sync)
        return fast, new_slow
    return fn


register(OpSpec(
    "lookahead", slots("Param", "Slow", "Step"), slots("ParamOut", "SlowOut"),
    _lookahead_infer, _lookahead_kernel, attrs={"alpha": 0.5, "k": 5},
    doc="Every k-th step (Step % k == 0) both the fast weights and the slow ones become "
        "alpha * Param + (1 - alpha) * Slow; other steps leave both as they are"))
