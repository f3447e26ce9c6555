"""Telling a dead trainer from a slow one, for the ``TRAINING_ROLE`` processes.

A server cannot tell a trainer that died from one that is slow: both simply stop
talking, and without more a sync step waits ``FLUID_TIMEOUT`` for it. So each TRAINER
process, once it has joined the cluster, creates a small named actor, its *token*
(``trainer:<id>`` in the job's namespace), and owns it. Ray ends an actor whose owner
dies (a non-detached actor shares its owner's fate): whatever ends the trainer's
process, SIGKILL included, its token goes with it, and the name leaves Ray's list of named
actors within a second (measured: docs/distributed.md, "A trainer that dies"). The
PSERVER process's supervisor lists the job's named actors on each poll (one call, however
many trainers): a trainer whose token it has seen and no longer finds, and that has not
said it finished, is dead.

The token runs in a worker process of its own (about 100 MB, as every Ray worker; its
creation took 0.03 to 6 s on a busy machine, and the trainer does not wait for it); its
class is sent by value, so that worker imports nothing of this package. Ray's job table
says as quickly that a driver is gone, with no process, but only through a private API
(``ray._private.state.jobs()``); the token is Ray's documented fate sharing. A second
trainer started with the id of a running one is refused: the name is taken.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from .errors import DistributedError
from .ray_cluster import import_ray

__all__ = ["token_name", "hold_token", "TrainerWatch"]

_held: list[Any] = []    # the tokens this process owns (Ray ends them when it exits)


def token_name(trainer_id: int) -> str:
    return f"trainer:{trainer_id}"


def _token_class() -> type:
    """The token actor's class, made here so that Ray sends it by value."""
    def pid(self: Any) -> int:
        return os.getpid()

    return type("TrainerToken", (), {"pid": pid, "__module__": "__fluid_token__"})


def hold_token(trainer_id: int, namespace: str) -> None:
    """Create this trainer's token, owned by this process (see the module docstring)."""
    ray = import_ray()
    cls = ray.remote(num_cpus=0, max_restarts=0)(_token_class())
    try:
        handle = cls.options(name=token_name(trainer_id), namespace=namespace).remote()
    except ValueError:
        raise DistributedError(
            f"trainer {trainer_id}: another process already runs as trainer {trainer_id} "
            f"of the job in the Ray namespace {namespace!r}; give each TRAINER process its "
            f"own PADDLE_TRAINER_ID (0 .. PADDLE_TRAINERS_NUM-1), or each job its own "
            f"FLUID_JOB") from None
    _held.append(handle)


class TrainerWatch:
    """The trainers whose token was seen and is gone (the supervisor asks on each poll)."""

    def __init__(self, trainers: int):
        self.trainers = trainers
        self.seen: set[int] = set()

    def gone(self, among: Iterable[int]) -> list[int]:
        """Those of ``among`` whose token this watch saw before and Ray no longer lists;
        none when Ray cannot be asked."""
        try:
            names = set(import_ray().util.list_named_actors())
        except Exception:   # Ray unreachable a moment: the step timeout still bounds it
            return []
        alive = {t for t in range(self.trainers) if token_name(t) in names}
        self.seen |= alive
        return [t for t in among if t in self.seen and t not in alive]
