"""The parameter server, written once: `ParameterServer` is a plain thread-safe object that
the in-process engine uses as it is and the Ray engine runs inside an actor.

The protocol, per trainer and step (numbered by the trainer side, never reused)::

    exchange(trainer, step, committed, blocks, names) -> values of `names`

In sync mode the server holds each trainer's gradient blocks of ``step`` until every
trainer's have arrived, then *prepares* the step: it runs its optimize blocks on a copy of
its state (state arrays are never changed in place, so the copy is a new dict) and keeps
the result beside the committed state. Every waiting exchange then returns the prepared
values. The step becomes the server's state only when it is *committed*: by `commit`, or
implicitly by a later exchange whose ``committed`` says the trainer saw that step succeed on
every server. `abort` drops a prepared or incomplete step. A trainer commits only after
every server returned its values, and aborts when one of them failed, so a step is applied
on every server or on none.

Outcomes are sticky: a step whose update failed, or that waited longer than ``timeout``
for a trainer, fails for every trainer that asks. Exchanges are idempotent: a repeated one
(a trainer retrying after this server restarted) is answered from what the server already
holds. With a state directory the server writes each prepared step before answering
(`state.StateDir`), so a restarted server resumes where it stopped.

In async mode an exchange applies its gradients at once and returns the current values;
each trainer's pushes are applied at most once (by step number).
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..backend import array_module_for, to_device
from ..passes.transpiler import JointBlock, OptimizeBlock
from ..runtime.live.compiled import CompiledProgram
from ..runtime.plan.runner import BlockRunner
from .agreement import Fingerprint, differences
from .errors import DistributedTimeout, PlanMismatch, StepAborted, StepFailed
from .interface import PServer
from .server_spec import DEFAULT_TIMEOUT, PServerSpec, ServerStatus
from .state import Snapshot, StateDir, values_equal_layout
from .table_store import TableDelta
from .table_update import TableStore, split_tables

_ABORTED_KEPT = 256


class _Round:
    """One sync step on its way through this server."""

    def __init__(self, step: int):
        self.step = step
        self.pending: dict[int, dict[str, Any]] = {}
        self.staged: dict[str, Any] | None = None
        self.deltas: list[TableDelta] = []     # what the step writes in table shards
        self.error: BaseException | None = None
        self.started = time.monotonic()


def _fresh(error: BaseException) -> BaseException:
    """A new exception like a sticky one, so that each waiter's traceback and notes are its
    own."""
    copy = type(error)(*error.args)
    copy.__cause__ = error.__cause__
    return copy


class ParameterServer(PServer):
    """One parameter server's state and update logic (see the module docstring)."""

    def __init__(self, spec: PServerSpec, *, seed: int | None = None, device: str = "cpu",
                 timeout: float = DEFAULT_TIMEOUT, state_dir: str | None = None):
        self.spec = spec
        self.endpoint = spec.endpoint
        self.trainers = spec.trainers
        self.sync = spec.sync
        self.timeout = float(timeout)
        self._xp = array_module_for(device)
        self._values = self._initial_values(spec, seed, device)
        self._runners = {b.idx: BlockRunner(spec.program, b, self._xp, seed)
                         for b in spec.program.blocks[1:]}
        self._tables = TableStore(spec.info, seed, self._runners)
        self._feeds = {f for b in spec.info.optimize_blocks for f in b.feeds} | {
            f for j in spec.info.joint_blocks for f in j.feeds} | self._tables.feeds()
        self._cond = threading.Condition()
        self.step = 0                       # last committed step (sync)
        self._applied = [0] * self.trainers  # last step pushed by each trainer (async)
        self._round: _Round | None = None
        self._aborted: dict[int, str] = {}
        self._finished: dict[int, str | None] = {}
        self._last_seen: dict[int, float] = {}
        self._missing: dict[int, str] = {}       # trainers a sync step timed out waiting for
        self._connected: set[int] = set()
        self._refused: dict[int, str] = {}
        self._started = time.monotonic()
        self._closed = False
        self.updates = 0                    # optimize-block runs
        self.restored = False
        self._round_tables: dict[str, Any] = {}   # tables of a step prepared before a restart
        self._state = StateDir(state_dir) if state_dir else None
        if self._state is not None:
            self._restore_or_save(self._state)

    @property
    def role(self) -> str:
        return self.spec.role

    # --- set-up -------------------------------------------------------------------------------

    def _initial_values(self, spec: PServerSpec, seed: int | None, device: str
                        ) -> dict[str, Any]:
        startup = CompiledProgram(spec.startup, seed=seed, device=device)
        values: dict[str, Any] = {}
        for n in startup.var_names():
            try:
                values[n] = to_device(startup.get_var(n), self._xp)
            except KeyError:   # computed each step by a schedule block, not initialised
                pass
        return values

    def _with_tables(self, values: dict[str, Any], deltas: Sequence[TableDelta] = ()
                     ) -> dict[str, Any]:
        """The state a state file holds: ``values`` and the table shards after ``deltas``."""
        return {**values, **self._tables.snapshot(deltas)} if self._tables.shards else values

    def _restore_or_save(self, state: StateDir) -> None:
        committed, prepared = state.load()
        if committed is None:
            state.save_committed(Snapshot(0, self._with_tables(self._values),
                                          list(self._applied)))
            return
        plain, tables = split_tables(committed.values)
        if not values_equal_layout(plain, self._values) or \
                len(committed.applied) != self.trainers:
            raise StepFailed(f"{self.role}: the saved state in {state.path} does not "
                             f"fit this server's program (another job's files?); remove the "
                             f"directory to start afresh")
        self._values = {n: to_device(v, self._xp) for n, v in plain.items()}
        self._tables.restore(tables)
        self.step, self._applied = committed.step, list(committed.applied)
        if prepared is not None:
            # a prepared step's tables are whole in its file: committing it loads them
            self._round = _Round(prepared.step)
            plain, self._round_tables = split_tables(prepared.values)
            self._round.staged = {n: to_device(v, self._xp) for n, v in plain.items()}
        self.restored = True

    # --- the protocol -------------------------------------------------------------------------

    def exchange(self, trainer_id: int, step: int, committed: int | None,
                 blocks: Mapping[str, Any], names: Sequence[str]) -> list[Any]:
        """Push this trainer's gradient blocks of ``step`` and return the values of
        ``names`` after the step (sync: once every trainer's blocks are in and the update is
        prepared; async: at once). ``committed``: the last step this trainer saw succeed on
        every server (commits it here if it is still only prepared)."""
        with self._cond:
            self._check_trainer(trainer_id)
            self._missing.pop(trainer_id, None)
            try:
                self._last_seen[trainer_id] = time.monotonic()
                return self._exchange(trainer_id, step, committed, blocks, names)
            finally:
                # a trainer that waited in a step was alive all along: its silence
                # starts when the exchange ends, however it ends
                self._last_seen[trainer_id] = time.monotonic()

    def _exchange(self, trainer_id: int, step: int, committed: int | None,
                  blocks: Mapping[str, Any], names: Sequence[str]) -> list[Any]:
        if committed is not None:
            self._commit_upto(committed)
        if not self.sync:
            return self._exchange_async(trainer_id, step, blocks, names)
        if step <= self.step:              # committed already: a repeated exchange
            return self._read(self._values, names)
        r = self._round_for(step)
        if r.staged is None and r.error is None and trainer_id not in r.pending:
            r.pending[trainer_id] = dict(blocks)
            if len(r.pending) == self.trainers:
                self._prepare(r)
        return self._read(self._await(r, trainer_id), names)

    def commit(self, step: int) -> None:
        """Every server has prepared ``step`` (and the steps before it): make it the state."""
        with self._cond:
            self._commit_upto(step)

    def abort(self, step: int, reason: str) -> None:
        """Drop ``step`` (prepared or not); later exchanges of it fail with the reason."""
        with self._cond:
            if step <= self.step:
                return                          # committed: too late, and not needed
            self._aborted[step] = reason
            while len(self._aborted) > _ABORTED_KEPT:
                del self._aborted[next(iter(self._aborted))]
            r = self._round
            if r is not None and r.step == step:
                self._drop_round()
            self._cond.notify_all()

    def get(self, names: Sequence[str]) -> list[np.ndarray]:
        """Copies of committed values."""
        with self._cond:
            return [np.array(v, copy=True) for v in self._read(self._values, names)]

    def set_values(self, values: Mapping[str, Any]) -> None:
        """Overwrite committed values (checked by name, shape and dtype); only between
        steps."""
        with self._cond:
            for n, v in values.items():
                old = self._values.get(n)
                if old is None or tuple(old.shape) != tuple(np.shape(v)):
                    raise KeyError(f"{self.role} holds no {n!r} of shape {np.shape(v)}")
            self._values = dict(self._values)
            for n, v in values.items():
                self._values[n] = to_device(np.array(v, dtype=self._values[n].dtype), self._xp)
            if self._state is not None:
                self._state.save_committed(Snapshot(self.step, self._with_tables(self._values),
                                                    list(self._applied)))

    def prefetch(self, trainer_id: int, step: int | None, committed: int | None,
                 names: Sequence[str], ids: Sequence[Any], grow: bool) -> list[Any]:
        """The rows of ``ids[i]`` in table shard ``names[i]``, after the step this trainer
        last saw succeed everywhere (``committed``, committed here first). An id never
        seen reads its first value when ``grow`` (a training method; the row is made when
        its gradient arrives) and zeros otherwise."""
        with self._cond:
            self._check_trainer(trainer_id)
            if committed is not None:
                self._commit_upto(committed)
            when = f"step {step} of trainer {trainer_id}" if step is not None else \
                f"a call of trainer {trainer_id}"
            return self._tables.read(names, ids, grow, when)

    def table_rows(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """Each table shard's live ids and the rows of every var it keeps (committed),
        as ``{'ids': ids, <var>: rows, ...}`` with the vars named as on this server."""
        with self._cond:
            out: list[dict[str, Any]] = []
            for n in names:
                shard = self._tables.shards[n]
                ids, rows = shard.live()
                out.append({"ids": ids, **rows})
            return out

    def set_table_rows(self, name: str, rows: Mapping[str, Any]) -> None:
        """Replace table shard ``name``'s rows (``{'ids': ids, <var>: rows, ...}``); only
        between steps."""
        with self._cond:
            shard = self._tables.shards[name]
            shard.load(np.asarray(rows["ids"]), {k: np.asarray(v) for k, v in rows.items()
                                                 if k != "ids"})
            if self._state is not None:
                self._state.save_committed(Snapshot(self.step, self._with_tables(self._values),
                                                    list(self._applied)))

    def table_stats(self) -> dict[str, tuple[int, int, int]]:
        """Per table shard: (live rows, rows it may hold, bytes it takes)."""
        with self._cond:
            return {n: (s.size, s.spec.rows, s.nbytes()) for n, s in self._tables.shards.items()}

    def finish(self, trainer_id: int, error: str | None = None) -> None:
        """Trainer ``trainer_id`` is done (``error``: why it stopped, if it failed; a second
        call keeps the first error)."""
        with self._cond:
            self._check_trainer(trainer_id)
            self._finished[trainer_id] = self._finished.get(trainer_id) or error
            self._cond.notify_all()

    def connect(self, trainer_id: int, plan: Fingerprint) -> None:
        """Trainer ``trainer_id`` joins, with its fingerprint of this server's part of the
        plan: refused with `PlanMismatch`, naming what differs, unless it agrees."""
        with self._cond:
            self._check_trainer(trainer_id)
            problems = differences(self.spec.fingerprint, plan)
            if problems:
                message = (f"{self.role} refuses trainer {trainer_id}: its plan differs from "
                           f"this server's (start every role from the same script with the "
                           f"same --distributed options and PADDLE_* settings):\n  "
                           + "\n  ".join(problems))
                self._refused[trainer_id] = message
                raise PlanMismatch(message)
            self._connected.add(trainer_id)
            self._refused.pop(trainer_id, None)
            self._last_seen[trainer_id] = time.monotonic()

    def status(self) -> ServerStatus:
        """What a supervisor needs to decide whether the job is over."""
        with self._cond:
            now = time.monotonic()
            r = self._round
            failed = r is not None and r.error is not None
            open_round = r is not None and bool(r.pending) and not failed and r.staged is None
            return ServerStatus(
                endpoint=self.endpoint, step=self.step, updates=self.updates, pid=os.getpid(),
                restored=self.restored, up_s=now - self._started,
                finished=dict(self._finished), connected=sorted(self._connected),
                refused=dict(self._refused),
                idle_s={t: now - self._last_seen.get(t, self._started)
                        for t in range(self.trainers)},
                missing=dict(self._missing),
                waiting_for=[t for t in range(self.trainers) if r is not None and
                             t not in r.pending] if open_round else [],
                failed=f"{type(r.error).__name__}: {r.error}" if failed and r else None)

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def remove_state(self) -> None:
        """Delete the state files (the job finished cleanly)."""
        if self._state is not None:
            self._state.remove()

    def shut_down(self, remove_state: bool) -> None:
        """Close, and delete the state files when asked (the job is over)."""
        self.close()
        if remove_state:
            self.remove_state()

    # --- inside -------------------------------------------------------------------------------

    def _check_trainer(self, trainer_id: int) -> None:
        if self._closed:
            raise StepAborted(f"{self.role} is closed")
        if not 0 <= trainer_id < self.trainers:
            raise StepFailed(f"{self.role}: trainer {trainer_id} is not one of the plan's "
                             f"{self.trainers} trainers (ids 0..{self.trainers - 1})")

    def _read(self, values: Mapping[str, Any], names: Sequence[str]) -> list[Any]:
        missing = [n for n in names if n not in values]
        if missing:
            raise KeyError(f"{self.role} holds no {', '.join(missing)}; it holds: "
                           f"{', '.join(values)}")
        return [values[n] for n in names]

    def _round_for(self, step: int) -> _Round:
        if step in self._aborted:
            raise StepAborted(self._aborted[step])
        r = self._round
        if r is not None and r.step != step:
            if r.step > step:
                raise StepAborted(f"{self.role}: step {step} is over (the servers are at "
                                  f"step {r.step})")
            # A later step means the trainers gave up on this one without telling us.
            self._drop_round()
            r = None
        if r is None:
            r = self._round = _Round(step)
        return r

    def _await(self, r: _Round, trainer_id: int) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            if self._closed:
                raise StepAborted(f"{self.role} closed while trainer {trainer_id} waited "
                                  f"for step {r.step}")
            if r.step in self._aborted:
                raise StepAborted(self._aborted[r.step])
            if self.step >= r.step:
                return self._values
            if self._round is not r:
                raise StepAborted(f"{self.role}: step {r.step} was abandoned")
            if r.error is not None:
                raise _fresh(r.error)
            if r.staged is not None:
                return r.staged
            gone = [t for t in self._finished if t not in r.pending]
            if gone:
                r.error = StepFailed(f"{self.role}: step {r.step} cannot complete: "
                                     + self._why_gone(gone))
                self._cond.notify_all()
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                missing = [t for t in range(self.trainers) if t not in r.pending]
                r.error = DistributedTimeout(
                    f"{self.role}: trainer {trainer_id} waited {self.timeout:g}s for "
                    f"step {r.step}; trainer(s) {', '.join(map(str, missing))} never sent "
                    f"their gradients")
                for t in missing:
                    self._missing[t] = f"step {r.step} waited {self.timeout:g}s for it"
                self._cond.notify_all()
                continue
            self._cond.wait(left)

    def _why_gone(self, gone: list[int]) -> str:
        """Why the trainers ``gone`` (finished) will not send the open step: the error
        they stopped with, or that they ran out of batches."""
        failed = [f"trainer {t} stopped ({self._finished[t]})" for t in gone
                  if self._finished[t]]
        if failed:
            return "; ".join(failed)
        return (f"trainer(s) {', '.join(map(str, gone))} finished without sending it (sync "
                f"mode needs every trainer in every step: give each trainer as many batches, "
                f"e.g. drop_last=True or equal shards)")

    def _prepare(self, r: _Round) -> None:
        arrived: dict[str, Any] = {}
        for t in sorted(r.pending):
            arrived.update(r.pending[t])
        r.pending = dict.fromkeys(r.pending, {})  # keep who arrived, drop the arrays
        try:
            staged, deltas = self._run(arrived, f"step {r.step}")
            if self._state is not None:
                self._state.save_prepared(Snapshot(r.step, self._with_tables(staged, deltas),
                                                   list(self._applied)))
        except BaseException as e:
            r.error = StepFailed(f"{self.role}: the update of step {r.step} failed, so no "
                                 f"server applies it: {type(e).__name__}: {e}")
            r.error.__cause__ = e
        else:
            r.staged, r.deltas = staged, deltas
        self._cond.notify_all()

    def _commit_upto(self, step: int) -> None:
        r = self._round
        if r is None or r.step > step or r.staged is None:
            return
        self._values = r.staged
        self._tables.commit(r.deltas)
        if self._round_tables:   # a step prepared before a restart: whole in its file
            self._tables.restore(self._round_tables)
            self._round_tables = {}
        self.step = r.step
        self._round = None
        if self._state is not None:
            self._state.commit(r.step)
        self._cond.notify_all()

    def _drop_round(self) -> None:
        r = self._round
        self._round = None
        self._round_tables = {}
        if r is not None and r.staged is not None and self._state is not None:
            self._state.drop(r.step)
        self._cond.notify_all()

    def _exchange_async(self, trainer_id: int, step: int, blocks: Mapping[str, Any],
                        names: Sequence[str]) -> list[Any]:
        if blocks and step > self._applied[trainer_id]:
            values, deltas = self._run(dict(blocks), f"trainer {trainer_id}'s step {step}")
            applied = list(self._applied)
            applied[trainer_id] = step
            if self._state is not None:
                self._state.save_committed(Snapshot(self.step, self._with_tables(values, deltas),
                                                    applied))
            self._values, self._applied = values, applied
            self._tables.commit(deltas)
        return self._read(self._values, names)

    def _run(self, arrived: dict[str, Any], when: str
             ) -> tuple[dict[str, Any], list[TableDelta]]:
        """The state after applying ``arrived``, as a new dict (nothing changes in place),
        and what it writes in the table shards (applied when the step commits)."""
        unknown = [n for n in arrived if n not in self._feeds]
        if unknown:
            raise KeyError(f"{self.role} got gradient(s) it has no block for: "
                           f"{', '.join(unknown)}")
        blocks = [b for b in self.spec.info.optimize_blocks
                  if any(f in arrived for f in b.feeds)]
        joints = [b for b in self.spec.info.joint_blocks if any(f in arrived for f in b.feeds)]
        runs: list[OptimizeBlock | JointBlock] = [*joints, *blocks]
        for b in runs:
            missing = [f for f in b.feeds if f not in arrived]
            if missing:
                what = b.param_block if isinstance(b, OptimizeBlock) else \
                    f"the joint ops of {', '.join(b.params)}"
                raise RuntimeError(f"{self.role}: the update of {what} lacks "
                                   f"{', '.join(missing)}")
        tables = [t for t in self._tables.blocks if any(f in arrived for f in t.arrivals)]
        for t in tables:
            missing = [f for f in t.arrivals if f not in arrived]
            if missing:
                raise RuntimeError(f"{self.role}: the update of {t.shard} lacks "
                                   f"{', '.join(missing)}")
        values = dict(self._values)
        methods = [b.method for b in blocks] + [t.method for t in tables]
        for method in dict.fromkeys(methods):
            lr = self.spec.info.lr_blocks.get(method)
            if lr is not None:
                self._runners[lr].run(values, [])
        for b in runs:   # joint blocks first: the updates read their results
            self._runners[b.block_idx].run(
                values, [to_device(arrived[f], self._xp) for f in b.feeds])
        deltas = self._tables.step(arrived, values, when)
        self.updates += len(blocks) + len(tables)
        return values, deltas
