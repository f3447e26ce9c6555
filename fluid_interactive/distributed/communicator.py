"""The trainer side of a step, written once for every engine.

A trainer program's RPC ops call the `StepCommunicator` in its scope. It collects the
step's gradient blocks (``send``), and at ``send_barrier`` (sync) or the first ``recv``
(async) makes one exchange with every server at once: each gets this trainer's blocks and
returns the values the trainer receives from it. So a step costs one round trip per server,
all in flight together. If every server answered, the step succeeded everywhere and the
next exchange tells the servers to commit it; if one failed, the communicator aborts the
step on every server and raises, so no server applies it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import numpy as np

from ..backend import to_device, to_host
from .errors import ServerUnreachable, StepAborted
from .interface import Communicator, PServer
from .table_store import TableRows

#: Extra seconds a trainer waits beyond the servers' own timeout (they decide first, and
#: their answer names the missing trainer).
ANSWER_MARGIN = 10.0


class StepCommunicator(Communicator):
    """A trainer's communicator over `PServer` objects (local objects or proxies).

    ``received``: per transpiled method, the names each server returns to this trainer.
    """

    def __init__(self, trainer_id: int, pservers: Mapping[str, PServer], xp: Any,
                 received: Mapping[str, Mapping[str, Sequence[str]]], timeout: float):
        self.trainer_id = trainer_id
        self._pservers = dict(pservers)
        self._xp = xp
        self._received = {m: {ep: list(ns) for ep, ns in r.items()}
                          for m, r in received.items()}
        self.timeout = timeout
        self.committed: int | None = None   # last step that succeeded on every server
        self._method: str | None = None
        self._step = 0
        self._outbox: dict[str, dict[str, Any]] = {}
        self._values: dict[tuple[str, str], Any] | None = None
        # Array bytes this trainer sent and received, in all (ids and rows of tables,
        # gradient and parameter blocks): what a benchmark reads per step.
        self.bytes_sent = 0
        self.bytes_received = 0

    # --- step boundaries (called by the engine's trainer) -------------------------------------

    def begin(self, method: str, step: int) -> None:
        self._method, self._step = method, step
        self._outbox, self._values = {}, None

    def end(self) -> bool:
        """The method finished; True when this step's exchange succeeded."""
        ok = self._values is not None
        self._method, self._outbox, self._values = None, {}, None
        return ok

    @property
    def exchanged(self) -> bool:
        return self._values is not None

    def forget_commits(self) -> None:
        """After a resynchronisation: the servers decide about earlier steps without us."""
        self.committed = None

    # --- what the kernels call ----------------------------------------------------------------

    def _server(self, endpoint: str) -> PServer:
        ps = self._pservers.get(endpoint)
        if ps is None:
            raise KeyError(f"trainer {self.trainer_id}: no parameter server at {endpoint}; "
                           f"known: {', '.join(self._pservers)}")
        return ps

    def send(self, trainer_id: int, names: Sequence[str], arrays: Sequence[Any],
             epmap: Sequence[str], sync: bool) -> None:
        self._check_step()
        for name, a, ep in zip(names, arrays, epmap):
            self._server(ep)
            # A copy: the plan may reuse the kernel's buffer before the exchange.
            value = self._outbox.setdefault(ep, {})[name] = np.array(to_host(a), copy=True)
            self.bytes_sent += value.nbytes

    def send_barrier(self, trainer_id: int, endpoints: Sequence[str]) -> None:
        self._check_step()
        stray = [ep for ep in self._outbox if ep not in endpoints]
        if stray:
            raise RuntimeError(f"trainer {trainer_id} sent to {', '.join(stray)} but its "
                               f"send_barrier does not name them")
        self._exchange(endpoints)

    def recv(self, trainer_id: int, names: Sequence[str], epmap: Sequence[str]) -> list[Any]:
        self._check_step()
        values = self._values if self._values is not None else self._exchange(())
        try:
            return [to_device(values[(ep, n)], self._xp) for n, ep in zip(names, epmap)]
        except KeyError as e:
            raise KeyError(f"trainer {trainer_id}: {e.args[0]} was not among the values "
                           f"received in step {self._step}") from None

    def fetch_barrier(self, trainer_id: int, endpoints: Sequence[str]) -> None:
        pass   # the exchange already waited for every server

    def prefetch(self, trainer_id: int, table: str, names: Sequence[str],
                 ids: Sequence[np.ndarray], epmap: Sequence[str], grow: bool) -> list[Any]:
        """The rows of ``ids[j]`` from table shard ``names[j]`` on ``epmap[j]``: one request
        per server, all in flight together; in a step, after the last step this trainer
        saw succeed (the servers commit it first)."""
        step = self._step if self._method is not None else None
        asks: dict[str, list[int]] = {}
        for j, ep in enumerate(epmap):
            asks.setdefault(ep, []).append(j)
        pending = {ep: self._server(ep).submit(
            "prefetch", trainer_id, step, self.committed, [names[j] for j in js],
            [np.ascontiguousarray(ids[j], dtype=np.int64) for j in js], grow)
            for ep, js in asks.items()}
        out: list[Any] = [None] * len(names)
        for ep, js in asks.items():
            for j, rows in zip(js, pending[ep].result(self.timeout + ANSWER_MARGIN)):
                out[j] = rows
                self.bytes_sent += np.asarray(ids[j]).nbytes
                self.bytes_received += rows.nbytes
        return out

    def send_rows(self, trainer_id: int, names: Sequence[str], ids: Sequence[np.ndarray],
                  values: Sequence[Any], epmap: Sequence[str]) -> None:
        """Send the gradient rows ``values[j]`` of ``ids[j]`` to ``epmap[j]`` as
        ``names[j]`` (ids and values only: never a table's full height)."""
        self._check_step()
        for name, i, v, ep in zip(names, ids, values, epmap):
            self._server(ep)
            rows = self._outbox.setdefault(ep, {})[name] = TableRows(
                np.array(i, dtype=np.int64, copy=True), np.array(to_host(v), copy=True))
            self.bytes_sent += rows.ids.nbytes + rows.values.nbytes

    # --- inside -------------------------------------------------------------------------------

    def _check_step(self) -> None:
        if self._method is None:
            raise RuntimeError(f"trainer {self.trainer_id}: the communicator was used outside "
                               f"a step; run transpiled methods through their engine")

    def _exchange(self, barrier: Sequence[str]) -> dict[tuple[str, str], Any]:
        """One exchange with every server of the step; the values received, by (server,
        name)."""
        wanted = self._received.get(self._method or "", {})
        order = [ep for ep in self._pservers
                 if ep in wanted or ep in self._outbox or ep in barrier]
        pending = {}
        for ep in order:
            pending[ep] = p = self._server(ep).submit_exchange(
                self.trainer_id, self._step, self.committed, self._outbox.get(ep, {}),
                wanted.get(ep, []))
            if p.failed():
                break
        results: dict[str, list[Any]] = {}
        errors: list[tuple[str, BaseException]] = []
        for ep, p in pending.items():
            try:
                results[ep] = p.result(self.timeout + ANSWER_MARGIN)
            except Exception as e:  # every server is asked before deciding
                errors.append((ep, e))
        if errors:
            self._fail(errors)
        self._values = values = {(ep, n): v for ep in order
                                 for n, v in zip(wanted.get(ep, []), results[ep])}
        self.bytes_received += sum(np.asarray(v).nbytes for v in values.values())
        self._outbox = {}
        self.committed = self._step
        return values

    def _fail(self, errors: list[tuple[str, BaseException]]) -> NoReturn:
        ep, error = next(((ep, e) for ep, e in errors if not isinstance(e, StepAborted)),
                         errors[0])
        if not any(isinstance(e, ServerUnreachable) for _, e in errors):
            # Every server answered, and one said no: nobody saw the step succeed, so it
            # is dropped everywhere. (A server that could not be reached may have answered
            # others; the engine decides then.)
            reason = (f"step {self._step} abandoned by trainer {self.trainer_id}: "
                      f"{self._pservers[ep].role} failed: {type(error).__name__}: {error}")
            for ps in self._pservers.values():
                try:
                    ps.abort(self._step, reason)
                except Exception:  # the step is failing already; report the first cause
                    pass
        raise error

    def __repr__(self) -> str:
        return f"<communicator of trainer {self.trainer_id}: {', '.join(self._pservers)}>"
