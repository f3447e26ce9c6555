"""Learning-rate schedules (role LRSched): ops computing the rate from a step counter.
(ops/lr_decay.py has the rest of Paddle's schedules.)

``increment``
    ``Out = X + step`` for a one-element ``X`` (the global step counter
    ``@LR_DECAY_COUNTER@``, int64); an integer ``X`` takes only whole steps.

``exponential_decay`` / ``piecewise_decay`` / ``cosine_decay``
    Read the step ``k`` from ``Step`` (one element, any int or float dtype) and write the
    rate as ``float32[1]``. Each is a single op whose schedule lives in its attrs:

    * exponential: ``learning_rate * decay_rate ** (k / decay_steps)``, the exponent
      floored with ``staircase``;
    * piecewise: ``values[i]`` for ``boundaries[i-1] <= k < boundaries[i]`` (``values[0]``
      before the first boundary, ``values[-1]`` from the last one on);
    * cosine: ``learning_rate * 0.5 * (cos(pi * epoch / epochs) + 1)`` with
      ``epoch = floor(k / step_each_epoch)``.

    The arithmetic is done in float64 and rounded to float32 once. None of these ops has a
    gradient: a schedule is a function of the step, not of anything trained.

Attribute errors (a non-positive ``decay_steps``, unsorted ``boundaries``, ...) are raised
as `OpArgumentError` by the shape rules, so an op built by hand fails as clearly as one a
layer records.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Real

import numpy as np

from ..errors import OpArgumentError
from ..ir.records import FLOAT_DTYPES, INT_DTYPES
from .accumulate import assign_grad
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, TensorType, slots

RATE_DTYPE = "float32"


def _number(v) -> bool:
    return isinstance(v, (Real, np.integer, np.floating)) and not isinstance(v, bool)


def _integral(v) -> bool:
    return _number(v) and math.isfinite(float(v)) and float(v) == int(v)


def check_attr(ok: bool, op: str, message: str) -> None:
    if not ok:
        raise OpArgumentError(f"{op}: {message}")


def single_value(ctx: InferContext, slot: str) -> TensorType:
    """``slot`` holds one value (shape [1] or []; -1 dims allowed while tracing), of an
    int or float dtype."""
    t = ctx.input(slot)
    if any(d not in (1, -1) for d in t.shape):
        ctx.fail(f"{slot} must hold a single value (shape [1]), got {t.dtype}{list(t.shape)}")
    if t.dtype not in FLOAT_DTYPES and t.dtype not in INT_DTYPES:
        ctx.fail_dtype(f"{slot} must be an int or float step count, got {t.dtype}")
    return t


def finish_rate(ctx: KernelContext, compute):
    """A kernel ``fn(step)``: ``compute(k)`` gets the step as a float64 array of one
    element and returns the rate (float64); the result is Out's type (float32[1]),
    written into the planner's buffer when it offers one."""
    xp = ctx.xp
    out, dtype = ctx.buffer("Out"), ctx.output("Out").dtype

    def fn(step):
        rate = compute(step.reshape(1).astype(xp.float64))
        if out is None:
            return rate.astype(dtype)
        out[...] = rate
        return out
    return fn


# --- increment ----------------------------------------------------------------------------------

def _increment_infer(ctx: InferContext) -> None:
    x = single_value(ctx, "X")
    step = ctx.attrs["step"]
    check_attr(_number(step) and math.isfinite(float(step)), "increment",
                f"step must be a finite number, got {step!r}")
    if x.dtype in INT_DTYPES:
        check_attr(_integral(step), "increment",
                    f"an {x.dtype} counter takes whole steps, got step={step!r}")
    ctx.set_output("Out", x.shape, x.dtype)


def _increment_kernel(ctx: KernelContext):
    xp = ctx.xp
    x = ctx.input("X")
    step = ctx.attrs["step"]
    # Add a value of X's own dtype, so an int64 counter stays int64 and exact.
    delta = xp.asarray(int(step) if x.dtype in INT_DTYPES else float(step), dtype=x.dtype)
    out = ctx.buffer("Out")
    return lambda v: xp.add(v, delta, out=out)


# a float counter passes its gradient through (a loop's i in x = i * i; i += 1): the step
# is a constant
register(OpSpec("increment", slots("X"), slots("Out"), _increment_infer, _increment_kernel,
                assign_grad, attrs={"step": 1.0}, updates=(("Out", "X"),),
                doc="Out = X + step, X holding one value (a step counter)"))


# --- exponential_decay --------------------------------------------------------------------------

def rate_output(ctx: InferContext) -> None:
    single_value(ctx, "Step")
    ctx.set_output("Out", (1,), RATE_DTYPE)


def positive_attr(ctx: InferContext, op: str, name: str, integral: bool = False) -> float:
    v = ctx.attrs[name]
    ok = _number(v) and math.isfinite(float(v)) and float(v) > 0 and (
        not integral or _integral(v))
    kind = "a positive integer" if integral else "a positive number"
    check_attr(ok, op, f"{name} must be {kind}, got {v!r}")
    return float(v)


def positive_rate_infer(*names: str) -> Callable[[InferContext], None]:
    """The shape rule of a schedule whose attrs ``names`` must be positive numbers."""
    def infer(ctx: InferContext) -> None:
        for name in names:
            positive_attr(ctx, ctx.spec.type, name)
        rate_output(ctx)
    return infer


_exponential_infer = positive_rate_infer("learning_rate", "decay_steps", "decay_rate")


def _exponential_kernel(ctx: KernelContext):
    xp = ctx.xp
    lr = float(ctx.attrs["learning_rate"])
    steps = float(ctx.attrs["decay_steps"])
    rate = float(ctx.attrs["decay_rate"])
    staircase = bool(ctx.attrs["staircase"])

    return finish_rate(ctx, lambda k: lr * xp.power(rate, decay_exponent(xp, k, steps,
                                                                         staircase)))


def decay_exponent(xp, k, steps: float, staircase: bool):
    """``k / steps``, floored with ``staircase``: the exponent of the decays."""
    e = k / steps
    return xp.floor(e) if staircase else e


register(OpSpec(
    "exponential_decay", slots("Step"), slots("Out"), _exponential_infer, _exponential_kernel,
    attrs={"learning_rate": 0.1, "decay_steps": 1.0, "decay_rate": 1.0, "staircase": False},
    doc="Out = learning_rate * decay_rate ^ (Step / decay_steps), the exponent floored "
        "with staircase"))


# --- piecewise_decay ----------------------------------------------------------------------------

def _piecewise_infer(ctx: InferContext) -> None:
    op = "piecewise_decay"
    b, v = ctx.attrs["boundaries"], ctx.attrs["values"]
    check_attr(isinstance(b, (list, tuple)) and all(_integral(x) for x in b), op,
                f"boundaries must be a list of integer steps, got {b!r}")
    check_attr(isinstance(v, (list, tuple)) and len(v) > 0
                and all(_number(x) and math.isfinite(float(x)) for x in v), op,
                f"values must be a non-empty list of numbers, got {v!r}")
    check_attr(all(int(x) < int(y) for x, y in zip(b, b[1:])), op,
                f"boundaries must be strictly increasing, got {list(b)}")
    check_attr(len(v) == len(b) + 1, op,
                f"needs one more value than boundaries (a rate before the first boundary and "
                f"one after each), got {len(b)} boundaries and {len(v)} values")
    rate_output(ctx)


def _piecewise_kernel(ctx: KernelContext):
    xp = ctx.xp
    bounds = xp.asarray([float(x) for x in ctx.attrs["boundaries"]], dtype=xp.float64)
    values = xp.asarray([float(x) for x in ctx.attrs["values"]], dtype=xp.float64)

    def compute(k):
        # The number of boundaries <= k is the index of the value in force at k.
        return values[xp.searchsorted(bounds, k, side="right")]
    return finish_rate(ctx, compute)


register(OpSpec(
    "piecewise_decay", slots("Step"), slots("Out"), _piecewise_infer, _piecewise_kernel,
    attrs={"boundaries": [], "values": [0.1]},
    doc="Out = values[i] for boundaries[i-1] <= Step < boundaries[i]"))


# --- cosine_decay -------------------------------------------------------------------------------

def _cosine_infer(ctx: InferContext) -> None:
    positive_attr(ctx, "cosine_decay", "learning_rate")
    positive_attr(ctx, "cosine_decay", "step_each_epoch", integral=True)
    positive_attr(ctx, "cosine_decay", "epochs", integral=True)
    rate_output(ctx)


def _cosine_kernel(ctx: KernelContext):
    xp = ctx.xp
    lr = float(ctx.attrs["learning_rate"])
    per_epoch = float(ctx.attrs["step_each_epoch"])
    epochs = float(ctx.attrs["epochs"])

    def compute(k):
        epoch = xp.floor(k / per_epoch)
        return lr * 0.5 * (xp.cos(epoch * (math.pi / epochs)) + 1.0)
    return finish_rate(ctx, compute)


register(OpSpec(
    "cosine_decay", slots("Step"), slots("Out"), _cosine_infer, _cosine_kernel,
    attrs={"learning_rate": 0.1, "step_each_epoch": 1, "epochs": 1},
    doc="Out = learning_rate * 0.5 * (cos(pi * floor(Step / step_each_epoch) / epochs) + 1)"))
