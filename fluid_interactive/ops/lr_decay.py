"""More learning-rate schedules (role LRSched), each one op reading the step ``k`` from
``Step`` (see ops/lr.py) and writing the rate as ``float32[1]``, with Paddle 1.8's formulas:

* ``noam_decay``: ``learning_rate * d_model ** -0.5 * min(s ** -0.5, warmup_steps ** -1.5
  * s)`` with ``s = k + 1`` (Paddle's counter for this schedule starts at 1);
* ``polynomial_decay``: ``(learning_rate - end_learning_rate) * (1 - k / n) ** power +
  end_learning_rate``; without ``cycle``, ``k`` stops at ``n = decay_steps``; with it, ``n``
  is ``decay_steps`` times ``ceil(k / decay_steps)`` (1 at step 0), so the decay starts over;
* ``inverse_time_decay``: ``learning_rate / (1 + decay_rate * e)``;
* ``natural_exp_decay``: ``learning_rate * exp(-decay_rate * e)``, both with
  ``e = k / decay_steps``, floored with ``staircase``;
* ``linear_lr_warmup``: ``start_lr + (end_lr - start_lr) * k / warmup_steps`` while
  ``k < warmup_steps``, then the rate ``LearningRate`` (a one-value input: another
  schedule's rate) or, without it, the ``learning_rate`` attr. Out has LearningRate's
  dtype (float32 without it).

As in ops/lr.py: float64 arithmetic rounded once, attribute errors from the shape rules,
no gradients.
"""
from __future__ import annotations

import math

from ..ir.records import FLOAT_DTYPES
from .lr import (
    RATE_DTYPE,
    check_attr,
    decay_exponent,
    finish_rate,
    positive_attr,
    positive_rate_infer,
    rate_output,
    single_value,
)
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, slots


def _attrs(ctx: KernelContext, *names: str) -> list[float]:
    return [float(ctx.attrs[n]) for n in names]


# --- noam_decay ---------------------------------------------------------------------------------

def _noam_kernel(ctx: KernelContext):
    xp = ctx.xp
    d_model, warmup, lr = _attrs(ctx, "d_model", "warmup_steps", "learning_rate")
    scale = lr * d_model ** -0.5

    def compute(k):
        s = k + 1.0
        return scale * xp.minimum(s ** -0.5, warmup ** -1.5 * s)
    return finish_rate(ctx, compute)


register(OpSpec("noam_decay", slots("Step"), slots("Out"),
                positive_rate_infer("d_model", "warmup_steps", "learning_rate"), _noam_kernel,
                attrs={"d_model": 1.0, "warmup_steps": 1.0, "learning_rate": 1.0},
                doc="Out = learning_rate * d_model^-0.5 * min(s^-0.5, warmup_steps^-1.5 * s), "
                    "s = Step + 1"))


# --- polynomial_decay ---------------------------------------------------------------------------

def _polynomial_infer(ctx: InferContext) -> None:
    op = "polynomial_decay"
    positive_attr(ctx, op, "learning_rate")
    positive_attr(ctx, op, "decay_steps")
    for name in ("end_learning_rate", "power"):
        v = ctx.attrs[name]
        check_attr(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0, op,
                   f"{name} must be a number >= 0, got {v!r}")
    rate_output(ctx)


def _polynomial_kernel(ctx: KernelContext):
    xp = ctx.xp
    lr, steps, end, power = _attrs(ctx, "learning_rate", "decay_steps", "end_learning_rate",
                                   "power")
    cycle = bool(ctx.attrs["cycle"])

    def compute(k):
        if cycle:
            n = steps * xp.maximum(xp.ceil(k / steps), 1.0)
        else:
            n, k = steps, xp.minimum(k, steps)
        return (lr - end) * (1.0 - k / n) ** power + end
    return finish_rate(ctx, compute)


register(OpSpec("polynomial_decay", slots("Step"), slots("Out"), _polynomial_infer,
                _polynomial_kernel,
                attrs={"learning_rate": 0.1, "decay_steps": 1.0, "end_learning_rate": 0.0001,
                       "power": 1.0, "cycle": False},
                doc="Out = (learning_rate - end) * (1 - Step / n)^power + end"))


# --- inverse_time_decay, natural_exp_decay --------------------------------------------------------

_time_decay_infer = positive_rate_infer("learning_rate", "decay_steps", "decay_rate")


def _time_decay_kernel(ctx: KernelContext):
    xp = ctx.xp
    lr, steps, rate = _attrs(ctx, "learning_rate", "decay_steps", "decay_rate")
    staircase = bool(ctx.attrs["staircase"])
    natural = ctx.spec.type == "natural_exp_decay"

    def compute(k):
        e = decay_exponent(xp, k, steps, staircase)
        return lr * xp.exp(-rate * e) if natural else lr / (1.0 + rate * e)
    return finish_rate(ctx, compute)


_TIME = {"learning_rate": 0.1, "decay_steps": 1.0, "decay_rate": 1.0, "staircase": False}
register(OpSpec("inverse_time_decay", slots("Step"), slots("Out"), _time_decay_infer,
                _time_decay_kernel, attrs=_TIME,
                doc="Out = learning_rate / (1 + decay_rate * Step / decay_steps)"))
register(OpSpec("natural_exp_decay", slots("Step"), slots("Out"), _time_decay_infer,
                _time_decay_kernel, attrs=_TIME,
                doc="Out = learning_rate * exp(-decay_rate * Step / decay_steps)"))


# --- linear_lr_warmup ---------------------------------------------------------------------------

def _warmup_infer(ctx: InferContext) -> None:
    op = "linear_lr_warmup"
    single_value(ctx, "Step")
    positive_attr(ctx, op, "warmup_steps")
    for name in ("start_lr", "end_lr", "learning_rate"):
        v = ctx.attrs[name]
        check_attr(isinstance(v, (int, float)) and math.isfinite(v), op,
                   f"{name} must be a finite number, got {v!r}")
    dtype = RATE_DTYPE
    if ctx.has_input("LearningRate"):
        dtype = single_value(ctx, "LearningRate").dtype
        if dtype not in FLOAT_DTYPES:
            ctx.fail_dtype(f"LearningRate must be a float rate, got {dtype}")
    ctx.set_output("Out", (1,), dtype)


def _warmup_kernel(ctx: KernelContext):
    xp = ctx.xp
    warmup, start, end, after = _attrs(ctx, "warmup_steps", "start_lr", "end_lr",
                                       "learning_rate")
    dtype, out = ctx.output("Out").dtype, ctx.buffer("Out")

    def rate(step, lr):
        k = step.reshape(1).astype(xp.float64)
        warming = start + (end - start) * (k / warmup)
        value = xp.where(k < warmup, warming, lr).astype(dtype, copy=False)
        if out is None:
            return value
        out[...] = value
        return out
    if ctx.has_input("LearningRate"):
        return lambda step, lr: rate(step, lr.reshape(1).astype(xp.float64))
    return lambda step: rate(step, after)


register(OpSpec("linear_lr_warmup", slots("Step", "LearningRate?"), slots("Out"), _warmup_infer,
                _warmup_kernel,
                attrs={"learning_rate": 0.1, "warmup_steps": 1.0, "start_lr": 0.0,
                       "end_lr": 0.1},
                doc="Out = start_lr + (end_lr - start_lr) * Step / warmup_steps while Step < "
                    "warmup_steps, then LearningRate (or learning_rate)"))
