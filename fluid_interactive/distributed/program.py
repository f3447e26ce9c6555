"""`DistributedProgram`: what ``plan.launch()`` returns — the compiled program's methods,
run by trainers and parameter servers.

Calling a transpiled method (``main``) with a batch cuts the batch evenly across the
trainers, runs them together, and returns what one process would: per-sample results joined
in order, everything else (the mean loss) averaged over trainers. Any other method runs on
trainer 0 with the current parameters. ``parameters()`` and ``get_var`` read the servers.
"""
from __future__ import annotations

import threading
import weakref
from concurrent.futures import FIRST_EXCEPTION, Future, wait
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import FeedError, ProgramDefinitionError
from ..ir.records import BlockDesc, OpRole, ProgramDesc
from ..ir.text import format_block
from .interface import PServer, StepAborted, Trainer


def _caused_by_abort(error: BaseException) -> bool:
    seen = set()
    e = error
    while e is not None and id(e) not in seen:
        if isinstance(e, StepAborted):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


class DistributedMethod:
    """One method of a `DistributedProgram`."""

    def __init__(self, owner: "DistributedProgram", block: BlockDesc, program: ProgramDesc,
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
        feeds, name = list(self.block.feeds), self.block.name
        if len(args) > len(feeds):
            raise TypeError(f"{name}() takes {len(feeds)} argument(s) ({', '.join(feeds)}) "
                            f"but {len(args)} were given")
        bound = dict(zip(feeds, args))
        for key, value in kwargs.items():
            if key not in feeds:
                raise TypeError(f"{name}() got an unexpected keyword argument {key!r}; "
                                f"it feeds: {', '.join(feeds) or 'nothing'}")
            if key in bound:
                raise TypeError(f"{name}() got multiple values for argument {key!r}")
            bound[key] = value
        missing = [f for f in feeds if f not in bound]
        if missing:
            raise TypeError(f"{name}() is missing argument(s): {', '.join(missing)}")
        return [bound[f] for f in feeds]

    @property
    def text(self) -> str:
        return format_block(self._program, self.block)

    def __repr__(self) -> str:
        where = "split across the trainers" if self.distributed else "on trainer 0"
        return f"<distributed method {self.block.name} ({where})>"


class DistributedProgram:
    """Trainers and parameter servers behind the methods of one compiled program."""

    def __init__(self, plan: Any, trainers: Sequence[Trainer], pservers: Mapping[str, PServer],
                 *, engine: str = ""):
        self.plan = plan
        self.engine = engine
        self._trainers = list(trainers)
        self._pservers = dict(pservers)
        self._lock = threading.RLock()
        self._closed = False
        program = plan.trainer_program(0)
        self._program = program
        self.methods: dict[str, DistributedMethod] = {}
        for block in program.method_blocks():
            method = DistributedMethod(self, block, program, block.name in plan.main)
            self.methods[block.name] = method
            setattr(self, block.name, method)
        self._pull(self._trainers)
        # Stop the workers even when a notebook drops the object without close().
        self._finalizer = weakref.finalize(self, _shut_down, self._trainers, self._pservers)

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
            futures = [t.call(method.__name__, shard)
                       for t, shard in zip(self._trainers, shards)]
            results = self._gather(futures)
            return _combine(self._program, method.block, method.block.returns, results)

    def _gather(self, futures: list[Future]) -> list[Any]:
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        first = next((f.exception() for f in done if f.exception() is not None), None)
        if first is None:
            return [f.result() for f in futures]
        for ps in self._pservers.values():
            ps.abort(first)
        wait(futures)
        errors = [(k, f.exception()) for k, f in enumerate(futures)
                  if f.exception() is not None]
        for ps in self._pservers.values():
            ps.reset()
        self._pull(self._trainers)   # a trainer that failed late may have missed the update
        k, root = next(((k, e) for k, e in errors if not _caused_by_abort(e)), errors[0])
        root.add_note(f"(raised by trainer {k} of {len(futures)}; the other trainers stopped "
                      f"their step too)")
        raise root

    def _run_local(self, method: DistributedMethod, arrays: list[Any]) -> Any:
        if method.updates:
            raise ProgramDefinitionError(
                f"{method.__name__}() updates parameters but was not transpiled, so its "
                f"updates would reach trainer 0 only; transpile with "
                f"main={tuple(self.plan.main) + (method.__name__,)!r}")
        with self._lock:
            self._check_open()
            if not self.plan.sync:
                self._pull(self._trainers[:1])   # async: the servers may have moved on
            return self._trainers[0].call(method.__name__, arrays).result()

    # --- state --------------------------------------------------------------------------------

    def _fetch(self, name: str) -> np.ndarray:
        loc = self.plan.locate(name)
        pieces = loc.pieces if loc.kind == "rows" else loc.pieces[:1]
        by_server: dict[str, list[int]] = {}
        for i, p in enumerate(pieces):
            by_server.setdefault(p.endpoint, []).append(i)
        parts: list[Any] = [None] * len(pieces)
        for ep, idx in by_server.items():
            for i, v in zip(idx, self._pservers[ep].get([pieces[i].name for i in idx])):
                parts[i] = v
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

    def _pull(self, trainers: Sequence[Trainer]) -> None:
        values = {p: self._fetch(p) for p in self.plan.distributed_params()}
        for t in trainers:
            t.set_vars(values)

    def parameters(self) -> dict[str, np.ndarray]:
        """Every parameter (name -> a NumPy copy): those the servers update joined from
        their blocks, the others from trainer 0."""
        with self._lock:
            self._check_open()
            out = {}
            served = set(self.plan.distributed_params())
            for name, var in self._program.global_block().vars.items():
                if not var.is_parameter:
                    continue
                if name in served:
                    out[name] = self._fetch(name)
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
            self._check_open()
            if self.plan.locate(name) is not None:
                return self._fetch(name)
            return self._trainers[0].get_var(name)

    # --- life cycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the trainers' threads and the servers. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._finalizer()

    def __enter__(self) -> "DistributedProgram":
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


def _shut_down(trainers: Sequence[Trainer], pservers: Mapping[str, PServer]) -> None:
    for t in trainers:
        t.close()
    for ps in pservers.values():
        ps.close()


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
