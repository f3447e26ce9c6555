"""``fluid run``: run a script in a role, or launch a whole job on this machine.

    fluid run main.py --distributed main=train_step
        runs main.py in this process (as ``python main.py`` would), in the role that
        ``TRAINING_ROLE`` names: this is how a parameter server is started.

    fluid run main.py --distributed main=train_step --trainers 2 --pservers 2
        starts a private Ray cluster (127.0.0.1 only, its own temporary directory, a bounded
        object store, token authentication; or joins ``RAY_ADDRESS``), one PSERVER process
        per server, whose servers are Ray actors, and one TRAINER process per trainer, each
        running main.py. Prints each role's PID as it starts (``pserver 0 pid 1234`` is the
        server actor's process), the roles' output and progress, stops every process it
        started by PID, and exits with the trainers' status.

``--trainers`` and ``--pservers`` may stand anywhere after ``run``; everything else goes to
the script.
"""
from __future__ import annotations

import os
import re
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence

from .launch import distributed_options
from .ray_cluster import RayHead, stop_pids
from .roles import timeout_from_env
from .state import default_root

USAGE = ("usage: fluid run SCRIPT [ARGS...] [--trainers N --pservers M]\n"
         "  see docs/distributed.md")
PSERVER_READY = re.compile(r"^pserver (\d+) pid (\d+)")
PROGRESS_EVERY_S = 10.0
FIRST_PORT = 6174


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "run" or len(args) < 2:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        counts, rest = _launcher_options(args[1:])
    except ValueError as e:
        print(f"fluid run: {e}\n{USAGE}", file=sys.stderr)
        return 2
    if not rest:
        print(USAGE, file=sys.stderr)
        return 2
    script, script_args = rest[0], rest[1:]
    if counts:
        return Launcher(script, script_args, **counts).run()
    return run_script(script, script_args)


def _launcher_options(args: list[str]) -> tuple[dict[str, int], list[str]]:
    counts: dict[str, int] = {}
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        key, value = None, None
        for name in ("trainers", "pservers"):
            if a == f"--{name}":
                if i + 1 >= len(args):
                    raise ValueError(f"--{name} needs a number")
                key, value, i = name, args[i + 1], i + 2
            elif a.startswith(f"--{name}="):
                key, value, i = name, a.split("=", 1)[1], i + 1
        if key is None:
            rest.append(a)
            i += 1
            continue
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"--{key} must be a positive integer; got {value!r}")
        counts[key] = int(value)
    if counts and len(counts) != 2:
        raise ValueError("--trainers and --pservers go together")
    return counts, rest


def run_script(script: str, args: Sequence[str]) -> int:
    """Run ``script`` as ``__main__`` in this process; its exit status."""
    if not os.path.isfile(script):
        print(f"fluid run: no such script: {script}", file=sys.stderr)
        return 2
    sys.argv = [script] + list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    return 0


class Launcher:
    """One job on this machine (see the module docstring)."""

    def __init__(self, script: str, args: Sequence[str], *, trainers: int, pservers: int):
        self.script, self.args = script, list(args)
        self.trainers, self.pservers = trainers, pservers
        self._print_lock = threading.Lock()
        self._procs: dict[str, subprocess.Popen] = {}
        self._threads: list[threading.Thread] = []
        self._actor_pids: dict[int, int] = {}

    def say(self, line: str) -> None:
        with self._print_lock:
            print(line, flush=True)

    def _check_args(self) -> str | None:
        options = distributed_options(self.args, os.environ)
        if not options:
            return "a job needs the script's --distributed option, e.g. --distributed " \
                   "main=train_step"
        for key, want in (("trainers", self.trainers), ("pservers", self.pservers)):
            if key in options and options[key] != want:
                return (f"--distributed says {key}={options[key]} but --{key} {want}; give "
                        f"the count once")
        return None

    def run(self) -> int:
        problem = self._check_args()
        if problem:
            print(f"fluid run: {problem}", file=sys.stderr)
            return 2
        head: RayHead | None = None
        state_dir = tempfile.mkdtemp(prefix="fluid-job-state-", dir=default_root())
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            env = dict(os.environ, PYTHONUNBUFFERED="1")
            if not env.get("RAY_ADDRESS"):
                started = time.monotonic()
                head = RayHead(temp_root=None).start()
                env.update(head.env())
                self.say(f"ray: private cluster at {head.address} (pid {head.pid}, "
                         f"{head.temp_dir}) started in {time.monotonic() - started:.1f}s")
            else:
                self.say(f"ray: joining {env['RAY_ADDRESS']}")
            endpoints = [f"127.0.0.1:{FIRST_PORT + j}" for j in range(self.pservers)]
            env.update({"FLUID_JOB": f"fluid-{uuid.uuid4().hex[:12]}",
                        "PADDLE_TRAINERS_NUM": str(self.trainers),
                        "PADDLE_PSERVERS_IP_PORT_LIST": ",".join(endpoints),
                        "FLUID_STATE_DIR": state_dir})
            return self._run_job(env, endpoints)
        except KeyboardInterrupt:
            self.say("fluid run: interrupted; stopping every process of the job")
            return 130
        finally:
            self._stop_all()
            if head is not None:
                head.stop()
            shutil.rmtree(state_dir, ignore_errors=True)
            signal.signal(signal.SIGTERM, previous)

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, bufsize=1)
        self._procs[name] = proc
        t = threading.Thread(target=self._relay, args=(name, proc), daemon=True)
        t.start()
        self._threads.append(t)
        return proc

    def _relay(self, name: str, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            line = line.rstrip("\n")
            m = PSERVER_READY.match(line) if name.startswith("pserver") else None
            if m:
                self._actor_pids[int(m.group(1))] = int(m.group(2))
                self.say(f"pserver {m.group(1)} pid {m.group(2)}")
            self.say(f"[{name}] {line}")

    def _run_job(self, env: dict[str, str], endpoints: list[str]) -> int:
        for j, ep in enumerate(endpoints):
            self._spawn(f"pserver {j}", [sys.executable, "-m", "fluid_interactive.distributed.cli",
                                         "run", self.script, *self.args],
                        dict(env, TRAINING_ROLE="PSERVER", PADDLE_CURRENT_ENDPOINT=ep))
        for i in range(self.trainers):
            proc = self._spawn(f"trainer {i}", [sys.executable, self.script, *self.args],
                               dict(env, TRAINING_ROLE="TRAINER", PADDLE_TRAINER_ID=str(i)))
            self.say(f"trainer {i} pid {proc.pid}")
        return self._wait(timeout_from_env(env))

    def _wait(self, timeout: float) -> int:
        trainers = {n: p for n, p in self._procs.items() if n.startswith("trainer")}
        servers = {n: p for n, p in self._procs.items() if n.startswith("pserver")}
        status: dict[str, int] = {}
        started = last_progress = time.monotonic()
        while len(status) < len(trainers):
            for name, proc in trainers.items():
                if name not in status and proc.poll() is not None:
                    status[name] = proc.returncode
                    self.say(f"{name} exited with status {proc.returncode} after "
                             f"{time.monotonic() - started:.1f}s")
            failed = [n for n, p in servers.items() if p.poll() not in (None, 0)]
            if failed and len(status) < len(trainers):
                self.say(f"{failed[0]} exited with status {servers[failed[0]].poll()}; "
                         f"stopping the trainers")
                stop_pids([p.pid for n, p in trainers.items() if n not in status])
                continue
            if time.monotonic() - last_progress >= PROGRESS_EVERY_S:
                last_progress = time.monotonic()
                running = [n for n in trainers if n not in status]
                self.say(f"progress: {last_progress - started:.0f}s, running: "
                         f"{', '.join(running)}")
            time.sleep(0.1)
        deadline = time.monotonic() + timeout + 30
        while any(p.poll() is None for p in servers.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        for name, proc in servers.items():
            if proc.poll() is None:
                self.say(f"{name} did not exit after the trainers finished; stopping it")
        codes = [status[n] for n in sorted(status)]
        worst = next((c for c in codes if c != 0), 0)
        if worst == 0:
            worst = next((p.poll() for p in servers.values() if p.poll() not in (None, 0)), 0)
        return worst

    def _stop_all(self) -> None:
        stop_pids([p.pid for p in self._procs.values()])
        for t in self._threads:
            t.join(timeout=5)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
