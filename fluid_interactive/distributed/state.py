"""A parameter server's state on disk, so that a restarted server carries on exactly.

Two kinds of file in the server's own directory, each written to a temporary name and
moved into place (``os.replace``), so a reader sees a whole file or none:

``committed.npz``
    the values after the last committed step, that step's number, and the last step
    number each trainer pushed (async mode: its pushes are applied at most once);
``step-<n>.npz``
    the values step ``n`` would commit, written once the server has computed them and
    before any trainer sees them. Committing renames it over ``committed.npz`` (no second
    write); abandoning the step deletes it.

A server killed at any instant restarts from ``committed.npz`` plus, if present, the
prepared step, so a trainer that already received that step's values and a trainer still
waiting for them see the same step. Files are not fsynced: they survive the death of the
server's process, not of the machine (a restart on another machine needs this directory on
storage both can reach).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..backend import to_host

COMMITTED = "committed.npz"
_STEP_FILE = re.compile(r"step-(\d+)\.npz")


@dataclass
class Snapshot:
    step: int
    values: dict[str, np.ndarray]
    applied: list[int] = field(default_factory=list)   # per trainer: last step pushed


def _write(path: str, snap: Snapshot) -> None:
    names = list(snap.values)
    arrays = {f"v{i}": np.asarray(to_host(snap.values[n])) for i, n in enumerate(names)}
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        np.savez(f, __names__=np.array(names, dtype=str), __step__=np.int64(snap.step),
                 __applied__=np.asarray(snap.applied, dtype=np.int64), **arrays)
    os.replace(tmp, path)


def _read(path: str) -> Snapshot:
    with np.load(path, allow_pickle=False) as data:
        names = [str(n) for n in data["__names__"]]
        values = {n: data[f"v{i}"] for i, n in enumerate(names)}
        return Snapshot(int(data["__step__"]), values, [int(a) for a in data["__applied__"]])


class StateDir:
    """The files of one parameter server (see the module docstring)."""

    def __init__(self, path: str):
        self.path = path
        os.makedirs(path, exist_ok=True)

    def _step_path(self, step: int) -> str:
        return os.path.join(self.path, f"step-{step}.npz")

    def save_committed(self, snap: Snapshot) -> None:
        _write(os.path.join(self.path, COMMITTED), snap)

    def save_prepared(self, snap: Snapshot) -> None:
        _write(self._step_path(snap.step), snap)

    def commit(self, step: int) -> None:
        os.replace(self._step_path(step), os.path.join(self.path, COMMITTED))

    def drop(self, step: int) -> None:
        try:
            os.unlink(self._step_path(step))
        except FileNotFoundError:
            pass

    def load(self) -> tuple[Optional[Snapshot], Optional[Snapshot]]:
        """(committed, prepared): the last committed state and the step prepared after it
        (None where there is none). Stray files of older steps are removed."""
        committed_path = os.path.join(self.path, COMMITTED)
        committed = _read(committed_path) if os.path.exists(committed_path) else None
        prepared = None
        for name in sorted(os.listdir(self.path)):
            m = _STEP_FILE.fullmatch(name)
            if m is None:
                continue
            step = int(m.group(1))
            if committed is not None and step == committed.step + 1 and prepared is None:
                prepared = _read(os.path.join(self.path, name))
            else:
                self.drop(step)
        return committed, prepared

    def remove(self) -> None:
        """Delete every file of this server (after a clean finish)."""
        for name in os.listdir(self.path):
            if name == COMMITTED or _STEP_FILE.fullmatch(name) or ".tmp-" in name:
                os.unlink(os.path.join(self.path, name))
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def values_equal_layout(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two states hold the same names, shapes and dtypes (a restored state must
    fit the program the server runs)."""
    if set(a) != set(b):
        return False
    return all(tuple(a[n].shape) == tuple(b[n].shape) and a[n].dtype == b[n].dtype for n in a)
