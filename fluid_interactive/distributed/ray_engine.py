"""The Ray engine: parameter servers as named, restartable Ray actors; trainers as Ray
actors (``launch(plan, engine='ray')``) or as their own processes (``TRAINING_ROLE=TRAINER``,
see `roles`).

A server actor is the `ParameterServer` the in-process engine uses, run by Ray as a threaded
actor (trainers wait inside it for each other). It is named ``pserver:<endpoint>`` in the
job's namespace, so any process of the job finds it; it is pinned to the machine it was
created on and keeps its state in a directory there (`state.StateDir`), so when its process
dies Ray restarts it and it carries on from its last prepared step. Trainers retry an
exchange that met a restarting server, and exchanges are idempotent, so the run ends with
the parameters an uninterrupted run would have. A trainer connects to each server before
its first step, and the server refuses a trainer whose plan differs (`agreement`).
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ..passes.transpiler import TranspilePlan
from .agreement import fingerprint
from .engine import Engine, Job
from .errors import DistributedError
from .interface import PServer, Trainer
from .pserver import ParameterServer
from .ray_cluster import RayHead, connect, import_ray, prepare_env
from .ray_proxy import RESTART_TIMEOUT, RayPServer, RayTrainer, actor_name
from .server_spec import DEFAULT_TIMEOUT, pserver_spec
from .state import default_root
from .trainer import TrainerRuntime

#: How often a server may restart.
MAX_RESTARTS = 8

#: Seconds a new server actor may take to start (a worker process, its imports, the startup
#: program) before it counts as lost. This is not a wait for a peer, so it is not bounded by
#: the job's step timeout, which a user may set to a few seconds: on a loaded machine Ray
#: alone takes longer than that to start a worker.
ACTOR_START_TIMEOUT = 60.0


def join_servers(plan: TranspilePlan, trainer_id: int, namespace: str, *, timeout: float,
                 restart_timeout: float = RESTART_TIMEOUT, wait: float = 0.0
                 ) -> dict[str, RayPServer]:
    """Proxies of the job's server actors for trainer ``trainer_id``: each found by name
    (waiting up to ``wait`` seconds, in all, for them to appear and answer) and told that
    this trainer joins, with its plan, which the server checks."""
    who = f"trainer {trainer_id}"
    deadline = time.monotonic() + wait
    pservers = {}
    for j, ep in enumerate(plan.endpoints):
        ps = RayPServer.lookup(ep, j, namespace, timeout=timeout, who=who,
                               restart_timeout=restart_timeout, wait=wait, deadline=deadline)
        # A server registers its name before its state is initialised: the answer may take
        # a while, up to what is left of the wait (at least the step timeout).
        ps.call("connect", trainer_id, fingerprint(plan, ep),
                timeout=max(timeout, deadline - time.monotonic()),
                what=f"its answer to {who} joining")
        pservers[ep] = ps
    return pservers


class TrainerActor(TrainerRuntime):
    """A `TrainerRuntime` in a Ray actor, talking to the server actors by name."""

    def __init__(self, plan: TranspilePlan, trainer_id: int, namespace: str,
                 seed: int | None, timeout: float, restart_timeout: float):
        pservers = join_servers(plan, trainer_id, namespace, timeout=timeout,
                                restart_timeout=restart_timeout)
        super().__init__(plan, trainer_id, pservers, seed=seed, device="cpu", timeout=timeout)

    def pid(self) -> int:
        return os.getpid()


def remote_class(cls: type, **options: Any) -> Any:
    ray = import_ray()
    return ray.remote(**options)(cls)


def start_pserver(plan: TranspilePlan, endpoint: str, *, namespace: str, seed: int | None,
                  timeout: float, state_dir: str, restarts: int = MAX_RESTARTS,
                  restart_timeout: float = RESTART_TIMEOUT, who: str = "driver"
                  ) -> RayPServer:
    """Create the named server actor for ``endpoint`` on this machine and wait until it
    has initialised its state."""
    ray = import_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    spec = pserver_spec(plan, endpoint)
    here = ray.get_runtime_context().get_node_id()
    cls = remote_class(ParameterServer, num_cpus=0,
                       max_concurrency=max(16, 2 * plan.trainers + 8),
                       max_restarts=restarts, max_task_retries=0)
    handle = cls.options(
        name=actor_name(endpoint), namespace=namespace,
        scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
    ).remote(spec, seed=seed, device="cpu", timeout=timeout,
             state_dir=os.path.join(state_dir, server_dir_name(endpoint)))
    proxy = RayPServer(handle, endpoint, spec.index, timeout=timeout,
                       restart_timeout=restart_timeout, who=who, owned=True,
                       namespace=namespace)
    # Waits for __init__ (its startup program) to finish.
    proxy.call("pid", timeout=max(timeout, ACTOR_START_TIMEOUT), what="its process id")
    return proxy


def server_dir_name(endpoint: str) -> str:
    """The folder of a server's state files (under the job's state directory)."""
    return "pserver-" + "".join(c if c.isalnum() else "_" for c in endpoint)


# --- the private cluster of a process that launches on Ray without one ---------------------------

_PRIVATE_HEAD: list[RayHead] = []


def ensure_connected(address: str | None, namespace: str, timeout: float = DEFAULT_TIMEOUT
                     ) -> Any:
    """``ray`` connected to ``address``, ``RAY_ADDRESS``, or a private local cluster that
    this process starts once (and stops at exit or with `shutdown`)."""
    ray_imported = "ray" in sys.modules
    if ray_imported and import_ray().is_initialized():
        return import_ray()
    if address or os.environ.get("RAY_ADDRESS"):
        return connect(address, namespace, timeout=timeout)
    prepare_env(local=True)
    if ray_imported and os.environ.get("RAY_AUTH_MODE") != "token":
        raise DistributedError(
            "ray was imported before RAY_AUTH_MODE=token was set, so this process cannot "
            "join the private cluster the Ray engine would start; set RAY_AUTH_MODE=token "
            "before importing ray, or join a running cluster with RAY_ADDRESS")
    head = RayHead(token=os.environ.get("RAY_AUTH_TOKEN")).start(
        progress=lambda line: print(line, file=sys.stderr, flush=True))
    _PRIVATE_HEAD.append(head)
    import atexit
    atexit.register(shutdown)
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = head.token
    return connect(head.address, namespace, timeout=timeout)


def shutdown() -> None:
    """Disconnect from Ray, and stop the private cluster this process started (if any)."""
    if "ray" in sys.modules:
        ray = import_ray()
        if ray.is_initialized():
            ray.shutdown()
    while _PRIVATE_HEAD:
        _PRIVATE_HEAD.pop().stop()


# --- the engine ----------------------------------------------------------------------------------

class RayEngine(Engine):
    """Servers and trainers as Ray actors; the same `DistributedProgram` as the in-process
    engine, and the same results in sync mode.

    ``address``: a cluster to join (default ``RAY_ADDRESS``, else a private local cluster
    started once per process); ``namespace``: Ray namespace of the job's actors (default:
    a fresh one per job); ``state_dir``: where servers keep the state they restart from
    (default: a temporary directory, removed when the job ends); ``restarts``: how often a
    server may restart; ``restart_timeout``: how long callers wait for it."""

    name = "ray"

    def __init__(self, address: str | None = None, namespace: str | None = None,
                 state_dir: str | None = None, restarts: int = MAX_RESTARTS,
                 restart_timeout: float = RESTART_TIMEOUT):
        self.address, self.namespace, self.state_dir = address, namespace, state_dir
        self.restarts, self.restart_timeout = restarts, restart_timeout
        self.patience = restart_timeout
        self._job_namespace = self._job_state_dir = ""
        self._trainer_actor: Any = None

    def begin(self, job: Job) -> list[Callable[[], None]]:
        self._job_namespace = self.namespace or f"fluid-{uuid.uuid4().hex[:12]}"
        ensure_connected(self.address, self._job_namespace, timeout=job.timeout)
        self._trainer_actor = remote_class(TrainerActor, num_cpus=0, max_concurrency=1,
                                           max_restarts=0)
        if self.state_dir is not None:
            self._job_state_dir = self.state_dir
            return []
        state_dir = tempfile.mkdtemp(prefix="fluid-pservers-", dir=default_root())
        self._job_state_dir = state_dir
        return [lambda: shutil.rmtree(state_dir, ignore_errors=True)]

    def start_pserver(self, job: Job, endpoint: str) -> PServer:
        return start_pserver(job.plan, endpoint, namespace=self._job_namespace, seed=job.seed,
                             timeout=job.timeout, state_dir=self._job_state_dir,
                             restarts=self.restarts, restart_timeout=self.restart_timeout)

    def start_trainer(self, job: Job, trainer_id: int, pservers: Mapping[str, PServer]
                      ) -> Trainer:
        handle = self._trainer_actor.options(namespace=self._job_namespace).remote(
            job.plan, trainer_id, self._job_namespace, job.trainer_seed(trainer_id),
            job.timeout, self.restart_timeout)
        return RayTrainer(handle, trainer_id, job.timeout + self.restart_timeout)


__all__ = ["RayEngine", "RayPServer", "RayTrainer", "TrainerActor", "join_servers",
           "start_pserver", "ensure_connected", "shutdown", "actor_name", "DistributedError"]
