"""Paddle 1.8's optimizers that wrap another one: `LookaheadOptimizer` (slow weights
pulled towards the fast ones every k steps) and `RecomputeOptimizer` (the backward part
recomputes forward values between checkpoints instead of keeping them: less memory, the
same parameters)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import OpArgumentError
from ..ir.records import OpDesc, OpRole, VarDesc
from ..passes.recompute import recompute_segments
from .layers.helpers import as_variable
from .optim_base import Pairs, ParamList, check_optimizer, number, var_names
from .tracing import TraceContext, current_trace, error_at
from .variable import Variable

__all__ = ["LookaheadOptimizer", "RecomputeOptimizer"]


def _state_name(trace: TraceContext, name: str) -> str:
    """``name`` (Paddle's) when the program does not use it yet, else a fresh one."""
    taken = any(name in b.vars for b in trace.program.blocks)
    return trace.state_names.generate(name) if taken else name


class LookaheadOptimizer:
    """Lookahead (Zhang et al.): ``inner_optimizer`` updates the (fast) parameters each
    step; every ``k`` steps the slow weights ``<param>@SLOW`` (starting at the initial
    parameters) become ``alpha * fast + (1 - alpha) * slow``, and so do the fast ones. The
    step counter is ``lookahead_step``."""

    def __init__(self, inner_optimizer: Any, alpha: float = 0.5, k: int = 5):
        self.inner_optimizer = check_optimizer(inner_optimizer,
                                               "LookaheadOptimizer(inner_optimizer=...)")
        self.alpha = number(alpha, "LookaheadOptimizer(alpha=...)", 0.0, 1.0, high_open=False)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise error_at(OpArgumentError, f"LookaheadOptimizer(k=...) must be a positive "
                                            f"int, got {k!r}")
        self.k = k
        self.type = "lookahead"

    def minimize(self, loss: Variable, startup_program: Any = None
                 ) -> tuple[list[OpDesc], list[tuple[Variable, Variable]]]:
        """The inner optimizer's ``minimize``, then the lookahead ops of the parameters it
        updates; returns the inner optimizer's result."""
        optimize_ops, params_grads = self.inner_optimizer.minimize(loss, startup_program)
        trace = current_trace("LookaheadOptimizer.minimize")
        step = _state_name(trace, "lookahead_step")
        trace.declare(VarDesc(step, (1,), "int32", persistable=True, stop_gradient=True),
                      in_global=True)
        trace.append_op("fill_constant", {}, {"Out": [step]},
                        {"shape": [1], "dtype": "int32", "value": 0.0}, in_global=True)
        trace.append_op("increment", {"X": [step]}, {"Out": [step]}, {"step": 1.0},
                        role=OpRole.LRSCHED)
        for p, g in params_grads:
            slow = _state_name(trace, f"{p.name}@SLOW")
            var = trace.type_of(p.name)
            trace.declare(VarDesc(slow, var.shape, var.dtype, persistable=True),
                          in_global=True)
            trace.append_op("assign", {"X": [p.name]}, {"Out": [slow]}, in_global=True)
            trace.append_op("lookahead", {"Param": [p.name], "Slow": [slow], "Step": [step]},
                            {"ParamOut": [p.name], "SlowOut": [slow]},
                            {"alpha": self.alpha, "k": self.k}, role=OpRole.OPTIMIZE,
                            role_var=(p.name, g.name))
        return optimize_ops, params_grads

    def __repr__(self) -> str:
        return (f"LookaheadOptimizer({self.inner_optimizer!r}, alpha={self.alpha}, "
                f"k={self.k})")


class RecomputeOptimizer:
    """``optimizer``, with a backward part that recomputes the forward values between the
    checkpoints `_set_checkpoints` names (outputs of layers on the way to the loss)
    instead of keeping them alive: the peak memory of a step falls, and the parameters
    are bit for bit those of ``optimizer`` alone. Random ops (dropout) and ops updating
    state (batch norm) are never run twice: their values are kept."""

    def __init__(self, optimizer: Any):
        self._optimizer = check_optimizer(optimizer, "RecomputeOptimizer(optimizer=...)")
        self._checkpoints: list[Variable | str] | None = None

    def _set_checkpoints(self, checkpoints: Sequence[Variable | str]) -> None:
        """The forward vars (Variables or names) whose values the backward part keeps."""
        if isinstance(checkpoints, (str, Variable)) or not isinstance(checkpoints, Sequence):
            raise error_at(OpArgumentError, f"_set_checkpoints takes a list of Variables, got "
                                            f"{checkpoints!r}")
        self._checkpoints = list(checkpoints)

    def backward(self, loss: Variable, startup_program: Any = None,
                 parameter_list: ParamList = None,
                 no_grad_set: Iterable[str | Variable] | None = None,
                 callbacks: Any = None) -> list[tuple[Variable, Variable]]:
        """The inner optimizer's backward part, then the recomputation of the segments."""
        if not self._checkpoints:
            raise error_at(OpArgumentError, "RecomputeOptimizer: call _set_checkpoints([...]) "
                                            "with the vars to keep before minimize")
        trace = current_trace("RecomputeOptimizer.backward")
        names = var_names([c if isinstance(c, str) else as_variable(c, "checkpoint").name
                           for c in self._checkpoints], trace, "checkpoints", False)
        pairs = self._optimizer.backward(loss, startup_program, parameter_list, no_grad_set)
        try:
            program, _ = recompute_segments(trace.program, trace.block_idx, names or [])
        except OpArgumentError as e:
            raise error_at(OpArgumentError, str(e)) from None
        trace.replace_program(program)
        return pairs

    def apply_gradients(self, params_grads: Pairs) -> list[OpDesc]:
        return self._optimizer.apply_gradients(params_grads)

    def apply_optimize(self, loss: Variable, startup_program: Any,
                       params_grads: Pairs) -> list[OpDesc]:
        return self._optimizer.apply_optimize(loss, startup_program, params_grads)

    def minimize(self, loss: Variable, startup_program: Any = None,
                 parameter_list: ParamList = None,
                 no_grad_set: Iterable[str | Variable] | None = None
                 ) -> tuple[list[OpDesc], list[tuple[Variable, Variable]]]:
        params_grads = self.backward(loss, startup_program, parameter_list, no_grad_set)
        return self.apply_optimize(loss, startup_program, params_grads), params_grads

    def __repr__(self) -> str:
        return f"RecomputeOptimizer({self._optimizer!r})"
