"""Learning-rate schedules: exponential, piecewise, cosine, noam, polynomial, inverse-time
and natural-exponential decay, and a linear warmup before a rate or another schedule.

Each layer records one op (role LRSched) that computes the rate of the current step from
the program's global step counter ``@LR_DECAY_COUNTER@`` and returns it as a ``float32[1]``
Variable, to pass as ``learning_rate=`` to an optimizer::

    lr = fluid.layers.exponential_decay(learning_rate=0.1, decay_steps=100, decay_rate=0.5)
    fluid.optimizer.SGD(learning_rate=lr).minimize(loss)

The counter is a persistable int64 ``[1]`` var of block 0, created (at 0) by the first
schedule of a trace and shared by every schedule of the program. It counts steps taken: a
call of a method computing a schedule reads it as ``k`` (0 on the first call), computes its
rates at ``k``, then one ``increment`` op (role LRSched, the last LR op of the method)
writes ``k + 1``. Like every persistable write, the increment is committed with the
parameters at the end of the call, so a call that fails does not advance the counter.

See docs/lr_schedules.md.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Integral, Real
from typing import Any

from ...errors import NameConflictError, OpArgumentError
from ...ir.records import OpDesc, OpRole, VarDesc
from ...ir.text import short_type
from ..tracing import TraceContext, error_at
from ..variable import Variable
from .helpers import LayerHelper

__all__: list[str] = ["exponential_decay", "piecewise_decay", "cosine_decay", "noam_decay",
                      "polynomial_decay", "inverse_time_decay", "natural_exp_decay",
                      "linear_lr_warmup"]

#: The global step counter's name (Paddle's).
LR_COUNTER = "@LR_DECAY_COUNTER@"
COUNTER_DTYPE = "int64"


# --- the counter -----------------------------------------------------------------------------

def _step_counter(trace: TraceContext) -> str:
    """``@LR_DECAY_COUNTER@``, declared in block 0 and initialised to 0 the first time a
    trace asks for it."""
    existing = trace.program.global_block().vars.get(LR_COUNTER)
    if existing is None:
        trace.declare(VarDesc(LR_COUNTER, (1,), COUNTER_DTYPE, persistable=True,
                              stop_gradient=True), in_global=True)
        trace.append_op("fill_constant", {}, {"Out": [LR_COUNTER]},
                        {"shape": [1], "dtype": COUNTER_DTYPE, "value": 0.0},
                        role=OpRole.LRSCHED, in_global=True)
    elif not (existing.persistable and not existing.is_parameter
              and existing.dtype == COUNTER_DTYPE and tuple(existing.shape) == (1,)):
        raise error_at(NameConflictError,
                       f"the learning-rate step counter {LR_COUNTER!r} must be a persistable "
                       f"{COUNTER_DTYPE}[1] state var, but the program already declares it as "
                       f"{short_type(existing)}")
    return LR_COUNTER


def _is_increment(op: OpDesc) -> bool:
    return bool(op.type == "increment" and op.role & OpRole.LRSCHED
                and op.outputs.get("Out") == [LR_COUNTER])


def _increment_last(trace: TraceContext, counter: str) -> None:
    """One ``increment`` of the counter per method, kept after the method's schedule ops
    so that every schedule of a call reads the same (not yet advanced) step."""
    ops = trace.block.ops
    for i, op in enumerate(ops):
        if _is_increment(op):
            ops.append(ops.pop(i))
            return
    trace.append_op("increment", {"X": [counter]}, {"Out": [counter]}, {"step": 1.0},
                    role=OpRole.LRSCHED)


def _schedule(op_type: str, attrs: dict[str, Any],
              inputs: dict[str, list[str]] | None = None) -> Variable:
    helper = LayerHelper(op_type)
    trace = helper.trace
    counter = _step_counter(trace)
    out = helper.out_name()
    trace.append_op(op_type, {"Step": [counter], **(inputs or {})}, {"Out": [out]}, attrs,
                    role=OpRole.LRSCHED)
    trace.program.var(trace.block, out).stop_gradient = True
    _increment_last(trace, counter)
    return Variable(trace, out)


# --- argument checks -------------------------------------------------------------------------

def _is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def _positive(layer: str, what: str, value: Any) -> float:
    if isinstance(value, Variable):
        raise error_at(OpArgumentError, f"{layer}: {what} must be a Python number; a Variable "
                                        f"({value.name}) is not supported here")
    if not _is_number(value) or value <= 0:
        raise error_at(OpArgumentError, f"{layer}: {what} must be a positive number, got "
                                        f"{value!r}")
    return float(value)


def _positive_int(layer: str, what: str, value: Any) -> int:
    if not isinstance(value, Integral) or isinstance(value, bool) or value <= 0:
        raise error_at(OpArgumentError, f"{layer}: {what} must be a positive integer (a number "
                                        f"of steps), got {value!r}")
    return int(value)


def _list(layer: str, what: str, value: Any) -> list:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        try:
            value = list(value)   # e.g. a NumPy array
        except TypeError:
            raise error_at(OpArgumentError, f"{layer}: {what} must be a list, got "
                                            f"{value!r}") from None
    return list(value)


# --- layers ----------------------------------------------------------------------------------

def exponential_decay(learning_rate: float, decay_steps: float, decay_rate: float,
                      staircase: bool = False) -> Variable:
    """The rate ``learning_rate * decay_rate ** (k / decay_steps)`` at step ``k`` (0 on the
    first call); with ``staircase`` the exponent is floored, so the rate drops by
    ``decay_rate`` once every ``decay_steps`` steps.

    Returns a ``float32[1]`` Variable for an optimizer's ``learning_rate=``."""
    layer = "exponential_decay"
    attrs = {"learning_rate": _positive(layer, "learning_rate", learning_rate),
             "decay_steps": _positive(layer, "decay_steps", decay_steps),
             "decay_rate": _positive(layer, "decay_rate", decay_rate),
             "staircase": bool(staircase)}
    return _schedule(layer, attrs)


def piecewise_decay(boundaries: Sequence[int], values: Sequence[float]) -> Variable:
    """The rate ``values[i]`` at step ``k`` for ``boundaries[i-1] <= k < boundaries[i]``:
    ``values[0]`` before step ``boundaries[0]``, ``values[-1]`` from the last boundary on.
    ``boundaries`` are strictly increasing step numbers; there is one more value than
    boundaries. Returns a ``float32[1]`` Variable.

    ``piecewise_decay([100, 200], [0.1, 0.01, 0.001])``: 0.1 for steps 0-99, 0.01 for
    100-199, then 0.001."""
    layer = "piecewise_decay"
    bounds = _list(layer, "boundaries", boundaries)
    rates = _list(layer, "values", values)
    bad = [b for b in bounds if not isinstance(b, Integral) or isinstance(b, bool)]
    if bad:
        raise error_at(OpArgumentError, f"{layer}: boundaries must be integer step numbers, "
                                        f"got {bad[0]!r} in {bounds!r}")
    bounds = [int(b) for b in bounds]
    unsorted = [(a, b) for a, b in zip(bounds, bounds[1:]) if a >= b]
    if unsorted:
        a, b = unsorted[0]
        raise error_at(OpArgumentError, f"{layer}: boundaries must be sorted in strictly "
                                        f"increasing order, but {a} is followed by {b} in "
                                        f"{bounds}")
    if len(rates) != len(bounds) + 1:
        raise error_at(OpArgumentError,
                       f"{layer}: len(values) must be len(boundaries) + 1 (a rate before the "
                       f"first boundary and one from each boundary on), got {len(bounds)} "
                       f"boundaries and {len(rates)} values")
    bad = [v for v in rates if not _is_number(v) or v < 0]
    if bad:
        raise error_at(OpArgumentError, f"{layer}: values must be non-negative numbers, got "
                                        f"{bad[0]!r} in {rates!r}")
    return _schedule(layer, {"boundaries": bounds, "values": [float(v) for v in rates]})


def cosine_decay(learning_rate: float, step_each_epoch: int, epochs: int) -> Variable:
    """The rate ``learning_rate * 0.5 * (cos(pi * epoch / epochs) + 1)`` at step ``k``,
    with ``epoch = floor(k / step_each_epoch)``: it falls from ``learning_rate`` towards 0
    over ``epochs`` epochs of ``step_each_epoch`` steps, constant within an epoch. (As in
    Paddle, the cosine is not clamped: past ``epochs`` the rate rises again.)

    Returns a ``float32[1]`` Variable for an optimizer's ``learning_rate=``."""
    layer = "cosine_decay"
    attrs = {"learning_rate": _positive(layer, "learning_rate", learning_rate),
             "step_each_epoch": _positive_int(layer, "step_each_epoch", step_each_epoch),
             "epochs": _positive_int(layer, "epochs", epochs)}
    return _schedule(layer, attrs)


def _non_negative(layer: str, what: str, value: Any) -> float:
    if not _is_number(value) or value < 0:
        raise error_at(OpArgumentError, f"{layer}: {what} must be a number >= 0, got "
                                        f"{value!r}")
    return float(value)


def noam_decay(d_model: float, warmup_steps: float, learning_rate: float = 1.0) -> Variable:
    """The rate of the Transformer paper, ``learning_rate * d_model ** -0.5 * min(s **
    -0.5, warmup_steps ** -1.5 * s)`` at step ``s = k + 1``: it rises linearly for
    ``warmup_steps`` steps, then falls as ``1 / sqrt(s)``.

    Returns a ``float32[1]`` Variable for an optimizer's ``learning_rate=``."""
    layer = "noam_decay"
    return _schedule(layer, {"d_model": _positive(layer, "d_model", d_model),
                             "warmup_steps": _positive(layer, "warmup_steps", warmup_steps),
                             "learning_rate": _positive(layer, "learning_rate",
                                                        learning_rate)})


def polynomial_decay(learning_rate: float, decay_steps: int,
                     end_learning_rate: float = 0.0001, power: float = 1.0,
                     cycle: bool = False) -> Variable:
    """The rate ``(learning_rate - end_learning_rate) * (1 - k / decay_steps) ** power +
    end_learning_rate``: from ``learning_rate`` down to ``end_learning_rate`` at step
    ``decay_steps``, and constant after it. With ``cycle`` the decay starts over instead:
    ``decay_steps`` is multiplied by ``ceil(k / decay_steps)`` (1 at step 0), so each
    cycle is longer and starts lower.

    Returns a ``float32[1]`` Variable for an optimizer's ``learning_rate=``."""
    layer = "polynomial_decay"
    attrs = {"learning_rate": _positive(layer, "learning_rate", learning_rate),
             "decay_steps": _positive(layer, "decay_steps", decay_steps),
             "end_learning_rate": _non_negative(layer, "end_learning_rate",
                                                end_learning_rate),
             "power": _non_negative(layer, "power", power), "cycle": bool(cycle)}
    return _schedule(layer, attrs)


def _time_decay(layer: str, learning_rate: float, decay_steps: float, decay_rate: float,
                staircase: bool) -> Variable:
    return _schedule(layer, {"learning_rate": _positive(layer, "learning_rate", learning_rate),
                             "decay_steps": _positive(layer, "decay_steps", decay_steps),
                             "decay_rate": _positive(layer, "decay_rate", decay_rate),
                             "staircase": bool(staircase)})


def inverse_time_decay(learning_rate: float, decay_steps: float, decay_rate: float,
                       staircase: bool = False) -> Variable:
    """The rate ``learning_rate / (1 + decay_rate * k / decay_steps)``; with
    ``staircase`` the quotient ``k / decay_steps`` is floored, so the rate changes once
    every ``decay_steps`` steps.

    Returns a ``float32[1]`` Variable for an optimizer's ``learning_rate=``."""
    return _time_decay("inverse_time_decay", learning_rate, decay_steps, decay_rate,
                       staircase)


def natural_exp_decay(learning_rate: float, decay_steps: float, decay_rate: float,
                      staircase: bool = False) -> Variable:
    """The rate ``learning_rate * exp(-decay_rate * k / decay_steps)``; with
    ``staircase`` the quotient ``k / decay_steps`` is floored.

    Returns a ``float32[1]`` Variable for an optimizer's ``learning_rate=``."""
    return _time_decay("natural_exp_decay", learning_rate, decay_steps, decay_rate,
                       staircase)


def linear_lr_warmup(learning_rate: float | Variable, warmup_steps: int, start_lr: float,
                     end_lr: float) -> Variable:
    """A warmup before a rate: ``start_lr + (end_lr - start_lr) * k / warmup_steps`` for
    the first ``warmup_steps`` steps, then ``learning_rate``, a number or another
    schedule's Variable (``linear_lr_warmup(fluid.layers.piecewise_decay(...), 100, 0.0,
    0.1)``), which counts the same steps: it is not held back by the warmup.

    Returns a Variable of ``learning_rate``'s dtype (``float32[1]`` for a number)."""
    layer = "linear_lr_warmup"
    attrs: dict[str, Any] = {"warmup_steps": _positive(layer, "warmup_steps", warmup_steps)}
    for what, value in (("start_lr", start_lr), ("end_lr", end_lr)):
        if not _is_number(value):
            raise error_at(OpArgumentError, f"{layer}: {what} must be a number, got {value!r}")
        attrs[what] = float(value)
    if isinstance(learning_rate, Variable):
        return _schedule(layer, attrs, {"LearningRate": [learning_rate.name]})
    if not _is_number(learning_rate):
        raise error_at(OpArgumentError, f"{layer}: learning_rate must be a number or a "
                                        f"Variable (another schedule's rate), got "
                                        f"{learning_rate!r}")
    return _schedule(layer, {**attrs, "learning_rate": float(learning_rate)})
