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
from .interface import CallResult, Engine, PServer, Trainer
from .program import DistributedProgram, start_job
from .pserver import DEFAULT_TIMEOUT, ParameterServer, check_timeout, pserver_spec
from .trainer import TrainerRuntime


class LocalTrainer(Trainer):
    """A trainer runtime and the thread its calls run on."""

    def __init__(self, plan: Any, trainer_id: int, pservers: Mapping[str, PServer], *,
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
    """Everything in this process: servers as objects, one thread per trainer."""

    name = "local"

    def launch(self, plan: Any, *, seed: int | None = None, device: str | None = None,
               timeout: float = DEFAULT_TIMEOUT) -> DistributedProgram:
        """``seed`` (default: the compiled program's) seeds the servers' initialisers;
        ``timeout``: how long a sync step waits for a missing trainer (and so bounds a
        call)."""
        seed = plan.seed if seed is None else seed
        device = device or plan.device or get_device()
        timeout = check_timeout(timeout)
        return start_job(
            plan, lambda ep: ParameterServer(pserver_spec(plan, ep), seed=seed, device=device,
                                             timeout=timeout),
            lambda k, seed_k, servers: LocalTrainer(plan, k, servers, seed=seed_k,
                                                    device=device, timeout=timeout),
            seed, lambda servers, trainers: DistributedProgram(
                plan, trainers, servers, engine=self.name, timeout=timeout))
