"""The Ray engine: parameter servers as named, restartable Ray actors; trainers as Ray
actors (``launch(plan, engine='ray')``) or as their own processes (``TRAINING_ROLE=TRAINER``,
see `roles`).

A server actor wraps the same `ParameterServer` the in-process engine uses, in a threaded
actor (trainers wait inside it for each other). It is named ``pserver:<endpoint>`` in the
job's namespace, so any process of the job finds it; it is pinned to the machine it was
created on and keeps its state in a directory there (`state.StateDir`), so when its process
dies Ray restarts it and it carries on from its last prepared step. Trainers retry an
exchange that met a restarting server, and exchanges are idempotent, so the run ends with
the parameters an uninterrupted run would have.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from ..errors import FluidError
from .errors import DistributedError, DistributedTimeout, ServerUnreachable
from .interface import CallResult, Engine, Pending, PServer, Trainer
from .program import DistributedProgram, start_job
from .pserver import DEFAULT_TIMEOUT, ParameterServer, PServerSpec, check_timeout, pserver_spec
from .ray_cluster import RayHead, connect, import_ray, prepare_env
from .state import default_root
from .trainer import TrainerRuntime

#: How long a caller keeps retrying a server that is restarting.
RESTART_TIMEOUT = 60.0
#: How often a server may restart.
MAX_RESTARTS = 8
NAMESPACE = "fluid"


def actor_name(endpoint: str) -> str:
    return f"pserver:{endpoint}"


# --- the actors (plain classes; wrapped by ray.remote when used) ---------------------------------

class PServerActor:
    """A `ParameterServer` in a Ray actor."""

    def __init__(self, spec: PServerSpec, seed: int | None, timeout: float,
                 state_dir: str | None):
        self.server = ParameterServer(spec, seed=seed, device="cpu", timeout=timeout,
                                      state_dir=state_dir)

    def exchange(self, trainer_id: int, step: int, committed: int | None,
                 blocks: Mapping[str, Any], names: Sequence[str]) -> list[Any]:
        return self.server.exchange(trainer_id, step, committed, blocks, names)

    def commit(self, step: int) -> None:
        self.server.commit(step)

    def abort(self, step: int, reason: str) -> None:
        self.server.abort(step, reason)

    def get(self, names: Sequence[str]) -> list[np.ndarray]:
        return self.server.get(names)

    def set_values(self, values: Mapping[str, Any]) -> None:
        self.server.set_values(values)

    def finish(self, trainer_id: int, error: str | None = None) -> None:
        self.server.finish(trainer_id, error)

    def status(self) -> dict[str, Any]:
        return self.server.status()

    def digest(self) -> str:
        return self.server.spec.digest

    def pid(self) -> int:
        return os.getpid()

    def shut_down(self, remove_state: bool) -> None:
        self.server.close()
        if remove_state:
            self.server.remove_state()


class TrainerActor:
    """A `TrainerRuntime` in a Ray actor, talking to the server actors by name."""

    def __init__(self, plan: Any, trainer_id: int, namespace: str, seed: int | None,
                 timeout: float, restart_timeout: float):
        pservers = {ep: RayPServer.lookup(ep, plan.endpoints.index(ep), namespace,
                                          timeout=timeout, restart_timeout=restart_timeout,
                                          who=f"trainer {trainer_id}")
                    for ep in plan.endpoints}
        self.runtime = TrainerRuntime(plan, trainer_id, pservers, seed=seed, device="cpu",
                                      timeout=timeout)

    def call(self, method: str, args: Sequence[Any], step: int | None) -> CallResult:
        return self.runtime.call(method, args, step)

    def get_var(self, name: str) -> np.ndarray:
        return self.runtime.get_var(name)

    def set_vars(self, values: Mapping[str, np.ndarray]) -> None:
        self.runtime.set_vars(values)

    def tensor_state(self) -> dict[str, np.ndarray]:
        return self.runtime.tensor_state()

    def pid(self) -> int:
        return os.getpid()


# --- proxies ----------------------------------------------------------------------------------

class _RayPending(Pending):
    def __init__(self, proxy: RayPServer, submit: Callable[[], Any], what: str):
        self._proxy, self._submit, self._what = proxy, submit, what
        self._ref = submit()

    def result(self, timeout: float | None = None) -> Any:
        return self._proxy._wait(self._ref, self._submit, self._what, timeout)

    def failed(self) -> bool:
        return False


class RayPServer(PServer):
    """A `PServer` proxy for a server actor. Calls that meet a restarting actor are sent
    again until ``restart_timeout``; every wait is bounded."""

    def __init__(self, handle: Any, endpoint: str, index: int, *, timeout: float,
                 restart_timeout: float = RESTART_TIMEOUT, who: str = "driver",
                 owned: bool = False, namespace: str = NAMESPACE):
        self.handle = handle
        self.endpoint = endpoint
        self.index = index
        self.timeout = timeout
        self.restart_timeout = restart_timeout
        self.who = who
        self.owned = owned
        self.namespace = namespace

    @property
    def role(self) -> str:
        return f"pserver {self.index} ({self.endpoint})"

    @classmethod
    def lookup(cls, endpoint: str, index: int, namespace: str, *, timeout: float,
               restart_timeout: float = RESTART_TIMEOUT, who: str = "driver",
               wait: float = 0.0) -> RayPServer:
        """The proxy of the server actor for ``endpoint``, waiting up to ``wait`` seconds for
        it to be registered."""
        ray = import_ray()
        deadline = time.monotonic() + wait
        while True:
            try:
                handle = ray.get_actor(actor_name(endpoint), namespace=namespace)
                return cls(handle, endpoint, index, timeout=timeout,
                           restart_timeout=restart_timeout, who=who, namespace=namespace)
            except ValueError:
                if time.monotonic() >= deadline:
                    raise ServerUnreachable(
                        f"{who}: no parameter server {index} ({endpoint}) in the Ray "
                        f"namespace {namespace!r} after {wait:g}s; start it with "
                        f"TRAINING_ROLE=PSERVER (same script, same --distributed) or check "
                        f"RAY_ADDRESS and FLUID_JOB") from None
                time.sleep(0.2)

    def _call(self, method: str, *args: Any, timeout: float | None = None,
              what: str = "") -> Any:
        submit = lambda: getattr(self.handle, method).remote(*args)  # noqa: E731
        return self._wait(submit(), submit, what or method, timeout)

    def _wait(self, ref: Any, submit: Callable[[], Any], what: str,
              timeout: float | None) -> Any:
        ray = import_ray()
        timeout = self.timeout if timeout is None else timeout
        restart_deadline = None
        while True:
            try:
                return ray.get(ref, timeout=timeout)
            except ray.exceptions.RayTaskError as e:
                cause = e.cause
                if isinstance(cause, (FluidError, KeyError, ValueError, RuntimeError)):
                    raise cause from None
                raise
            except ray.exceptions.GetTimeoutError:
                raise DistributedTimeout(f"{self.who}: no answer from {self.role} within "
                                         f"{timeout:g}s while waiting for {what}") from None
            except ray.exceptions.RayActorError as e:
                now = time.monotonic()
                if restart_deadline is None:
                    restart_deadline = now + self.restart_timeout
                late = now >= restart_deadline
                if late or self._gone_for_good():
                    # Say what happened: a server gone for good is reported at once, and
                    # nothing waited for it.
                    how = (f"waited {self.restart_timeout:g}s for it to restart" if late
                           else "it is gone and Ray will not restart it")
                    raise ServerUnreachable(
                        f"{self.who}: {self.role} is unreachable ({how}) while waiting for "
                        f"{what}: {type(e).__name__}: {str(e).strip().splitlines()[0]}"
                    ) from None
                time.sleep(0.2)
                ref = submit()

    def _gone_for_good(self) -> bool:
        """A dead actor that Ray will not restart is no longer registered by name."""
        ray = import_ray()
        try:
            ray.get_actor(actor_name(self.endpoint), namespace=self.namespace)
            return False
        except ValueError:
            return True
        except Exception:  # cannot tell: keep trying until the deadline
            return False

    # --- the PServer interface --------------------------------------------------------------

    def submit_exchange(self, trainer_id: int, step: int, committed: int | None,
                        blocks: Mapping[str, Any], names: Sequence[str]) -> Pending:
        handle = self.handle
        return _RayPending(
            self, lambda: handle.exchange.remote(trainer_id, step, committed, blocks, names),
            f"step {step} (trainer {trainer_id})")

    def exchange(self, trainer_id: int, step: int, committed: int | None,
                 blocks: Mapping[str, Any], names: Sequence[str]) -> list[Any]:
        return self.submit_exchange(trainer_id, step, committed, blocks, names).result()

    def commit(self, step: int) -> None:
        self._call("commit", step, what=f"the commit of step {step}")

    def abort(self, step: int, reason: str) -> None:
        self._call("abort", step, reason, what=f"the abort of step {step}")

    def get(self, names: Sequence[str]) -> list[np.ndarray]:
        return self._call("get", list(names), what="parameter values")

    def set_values(self, values: Mapping[str, Any]) -> None:
        self._call("set_values", dict(values), what="new values")

    def finish(self, trainer_id: int, error: str | None = None) -> None:
        self._call("finish", trainer_id, error, what=f"the end of trainer {trainer_id}")

    def status(self) -> dict[str, Any]:
        return self._call("status", what="its status")

    def digest(self) -> str:
        return self._call("digest", what="its program's digest")

    def pid(self) -> int:
        return self._call("pid", what="its process id")

    def close(self) -> None:
        if self.owned:
            shut_down_actor(self.handle, remove_state=True)


def shut_down_actor(handle: Any, remove_state: bool, wait: float = 10.0) -> None:
    """Let the actor remove its state, then end it."""
    ray = import_ray()
    try:
        ray.get(handle.shut_down.remote(remove_state), timeout=wait)
    except Exception:   # dead already, or stuck: it is killed below either way
        pass
    try:
        ray.kill(handle, no_restart=True)
    except Exception:
        pass


class RayTrainer(Trainer):
    """A proxy for a trainer actor. Its calls run in order (the actor runs one at a time)."""

    def __init__(self, handle: Any, trainer_id: int, timeout: float):
        self.handle = handle
        self.trainer_id = trainer_id
        self.timeout = timeout

    def call(self, method: str, args: Sequence[Any], step: int | None
             ) -> Future[CallResult]:
        return self.handle.call.remote(method, list(args), step).future()

    def _get(self, ref: Any, what: str) -> Any:
        ray = import_ray()
        try:
            return ray.get(ref, timeout=self.timeout)
        except ray.exceptions.GetTimeoutError:
            raise DistributedTimeout(f"driver: trainer {self.trainer_id} did not answer "
                                     f"within {self.timeout:g}s ({what})") from None
        except ray.exceptions.RayTaskError as e:
            raise e.cause from None

    def get_var(self, name: str) -> np.ndarray:
        return self._get(self.handle.get_var.remote(name), f"reading {name}")

    def set_vars(self, values: Mapping[str, np.ndarray]) -> Future[None]:
        return self.handle.set_vars.remote(dict(values)).future()

    def tensor_state(self) -> dict[str, np.ndarray]:
        return self._get(self.handle.tensor_state.remote(), "reading its state")

    def pid(self) -> int:
        return self._get(self.handle.pid.remote(), "its process id")

    def close(self) -> None:
        ray = import_ray()
        try:
            ray.kill(self.handle, no_restart=True)
        except Exception:
            pass


# --- creating server actors (shared by the engine and the PSERVER role) ------------------------

def remote_class(cls: type, **options: Any) -> Any:
    ray = import_ray()
    return ray.remote(**options)(cls)


def start_pserver(plan: Any, endpoint: str, *, namespace: str, seed: int | None,
                  timeout: float, state_dir: str, restarts: int = MAX_RESTARTS,
                  restart_timeout: float = RESTART_TIMEOUT, who: str = "driver"
                  ) -> RayPServer:
    """Create the named server actor for ``endpoint`` on this machine and wait until it
    has initialised its state."""
    ray = import_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    spec = pserver_spec(plan, endpoint)
    here = ray.get_runtime_context().get_node_id()
    cls = remote_class(PServerActor, num_cpus=0, max_concurrency=max(16, 2 * plan.trainers + 8),
                       max_restarts=restarts, max_task_retries=0)
    handle = cls.options(
        name=actor_name(endpoint), namespace=namespace,
        scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
    ).remote(spec, seed, timeout, os.path.join(state_dir, _safe(endpoint)))
    proxy = RayPServer(handle, endpoint, spec.index, timeout=timeout,
                       restart_timeout=restart_timeout, who=who, owned=True,
                       namespace=namespace)
    proxy.pid()   # waits for __init__ (its startup program) to finish
    return proxy


def _safe(endpoint: str) -> str:
    return "pserver-" + "".join(c if c.isalnum() else "_" for c in endpoint)


# --- the engine ---------------------------------------------------------------------------------

_PRIVATE_HEAD: list[RayHead] = []


def ensure_connected(address: str | None, namespace: str) -> Any:
    """``ray`` connected to ``address``, ``RAY_ADDRESS``, or a private local cluster that
    this process starts once (and stops at exit or with `shutdown`)."""
    ray_imported = "ray" in sys.modules
    if ray_imported and import_ray().is_initialized():
        return import_ray()
    if address or os.environ.get("RAY_ADDRESS"):
        return connect(address, namespace)
    prepare_env(local=True)
    if ray_imported and os.environ.get("RAY_AUTH_MODE") != "token":
        raise DistributedError(
            "ray was imported before RAY_AUTH_MODE=token was set, so this process cannot "
            "join the private cluster the Ray engine would start; set RAY_AUTH_MODE=token "
            "before importing ray, or join a running cluster with RAY_ADDRESS")
    head = RayHead(token=os.environ.get("RAY_AUTH_TOKEN")).start()
    _PRIVATE_HEAD.append(head)
    import atexit
    atexit.register(shutdown)
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = head.token
    return connect(head.address, namespace)


def shutdown() -> None:
    """Disconnect from Ray, and stop the private cluster this process started (if any)."""
    if "ray" in sys.modules:
        ray = import_ray()
        if ray.is_initialized():
            ray.shutdown()
    while _PRIVATE_HEAD:
        _PRIVATE_HEAD.pop().stop()


class RayEngine(Engine):
    """Servers and trainers as Ray actors; the same `DistributedProgram` as the in-process
    engine, and the same results in sync mode."""

    name = "ray"

    def launch(self, plan: Any, *, seed: int | None = None,
               timeout: float = DEFAULT_TIMEOUT, address: str | None = None,
               namespace: str | None = None, state_dir: str | None = None,
               restarts: int = MAX_RESTARTS, restart_timeout: float = RESTART_TIMEOUT
               ) -> DistributedProgram:
        """``address``: a cluster to join (default ``RAY_ADDRESS``, else a private local
        cluster started once per process); ``namespace``: Ray namespace of the job's
        actors (default: a fresh one); ``state_dir``: where servers keep the state they
        restart from (default: a temporary directory, removed by ``close()``);
        ``restarts``: how often a server may restart; ``restart_timeout``: how long
        callers wait for it."""
        timeout = check_timeout(timeout)
        seed = plan.seed if seed is None else seed
        namespace = namespace or f"fluid-{uuid.uuid4().hex[:12]}"
        ensure_connected(address, namespace)
        own_state = state_dir is None
        state_dir = state_dir or tempfile.mkdtemp(prefix="fluid-pservers-", dir=default_root())
        closers = [(lambda: _remove_dir(state_dir))] if own_state else []

        def start_trainer(k: int, seed_k: int | None, servers: Any) -> RayTrainer:
            handle = trainer_actor.options(namespace=namespace).remote(
                plan, k, namespace, seed_k, timeout, restart_timeout)
            return RayTrainer(handle, k, timeout + restart_timeout)

        try:
            trainer_actor = remote_class(TrainerActor, num_cpus=0, max_concurrency=1,
                                         max_restarts=0)
            return start_job(
                plan, lambda ep: start_pserver(plan, ep, namespace=namespace, seed=seed,
                                               timeout=timeout, state_dir=state_dir,
                                               restarts=restarts,
                                               restart_timeout=restart_timeout),
                start_trainer, seed, lambda servers, trainers: DistributedProgram(
                    plan, trainers, servers, engine=self.name, timeout=timeout,
                    closers=closers, patience=restart_timeout), timeout)
        except BaseException:
            for close in closers:
                close()
            raise


def _remove_dir(path: str) -> None:
    import shutil
    shutil.rmtree(path, ignore_errors=True)


__all__ = ["RayEngine", "RayPServer", "RayTrainer", "PServerActor", "TrainerActor",
           "start_pserver", "ensure_connected", "shutdown", "actor_name", "DistributedError"]
