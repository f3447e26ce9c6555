"""One script, every role: what ``Compile()`` does when the script runs with
``--distributed`` (or ``FLUID_DISTRIBUTED``).

=========================  ==================================================================
``TRAINING_ROLE``          ``Compile()`` returns / does
=========================  ==================================================================
unset (LOCAL)              transpiles and launches the plan in this process (``FLUID_ENGINE``
                           ``=ray``: on Ray), returning the `DistributedProgram`
``TRAINER``                joins the Ray cluster (``RAY_ADDRESS``), finds the job's servers,
                           connects to each (a server refuses a trainer whose plan differs,
                           naming what differs) and returns a `DistributedProgram` driving
                           trainer ``PADDLE_TRAINER_ID`` against them; when the script ends
                           it tells them it finished
``PSERVER``                joins the cluster, starts this endpoint's server actor, prints
                           ``pserver <j> pid <pid>``, serves until every trainer finished or
                           is lost (`supervise`), removes its state, then exits the script
                           (status 0; 1 when the job lost a trainer; 128 + N on signal N)
=========================  ==================================================================

Other settings: ``FLUID_JOB`` (the Ray namespace the job's actors are named in; default
``fluid``), ``FLUID_TIMEOUT`` (seconds a step waits for a missing trainer, default 120; it
bounds every wait: joining the cluster, finding the servers, a server waiting for trainers
that never connect), ``FLUID_STATE_DIR`` (where a server keeps the state it restarts from).

A malformed ``--distributed`` on the command line is a usage error: one line on stderr and
exit status 2, as command-line tools do.
"""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from ..errors import FluidError, OpArgumentError
from ..ir.records import ProgramDesc
from ..passes.transpiler import TranspilePlan, transpile
from .errors import DistributedError
from .interface import PServer
from .program import DistributedProgram
from .server_spec import DEFAULT_TIMEOUT
from .settings import DISTRIBUTED_VAR, RoleConfig, parse_distributed_arg, role_from_env
from .state import default_root
from .stopping import Stopped, stop_on_signals

JOB_VAR = "FLUID_JOB"
ENGINE_VAR = "FLUID_ENGINE"
TIMEOUT_VAR = "FLUID_TIMEOUT"
STATE_VAR = "FLUID_STATE_DIR"
#: Set by `fluid run` for a first run of the script that only checks the split, before
#: anything starts: ``Compile()`` transpiles, says whether it could, and ends the script.
CHECK_VAR = "FLUID_PLAN_CHECK"
#: What that run prints when the program splits.
PLAN_OK = "fluid: the program splits as asked"
#: Its exit status when the program cannot be split (the reason on stderr).
PLAN_REFUSED = 3


@dataclass(frozen=True)
class ToSplit:
    """A traced program not compiled in this process, with the seed and device it would
    compile with: what a role transpiles. (Compiling it would initialise every parameter
    here, tables kept on the servers included, which may not fit one process.)"""
    program: ProgramDesc
    seed: int | None
    device: str | None


def distribution_requested(argv: Sequence[str] | None = None,
                           environ: Mapping[str, str] | None = None) -> bool:
    """Whether this script runs with ``--distributed`` (or ``FLUID_DISTRIBUTED``)."""
    return _requested(sys.argv if argv is None else argv,
                      os.environ if environ is None else environ)


def distribute_if_requested(compiled: Any, argv: Sequence[str] | None = None,
                            environ: Mapping[str, str] | None = None) -> Any:
    """``compiled`` itself without ``--distributed``; otherwise what the role asks for
    (see the module docstring)."""
    env = os.environ if environ is None else environ
    argv = sys.argv if argv is None else argv
    if not _requested(argv, env):
        return compiled  # a plain script never reads (or trips over) the role variables
    cfg = role_from_env(env, argv)
    if env.get(CHECK_VAR):
        _check_split(compiled, cfg)
    plan = transpile(compiled, **cfg.transpile_kwargs())
    if cfg.role == "TRAINER":
        return start_trainer(plan, cfg, env)
    if cfg.role == "PSERVER":
        status = serve(plan, cfg, env)
        # The job's end is decided and the state removed: a stop asked for while Ray
        # shuts down (the launcher stopping the roles) would only hide this status.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SystemExit(status)
    from .launch import launch
    return launch(plan, env.get(ENGINE_VAR) or "local", timeout=timeout_from_env(env))


def _check_split(compiled: Any, cfg: RoleConfig) -> None:
    """Transpile as the roles will, say whether it worked, and end the script."""
    try:
        transpile(compiled, **cfg.transpile_kwargs())
    except FluidError as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
        raise SystemExit(PLAN_REFUSED) from None
    print(PLAN_OK, flush=True)
    raise SystemExit(0)


def _requested(argv: Sequence[str], env: Mapping[str, str]) -> bool:
    """Whether a split was asked for; a malformed ``--distributed`` on the command line
    ends the process as a usage error (one line, status 2)."""
    try:
        if parse_distributed_arg(argv):
            return True
    except OpArgumentError as e:
        program = os.path.basename(argv[0]) if argv else "fluid"
        print(f"{program}: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    return bool(env.get(DISTRIBUTED_VAR))


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

def start_trainer(plan: TranspilePlan, cfg: RoleConfig, env: Mapping[str, str]
                  ) -> DistributedProgram:
    """The `DistributedProgram` of trainer ``cfg.trainer_id`` in this process; joining the
    cluster and finding the servers take at most the job's timeout each."""
    from .liveness import hold_token
    from .local import LocalTrainer
    from .ray_cluster import connect
    from .ray_engine import RESTART_TIMEOUT, join_servers
    from .ray_noise import quiet_unread_results

    tid, timeout, namespace = cfg.trainer_id, timeout_from_env(env), _namespace(env)
    connect(None, namespace, env, timeout=timeout)
    quiet_unread_results()
    hold_token(tid, namespace)      # the servers tell a dead trainer from a slow one by it
    failure: list[str] = []
    _stop_with_exit_status(failure)
    pservers = join_servers(plan, tid, namespace, timeout=timeout, wait=timeout)
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
    _finish_at_exit(dist, list(pservers.values()), tid, failure)
    return dist


def _stop_with_exit_status(failure: list[str]) -> None:
    """SIGTERM ends a trainer like SystemExit (status 143, the servers told why) instead of
    Ray's handler, which prints a C++ stack trace."""
    def handler(signum: int, frame: FrameType | None) -> None:
        failure.append(f"stopped by {signal.Signals(signum).name}")
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def _finish_at_exit(dist: DistributedProgram, pservers: Iterable[PServer], tid: int,
                    failure: list[str]) -> None:
    """When the script ends, tell the servers this trainer is done (with the error that
    ended it, if one did)."""
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

def _endpoint(plan: TranspilePlan, cfg: RoleConfig) -> str:
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


class _StateFolder:
    """Where this server keeps its state: ``FLUID_STATE_DIR``, else a folder of the job
    under /dev/shm that this process makes and removes again (when it is empty: the
    job's other servers on this machine may still use it)."""

    def __init__(self, env: Mapping[str, str], namespace: str, endpoint: str):
        from .ray_engine import server_dir_name
        given = env.get(STATE_VAR)
        self.root = given or os.path.join(default_root(), f"fluid-state-{namespace}")
        self.made = not given
        self.server = os.path.join(self.root, server_dir_name(endpoint))

    def remove(self) -> None:
        shutil.rmtree(self.server, ignore_errors=True)
        if self.made:
            try:
                os.rmdir(self.root)
            except OSError:   # not empty: another server of the job still runs
                pass


def serve(plan: TranspilePlan, cfg: RoleConfig, env: Mapping[str, str]) -> int:
    """Start this endpoint's server actor and supervise it until the job is over; returns
    the process's exit status. SIGINT and SIGTERM stop it cleanly (`stopping`); its state
    is removed however it ends."""
    ep, timeout, namespace = _endpoint(plan, cfg), timeout_from_env(env), _namespace(env)
    j = plan.endpoints.index(ep)

    def say(message: str) -> None:
        print(f"pserver {j}: {message}", flush=True)

    folder = _StateFolder(env, namespace, ep)
    with stop_on_signals():
        try:
            return _serve(plan, ep, timeout, namespace, folder, env, say)
        except Stopped as e:
            say(f"{e}; its state is removed")
            return e.status
        except DistributedError as e:
            say(str(e))
            return 1
        finally:
            folder.remove()


def _serve(plan: TranspilePlan, ep: str, timeout: float, namespace: str,
           folder: _StateFolder, env: Mapping[str, str], say: Callable[[str], None]
           ) -> int:
    from .liveness import TrainerWatch
    from .ray_cluster import connect
    from .ray_engine import start_pserver
    from .ray_noise import quiet_unread_results
    from .ray_proxy import shut_down_actor
    from .supervise import supervise

    j = plan.endpoints.index(ep)
    ray = connect(None, namespace, env, timeout=timeout)
    quiet_unread_results()
    ps = None
    try:
        ps = start_pserver(plan, ep, namespace=namespace, seed=plan.seed, timeout=timeout,
                           state_dir=folder.root, who=f"pserver {j}")
        print(f"pserver {j} pid {ps.pid()} endpoint {ep}", flush=True)
        status, message = supervise(ps, plan.trainers, plan.sync, timeout, say=say,
                                    watch=TrainerWatch(plan.trainers))
        say(message)
        return status
    finally:
        if ps is not None:
            shut_down_actor(ps.handle, remove_state=True)
        ray.shutdown()
