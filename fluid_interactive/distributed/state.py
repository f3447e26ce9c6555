"""A parameter server's state on disk, so that a restarted server carries on exactly.

Two kinds of file in the server's own directory, each written to a temporary name and
moved into place (``os.replace``), so a reader sees a whole file or none:

``committed.state``
    the values after the last committed step, that step's number, and the last step
    number each trainer pushed (async mode: its pushes are applied at most once);
``step-<n>.state``
    the values step ``n`` would commit, written once the server has computed them and
    before any trainer sees them. Committing renames it over ``committed.state`` (no second
    write); abandoning the step deletes it.

A server killed at any instant restarts from ``committed.state`` plus, if present, the
prepared step, so a trainer that already received that step's values and a trainer still
waiting for them see the same step. Files are not fsynced, and by default live in
/dev/shm (`default_root`): they survive the death of the server's process, not of the
machine. Set the directory (``FLUID_STATE_DIR``, ``launch(..., state_dir=)``) to a disk for
that.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..backend import to_host

COMMITTED = "committed.state"
_STEP_FILE = re.compile(r"step-(\d+)\.state")


def default_root() -> str:
    """Where servers keep their state unless told: /dev/shm where it exists (memory: a
    step's file costs about 0.1 ms there against 1-2 ms on a disk, and it survives the
    server's process, which is what a restart needs), else the temporary directory."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        return shm
    return tempfile.gettempdir()


@dataclass
class Snapshot:
    step: int
    values: dict[str, np.ndarray]
    applied: list[int] = field(default_factory=list)   # per trainer: last step pushed


def _write(path: str, snap: Snapshot) -> None:
    """A JSON header line (step, per-trainer steps, each array's name, dtype and shape),
    then the arrays' bytes in that order: one write each, nothing to compress or index
    (this runs every step)."""
    arrays = [(n, np.ascontiguousarray(to_host(v))) for n, v in snap.values.items()]
    header = {"step": snap.step, "applied": list(snap.applied),
              "arrays": [[n, a.dtype.str, list(a.shape)] for n, a in arrays]}
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(json.dumps(header).encode() + b"\n")
        for _, a in arrays:
            f.write(a.tobytes() if a.size == 0 else a.reshape(-1).data.cast("B"))
    os.replace(tmp, path)


def _read(path: str) -> Snapshot:
    with open(path, "rb") as f:
        header = json.loads(f.readline())
        data = f.read()
    values, offset = {}, 0
    for name, dtype, shape in header["arrays"]:
        dt = np.dtype(dtype)
        if dt.hasobject:
            raise ValueError(f"{path}: {name} has an object dtype")
        count = int(np.prod(shape, dtype=np.int64))
        values[name] = np.frombuffer(data, dt, count, offset).reshape(shape).copy()
        offset += count * dt.itemsize
    if offset != len(data):
        raise ValueError(f"{path}: {len(data) - offset} bytes more than its header lists")
    return Snapshot(int(header["step"]), values, [int(a) for a in header["applied"]])


class StateDir:
    """The files of one parameter server (see the module docstring)."""

    def __init__(self, path: str):
        self.path = path
        os.makedirs(path, exist_ok=True)

    def _step_path(self, step: int) -> str:
        return os.path.join(self.path, f"step-{step}.state")

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

    def load(self) -> tuple[Snapshot | None, Snapshot | None]:
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
