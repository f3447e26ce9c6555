"""`DistributedProgram`: what ``launch(plan)`` returns — the compiled program's methods,
run by trainers and parameter servers.

Calling a transpiled method (``main``) with a batch cuts the batch evenly across the
trainers, runs them together, and returns what one process would: per-sample results joined
in order, everything else (the mean loss) averaged over trainers. Any other method runs on
trainer 0 with the current parameters. ``parameters()`` and ``get_var`` read the servers.
"""
from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any

import numpy as np

from ..errors import FeedError, ProgramDefinitionError
from ..ir.records import BlockDesc, OpRole, ProgramDesc
from ..ir.text import format_block
from ..passes.transpiler import TranspilePlan
from ..runtime.live.compiled import CompiledProgram
from ..runtime.plan.feed import bind_arguments
from .errors import DistributedTimeout, StepAborted, add_note
from .interface import CallResult, PServer, Trainer
from .server_spec import DEFAULT_TIMEOUT
from .table_checkpoint import from_checkpoint, merge_shards, one_process, split_rows
from .table_store import first_rows

#: How long, after one trainer failed a step, the others may take to report.
_SETTLE_GRACE = 1.0


def _caused_by_abort(error: BaseException) -> bool:
    seen = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        if isinstance(e, StepAborted):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


class DistributedMethod:
    """One method of a `DistributedProgram`."""

    def __init__(self, owner: DistributedProgram, block: BlockDesc, program: ProgramDesc,
                 distributed: bool):
        self._owner = owner
        self.block = block
        self._program = program
        self.distributed = distributed
        self.__name__ = block.name
        self.updates = any(op.role & OpRole.OPTIMIZE for op in block.ops)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        arrays = self._bind(args, kwargs)
        if self.distributed:
            return self._owner._run_distributed(self, arrays)
        return self._owner._run_local(self, arrays)

    def _bind(self, args: tuple, kwargs: dict) -> list[Any]:
        return list(bind_arguments(self.block.name, list(self.block.feeds), args, kwargs))

    @property
    def text(self) -> str:
        return format_block(self._program, self.block)

    def __repr__(self) -> str:
        where = "split across the trainers" if self.distributed else "on trainer 0"
        return f"<distributed method {self.block.name} ({where})>"


class DistributedProgram:
    """Trainers and parameter servers behind the methods of one compiled program.

    In a ``TRAINING_ROLE=TRAINER`` process it drives that one trainer (``trainers`` holds
    just it) against servers in other processes; otherwise every trainer of the plan.
    """

    def __init__(self, plan: TranspilePlan, trainers: Sequence[Trainer],
                 pservers: Mapping[str, PServer],
                 *, engine: str = "", timeout: float = DEFAULT_TIMEOUT,
                 closers: Sequence[Callable[[], None]] = (), patience: float = 0.0,
                 seed: int | None = None):
        self.plan = plan
        self.seed = plan.seed if seed is None else seed   # the servers' initialisers
        self.engine = engine
        self.timeout = timeout
        self._patience = patience      # extra wait an engine may need (a server restarting)
        self._trainers = list(trainers)
        self._pservers = dict(pservers)
        self._lock = threading.RLock()
        self._closed = False
        self._step = 0                       # numbers of this object's distributed calls
        self._uncommitted: int | None = None
        self._final: dict[str, np.ndarray] | None = None   # the state when closed
        self._final_tables: dict[str, dict[str, np.ndarray]] = {}
        self._served = {s.name: s for ep in plan.endpoints
                        for s in plan.pserver_info(ep).tables}   # table shards by name
        program = plan.trainer_program(self._trainers[0].trainer_id)
        self._program = program
        self.methods: dict[str, DistributedMethod] = {}
        for block in program.method_blocks():
            method = DistributedMethod(self, block, program, block.name in plan.main)
            self.methods[block.name] = method
            setattr(self, block.name, method)
        self._pull(self._trainers)
        # Stop the workers even when a notebook drops the object without close().
        self._finalizer = weakref.finalize(self, _shut_down, self._trainers, self._pservers,
                                           list(closers))

    # --- calls --------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this distributed program is closed")

    def _split(self, method: DistributedMethod, arrays: list[Any]) -> list[list[Any]]:
        n = len(self._trainers)
        block = method.block
        values = [np.asarray(a) for a in arrays]
        sizes: dict[str, int] = {}
        for name, a in zip(block.feeds, values):
            var = block.vars[name]
            if not var.has_batch_dim:
                continue
            if a.ndim == len(var.shape) - 1:
                raise FeedError(f"{block.name}(): {name!r} looks like one sample "
                                f"(shape {list(a.shape)}); a distributed call needs a batch "
                                f"to share across {n} trainers")
            sizes[name] = int(a.shape[0]) if a.ndim else 0
        if len(set(sizes.values())) > 1:
            raise FeedError(f"{block.name}(): the arguments have different batch sizes: "
                            + ", ".join(f"{k} has {v} rows" for k, v in sizes.items()))
        if not sizes:
            return [list(values) for _ in range(n)]
        total = next(iter(sizes.values()))
        if total % n or total == 0:
            raise FeedError(
                f"{block.name}(): a batch of {total} rows cannot be split evenly across {n} "
                f"trainers ({', '.join(f'{k}: {v} rows' for k, v in sizes.items())}); use a "
                f"batch size that is a multiple of {n}")
        rows = total // n
        shards = []
        for k in range(n):
            shards.append([a[k * rows:(k + 1) * rows] if name in sizes else a
                           for name, a in zip(block.feeds, values)])
        return shards

    def _run_distributed(self, method: DistributedMethod, arrays: list[Any]) -> Any:
        with self._lock:
            self._check_open()
            shards = self._split(method, arrays)
            self._step += 1
            step = self._step
            futures = [t.call(method.__name__, shard, step)
                       for t, shard in zip(self._trainers, shards)]
            results = self._gather(futures, step)
            self._uncommitted = step
            return _combine(self._program, method.block, method.block.returns, results)

    def _gather(self, futures: list[Future], step: int) -> list[Any]:
        """The trainers' values, or the step settled everywhere and its first error raised.
        Waits at most about ``timeout``: a trainer still busy then is left to finish its
        abandoned step on its own."""
        grace = min(_SETTLE_GRACE, self.timeout)
        deadline = time.monotonic() + self.timeout + self._patience + grace
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=max(0.0, deadline - time.monotonic()),
                                 return_when=FIRST_COMPLETED)
            if not done:
                break
            if any(_outcome(f).error is not None for f in done):
                # Give the others a moment to report (they fail fast once the servers
                # hear about the step), but no longer than the grace.
                deadline = min(deadline, time.monotonic() + grace)
        results = [_outcome(f) if f.done() else None for f in futures]
        succeeded = [r for r in results if r is not None and r.error is None]
        if len(succeeded) == len(results):
            return [r.value for r in succeeded]
        error = self._step_error(step, results)
        try:
            self._settle_failed_step(step, results)
        except Exception as settling:   # a server gone meanwhile: the step's cause comes first
            add_note(error, f"settling step {step} on the servers failed too: "
                            f"{type(settling).__name__}: {settling}")
        raise error

    def _settle_failed_step(self, step: int, results: list[CallResult | None]) -> None:
        """A trainer that received the step's values from every server saw it succeed
        there, so it is committed; otherwise no server applies it. Then every trainer
        starts again from the servers' values."""
        self._ensure_committed()       # the step before succeeded everywhere
        if _applied(results):
            for ps in self._pservers.values():
                ps.commit(step)
        else:
            reason = f"step {step} abandoned: {self._failure_summary(results)}"
            for ps in self._pservers.values():
                ps.abort(step, reason)
        self._uncommitted = None
        self._pull(self._trainers, wait_s=0.0)

    def _failure_summary(self, results: list[CallResult | None]) -> str:
        for t, r in zip(self._trainers, results):
            if r is not None and r.error is not None:
                return f"trainer {t.trainer_id}: {type(r.error).__name__}: {r.error}"
        return (f"trainer(s) {', '.join(map(str, self._stalled(results)))} did not finish "
                f"within timeout={self.timeout:g}s")

    def _stalled(self, results: list[CallResult | None]) -> list[int]:
        return [t.trainer_id for t, r in zip(self._trainers, results) if r is None]

    def _step_error(self, step: int, results: list[CallResult | None]) -> BaseException:
        failed = [(t.trainer_id, r.error) for t, r in zip(self._trainers, results)
                  if r is not None and r.error is not None]
        stalled = self._stalled(results)
        outcome = "every server" if _applied(results) else "no server"
        if failed:
            k, root = next(((k, e) for k, e in failed if not _caused_by_abort(e)), failed[0])
            add_note(root, f"(raised by trainer {k} of {self.plan.trainers}; step {step} was "
                          f"applied on {outcome})")
        else:
            root = DistributedTimeout(f"step {step}: {self._failure_summary(results)}; it was "
                                      f"applied on {outcome}")
        if stalled:
            add_note(root, f"trainer(s) {', '.join(map(str, stalled))} still running the "
                          f"abandoned step {step}; they catch up before their next call")
        return root

    def _run_local(self, method: DistributedMethod, arrays: list[Any]) -> Any:
        if method.updates:
            raise ProgramDefinitionError(
                f"{method.__name__}() updates parameters but was not transpiled, so its "
                f"updates would reach trainer 0 only; transpile with "
                f"main={tuple(self.plan.main) + (method.__name__,)!r}")
        with self._lock:
            self._check_open()
            self._ensure_committed()   # tables are read from the servers as the call runs
            if not self.plan.sync:
                self._pull(self._trainers[:1])   # async: the servers may have moved on
            result = self._trainers[0].call(method.__name__, arrays, None).result()
            if result.error is not None:
                raise result.error
            return result.value

    # --- state --------------------------------------------------------------------------------

    def _ensure_committed(self) -> None:
        """The last step is only prepared on the servers until the next exchange commits
        it; a read of their state commits it first."""
        if self._uncommitted is not None:
            for ps in self._pservers.values():
                ps.commit(self._uncommitted)
            self._uncommitted = None

    def _fetch(self, name: str) -> np.ndarray:
        loc = self.plan.locate(name)
        if loc is None:
            raise KeyError(f"the servers hold no {name!r}")
        pieces = loc.pieces if loc.kind == "rows" else loc.pieces[:1]
        by_server: dict[str, list[int]] = {}
        for i, p in enumerate(pieces):
            by_server.setdefault(p.endpoint, []).append(i)
        parts: list[Any] = [None] * len(pieces)
        for ep, idx in by_server.items():
            for i, v in zip(idx, self._pservers[ep].get([pieces[i].name for i in idx])):
                parts[i] = v
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

    def _pull(self, trainers: Sequence[Trainer], wait_s: float | None = None) -> None:
        """Give ``trainers`` the servers' parameters (after their running calls); waits
        for that unless ``wait_s`` bounds the wait (a stalled trainer catches up later)."""
        self._ensure_committed()
        values = {p: self._fetch(p) for p in self.plan.distributed_params()}
        futures = [t.set_vars(values) for t in trainers]
        done, _ = wait(futures, timeout=wait_s)
        for f in done:
            f.result()

    def parameters(self) -> dict[str, np.ndarray]:
        """Every parameter (name -> a NumPy copy): those the servers update joined from
        their blocks, the others from trainer 0 (after ``close()``: as they were then)."""
        with self._lock:
            if self._final is not None:
                return {n: v.copy() for n, v in self._final.items()
                        if self.plan.program.global_block().vars[n].is_parameter}
            self._check_open()
            self._ensure_committed()
            out = {}
            served = set(self.plan.distributed_params())
            for name, var in self._program.global_block().vars.items():
                if not var.is_parameter:
                    continue
                if name in served:
                    out[name] = self._fetch(name)
                elif name in self.plan.tables():
                    continue   # rows made as used: see table(name)
                else:
                    try:
                        out[name] = self._trainers[0].get_var(name)
                    except KeyError:
                        pass
            return out

    def get_var(self, name: str) -> np.ndarray:
        """A persistable var of the original program: from the servers when they hold it
        (parameters, accumulators, learning rates), else from trainer 0."""
        with self._lock:
            if self._final is not None and name in self._final:
                return self._final[name].copy()
            self._check_open()
            self._ensure_committed()
            loc = self.plan.locate(name)
            if loc is not None and loc.kind == "table":
                raise KeyError(f"{name!r} is kept on the servers as table rows made as they "
                               f"are used, not as one array; read it with table(name)")
            if loc is not None:
                return self._fetch(name)
            return self._trainers[0].get_var(name)

    def state(self) -> dict[str, np.ndarray]:
        """Every persistable tensor of the original program, as one process would hold it:
        from the servers where they keep it, else from trainer 0."""
        with self._lock:
            if self._final is not None:
                return {n: v.copy() for n, v in self._final.items()}
            self._check_open()
            self._ensure_committed()
            trainer_state = self._trainers[0].tensor_state()
            out = {}
            for var in self.plan.program.global_block().vars.values():
                if not (var.persistable and var.kind == "tensor"):
                    continue
                loc = self.plan.locate(var.name)
                if loc is not None and loc.kind == "table":
                    continue   # see table(name)
                if loc is not None:
                    out[var.name] = self._fetch(var.name)
                elif var.name in trainer_state:
                    out[var.name] = trainer_state[var.name]
            return out

    def table(self, name: str) -> dict[str, np.ndarray]:
        """The live rows of a table kept on the servers: ``{'ids': the ids seen, sorted,
        name: their rows, <accumulator>: their rows, ...}`` gathered from its shards."""
        with self._lock:
            if self._final is not None and name in self._final_tables:
                return {k: v.copy() for k, v in self._final_tables[name].items()}
            self._check_open()
            self._ensure_committed()
            parts = []
            for piece in self.plan.table_shards(name):
                got = self._pservers[piece.endpoint].table_rows([piece.name])[0]
                parts.append((self._served[piece.name], got))
            return merge_shards(parts)

    def table_first_rows(self, name: str, ids: Any) -> dict[str, np.ndarray]:
        """The values the rows of ``ids`` of table ``name`` (and of its accumulators) start
        from on the servers: what a one-process program needs to start as the job did."""
        shards = [self._served[p.name] for p in self.plan.table_shards(name)]
        return first_rows(shards, self.seed, np.asarray(ids))

    def table_stats(self) -> dict[str, dict[str, tuple[int, int, int]]]:
        """Per server, per table shard: (live rows, rows it may hold, bytes it takes)."""
        with self._lock:
            self._check_open()
            self._ensure_committed()
            return {ep: ps.table_stats() for ep, ps in self._pservers.items()}

    def save(self, path: str) -> None:
        """Write an ordinary checkpoint of the job (the original program, with the state
        gathered from the servers and trainer 0) that `fluid.load(path)` opens as a
        single-process program; tables are saved as their live rows
        (distributed/table_checkpoint.py)."""
        tables = {t: self.table(t) for t in self.plan.tables()}
        program, values = one_process(self.plan, self.state(), tables)
        compiled = CompiledProgram(program, seed=self.plan.seed, device="cpu",
                                   initial_values=values)
        compiled.save(path)

    def load(self, path: str) -> None:
        """Start from the checkpoint at ``path`` (written by `save`, by this plan or one with
        other servers): the servers and trainers take its values, and each table's rows go
        to the shards of this plan that hold their ids."""
        from ..runtime.live.checkpoint import read
        saved = read(path)
        plain, tables = from_checkpoint(saved.values, self.plan)
        with self._lock:
            self._check_open()
            self._ensure_committed()
            for table, rows in tables.items():
                for shard, part in split_rows(self.plan, table, rows, self._served).items():
                    self._pservers[self._endpoint_of(shard)].set_table_rows(shard, part)
            self._load_plain(plain)

    def _endpoint_of(self, shard: str) -> str:
        return next(p.endpoint for t in self.plan.tables()
                    for p in self.plan.table_shards(t) if p.name == shard)

    def _load_plain(self, values: Mapping[str, Any]) -> None:
        by_server: dict[str, dict[str, Any]] = {}
        held = set(self._trainers[0].tensor_state())
        trainer_values = {}
        for name, value in values.items():
            loc = self.plan.locate(name)
            if loc is None:
                if name in held:
                    trainer_values[name] = value
                continue
            for p in loc.pieces:
                part = value[p.start:p.start + p.rows] if loc.kind == "rows" else value
                by_server.setdefault(p.endpoint, {})[p.name] = part
        for ep, part in by_server.items():
            self._pservers[ep].set_values(part)
        for t in self._trainers:
            t.set_vars(trainer_values).result(timeout=self.timeout)
        self._pull(self._trainers)

    # --- life cycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """End the job for this object's trainers: tell the servers they are done, stop
        the trainers and release the servers. `parameters`, `get_var`, `state` and `save`
        still answer afterwards, with the values at this moment. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            try:
                self._final = self.state()
                self._final_tables = {t: self.table(t) for t in self.plan.tables()}
            except Exception:   # a server that is gone cannot answer; close the rest
                pass
            self._closed = True
            self._finalizer()

    def __enter__(self) -> DistributedProgram:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def trainers(self) -> list[Trainer]:
        return list(self._trainers)

    @property
    def pservers(self) -> dict[str, PServer]:
        return dict(self._pservers)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running"
        return (f"<distributed {self.plan.mode} program ({self.engine or 'engine'}, {state}): "
                f"{len(self._trainers)} trainer(s), {len(self._pservers)} pserver(s); "
                f"methods {', '.join(self.methods)}; split across trainers: "
                f"{', '.join(self.plan.main)}>")


def _shut_down(trainers: Sequence[Trainer], pservers: Mapping[str, PServer],
               closers: Sequence[Callable[[], None]]) -> None:
    for ps in pservers.values():
        for t in trainers:
            try:
                ps.finish(t.trainer_id)
            except Exception:   # a server that is gone needs no goodbye
                pass
    release(trainers, pservers, closers)


def release(trainers: Sequence[Trainer], pservers: Mapping[str, PServer],
            closers: Sequence[Callable[[], None]]) -> None:
    """Close the trainers, then the servers, then what the engine set up for the job."""
    for t in trainers:
        t.close()
    for ps in pservers.values():
        ps.close()
    for close in closers:
        close()


def _outcome(future: Future) -> CallResult:
    """A finished call's result; an engine-level failure (a trainer process that died)
    becomes the call's error."""
    error = future.exception()
    return CallResult(error=error) if error is not None else future.result()


def _applied(results: Sequence[CallResult | None]) -> bool:
    return any(r is not None and r.exchanged for r in results)


def _combine(program: ProgramDesc, block: BlockDesc, spec: Any, values: list[Any]) -> Any:
    """One process's result from the trainers' results: per-sample values joined in trainer
    order, anything else averaged."""
    if spec is None:
        return None
    if isinstance(spec, tuple):
        return tuple(_combine(program, block, s, [v[i] for v in values])
                     for i, s in enumerate(spec))
    if isinstance(spec, dict):
        return {k: _combine(program, block, s, [v[k] for v in values]) for k, s in spec.items()}
    if len(values) == 1:
        return values[0]
    var = program.find_var(block, spec)
    if var is not None and var.has_batch_dim:
        return np.concatenate([np.asarray(v) for v in values], axis=0)
    if all(isinstance(v, float) for v in values):
        return sum(values) / len(values)
    stacked = np.stack([np.asarray(v) for v in values])
    return stacked.mean(axis=0).astype(stacked.dtype, copy=False)
