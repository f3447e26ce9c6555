"""`Engine`: what starts the programs of a plan (`launch.launch` picks one).

An engine is an object with two methods, `Engine.start_pserver` and `Engine.start_trainer`;
`Engine.launch` (written once, here) starts every server, then every trainer from trainer
0's initial values, and returns the `DistributedProgram` over them; when anything fails,
what started is closed again. An engine object starts one job at a time (its options are
its constructor's arguments).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..passes.transpiler import TranspilePlan
from .interface import PServer, Trainer
from .program import DistributedProgram, release
from .server_spec import DEFAULT_TIMEOUT, check_timeout


@dataclass(frozen=True)
class Job:
    """One launch of a plan: the settings every engine reads."""
    plan: TranspilePlan
    seed: int | None       # the servers' initialisers; trainer k draws from seed + k
    timeout: float         # how long a sync step waits for a missing trainer

    def trainer_seed(self, trainer_id: int) -> int | None:
        """Each trainer draws its own random numbers (dropout and the like)."""
        return None if self.seed is None else self.seed + trainer_id


class Engine(ABC):
    """Starts the servers and trainers of a `TranspilePlan` (see the module docstring)."""

    name = "engine"
    #: Extra seconds a caller may wait beyond the step timeout (a server restarting).
    patience = 0.0

    def launch(self, plan: TranspilePlan, *, seed: int | None = None,
               timeout: float = DEFAULT_TIMEOUT) -> DistributedProgram:
        """Start ``plan``: ``seed`` (default: the compiled program's) seeds the servers'
        initialisers; ``timeout``: how long a sync step waits for a missing trainer (it
        bounds every call)."""
        job = Job(plan, plan.seed if seed is None else seed, check_timeout(timeout))
        closers = self.begin(job)
        pservers: dict[str, PServer] = {}
        trainers: list[Trainer] = []
        try:
            for ep in plan.endpoints:
                pservers[ep] = self.start_pserver(job, ep)
            for k in range(plan.trainers):
                trainers.append(self.start_trainer(job, k, pservers))
            state = trainers[0].tensor_state()
            for t in trainers[1:]:
                t.set_vars(state).result(timeout=job.timeout)
            return DistributedProgram(plan, trainers, pservers, engine=self.name,
                                      timeout=job.timeout, closers=closers,
                                      patience=self.patience, seed=job.seed)
        except BaseException:
            release(trainers, pservers, closers)
            raise

    def begin(self, job: Job) -> list[Callable[[], None]]:
        """Set-up before the first server starts; returns what to call when the job ends
        (default: nothing to set up)."""
        return []

    @abstractmethod
    def start_pserver(self, job: Job, endpoint: str) -> PServer:
        """Start the server of ``endpoint``, its state initialised from ``job.seed``."""

    @abstractmethod
    def start_trainer(self, job: Job, trainer_id: int, pservers: Mapping[str, PServer]
                      ) -> Trainer:
        """Start trainer ``trainer_id`` against ``pservers`` (endpoint -> server)."""
