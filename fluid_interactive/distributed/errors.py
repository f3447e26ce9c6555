"""Errors of distributed runs. Each message names the role (trainer k, pserver j), the
endpoint and what was awaited, so a log line alone says where a job broke."""
from __future__ import annotations

from ..errors import FluidError


def add_note(error: BaseException, note: str) -> None:
    """``error.add_note(note)`` where Python has it (3.11+); on 3.10, the note joins the
    message, so that it is still printed."""
    adder = getattr(error, "add_note", None)
    if adder is not None:
        adder(note)
    elif error.args and isinstance(error.args[0], str):
        error.args = (f"{error.args[0]}\n{note}",) + error.args[1:]


class DistributedError(FluidError, RuntimeError):
    """A distributed step or job failed."""


class StepAborted(DistributedError):
    """A step was abandoned (another trainer failed, or a server's update failed) and
    applied on no server."""


class StepFailed(DistributedError):
    """A parameter server's update of a step failed; the step is applied on no server."""


class DistributedTimeout(DistributedError, TimeoutError):
    """A bounded wait ran out: the message says who waited for whom, and for what."""


class ServerUnreachable(DistributedError):
    """A parameter server could not be reached (dead, or not started) within the wait."""


class PlanMismatch(DistributedError):
    """A trainer and a server built different plans (another script, other options); the
    message names the ops, vars and settings that differ."""
