"""How a ``TRAINING_ROLE=PSERVER`` process decides that its job is over: it polls its server
(`ParameterServer.status`) until every trainer has finished or is lost, and never longer
than the job's timeout past the last sign of life of a trainer.

A trainer is lost when

* its process ended without saying it finished: the supervisor's ``watch`` (for the role
  processes, `liveness.TrainerWatch`) no longer finds the token the trainer's process
  owned. Then the server is told at once (``finish`` with why), so a sync step waiting for
  it fails for the others now, naming it, instead of after the timeout;
* a sync step timed out waiting for it (the server names it missing);
* it never connected within the timeout of the server's start (or was refused: its plan
  differs, and the refusal says how);
* it sent nothing for the timeout while every other trainer has finished, is lost, or is
  silent as long (a trainer hung outside a step, or every trainer hung); a trainer whose
  blocks are in the open step waits inside it, and is not silent.

A sync job that lost a trainer ends with status 1, naming it; an async job carries on
without a trainer that stopped talking (status 0, saying so), but not without one that
never connected.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from .interface import PServer
from .server_spec import ServerStatus

POLL_S = 0.5


class Watch(Protocol):
    def gone(self, among: Iterable[int]) -> list[int]:
        """Those of ``among`` whose process is known to have ended."""


@dataclass
class _Trainers:
    """What the supervisor has learnt so far (kept across restarts of the server, whose
    own record starts afresh)."""
    count: int
    finished: dict[int, str | None] = field(default_factory=dict)
    connected: set[int] = field(default_factory=set)
    lost: dict[int, str] = field(default_factory=dict)
    never_connected: set[int] = field(default_factory=set)
    refusals_told: set[int] = field(default_factory=set)

    def settled(self) -> bool:
        return len(set(self.finished) | set(self.lost)) >= self.count

    def open(self) -> list[int]:
        return [t for t in range(self.count) if t not in self.finished and t not in self.lost]


def _learn(known: _Trainers, st: ServerStatus, sync: bool, timeout: float) -> None:
    known.finished.update(st.finished)
    known.connected.update(st.connected)
    if sync:
        for t, why in st.missing.items():
            if t not in known.finished:
                known.lost.setdefault(t, why)
    for t in known.open():
        if t not in known.connected and st.up_s > timeout:
            refused = st.refused.get(t)
            known.lost[t] = (f"trainer {t} never connected within {timeout:g}s" +
                             (f" (it was refused: {refused})" if refused else ""))
            known.never_connected.add(t)

    def silent(t: int) -> bool:
        waiting = bool(st.waiting_for) and t not in st.waiting_for   # inside the open step
        return st.idle_s.get(t, 0.0) > timeout and not waiting

    for t in known.open():
        if t in known.connected and silent(t) and all(
                u == t or u not in known.open() or silent(u) for u in range(known.count)):
            known.lost[t] = (f"trainer {t} sent nothing for {st.idle_s[t]:.0f}s and never "
                             f"finished")


def _verdict(known: _Trainers, st: ServerStatus, sync: bool) -> tuple[int, str]:
    failures = [f"trainer {t} failed: {e}" for t, e in sorted(known.finished.items()) if e]
    if known.lost:
        words = "; ".join(f"trainer {t} is missing ({why})"
                          for t, why in sorted(known.lost.items()))
        if sync or known.never_connected:
            return 1, f"stopping: {words}"
        return 0, (f"every other trainer finished; {words}; the job went on without it "
                   f"(async mode)")
    if failures:
        return 1, "stopping: " + "; ".join(failures)
    return 0, f"every trainer finished (step {st.step}, {st.updates} block updates)"


def _bury(ps: PServer, known: _Trainers, dead: list[int], sync: bool,
          say: Callable[[str], None]) -> None:
    """Trainers whose process ended without finishing: lost, and the server told."""
    for t in dead:
        if t not in known.open():
            continue           # it finished before its process ended
        why = "its process ended without finishing: killed, or it crashed"
        known.lost[t] = why
        say(f"trainer {t} is gone: {why}" + ("" if sync else
                                             "; the job goes on without it (async mode)"))
        ps.finish(t, why)


def supervise(ps: PServer, trainers: int, sync: bool, timeout: float,
              say: Callable[[str], None] = print, watch: Watch | None = None
              ) -> tuple[int, str]:
    """Poll a server until every trainer finished or is lost (see the module docstring);
    returns (exit status, what happened)."""
    known = _Trainers(trainers)
    pid = None
    while True:
        # Which processes ended, asked before the status: a trainer finishes before its
        # process ends, so the status read after it already says so.
        dead = watch.gone(known.open()) if watch is not None else []
        st = ps.status()
        if pid is not None and st.pid != pid:
            say(f"restarted (pid {st.pid}) from its saved state at step {st.step}")
        pid = st.pid
        for t, why in st.refused.items():
            if t not in known.refusals_told:
                known.refusals_told.add(t)
                say(why)
        _learn(known, st, sync, timeout)
        _bury(ps, known, dead, sync, say)
        if known.settled():
            return _verdict(known, st, sync)
        time.sleep(POLL_S)
