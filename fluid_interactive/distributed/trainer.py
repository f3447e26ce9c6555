"""One trainer: its compiled trainer program and the communicator in its scope. Every
engine runs trainers through this class (on a thread, in a Ray actor, or in the trainer's
own process), so a step behaves the same everywhere."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..backend import array_module_for
from ..ops.dist import COMM_VAR
from ..passes.transpiler import TranspilePlan
from ..runtime.live.compiled import CompiledProgram
from .communicator import StepCommunicator
from .interface import CallResult, PServer


class TrainerRuntime:
    """Trainer ``trainer_id`` of ``plan``, talking to ``pservers`` (endpoint -> server)."""

    def __init__(self, plan: TranspilePlan, trainer_id: int, pservers: Mapping[str, PServer], *,
                 seed: int | None, device: str, timeout: float):
        self.trainer_id = trainer_id
        self.program = plan.trainer_program(trainer_id)
        self.compiled = CompiledProgram(self.program, seed=seed, device=device)
        received = {m: plan.received(m) for m in plan.main}
        self.comm = StepCommunicator(trainer_id, pservers, array_module_for(device), received,
                                     timeout)
        # The communicator is an object, not an array: set_var would refuse it.
        self.compiled.scope.set({COMM_VAR: self.comm})

    def call(self, method: str, args: Sequence[Any], step: int | None) -> CallResult:
        fn = self.compiled.methods[method]
        if step is None:
            try:
                return CallResult(value=fn(*args))
            except Exception as e:
                return CallResult(error=e)
        self.comm.begin(method, step)
        try:
            value = fn(*args)
        except Exception as e:
            return CallResult(error=e, exchanged=self.comm.exchanged)
        finally:
            exchanged = self.comm.end()
        return CallResult(value=value, exchanged=exchanged)

    def get_var(self, name: str) -> np.ndarray:
        return self.compiled.get_var(name)

    def set_vars(self, values: Mapping[str, np.ndarray]) -> None:
        for name, value in values.items():
            self.compiled.set_var(name, value)
        self.comm.forget_commits()

    def tensor_state(self) -> dict[str, np.ndarray]:
        out = {}
        for name in self.compiled.var_names():
            try:
                out[name] = self.compiled.get_var(name)
            except KeyError:   # declared but not initialised (computed each step)
                pass
        return out

    def close(self) -> None:
        self.compiled.close()
