"""A process that cleans up after another one, however that one ends.

A private Ray cluster and the role processes of ``fluid run`` are processes of their own:
when the process that started them is killed with SIGKILL, nothing in it runs, and they
would run on (a Ray cluster holds ~600 MB) with their folders left in /tmp and /dev/shm.
`Watchdog` starts a small process (``python -m fluid_interactive.distributed.watchdog``)
that the owner tells, line by line on a pipe, what to clean up: sessions (every process
in one, which is how a Ray head and everything it starts are found), single processes and
folders. When the owner ends its work it says ``dismiss`` and the watchdog exits doing
nothing; when the pipe closes without that (the owner died), or the owner's PID is gone,
the watchdog stops every process it was told about (SIGTERM, then SIGKILL after a grace)
and removes the folders.

The watchdog runs this file as a script in isolated mode (``python -I``), not as a module
of the package, so it starts in a fraction of a second and holds little memory; so this
module imports nothing from the package, and also keeps the process-stopping functions
(`alive`, `stop_pids`) that the rest of the package uses.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

#: Seconds between SIGTERM and SIGKILL when the watchdog stops what it guards.
GRACE = 3.0
_POLL_S = 1.0


class Watchdog:
    """The owner's side: start the watchdog process, tell it what to clean up."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = subprocess.Popen(
            [sys.executable, "-I", os.path.abspath(__file__), str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, text=True)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _tell(self, **message: Any) -> None:
        if self._proc is None or self._proc.stdin is None:
            return
        try:
            self._proc.stdin.write(json.dumps(message) + "\n")
            self._proc.stdin.flush()
        except OSError:   # the watchdog is gone; nothing else can clean up
            pass

    def guard_session(self, sid: int) -> None:
        """Every process of session ``sid`` (a process started with
        ``start_new_session=True`` and all it starts)."""
        self._tell(session=sid)

    def guard_process(self, pid: int) -> None:
        self._tell(process=pid, started=_start_time(pid))

    def guard_dir(self, path: str) -> None:
        self._tell(dir=os.path.abspath(path))

    def dismiss(self) -> None:
        """The owner cleaned up itself: the watchdog exits doing nothing."""
        if self._proc is None:
            return
        self._tell(dismiss=True)
        proc, self._proc = self._proc, None
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()


def psutil_or_none() -> Any:
    """``psutil`` (the ``distributed`` extra installs it), or None."""
    try:
        import psutil
    except ImportError:
        return None
    return psutil


def _start_time(pid: int) -> float | None:
    psutil = psutil_or_none()
    try:
        return float(psutil.Process(pid).create_time()) if psutil is not None else None
    except Exception:
        return None


def alive(pids: Iterable[int]) -> list[int]:
    """The processes among ``pids`` still running (zombies count as gone)."""
    psutil = psutil_or_none()
    out = []
    for pid in pids:
        if psutil is not None:
            try:
                p = psutil.Process(pid)
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(pid)
            except psutil.Error:
                pass
        else:
            try:
                os.kill(pid, 0)
                out.append(pid)
            except OSError:
                pass
    return out


def _signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def _await_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    left = alive(pids)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = alive(left)
    return left


def stop_pids(pids: Iterable[int], grace: float = GRACE) -> list[int]:
    """SIGTERM each process, wait up to ``grace`` seconds, SIGKILL what is left. Returns
    the PIDs that needed SIGKILL."""
    targets = [p for p in set(pids) if p != os.getpid()]
    _signal_all(alive(targets), signal.SIGTERM)
    left = _await_gone(targets, grace)
    _signal_all(left, signal.SIGKILL)
    _await_gone(left, grace)
    return left


@dataclass
class _Guarded:
    sessions: set[int] = field(default_factory=set)
    processes: dict[int, float | None] = field(default_factory=dict)
    dirs: list[str] = field(default_factory=list)
    dismissed: bool = False

    def read(self, line: str) -> None:
        message = json.loads(line)
        if "session" in message:
            self.sessions.add(int(message["session"]))
        if "process" in message:
            self.processes[int(message["process"])] = message.get("started")
        if "dir" in message:
            self.dirs.append(str(message["dir"]))
        if message.get("dismiss"):
            self.dismissed = True

    def pids(self) -> list[int]:
        """The processes guarded now: members of the sessions, the processes (if they are
        still the ones named: same start time), and their descendants."""
        psutil = psutil_or_none()
        if psutil is None:
            return [p for p in self.processes if os.path.exists(f"/proc/{p}")]
        me, found = os.getpid(), set()
        for p in psutil.process_iter(["create_time"]):
            try:
                if p.pid == me:
                    continue
                started = self.processes.get(p.pid, -1.0)
                if os.getsid(p.pid) in self.sessions or (
                        p.pid in self.processes and
                        (started is None or abs(started - p.info["create_time"]) < 0.01)):
                    found.add(p.pid)
                    found.update(c.pid for c in p.children(recursive=True))
            except (psutil.Error, OSError):
                pass
        found.discard(me)
        return sorted(found)

    def clean(self) -> None:
        stop_pids(self.pids(), GRACE)
        for path in self.dirs:
            shutil.rmtree(path, ignore_errors=True)


def _watch(owner: int) -> int:
    """Read the owner's messages until it dismisses the watchdog or is gone; clean up in the
    second case."""
    guarded = _Guarded()
    buffer = ""
    while not guarded.dismissed:
        ready, _, _ = select.select([sys.stdin], [], [], _POLL_S)
        if ready:
            chunk = os.read(sys.stdin.fileno(), 65536).decode()
            if not chunk:
                break                              # the pipe closed: the owner is gone
            buffer += chunk
            *lines, buffer = buffer.split("\n")
            for line in lines:
                if line.strip():
                    guarded.read(line)
        elif os.getppid() != owner:
            break                                  # re-parented: the owner is gone
    if not guarded.dismissed:
        time.sleep(0.2)   # let an owner that is exiting normally finish its own clean-up
        guarded.clean()
    return 0


def main(argv: list[str]) -> int:
    # A terminal's Ctrl-C or hang-up is meant for the owner, which then cleans up itself.
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    return _watch(int(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
