"""`Launcher`: ``fluid run main.py --distributed ... --trainers N --pservers M``, one job on
this machine.

It starts a private Ray cluster (127.0.0.1 only, its own temporary directory, free ports,
a bounded object store, token authentication with a fresh token; or joins ``RAY_ADDRESS``),
one PSERVER process per server, whose servers are Ray actors, and one TRAINER process per
trainer, each running the script. It prints each role's PID as it starts (``pserver 0 pid
1234`` is the server actor's process, the one that holds the state), every role's output
prefixed with its name, progress, and how each process ended.

Before anything starts, the script runs once to check the split (``FLUID_PLAN_CHECK``:
``Compile()`` transpiles and ends the script): a ``main=`` naming no method, or a method
without an optimizer, is one message and exit status 2 within seconds, not a job that
fails after Ray has started.

Nothing waits for ever and nothing is left behind:

* a role that dies is reported at once, with how it ended and its last words; in sync mode
  the job stops then (it cannot go on without the role) instead of waiting out the
  servers' timeout;
* once every server has exited, a trainer still running gets a short grace, then is
  stopped and named; servers that outlive the trainers by more than the job's timeout are
  stopped too;
* SIGINT and SIGTERM stop the job cleanly (exit status 130, 143); whichever way it ends,
  the launcher stops every process it started, by PID, and removes its state folder and
  the cluster's temporary directory; a watchdog process does the same if the launcher is
  killed with SIGKILL;
* the exit status is the worst trainer's (a role killed by signal N counts as 128 + N).

Ray's own log lines in a role's output are left out and counted (`ray_noise`).
"""
from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .ray_cluster import RayHead, stop_pids
from .ray_noise import is_ray_log
from .roles import CHECK_VAR, PLAN_OK, PLAN_REFUSED, timeout_from_env
from .settings import distributed_options
from .state import default_root
from .stopping import Stopped, describe_exit, exit_status, stop_on_signals
from .watchdog import Watchdog, psutil_or_none

PSERVER_READY = re.compile(r"^pserver (\d+) pid (\d+)")
PROGRESS_EVERY_S = 10.0
FIRST_PORT = 6174
#: Seconds a trainer may run on after every server has exited.
ORPHAN_GRACE_S = 10.0
#: Seconds to wait for a stopped role's process to be reaped before reporting how it ended.
REAP_S = 5.0
#: Memory a role needs: its process holds ~120 MB resident, a server's actor process
#: ~120 MB more (measured, docs/distributed.md "fluid run"). A machine is refused a job
#: it cannot hold.
ROLE_BYTES = 256 << 20
#: 12 roles (8 trainers x 4 servers) train correctly on 2 CPUs; 102 failed after 6 minutes.
ROLES_PER_CPU = 8
MAX_ROLES_VAR = "FLUID_MAX_ROLES"


def role_limit(env: Mapping[str, str]) -> tuple[int, str]:
    """How many role processes this machine can start, and why: ``ROLES_PER_CPU`` per
    CPU and ``ROLE_BYTES`` of available memory each (``FLUID_MAX_ROLES`` overrides)."""
    if env.get(MAX_ROLES_VAR, "").isdigit():
        return int(env[MAX_ROLES_VAR]), f"{MAX_ROLES_VAR}={env[MAX_ROLES_VAR]}"
    cpus = os.cpu_count() or 1
    limit, why = ROLES_PER_CPU * cpus, f"{ROLES_PER_CPU} per CPU on {cpus} CPU(s)"
    psutil = psutil_or_none()
    if psutil is not None:
        free = int(psutil.virtual_memory().available)
        if free // ROLE_BYTES < limit:
            limit = max(1, free // ROLE_BYTES)
            why = (f"{free >> 20} MiB of memory available, {ROLE_BYTES >> 20} MiB per "
                   f"role")
    return limit, why + f"; {MAX_ROLES_VAR}=N overrides"


@dataclass
class _Role:
    """One role process and what the launcher knows of it."""
    name: str
    proc: subprocess.Popen
    started: float = field(default_factory=time.monotonic)
    last_words: collections.deque = field(default_factory=lambda: collections.deque(maxlen=3))
    reported: bool = False
    relay: threading.Thread | None = None      # prints its output
    ray_lines: int = 0                         # Ray's own log lines left out of it

    @property
    def trainer(self) -> bool:
        return self.name.startswith("trainer")

    def ended(self) -> int | None:
        return self.proc.poll()

    def how(self) -> str:
        code = self.proc.returncode
        words = " | ".join(w for w in self.last_words if w.strip())
        said = f"; its last words: {words}" if words and code else ""
        ray = (f" ({self.ray_lines} line{'s' if self.ray_lines > 1 else ''} of Ray's own "
               f"logging left out)" if self.ray_lines else "")
        return (f"{describe_exit(code)} after {time.monotonic() - self.started:.1f}s"
                f"{ray}{said}")


class Launcher:
    """One job on this machine (see the module docstring)."""

    def __init__(self, script: str, args: Sequence[str], *, trainers: int, pservers: int):
        self.script, self.args = script, list(args)
        self.trainers, self.pservers = trainers, pservers
        self.job = f"fluid-{uuid.uuid4().hex[:12]}"
        self._print_lock = threading.Lock()
        self._roles: list[_Role] = []
        self._sync = True

    def say(self, line: str) -> None:
        with self._print_lock:
            print(line, flush=True)

    # --- the job ------------------------------------------------------------------------------

    def run(self) -> int:
        """Run the job; its exit status."""
        options = distributed_options(self.args, os.environ)
        self._sync = options.get("mode", "sync") == "sync"
        timeout = timeout_from_env(os.environ)
        refused = self.check_split(timeout)
        if refused:
            print(f"fluid run: {refused}", file=sys.stderr, flush=True)
            return 2
        watchdog = Watchdog()
        head: RayHead | None = None
        state_dir = tempfile.mkdtemp(prefix=f"fluid-state-{self.job}-", dir=default_root())
        watchdog.guard_dir(state_dir)
        self.say(f"fluid run: job {self.job}, servers' state in {state_dir}")
        with stop_on_signals():
            try:
                env = dict(os.environ, PYTHONUNBUFFERED="1")
                head = self._cluster(env, watchdog)
                self._start_roles(env, state_dir, watchdog)
                return self._wait(timeout)
            except Stopped as e:
                self.say(f"fluid run: {e}; stopping every process of the job")
                return e.status
            finally:
                self._stop_all()
                self._report_exits()
                if head is not None:
                    head.stop()
                shutil.rmtree(state_dir, ignore_errors=True)
                watchdog.dismiss()

    def role_env(self, env: Mapping[str, str], state_dir: str) -> dict[str, str]:
        """What every role's environment adds to ``env``: the job, its size, the servers'
        endpoints and where they keep their state."""
        endpoints = [f"127.0.0.1:{FIRST_PORT + j}" for j in range(self.pservers)]
        return dict(env, FLUID_JOB=self.job, PADDLE_TRAINERS_NUM=str(self.trainers),
                    PADDLE_PSERVERS_IP_PORT_LIST=",".join(endpoints),
                    FLUID_STATE_DIR=state_dir)

    def check_split(self, timeout: float) -> str | None:
        """Run the script once to check that its program splits as asked; None when it
        does, else why not."""
        env = self.role_env(os.environ, tempfile.gettempdir())
        env.pop("TRAINING_ROLE", None)
        env.pop("PADDLE_TRAINING_ROLE", None)
        env[CHECK_VAR] = "1"
        try:
            done = subprocess.run([sys.executable, self.script, *self.args], env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return (f"checking the split, {self.script} did not reach Compile() within "
                    f"{timeout:.0f}s (FLUID_TIMEOUT)")
        said = done.stderr.strip().splitlines()
        if done.returncode == PLAN_REFUSED and said:
            return f"the program cannot be split: {said[-1]}"
        if done.returncode != 0:
            return (f"checking the split, {self.script} {describe_exit(done.returncode)}"
                    + (f": {said[-1]}" if said else ""))
        if PLAN_OK not in done.stdout:
            return (f"{self.script} ended without compiling a fluid.Program: a job needs "
                    f"the script to call Compile()")
        return None

    def _cluster(self, env: dict[str, str], watchdog: Watchdog) -> RayHead | None:
        """A private cluster (its settings added to ``env``), or None to join
        ``RAY_ADDRESS``."""
        if env.get("RAY_ADDRESS"):
            self.say(f"ray: joining {env['RAY_ADDRESS']}")
            return None
        started = time.monotonic()
        head = RayHead(temp_root=None, name=self.job, watchdog=watchdog)
        try:
            head.start(progress=self.say)
        except BaseException:
            head.stop()
            raise
        env.update(head.env())
        self.say(f"ray: private cluster at {head.address} (pid {head.pid}, {head.temp_dir}) "
                 f"started in {time.monotonic() - started:.1f}s")
        return head

    def _start_roles(self, env: dict[str, str], state_dir: str, watchdog: Watchdog) -> None:
        env.update(self.role_env(env, state_dir))
        endpoints = env["PADDLE_PSERVERS_IP_PORT_LIST"].split(",")
        for j, ep in enumerate(endpoints):
            self._spawn(f"pserver {j}", [sys.executable, "-m", "fluid_interactive.distributed",
                                         "run", self.script, *self.args],
                        dict(env, TRAINING_ROLE="PSERVER", PADDLE_CURRENT_ENDPOINT=ep), watchdog)
        for i in range(self.trainers):
            role = self._spawn(f"trainer {i}", [sys.executable, self.script, *self.args],
                               dict(env, TRAINING_ROLE="TRAINER", PADDLE_TRAINER_ID=str(i)),
                               watchdog)
            self.say(f"trainer {i} pid {role.proc.pid}")

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str], watchdog: Watchdog
               ) -> _Role:
        # A session of its own: the launcher alone decides when a role stops (a terminal's
        # Ctrl-C reaches the launcher, which stops the roles), and the watchdog finds
        # everything the role started.
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, bufsize=1,
                                start_new_session=True)
        watchdog.guard_session(proc.pid)
        role = _Role(name, proc)
        self._roles.append(role)
        role.relay = threading.Thread(target=self._relay, args=(role,), daemon=True)
        role.relay.start()
        return role

    def _relay(self, role: _Role) -> None:
        assert role.proc.stdout is not None
        for line in role.proc.stdout:
            line = line.rstrip("\n")
            if is_ray_log(line):
                role.ray_lines += 1
                continue
            role.last_words.append(line)
            m = PSERVER_READY.match(line) if not role.trainer else None
            if m:
                self.say(f"pserver {m.group(1)} pid {m.group(2)}")
            self.say(f"[{role.name}] {line}")

    # --- waiting ------------------------------------------------------------------------------

    def _wait(self, timeout: float) -> int:
        """Follow the roles until the trainers are done (see the module docstring); the
        job's exit status."""
        trainers = [r for r in self._roles if r.trainer]
        servers = [r for r in self._roles if not r.trainer]
        started = last_progress = time.monotonic()
        servers_gone_at: float | None = None
        stopped_some = False
        cause: _Role | None = None
        while any(r.ended() is None for r in trainers):
            self._report_exits()
            cause = self._fatal_end(trainers, servers)
            if cause is not None:
                break
            if servers_gone_at is None and all(r.ended() is not None for r in servers):
                servers_gone_at = time.monotonic()
            if servers_gone_at is not None and \
                    time.monotonic() - servers_gone_at > ORPHAN_GRACE_S:
                stopped_some = self._stop_orphans(trainers)
                break
            if time.monotonic() - last_progress >= PROGRESS_EVERY_S:
                last_progress = time.monotonic()
                running = [r.name for r in self._roles if r.ended() is None]
                self.say(f"progress: {last_progress - started:.0f}s, running: "
                         f"{', '.join(running)}")
            time.sleep(0.1)
        self._report_exits()
        stopped_some = self._await_servers(servers, timeout) or stopped_some
        if cause is not None:
            return exit_status(cause.proc.returncode)
        return self._status(trainers, servers, stopped_some)

    def _report_exits(self) -> None:
        """Say how each role that ended since the last look ended (after its last lines)."""
        for r in self._roles:
            if r.ended() is not None and not r.reported:
                r.reported = True
                if r.relay is not None:
                    r.relay.join(timeout=1)
                self.say(f"{r.name} {r.how()}")

    def _fatal_end(self, trainers: list[_Role], servers: list[_Role]) -> _Role | None:
        """The role that ended in a way the job cannot survive (a server that failed, or in
        sync mode a trainer that failed), if one did; then says so and stops the others."""
        running = [r for r in self._roles if r.ended() is None]
        for r in servers + trainers:
            code = r.ended()
            if code is None or code == 0 or (r.trainer and not self._sync):
                continue
            what = "a sync job cannot go on without it" if r.trainer else \
                "the trainers cannot go on without it"
            self.say(f"fluid run: {r.name} {describe_exit(code)}: {what}; stopping "
                     f"{', '.join(x.name for x in running)}")
            self._stop(running)
            return r
        return None

    def _stop_orphans(self, trainers: list[_Role]) -> bool:
        left = [r for r in trainers if r.ended() is None]
        for r in left:
            self.say(f"fluid run: {r.name} is still running {ORPHAN_GRACE_S:g}s after every "
                     f"server exited (hung outside a step?); stopping it")
        stop_pids([r.proc.pid for r in left])
        return bool(left)

    def _await_servers(self, servers: list[_Role], timeout: float) -> bool:
        """Servers exit once they know every trainer's fate; at most ``timeout`` plus a
        grace after the trainers."""
        deadline = time.monotonic() + timeout + 30
        while any(r.ended() is None for r in servers) and time.monotonic() < deadline:
            time.sleep(0.1)
        late = [r for r in servers if r.ended() is None]
        for r in late:
            self.say(f"fluid run: {r.name} did not exit within {timeout + 30:g}s after the "
                     f"trainers; stopping it")
        stop_pids([r.proc.pid for r in late])
        self._report_exits()
        return bool(late)

    def _status(self, trainers: list[_Role], servers: list[_Role], stopped_some: bool
                ) -> int:
        """The worst trainer's status, else the worst server's, else 1 when the launcher
        had to stop a role."""
        for group in (trainers, servers):
            worst = next((exit_status(r.proc.returncode) for r in group
                          if r.proc.returncode != 0), 0)
            if worst:
                return worst
        return 1 if stopped_some else 0

    def _stop(self, roles: list[_Role]) -> None:
        """Stop the trainers first (a trainer stopped in a step still tells the servers),
        then the servers."""
        stop_pids([r.proc.pid for r in roles if r.trainer])
        stop_pids([r.proc.pid for r in roles if not r.trainer])

    def _stop_all(self) -> None:
        self._stop(self._roles)
        for r in self._roles:
            # a role killed a moment ago may not be reaped yet: wait for it (briefly), so
            # that its end is reported rather than skipped as still running
            try:
                r.proc.wait(timeout=REAP_S)
            except subprocess.TimeoutExpired:
                pass
            if r.relay is not None:
                r.relay.join(timeout=5)
