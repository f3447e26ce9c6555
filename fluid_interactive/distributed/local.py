"""The in-process engine: parameter servers are `ParameterServer` objects, trainers run on
threads.

Each `LocalTrainer` runs its calls in order on its own worker thread, so in sync mode every
trainer can wait in its exchange for the others. The same class runs the one trainer of a
``TRAINING_ROLE=TRAINER`` process (``inline=True``: on the caller's thread), against
parameter servers elsewhere.
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from ..backend import get_device
from ..passes.transpiler import TranspilePlan
from .engine import Engine, Job
from .interface import CallResult, PServer, Trainer
from .pserver import ParameterServer
from .server_spec import DEFAULT_TIMEOUT, pserver_spec
from .trainer import TrainerRuntime


class LocalTrainer(Trainer):
    """A trainer runtime and the thread its calls run on."""

    def __init__(self, plan: TranspilePlan, trainer_id: int, pservers: Mapping[str, PServer], *,
                 seed: int | None, device: str, timeout: float = DEFAULT_TIMEOUT,
                 inline: bool = False):
        self.trainer_id = trainer_id
        self.runtime = TrainerRuntime(plan, trainer_id, pservers, seed=seed, device=device,
                                      timeout=timeout)
        self.comm = self.runtime.comm
        self._thread: threading.Thread | None = None
        self._jobs: queue.SimpleQueue[tuple[Future, Callable[[], Any]] | None] = \
            queue.SimpleQueue()
        self._closed = False
        if not inline:
            self._thread = threading.Thread(target=self._work, daemon=True,
                                            name=f"fluid-trainer-{trainer_id}")
            self._thread.start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            future, fn = job
            _run_into(future, fn)

    def _submit(self, fn: Callable[[], Any]) -> Future:
        if self._closed:
            raise RuntimeError(f"trainer {self.trainer_id} is closed")
        future: Future = Future()
        if self._thread is None:
            _run_into(future, fn)
        else:
            self._jobs.put((future, fn))
        return future

    def call(self, method: str, args: Sequence[Any], step: int | None
             ) -> Future[CallResult]:
        return self._submit(lambda: self.runtime.call(method, args, step))

    def get_var(self, name: str) -> np.ndarray:
        return self.runtime.get_var(name)

    def set_vars(self, values: Mapping[str, np.ndarray]) -> Future[None]:
        return self._submit(lambda: self.runtime.set_vars(values))

    def tensor_state(self) -> dict[str, np.ndarray]:
        return self.runtime.tensor_state()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._thread is not None and self._thread.is_alive():
            self._jobs.put(None)
            if threading.current_thread() is not self._thread:
                # A trainer stuck in a stalled step is left to finish on its own (the
                # thread is a daemon); its exchange fails once the servers are closed.
                self._thread.join(timeout=5)
        self.runtime.close()

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread


def _run_into(future: Future, fn: Callable[[], Any]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(fn())
    except BaseException as e:  # handed to the caller through the future
        future.set_exception(e)


class LocalEngine(Engine):
    """Everything in this process: servers as objects, one thread per trainer.
    ``device``: where the servers and trainers compute (default: the plan's, else the
    current device)."""

    name = "local"

    def __init__(self, device: str | None = None):
        self.device = device

    def _device(self, job: Job) -> str:
        return self.device or job.plan.device or get_device()

    def start_pserver(self, job: Job, endpoint: str) -> PServer:
        return ParameterServer(pserver_spec(job.plan, endpoint), seed=job.seed,
                               device=self._device(job), timeout=job.timeout)

    def start_trainer(self, job: Job, trainer_id: int, pservers: Mapping[str, PServer]
                      ) -> Trainer:
        return LocalTrainer(job.plan, trainer_id, pservers, seed=job.trainer_seed(trainer_id),
                            device=self._device(job), timeout=job.timeout)
