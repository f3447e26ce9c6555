"""Averaged weights, as Paddle 1.8 keeps them: `ModelAverage` (the mean of the parameters
over a sliding window of steps) and `ExponentialMovingAverage`.

Both record their update ops in the traced method (after ``minimize``: they average the
updated parameters), and keep their sums in block 0, named as Paddle names them, so
they are saved, restored and rewound with the parameters. Outside the trace, the live
program plays the executor::

    with model_average.apply(prog):      # Paddle: apply(exe, need_restore=True)
        prog.infer(x)                    # runs with the averaged weights
        prog.save("averaged")            # ... and saves them
    # the trained weights are back

`apply` swaps the averaged weights in through ``prog.set_parameters`` (one change in the
history, all or nothing) and `restore` swaps the trained ones back (another change);
``need_restore=False`` keeps the averaged weights until `restore`.
"""
from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import FluidError, OpArgumentError
from ..ir.records import OpRole, VarDesc
from .optim_base import Optimizer, number
from .regularizer import WeightDecayRegularizer
from .tracing import TraceContext, current_trace, error_at, is_tracing
from .variable import Variable

__all__ = ["ModelAverage", "ExponentialMovingAverage"]


def _averaged_params(trace: TraceContext) -> list[tuple[str, str]]:
    """(param, grad) of every parameter averaged (``do_model_average`` not False), with the
    gradient its update ops name (its op_role_var; '' when this method does not train it)."""
    grads: dict[str, str] = {}
    for op in trace.block.ops:
        if op.role & OpRole.OPTIMIZE:
            for p, g in zip(op.role_var[0::2], op.role_var[1::2]):
                grads.setdefault(p, g)
    out = []
    for name, var in trace.program.global_block().vars.items():
        attr = trace.param_attrs.get(name)
        if var.is_parameter and getattr(attr, "do_model_average", True) is not False:
            out.append((name, grads.get(name, "")))
    return out


class _SwapsWeights:
    """`apply` and `restore` over the averaged values `_averaged` computes from a live
    program's state."""

    def __init__(self) -> None:
        self._backups: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def _averaged(self, executor: Any) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _state(self, executor: Any, names: list[str]) -> dict[str, np.ndarray]:
        what = type(self).__name__
        if not hasattr(executor, "get_var"):
            raise error_at(OpArgumentError, f"{what}.apply takes the compiled program "
                                            f"(prog = Net().Compile()), got {executor!r}")
        if not names:
            raise error_at(FluidError, f"{what}.apply: it recorded nothing yet; call it in "
                                       f"the traced method after minimize (and, for an "
                                       f"ExponentialMovingAverage, call update() there)")
        try:
            return {n: executor.get_var(n) for n in names}
        except KeyError:
            raise error_at(FluidError, f"{what}.apply: this program does not hold the "
                                       f"averages this {what} recorded ({names[0]!r}, ...); "
                                       f"apply it to the program compiled from the class "
                                       f"whose method made it") from None

    def averaged_parameters(self, executor: Any) -> dict[str, np.ndarray]:
        """The averaged value of each averaged parameter (name -> array), read from the
        state of ``executor`` (a compiled or distributed program); changes nothing."""
        return self._averaged(executor)

    @contextmanager
    def apply(self, executor: Any, need_restore: bool = True) -> Iterator[None]:
        """Swap the averaged weights into ``executor`` (the compiled program) for the body
        of the ``with``, then the trained ones back (unless ``need_restore`` is False:
        then `restore` does). A failure changes nothing."""
        values = self._averaged(executor)
        if not hasattr(executor, "set_parameters"):
            raise error_at(OpArgumentError, f"{type(self).__name__}.apply swaps weights of a "
                                            f"single-process program; for a distributed job "
                                            f"use averaged_parameters(prog)")
        trained = {n: executor.get_var(n) for n in values}
        executor.set_parameters(values)
        self._backups[executor] = trained
        try:
            yield
        finally:
            if need_restore:
                self.restore(executor)

    def restore(self, executor: Any) -> None:
        """Put back the trained weights the last `apply` to ``executor`` swapped out."""
        trained = self._backups.pop(executor, None)
        if trained is None:
            raise error_at(FluidError, f"{type(self).__name__}.restore: no apply to this "
                                       f"program is waiting to be restored")
        executor.set_parameters(trained)


class ModelAverage(_SwapsWeights, Optimizer):
    """The average of each parameter over the last steps: between ``min_average_window``
    and ``max_average_window`` steps, and ``average_window_rate`` times the steps taken
    (Paddle's sliding window, three running sums). Made in the traced method after
    ``minimize`` (or made elsewhere, then ``update()`` called there). Accumulators per
    parameter: ``<param>_sum_1_N``, ``_sum_2_N``, ``_sum_3_N`` and the int64 counts
    ``_num_accumulates_N``, ``_old_num_accumulates_N``, ``_num_updates_N``."""

    _hyper = ("average_window", "min_average_window", "max_average_window")
    _SUMS = ("sum_1", "sum_2", "sum_3")
    _COUNTS = ("num_accumulates", "old_num_accumulates", "num_updates")

    def __init__(self, average_window_rate: float, min_average_window: int = 10000,
                 max_average_window: int = 10000,
                 regularization: WeightDecayRegularizer | None = None,
                 name: str | None = None):
        _SwapsWeights.__init__(self)
        Optimizer.__init__(self, 1.0, regularization=regularization, name=name)
        self.average_window = number(average_window_rate,
                                     "ModelAverage(average_window_rate=...)", 0.0)
        self.min_average_window = _count(min_average_window, "min_average_window")
        self.max_average_window = _count(max_average_window, "max_average_window")
        if self.min_average_window > self.max_average_window:
            raise error_at(OpArgumentError, f"ModelAverage: min_average_window "
                                            f"({self.min_average_window}) must not exceed "
                                            f"max_average_window ({self.max_average_window})")
        self._records: list[tuple[str, ...]] = []
        if is_tracing():
            self.update()

    def update(self) -> None:
        """Record the averaging ops of every parameter in the traced method (once)."""
        trace = current_trace("ModelAverage")
        self._bind(trace)
        self._records = []
        for p, g in _averaged_params(trace):
            names = [self._accumulator(trace, k, p) for k in self._SUMS]
            names += [self._accumulator(trace, k, p, shape=[1], dtype="int64")
                      for k in self._COUNTS]
            ins = {"param": [p], **{f"in_{k}": [n] for k, n in zip(self._SUMS + self._COUNTS,
                                                                  names)}}
            outs = {f"out_{k}": [n] for k, n in zip(self._SUMS + self._COUNTS, names)}
            trace.append_op("average_accumulates", ins, outs,
                            {"average_window": self.average_window,
                             "min_average_window": self.min_average_window,
                             "max_average_window": self.max_average_window},
                            role=OpRole.OPTIMIZE, role_var=(p, g) if g else ())
            self._records.append((p, *names))

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        raise error_at(OpArgumentError, "ModelAverage averages what another optimizer "
                                        "trains: minimize with that one, then make the "
                                        "ModelAverage")

    def _averaged(self, executor: Any) -> dict[str, np.ndarray]:
        state = self._state(executor, [n for r in self._records for n in r[1:]])
        out = {}
        for p, s1, s2, s3, acc, old, _ in self._records:
            count = int(state[acc][0]) + int(state[old][0])
            if count == 0:
                raise error_at(FluidError, "ModelAverage.apply: no step has been averaged "
                                           "yet; train first (each training call adds its "
                                           "parameters to the average)")
            total = state[s1] + state[s2] + state[s3]
            out[p] = total / np.asarray(count, total.dtype)
        return out


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise error_at(OpArgumentError, f"ModelAverage({what}=...) must be a positive number "
                                        f"of steps, got {value!r}")
    return int(value)


class ExponentialMovingAverage(_SwapsWeights):
    """``ema = decay * ema + (1 - decay) * param`` after each step (``update()`` in the
    traced method, after ``minimize``); `apply` swaps in ``ema / (1 - decay^t)`` (the
    zero start corrected, t the steps taken). With ``thres_steps`` (a Variable, such as a
    step counter) the decay is ``min(decay, (t + 1) / (t + 10))``. State: one
    ``<name><param>_ema_N`` per parameter, ``scheduled_ema_decay_rate`` and
    ``@EMA_STEP_COUNTER@``. (Paddle's apply also overwrites the averages with the
    corrected values; here they stay as they are.)"""

    COUNTER = "@EMA_STEP_COUNTER@"

    def __init__(self, decay: float = 0.999, thres_steps: Variable | None = None,
                 name: str | None = None):
        super().__init__()
        self._decay = number(decay, "ExponentialMovingAverage(decay=...)", 0.0, 1.0)
        if thres_steps is not None and not isinstance(thres_steps, Variable):
            raise error_at(OpArgumentError, f"thres_steps must be a Variable (a step "
                                            f"counter) or None, got {thres_steps!r}")
        self._thres_steps = thres_steps
        self._name = name or ""
        self._records: list[tuple[str, str]] = []
        self._decay_var = ""

    def update(self) -> None:
        """Record one averaging step of every parameter in the traced method."""
        trace = current_trace("ExponentialMovingAverage.update")
        self._decay_var = self._decay_rate(trace)
        counter = _counter(trace, self.COUNTER)
        trace.append_op("increment", {"X": [counter]}, {"Out": [counter]}, {"step": 1.0},
                        role=OpRole.LRSCHED)
        self._records = []
        for p, g in _averaged_params(trace):
            var = trace.type_of(p)
            ema = trace.state_names.generate(f"{self._name}{p}_ema")
            trace.declare(VarDesc(ema, var.shape, var.dtype, persistable=True), in_global=True)
            trace.append_op("fill_constant", {}, {"Out": [ema]},
                            {"shape": list(var.shape), "dtype": var.dtype, "value": 0.0},
                            in_global=True)
            trace.append_op("ema_accumulate", {"Param": [p], "Average": [ema],
                                               "Decay": [self._decay_var]},
                            {"AverageOut": [ema]}, role=OpRole.OPTIMIZE,
                            role_var=(p, g) if g else ())
            self._records.append((p, ema))

    def _decay_rate(self, trace: TraceContext) -> str:
        """``scheduled_ema_decay_rate``: the decay, or with thres_steps the scheduled one
        (computed by LRSched ops at each step)."""
        name = "scheduled_ema_decay_rate"
        if trace.program.global_block().vars.get(name) is None:
            trace.declare(VarDesc(name, (1,), "float32", persistable=True), in_global=True)
            trace.append_op("fill_constant", {}, {"Out": [name]},
                            {"shape": [1], "dtype": "float32", "value": self._decay},
                            in_global=True)
        if self._thres_steps is None:
            return name
        step = trace.unique_in_block(f"{name}@STEP")
        trace.append_op("cast", {"X": [self._thres_steps.name]}, {"Out": [step]},
                        {"out_dtype": "float32"}, role=OpRole.LRSCHED)
        ratio = trace.unique_in_block(f"{name}@RATIO")
        ones, tens = (trace.unique_in_block(f"{name}@{k}") for k in ("PLUS1", "PLUS10"))
        trace.append_op("scale", {"X": [step]}, {"Out": [ones]}, {"bias": 1.0},
                        role=OpRole.LRSCHED)
        trace.append_op("scale", {"X": [step]}, {"Out": [tens]}, {"bias": 10.0},
                        role=OpRole.LRSCHED)
        trace.append_op("elementwise_div", {"X": [ones], "Y": [tens]}, {"Out": [ratio]},
                        role=OpRole.LRSCHED)
        trace.append_op("clip", {"X": [ratio]}, {"Out": [name]},
                        {"min": -3.4e38, "max": self._decay}, role=OpRole.LRSCHED)
        return name

    def _averaged(self, executor: Any) -> dict[str, np.ndarray]:
        names = [ema for _, ema in self._records]
        state = self._state(executor, names and names + [self._decay_var, self.COUNTER])
        steps = int(state[self.COUNTER][0])
        if steps == 0:
            raise error_at(FluidError, "ExponentialMovingAverage.apply: no step has been "
                                       "averaged yet; train first")
        decay_pow = np.power(state[self._decay_var], np.float32(steps))
        return {p: state[ema] / (1.0 - decay_pow).astype(state[ema].dtype)
                for p, ema in self._records}


def _counter(trace: TraceContext, name: str) -> str:
    """An int64 [1] step counter of block 0 (made at 0 the first time)."""
    if trace.program.global_block().vars.get(name) is None:
        trace.declare(VarDesc(name, (1,), "int64", persistable=True, stop_gradient=True),
                      in_global=True)
        trace.append_op("fill_constant", {}, {"Out": [name]},
                        {"shape": [1], "dtype": "int64", "value": 0.0}, role=OpRole.LRSCHED,
                        in_global=True)
    return name

