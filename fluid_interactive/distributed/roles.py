"""One script, every role: what ``Compile()`` does when the script runs with
``--distributed`` (or ``FLUID_DISTRIBUTED``).

=========================  ==================================================================
``TRAINING_ROLE``          ``Compile()`` returns / does
=========================  ==================================================================
unset (LOCAL)              transpiles and launches the plan in this process (``FLUID_ENGINE``
                           ``=ray``: on Ray), returning the `DistributedProgram`
``TRAINER``                joins the Ray cluster (``RAY_ADDRESS``), finds the job's servers and
                           returns a `DistributedProgram` driving trainer ``PADDLE_TRAINER_ID``
                           against them; when the script ends it tells them it finished
``PSERVER``                joins the cluster, starts this endpoint's server actor, prints
                           ``pserver <j> pid <pid>``, serves until every trainer finished,
                           then exits the script (status 0; 1 when a sync job lost a trainer)
=========================  ==================================================================

Other settings: ``FLUID_JOB`` (the Ray namespace the job's actors are named in; default
``fluid``), ``FLUID_TIMEOUT`` (seconds a step waits for a missing trainer, default 120),
``FLUID_STATE_DIR`` (where a server keeps the state it restarts from).
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..passes.transpiler import transpile
from .errors import DistributedError, ServerUnreachable
from .launch import RoleConfig, distributed_options, launch, role_from_env
from .pserver import DEFAULT_TIMEOUT, plan_digest
from .state import default_root

JOB_VAR = "FLUID_JOB"
ENGINE_VAR = "FLUID_ENGINE"
TIMEOUT_VAR = "FLUID_TIMEOUT"
STATE_VAR = "FLUID_STATE_DIR"
POLL_S = 0.5


def distribute_if_requested(compiled: Any, argv: Sequence[str] | None = None,
                            environ: Mapping[str, str] | None = None) -> Any:
    """``compiled`` itself without ``--distributed``; otherwise what the role asks for
    (see the module docstring)."""
    env = os.environ if environ is None else environ
    argv = sys.argv if argv is None else argv
    if not distributed_options(argv, env):
        return compiled  # a plain script never reads (or trips over) the role variables
    cfg = role_from_env(env, argv)
    plan = transpile(compiled, **cfg.transpile_kwargs())
    if cfg.role == "TRAINER":
        return start_trainer(plan, cfg, env)
    if cfg.role == "PSERVER":
        raise SystemExit(serve(plan, cfg, env))
    return launch(plan, env.get(ENGINE_VAR) or "local", timeout=timeout_from_env(env))


def timeout_from_env(env: Mapping[str, str]) -> float:
    raw = env.get(TIMEOUT_VAR)
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        value = -1.0
    if value <= 0:
        raise DistributedError(f"{TIMEOUT_VAR}={raw!r} is not a positive number of seconds")
    return value


def _namespace(env: Mapping[str, str]) -> str:
    return env.get(JOB_VAR) or "fluid"


# --- TRAINER ------------------------------------------------------------------------------------

def start_trainer(plan: Any, cfg: RoleConfig, env: Mapping[str, str]) -> Any:
    """The `DistributedProgram` of trainer ``cfg.trainer_id`` in this process."""
    from .local import LocalTrainer
    from .program import DistributedProgram
    from .ray_cluster import connect
    from .ray_engine import RESTART_TIMEOUT, RayPServer

    tid, timeout, namespace = cfg.trainer_id, timeout_from_env(env), _namespace(env)
    who = f"trainer {tid}"
    connect(None, namespace, env)
    pservers = {}
    for j, ep in enumerate(plan.endpoints):
        ps = RayPServer.lookup(ep, j, namespace, timeout=timeout, who=who, wait=timeout)
        if ps.digest() != plan_digest(plan, ep):
            raise DistributedError(
                f"{who}: {ps.role} runs a different program than this trainer; start every "
                f"role from the same script with the same --distributed options")
        pservers[ep] = ps
    seed = plan.seed
    trainer = LocalTrainer(plan, tid, pservers, seed=None if seed is None else seed + tid,
                           device=plan.device or "cpu", timeout=timeout, inline=True)
    if tid and seed is not None:
        # Trainer 0's initial values of what the servers do not hold (as the engines do).
        from ..runtime.live.compiled import CompiledProgram
        reference = CompiledProgram(plan.trainer_program(0), seed=seed, device="cpu")
        state = {n: reference.get_var(n) for n in trainer.tensor_state()}
        trainer.set_vars(state).result()
    dist = DistributedProgram(plan, [trainer], pservers, engine="ray", timeout=timeout,
                              patience=RESTART_TIMEOUT)
    _finish_at_exit(dist, pservers.values(), tid)
    return dist


def _finish_at_exit(dist: Any, pservers: Any, tid: int) -> None:
    """When the script ends, tell the servers this trainer is done (with the error that
    ended it, if one did)."""
    import atexit
    failure: list[str] = []
    previous = sys.excepthook

    def hook(kind, value, tb):
        failure.append(f"{kind.__name__}: {value}")
        previous(kind, value, tb)

    def at_exit():
        if failure:
            for ps in pservers:
                try:
                    ps.finish(tid, failure[0])
                except Exception:   # the servers may be gone already
                    pass
        dist.close()

    sys.excepthook = hook
    atexit.register(at_exit)


# --- PSERVER ------------------------------------------------------------------------------------

def _endpoint(plan: Any, cfg: RoleConfig) -> str:
    if cfg.current_endpoint:
        if cfg.current_endpoint not in plan.endpoints:
            raise DistributedError(f"PADDLE_CURRENT_ENDPOINT={cfg.current_endpoint} is not "
                                   f"one of the plan's servers: {', '.join(plan.endpoints)}")
        return cfg.current_endpoint
    index = cfg.pserver_id if cfg.pserver_id is not None else 0
    if cfg.pserver_id is None and len(plan.endpoints) > 1:
        raise DistributedError(f"TRAINING_ROLE=PSERVER: say which of the "
                               f"{len(plan.endpoints)} servers this is, with "
                               f"PADDLE_CURRENT_ENDPOINT or PADDLE_PSERVER_ID")
    if not 0 <= index < len(plan.endpoints):
        raise DistributedError(f"PADDLE_PSERVER_ID={index} is out of range: the plan has "
                               f"{len(plan.endpoints)} server(s)")
    return plan.endpoints[index]


def serve(plan: Any, cfg: RoleConfig, env: Mapping[str, str]) -> int:
    """Start this endpoint's server actor and supervise it until the job is over; returns
    the process's exit status."""
    from .ray_cluster import connect
    from .ray_engine import shut_down_actor, start_pserver

    ep, timeout, namespace = _endpoint(plan, cfg), timeout_from_env(env), _namespace(env)
    j = plan.endpoints.index(ep)
    ray = connect(None, namespace, env)
    state_root = env.get(STATE_VAR) or os.path.join(default_root(), f"fluid-state-{namespace}")
    ps = start_pserver(plan, ep, namespace=namespace, seed=plan.seed, timeout=timeout,
                       state_dir=state_root, who=f"pserver {j}")
    print(f"pserver {j} pid {ps.pid()} endpoint {ep}", flush=True)
    try:
        status, message = supervise(ps, plan.trainers, plan.sync, timeout,
                                    say=lambda m: print(f"pserver {j}: {m}", flush=True))
    except ServerUnreachable as e:
        status, message = 1, str(e)
    print(f"pserver {j}: {message}", flush=True)
    shut_down_actor(ps.handle, remove_state=status == 0)
    ray.shutdown()
    return status


def supervise(ps: Any, trainers: int, sync: bool, timeout: float,
              say: Callable[[str], None] = print) -> tuple[int, str]:
    """Poll a server until every trainer finished or is lost. A sync job that lost a
    trainer (a step timed out waiting for it) ends with status 1, naming it; an async job
    carries on without it."""
    finished: dict[int, str | None] = {}
    lost: dict[int, str] = {}
    pid = None
    while True:
        st = ps.status()
        if pid is not None and st["pid"] != pid:
            say(f"restarted (pid {st['pid']}) from its saved state at step {st['step']}")
        pid = st["pid"]
        finished.update(st["finished"])
        if sync:
            for t, why in st["missing"].items():
                if t not in finished:
                    lost.setdefault(t, why)
        if not sync:
            others_done = all(t in finished for t in range(trainers)
                              if st["idle_s"].get(t, 0.0) <= timeout)
            for t in range(trainers):
                if t not in finished and st["idle_s"].get(t, 0.0) > timeout and others_done:
                    lost.setdefault(t, f"trainer {t} sent nothing for "
                                       f"{st['idle_s'][t]:.0f}s and never finished")
        if len(set(finished) | set(lost)) >= trainers:
            break
        time.sleep(POLL_S)
    failures = [f"trainer {t} failed: {e}" for t, e in sorted(finished.items()) if e]
    if lost:
        words = "; ".join(f"trainer {t} is missing ({why})" for t, why in sorted(lost.items()))
        if sync:
            return 1, f"stopping: {words}"
        return 0, (f"every other trainer finished; {words}; the job went on without it "
                   f"(async mode)")
    if failures:
        return 1, "stopping: " + "; ".join(failures)
    return 0, f"every trainer finished (step {st['step']}, {st['updates']} block updates)"
