"""What a parameter server is given (`PServerSpec`), what it reports (`ServerStatus`), and
the bound every wait of a job has (`DEFAULT_TIMEOUT`, `check_timeout`)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.records import ProgramDesc
from ..passes.transpiler import PServerInfo, TranspilePlan
from .agreement import Fingerprint, fingerprint

#: Seconds a sync step waits for a missing trainer; it bounds every wait of a job.
DEFAULT_TIMEOUT = 120.0


def check_timeout(timeout: object) -> float:
    """``timeout`` (an engine's option: how long a sync step waits for a missing trainer)
    as seconds; a clear error unless it is a positive number."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds; got {timeout!r}")
    return float(timeout)


@dataclass(frozen=True)
class PServerSpec:
    """Everything a parameter server needs, picklable (it travels to a Ray actor)."""
    endpoint: str
    index: int
    program: ProgramDesc
    startup: ProgramDesc
    info: PServerInfo
    trainers: int
    sync: bool
    fingerprint: Fingerprint   # what a connecting trainer must agree with

    @property
    def role(self) -> str:
        return f"pserver {self.index} ({self.endpoint})"


def pserver_spec(plan: TranspilePlan, endpoint: str) -> PServerSpec:
    return PServerSpec(endpoint, plan.endpoints.index(endpoint), plan.pserver_program(endpoint),
                       plan.startup_program(endpoint), plan.pserver_info(endpoint),
                       plan.trainers, plan.sync, fingerprint(plan, endpoint))


@dataclass
class ServerStatus:
    """What a supervisor needs to decide whether a job is over (`ParameterServer.status`).
    Times are seconds; per-trainer fields are keyed by trainer id."""
    endpoint: str
    step: int                                  # the last committed step (sync)
    updates: int                               # optimize-block runs
    pid: int
    restored: bool                             # started from a state directory
    up_s: float                                # since the server started
    finished: dict[int, str | None] = field(default_factory=dict)   # -> the error, if any
    connected: list[int] = field(default_factory=list)
    refused: dict[int, str] = field(default_factory=dict)    # -> why
    idle_s: dict[int, float] = field(default_factory=dict)   # since it last called
    missing: dict[int, str] = field(default_factory=dict)    # a sync step timed out on it
    waiting_for: list[int] = field(default_factory=list)     # the open step lacks them
    failed: str | None = None                  # the open step's error
