"""The runtime interface behind ``plan.launch()``: what an engine must provide.

Three pieces, so that an engine running servers elsewhere (Ray actors, other processes)
replaces only what it must:

`PServer`
    One parameter server: holds its blocks and runs its optimize blocks. ``apply`` takes
    gradient blocks from one trainer; ``get`` returns parameter blocks. In sync mode the
    server waits for every trainer's gradients of a step, averages them, updates once, and
    ``get`` (given the trainer's id) waits for that update.

`Communicator`
    What the ``send`` / ``send_barrier`` / ``recv`` / ``fetch_barrier`` kernels of a trainer
    program call (it sits in the trainer's scope as ``@COMMUNICATOR@``).
    `PServerCommunicator` (in `local.py`) implements it over any `PServer` objects, so an
    engine whose servers live elsewhere only needs `PServer` proxies.

`Engine`
    ``launch(plan, **options)`` starts everything and returns a `DistributedProgram`.

A `Trainer` is the engine's handle on one trainer: it runs a method of its compiled trainer
program and reads and writes that program's persistable vars.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import Future
from typing import Any, Mapping, Optional, Sequence

import numpy as np


class StepAborted(RuntimeError):
    """A server gave up on a step because another trainer failed during it."""


class PServer(ABC):
    """One parameter server. Values cross this interface as NumPy arrays."""

    endpoint: str

    @abstractmethod
    def apply(self, grad_blocks: Mapping[str, np.ndarray], trainer_id: int) -> None:
        """Gradient blocks from trainer ``trainer_id``, named as the plan's trainer programs
        send them. Sync mode: held until every trainer's blocks of the step are in, then
        averaged and applied; async mode: applied at once."""

    @abstractmethod
    def get(self, param_blocks: Sequence[str], trainer_id: Optional[int] = None
            ) -> list[np.ndarray]:
        """Copies of the named vars. With a ``trainer_id`` in sync mode, first waits until
        the update of the step that trainer last sent to has been applied."""

    def abort(self, error: BaseException) -> None:
        """Wake everything waiting on this server with `StepAborted`; until `reset`,
        ``apply`` and waiting ``get`` calls fail too."""

    def reset(self) -> None:
        """Forget the gradients of an unfinished step and clear an abort."""

    def close(self) -> None:
        """Release the server's resources."""


class Communicator(ABC):
    """The trainer side of RPC, as the dist op kernels see it."""

    @abstractmethod
    def send(self, trainer_id: int, names: Sequence[str], arrays: Sequence[Any],
             epmap: Sequence[str], sync: bool) -> None:
        """Send ``arrays[i]`` to server ``epmap[i]`` under ``names[i]``. In sync mode it may
        hold them until `send_barrier`."""

    @abstractmethod
    def send_barrier(self, trainer_id: int, endpoints: Sequence[str]) -> None:
        """This trainer has sent all of its gradients for the step to these servers."""

    @abstractmethod
    def recv(self, trainer_id: int, names: Sequence[str], epmap: Sequence[str]) -> list[Any]:
        """The value of ``names[i]`` on server ``epmap[i]``, as arrays of the trainer's
        device."""

    @abstractmethod
    def fetch_barrier(self, trainer_id: int, endpoints: Sequence[str]) -> None:
        """This trainer has fetched the step's parameters from these servers."""


class Trainer(ABC):
    """An engine's handle on one trainer (its compiled trainer program)."""

    trainer_id: int

    @abstractmethod
    def call(self, method: str, args: Sequence[Any]) -> "Future[Any]":
        """Run ``method`` with its data-var values, on the trainer's own worker."""

    @abstractmethod
    def get_var(self, name: str) -> np.ndarray: ...

    @abstractmethod
    def set_vars(self, values: Mapping[str, np.ndarray]) -> None:
        """Overwrite persistable vars; only while no call is running."""

    @abstractmethod
    def close(self) -> None: ...


class Engine(ABC):
    """Starts the programs of a `TranspilePlan`."""

    name = "engine"

    @abstractmethod
    def launch(self, plan: Any, **options: Any) -> Any:
        """Start servers and trainers; return a `DistributedProgram`."""
