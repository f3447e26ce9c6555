"""The in-process engine: parameter servers are objects, trainers are threads.

`LocalPServer` runs its startup program once (the same initialisers, seed and random
streams as a single process) and then its optimize blocks with the ordinary `BlockRunner`.
`LocalTrainer` compiles its trainer program into a `CompiledProgram` with its own scope and
runs calls on its own worker thread, so that in sync mode every trainer can wait in ``recv``
for the others. `PServerCommunicator` is the communicator the trainers' RPC kernels call.
"""
from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from ..backend import array_module_for, get_device, to_device, to_host
from ..ops.dist import COMM_VAR
from ..runtime.compiled import CompiledProgram
from ..runtime.runner import BlockRunner
from .interface import Communicator, Engine, PServer, StepAborted, Trainer
from .program import DistributedProgram

DEFAULT_TIMEOUT = 120.0


def _host_copy(a: Any) -> np.ndarray:
    return np.array(to_host(a), copy=True)


class LocalPServer(PServer):
    """A parameter server in this process."""

    def __init__(self, plan: Any, endpoint: str, *, seed: Optional[int] = None,
                 device: str = "cpu", timeout: float = DEFAULT_TIMEOUT):
        self.endpoint = endpoint
        self.info = plan.pserver_info(endpoint)
        self.trainers = plan.trainers
        self.sync = plan.sync
        self.timeout = timeout
        self._xp = array_module_for(device)
        startup = CompiledProgram(plan.startup_program(endpoint), seed=seed, device=device)
        self._values: dict[str, Any] = {}
        for n in startup.var_names():
            try:
                self._values[n] = to_device(startup.get_var(n), self._xp)
            except KeyError:   # computed each step by a schedule block, not initialised
                pass
        self.program = plan.pserver_program(endpoint)
        self._runners = {b.idx: BlockRunner(self.program, b, self._xp, seed)
                         for b in self.program.blocks[1:]}
        self._feeds = {f: b for b in self.info.optimize_blocks for f in b.feeds}
        self._cond = threading.Condition()
        self._pending: dict[int, dict[str, np.ndarray]] = {}
        self._joined = [0] * self.trainers     # steps each trainer has sent to (sync)
        self._done = 0                         # steps applied (sync)
        self._error: Optional[BaseException] = None
        self._closed = False
        self.updates = 0                       # optimize-block runs, for tests and summaries

    # --- the PServer interface ---------------------------------------------------------------

    def apply(self, grad_blocks: Mapping[str, np.ndarray], trainer_id: int) -> None:
        with self._cond:
            self._check_usable()
            if not self.sync:
                self._run(dict(grad_blocks))
                return
            if trainer_id in self._pending:
                raise RuntimeError(f"pserver {self.endpoint}: trainer {trainer_id} sent a "
                                   f"second step before the first was applied")
            self._pending[trainer_id] = dict(grad_blocks)
            self._joined[trainer_id] += 1
            if len(self._pending) < self.trainers:
                return
            arrived: dict[str, np.ndarray] = {}
            for t in sorted(self._pending):
                arrived.update(self._pending[t])
            self._pending.clear()
            try:
                self._run(arrived)
            except BaseException as e:
                self._error = e
                self._cond.notify_all()
                raise
            self._done += 1
            self._cond.notify_all()

    def get(self, param_blocks: Sequence[str], trainer_id: Optional[int] = None
            ) -> list[np.ndarray]:
        with self._cond:
            if self.sync and trainer_id is not None:
                deadline = time.monotonic() + self.timeout
                while self._done < self._joined[trainer_id]:
                    self._check_usable()
                    left = deadline - time.monotonic()
                    if left <= 0:
                        missing = [t for t in range(self.trainers) if t not in self._pending]
                        raise TimeoutError(
                            f"pserver {self.endpoint}: trainer {trainer_id} waited "
                            f"{self.timeout:g}s for the step's update; trainer(s) "
                            f"{', '.join(map(str, missing))} never sent their gradients")
                    self._cond.wait(left)
            self._check_usable()
            missing = [n for n in param_blocks if n not in self._values]
            if missing:
                raise KeyError(f"pserver {self.endpoint} holds no {', '.join(missing)}; it "
                               f"holds: {', '.join(self._values)}")
            return [_host_copy(self._values[n]) for n in param_blocks]

    def abort(self, error: BaseException) -> None:
        with self._cond:
            if self._error is None:
                self._error = StepAborted(f"pserver {self.endpoint}: step abandoned because "
                                          f"{type(error).__name__}: {error}")
            self._cond.notify_all()

    def reset(self) -> None:
        with self._cond:
            self._pending.clear()
            self._error = None
            self._joined = [self._done] * self.trainers

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # --- inside -------------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._closed:
            raise RuntimeError(f"pserver {self.endpoint} is closed")
        if self._error is not None:
            if isinstance(self._error, StepAborted):
                raise StepAborted(str(self._error))
            raise StepAborted(f"pserver {self.endpoint}: the step's update failed: "
                              f"{type(self._error).__name__}: {self._error}")

    def _run(self, arrived: dict[str, np.ndarray]) -> None:
        unknown = [n for n in arrived if n not in self._feeds]
        if unknown:
            raise KeyError(f"pserver {self.endpoint} got gradient(s) it has no block for: "
                           f"{', '.join(unknown)}")
        blocks = [b for b in self.info.optimize_blocks if any(f in arrived for f in b.feeds)]
        for b in blocks:
            missing = [f for f in b.feeds if f not in arrived]
            if missing:
                raise RuntimeError(f"pserver {self.endpoint}: the update of {b.param_block} "
                                   f"lacks {', '.join(missing)}")
        for method in dict.fromkeys(b.method for b in blocks):
            lr = self.info.lr_blocks.get(method)
            if lr is not None:
                self._runners[lr].run(self._values, [])
        for b in blocks:
            self._runners[b.block_idx].run(
                self._values, [to_device(arrived[f], self._xp) for f in b.feeds])
            self.updates += 1


class PServerCommunicator(Communicator):
    """A trainer's communicator over `PServer` objects (local or proxies)."""

    def __init__(self, trainer_id: int, pservers: Mapping[str, PServer], xp: Any):
        self.trainer_id = trainer_id
        self._pservers = dict(pservers)
        self._xp = xp
        self._outbox: dict[str, dict[str, np.ndarray]] = {}

    def _server(self, endpoint: str) -> PServer:
        ps = self._pservers.get(endpoint)
        if ps is None:
            raise KeyError(f"no parameter server at {endpoint}; known: "
                           f"{', '.join(self._pservers)}")
        return ps

    def send(self, trainer_id, names, arrays, epmap, sync):
        by_server: dict[str, dict[str, np.ndarray]] = {}
        for name, a, ep in zip(names, arrays, epmap):
            self._server(ep)
            by_server.setdefault(ep, {})[name] = _host_copy(a)
        for ep, blocks in by_server.items():
            if sync:
                self._outbox.setdefault(ep, {}).update(blocks)
            else:
                self._server(ep).apply(blocks, trainer_id)

    def send_barrier(self, trainer_id, endpoints):
        outbox, self._outbox = self._outbox, {}
        stray = [ep for ep in outbox if ep not in endpoints]
        if stray:
            raise RuntimeError(f"trainer {trainer_id} sent to {', '.join(stray)} but its "
                               f"send_barrier does not name them")
        for ep in endpoints:
            self._server(ep).apply(outbox.get(ep, {}), trainer_id)

    def recv(self, trainer_id, names, epmap):
        wanted: dict[str, list[int]] = {}
        for i, ep in enumerate(epmap):
            wanted.setdefault(ep, []).append(i)
        out: list[Any] = [None] * len(names)
        for ep, idx in wanted.items():
            values = self._server(ep).get([names[i] for i in idx], trainer_id)
            for i, v in zip(idx, values):
                out[i] = to_device(v, self._xp)
        return out

    def fetch_barrier(self, trainer_id, endpoints):
        # Nothing to do in-process: a server applies step k+1 only after every trainer sent
        # it, which each does only after fetching step k, so no fetch can see a later step.
        self._outbox.clear()

    def __repr__(self) -> str:
        return f"<communicator of trainer {self.trainer_id}: {', '.join(self._pservers)}>"


class LocalTrainer(Trainer):
    """A compiled trainer program and the thread its calls run on."""

    def __init__(self, plan: Any, trainer_id: int, pservers: Mapping[str, PServer], *,
                 seed: Optional[int], device: str):
        self.trainer_id = trainer_id
        self.program = plan.trainer_program(trainer_id)
        self.compiled = CompiledProgram(self.program, seed=seed, device=device)
        self.comm = PServerCommunicator(trainer_id, pservers, array_module_for(device))
        # The communicator is an object, not an array: set_var would refuse it.
        self.compiled.scope.set({COMM_VAR: self.comm})
        self._jobs: "queue.SimpleQueue[Optional[tuple[Future, Callable[[], Any]]]]" = \
            queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name=f"fluid-trainer-{trainer_id}",
                                        daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            future, fn = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as e:  # handed to the caller through the future
                future.set_exception(e)

    def call(self, method: str, args: Sequence[Any]) -> "Future[Any]":
        if not self._thread.is_alive():
            raise RuntimeError(f"trainer {self.trainer_id} is closed")
        future: Future = Future()
        fn = self.compiled.methods[method]
        self._jobs.put((future, lambda: fn(*args)))
        return future

    def get_var(self, name: str) -> np.ndarray:
        return self.compiled.get_var(name)

    def set_vars(self, values: Mapping[str, np.ndarray]) -> None:
        for name, value in values.items():
            self.compiled.set_var(name, value)

    def tensor_state(self) -> dict[str, np.ndarray]:
        """Every initialised persistable array (not readers or the communicator)."""
        out = {}
        for name in self.compiled.var_names():
            var = self.program.global_block().vars[name]
            if var.kind == "tensor":
                try:
                    out[name] = self.compiled.get_var(name)
                except KeyError:
                    pass
        return out

    def close(self) -> None:
        if self._thread.is_alive():
            self._jobs.put(None)
            if threading.current_thread() is not self._thread:
                self._thread.join()

    @property
    def thread(self) -> threading.Thread:
        return self._thread


class LocalEngine(Engine):
    """Everything in this process: servers as objects, one thread per trainer."""

    name = "local"

    def launch(self, plan: Any, *, seed: Optional[int] = None, device: Optional[str] = None,
               timeout: float = DEFAULT_TIMEOUT) -> DistributedProgram:
        """``seed`` (default: the compiled program's) seeds the servers' initialisers;
        ``timeout``: how long a trainer waits for the others in a sync step."""
        seed = plan.seed if seed is None else seed
        device = device or plan.device or get_device()
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds; got {timeout!r}")
        pservers: dict[str, LocalPServer] = {}
        trainers: list[LocalTrainer] = []
        try:
            for ep in plan.endpoints:
                pservers[ep] = LocalPServer(plan, ep, seed=seed, device=device,
                                            timeout=timeout)
            for k in range(plan.trainers):
                # Trainer k draws its own random numbers (dropout, ...); all start from the
                # values of trainer 0 and then of the servers.
                trainers.append(LocalTrainer(plan, k, pservers, device=device,
                                             seed=None if seed is None else seed + k))
            state = trainers[0].tensor_state()
            for t in trainers[1:]:
                t.set_vars(state)
            return DistributedProgram(plan, trainers, pservers, engine=self.name)
        except BaseException:
            for t in trainers:
                t.close()
            for ps in pservers.values():
                ps.close()
            raise
