"""`transpile`: the whole pass, and `TranspilePlan`, what it returns.

``transpile`` is pure: it copies the program it is given and never changes it. The plan
builds each trainer and parameter-server program on first request and hands out copies.
Running a plan is the business of `fluid_interactive.distributed` (``launch(plan)``), a
layer above this one, and drawing it of ``fluid.graph(plan)``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import OpArgumentError, ProgramDefinitionError
from ...ir.records import ProgramDesc, VarDesc
from ...ir.text import format_program, short_type
from ...util.gc_pause import gc_paused
from ..verify import check_program
from .layout import Layout, build_layout
from .placement import SPLIT_METHODS, endpoints_from
from .pserver import PServerInfo, build_pserver_program, build_pserver_startup
from .roles import analyse_method
from .trainer import build_trainer_program

MODES = ("sync", "async")


@dataclass(frozen=True)
class Piece:
    """Rows ``[start, start + rows)`` of a var live on ``endpoint`` as ``name``."""
    endpoint: str
    name: str
    start: int
    rows: int


@dataclass(frozen=True)
class Location:
    """Where the servers keep a var of the original program: ``'rows'`` — the pieces
    joined along axis 0 make it; ``'copy'`` — every piece is a full copy (accumulators of
    one element, learning rates); ``'table'`` — the shards of a table (or of an
    accumulator shaped like it) that hold its rows as they are first used, each piece a
    shard (``start``, ``rows``: its row range, or its share of the capacity)."""
    kind: str
    pieces: tuple[Piece, ...]


# --- the plan -----------------------------------------------------------------------------------

class TranspilePlan:
    """The trainer and parameter-server programs of one transpiled program."""

    def __init__(self, layout: Layout, *, main: tuple[str, ...], mode: str, split_method: str,
                 slice_var_up: bool, min_block_size: int, seed: int | None,
                 device: str | None):
        self._layout = layout
        self.main = main
        self.mode = mode
        self.split_method = split_method
        self.slice_var_up = slice_var_up
        self.min_block_size = min_block_size
        self.seed = seed
        self.device = device
        self._trainers: dict[int, ProgramDesc] = {}
        self._pservers: dict[str, tuple[ProgramDesc, PServerInfo]] = {}
        self._startups: dict[str, ProgramDesc] = {}

    # --- facts --------------------------------------------------------------------------------

    @property
    def program(self) -> ProgramDesc:
        """A copy of the program that was transpiled."""
        return self._layout.program.clone()

    @property
    def endpoints(self) -> list[str]:
        return list(self._layout.endpoints)

    @property
    def trainers(self) -> int:
        return self._layout.trainers

    @property
    def sync(self) -> bool:
        return self._layout.sync

    def distributed_params(self) -> list[str]:
        """Parameters the servers update, in the order of their first update."""
        return list(self._layout.params)

    def tables(self) -> list[str]:
        """The tables kept on the servers in shards (passes/transpiler/tables.py)."""
        return list(self._layout.tables)

    def table_shards(self, table: str) -> list[Piece]:
        """The shards of ``table``: server, name, and its row range (or its share of the
        capacity, for a table dealt by ``id % shards``)."""
        t = self._layout.tables.get(table)
        if t is None:
            raise KeyError(f"{table!r} is not a table kept on the servers; the tables: "
                           f"{', '.join(self._layout.tables) or 'none'}")
        return [Piece(s.endpoint, s.name, s.start, s.rows) for s in t.shards]

    def table_rule(self, table: str) -> str:
        """How ids are dealt to the shards of ``table``: 'mod' or 'range'."""
        self.table_shards(table)
        return self._layout.tables[table].rule

    def table_state(self, table: str) -> list[str]:
        """The accumulators kept per row beside ``table`` (by its updates)."""
        return list(dict.fromkeys(s for tp in self._layout.table_pairs
                                  if tp.table.param == table for s in tp.row_state))

    def param_blocks(self, param: str) -> list[Piece]:
        pl = self._layout.params.get(param)
        if pl is None:
            raise KeyError(f"{param!r} is not updated on the parameter servers; they update: "
                           f"{', '.join(self._layout.params) or 'nothing'}")
        return [Piece(ep, b.name, b.start, b.rows) for b, ep in zip(pl.blocks, pl.endpoints)]

    def locate(self, name: str) -> Location | None:
        """Where the servers keep the original program's persistable ``name`` (None if only
        the trainers hold it)."""
        lay = self._layout
        if name in lay.params:
            return Location("rows", tuple(self.param_blocks(name)))
        for tp in lay.table_pairs:
            if name == tp.table.param or name in tp.row_state:
                return Location("table", tuple(
                    Piece(s.endpoint, tp.local_name(name, s.index), s.start, s.rows)
                    for s in tp.table.shards))
            if name in tp.scalar_state:
                return Location("copy", tuple(Piece(s.endpoint, tp.local_name(name, s.index),
                                                    0, 1) for s in tp.table.shards))
        for pair in lay.pairs:
            blocks = pair.state_blocks.get(name)
            if blocks is None:
                continue
            pieces = tuple(Piece(ep, b.name, b.start, b.rows)
                           for b, ep in zip(blocks, pair.param.endpoints))
            return Location("rows" if pair.state_sliced[name] or len(blocks) == 1 else "copy",
                            pieces)
        holders = []
        for ep in lay.endpoints:
            if any(name in pair.group.shared for pair, _ in lay.pairs_on(ep)) or any(
                    name in m.lr_state + m.lr_reads for m in lay.methods
                    if any(p.method == m.method for p, _ in lay.pairs_on(ep))):
                holders.append(Piece(ep, name, 0, -1))
        return Location("copy", tuple(holders)) if holders else None

    # --- programs -----------------------------------------------------------------------------

    def _trainer_id(self, trainer_id: int) -> int:
        n = self.trainers
        if isinstance(trainer_id, bool) or not isinstance(trainer_id, int) or \
                not 0 <= trainer_id < n:
            raise OpArgumentError(f"trainer id {trainer_id!r} is out of range: this plan has "
                                  f"{n} trainer(s), ids 0..{n - 1}")
        return trainer_id

    def _endpoint(self, pserver: int | str) -> str:
        eps = self._layout.endpoints
        if isinstance(pserver, str):
            if pserver in eps:
                return pserver
        elif isinstance(pserver, int) and not isinstance(pserver, bool) and \
                0 <= pserver < len(eps):
            return eps[pserver]
        raise OpArgumentError(f"no parameter server {pserver!r}: this plan has "
                              f"{len(eps)}, indices 0..{len(eps) - 1} or endpoints "
                              f"{', '.join(eps)}")

    def _trainer(self, trainer_id: int) -> ProgramDesc:
        tid = self._trainer_id(trainer_id)
        if tid not in self._trainers:
            self._trainers[tid] = build_trainer_program(self._layout, tid)
        return self._trainers[tid]

    def trainer_program(self, trainer_id: int = 0) -> ProgramDesc:
        """The program trainer ``trainer_id`` runs (a fresh copy)."""
        return self._trainer(trainer_id).clone()

    def _pserver(self, pserver: int | str) -> tuple[ProgramDesc, PServerInfo]:
        ep = self._endpoint(pserver)
        if ep not in self._pservers:
            self._pservers[ep] = build_pserver_program(self._layout, ep)
        return self._pservers[ep]

    def pserver_program(self, pserver: int | str) -> ProgramDesc:
        """The program of a parameter server, by index or endpoint (a fresh copy)."""
        return self._pserver(pserver)[0].clone()

    def pserver_info(self, pserver: int | str) -> PServerInfo:
        """Which optimize block of that server's program runs for which gradients."""
        return self._pserver(pserver)[1]

    def _startup(self, pserver: int | str) -> ProgramDesc:
        ep = self._endpoint(pserver)
        if ep not in self._startups:
            self._startups[ep] = build_pserver_startup(self._layout, ep, self._pserver(ep)[0])
        return self._startups[ep]

    def startup_program(self, pserver: int | str) -> ProgramDesc:
        """The program that creates a parameter server's state (a fresh copy)."""
        return self._startup(pserver).clone()

    def _build_all(self) -> None:
        """Build trainer 0 and every server's programs (without the copies the public
        accessors hand out), so a program that cannot be split fails in `transpile`."""
        self._trainer(0)
        for ep in self._layout.endpoints:
            self._startup(ep)

    def programs(self) -> dict[str, ProgramDesc]:
        """Every program by a display name: trainers, then servers and their startups."""
        out = {f"trainer {i}": self.trainer_program(i) for i in range(self.trainers)}
        for ep in self.endpoints:
            out[f"pserver {ep}"] = self.pserver_program(ep)
            out[f"pserver {ep} startup"] = self.startup_program(ep)
        return out

    # --- showing it ---------------------------------------------------------------------------

    def summary(self) -> str:
        lay = self._layout
        lines = [f"TranspilePlan: {self.mode} mode, {self.trainers} trainer(s), "
                 f"{len(lay.endpoints)} parameter server(s); main: {', '.join(self.main)}",
                 f"  split_method={self.split_method}, slice_var_up={self.slice_var_up}, "
                 f"min_block_size={self.min_block_size}"]
        for ep in lay.endpoints:
            on = lay.pairs_on(ep)
            idle = not on and not lay.table_pairs_on(ep)
            lines.append(f"pserver {ep}:" + ("  (idle: no parameter block)" if idle else ""))
            for pair, i in on:
                pb, gb = pair.param.blocks[i], pair.grad_blocks[i]
                rows = (f" rows {pb.start}:{pb.start + pb.rows} of {pair.param.var.shape[0]}"
                        if pair.param.split else "")
                block_var = VarDesc(pb.name, pb.shape, pair.param.var.dtype)
                lines.append(f"  {pb.name}: {short_type(block_var)}{rows} <- {gb.name} "
                             f"({pair.method})")
                state = [blocks[i].name for blocks in pair.state_blocks.values()]
                if state:
                    lines.append(f"    state: {', '.join(state)}")
            for tp, j in lay.table_pairs_on(ep):
                shard = tp.table.shards[j]
                what = (f"ids % {len(tp.table.shards)} == {j}" if tp.table.rule == "mod"
                        else f"ids {shard.start}:{shard.start + shard.rows}")
                lines.append(f"  {shard.name}: table of {tp.table.capacity} x {tp.table.dim}, "
                             f"{what}, up to {shard.rows} rows made as used <- "
                             f"{tp.grad_name(j)} rows ({tp.method})")
                state = [tp.local_name(s, j) for s in tp.row_state + tp.scalar_state]
                if state:
                    lines.append(f"    state: {', '.join(state)}")
            shared = sorted({n for pair, _ in on for n in pair.group.shared})
            if shared:
                lines.append(f"  replicated: {', '.join(shared)}")
        kept = [n for n, v in lay.program.global_block().vars.items()
                if v.is_parameter and n not in lay.params and n not in lay.tables]
        if kept:
            lines.append(f"kept on the trainers only (not updated by {', '.join(self.main)}): "
                         f"{', '.join(kept)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return (f"<TranspilePlan {self.mode}: {self.trainers} trainer(s), "
                f"{len(self._layout.endpoints)} pserver(s), main={', '.join(self.main)}>")

    def text(self) -> str:
        """Every program in the canonical text form."""
        return "\n\n".join(f"=== {name} ===\n{format_program(p)}"
                           for name, p in self.programs().items())

    def received(self, method: str) -> dict[str, list[str]]:
        """The parameter blocks a trainer receives in a transpiled ``method``, by server
        (what its ``recv`` ops ask for, in their order)."""
        if method not in self.main:
            raise KeyError(f"{method!r} is not transpiled; transpiled: {', '.join(self.main)}")
        out: dict[str, list[str]] = {}
        for p in self._layout.roles_of(method).params():
            pl = self._layout.params.get(p)
            if pl is None:   # a table: the next step prefetches its rows
                continue
            for b, ep in zip(pl.blocks, pl.endpoints):
                out.setdefault(ep, []).append(b.name)
        return out

    def edges(self, trainer_id: int = 0) -> list[tuple[str, str, str, str]]:
        """``(from_program, var, to_program, var)`` for every send and recv of a trainer;
        the programs are named as in `programs` (``'trainer 0'``, ``'pserver <endpoint>'``),
        so ``fluid.graph(plan)`` can draw them side by side."""
        lay = self._layout
        tname = f"trainer {self._trainer_id(trainer_id)}"
        out: list[tuple[str, str, str, str]] = []
        for pair in lay.pairs:
            for i, ep in enumerate(pair.param.endpoints):
                local = pair.grad_blocks[i].name if pair.param.split else pair.group.grad
                out.append((tname, local, f"pserver {ep}",
                            lay.sent_name(pair, i, trainer_id)))
            for side in pair.group.side:
                for ep in dict.fromkeys(pair.param.endpoints):
                    out.append((tname, side, f"pserver {ep}", lay.sent(side, trainer_id)))
        for pl in lay.params.values():
            for b, ep in zip(pl.blocks, pl.endpoints):
                out.append((f"pserver {ep}", b.name, tname, b.name))
        for tp in lay.table_pairs:
            for s in tp.table.shards:
                out.append((tname, tp.group.grad, f"pserver {s.endpoint}",
                            lay.sent(tp.grad_name(s.index), trainer_id)))
        for t in lay.tables.values():
            for s in t.shards:   # the rows of each batch, prefetched
                out.append((f"pserver {s.endpoint}", s.name, tname, f"{t.param}@PREFETCH.ids"))
        return out

# --- the pass -----------------------------------------------------------------------------------

def _program_of(source: Any) -> tuple[ProgramDesc, int | None, str | None]:
    """The program to split, with the seed and device of a compiled one. A bare
    ProgramDesc may come from anywhere (a file): it is verified first, as a compiled
    program was when it compiled."""
    if isinstance(source, ProgramDesc):
        check_program(source)
        return source, None, None
    program = getattr(source, "program", None)
    if isinstance(program, ProgramDesc):
        return program, getattr(source, "seed", None), getattr(source, "device", None)
    if callable(getattr(source, "Compile", None)):
        raise ProgramDefinitionError(
            f"transpile takes a compiled program: transpile({type(source).__name__}()"
            f".Compile(seed=...), ...)")
    raise ProgramDefinitionError(f"transpile takes a compiled program or a ProgramDesc; got "
                                 f"{type(source).__name__}")


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise OpArgumentError(f"{what} must be an integer >= 1; got {value!r}")
    return value


def transpile(compiled_or_program: Any, main: str | Sequence[str] = "train_step",
              trainers: int = 1, pservers: int | str | Sequence[str] = 1,
              mode: str = "sync", split_method: str = "round_robin",
              slice_var_up: bool = True, min_block_size: int = 8192) -> TranspilePlan:
    """Split the training method(s) ``main`` of a compiled program (or a ProgramDesc) into
    trainer programs and parameter-server programs.

    ``trainers``: how many trainers share each batch. ``pservers``: a count (local
    endpoints ``127.0.0.1:6174``, ``:6175``, ...) or endpoints (``"host:port"`` strings, a
    list or one comma-separated string). ``mode``: ``'sync'`` (the servers average every
    trainer's gradient, then update once) or ``'async'`` (each gradient updates on arrival).
    ``split_method``: ``'round_robin'`` or ``'hash'`` (CRC-32 of the block name, stable
    across processes). ``slice_var_up``: cut parameters into up to one row block per server;
    ``min_block_size``: the fewest elements a block may hold.

    The input is never changed. Raises `ProgramDefinitionError` for a program that cannot
    be split (an unknown method, a method without an optimizer, ...) and `OpArgumentError`
    for a bad setting; warns when some servers would get no block.
    """
    program, seed, device = _program_of(compiled_or_program)
    mains = (main,) if isinstance(main, str) else tuple(main)
    if not mains or not all(isinstance(m, str) for m in mains):
        raise OpArgumentError(f"main must name a method or list methods; got {main!r}")
    if len(set(mains)) != len(mains):
        raise OpArgumentError(f"main lists a method twice: {list(mains)}")
    trainers = _positive_int(trainers, "trainers")
    if mode not in MODES:
        raise OpArgumentError(f"mode must be 'sync' or 'async'; got {mode!r}")
    if split_method not in SPLIT_METHODS:
        raise OpArgumentError(f"split_method must be one of {', '.join(SPLIT_METHODS)}; "
                              f"got {split_method!r}")
    if not isinstance(slice_var_up, bool):
        raise OpArgumentError(f"slice_var_up must be True or False; got {slice_var_up!r}")
    min_block_size = _positive_int(min_block_size, "min_block_size")
    endpoints = endpoints_from(pservers)

    with gc_paused():   # many long-lived records: keep the cost linear in program size
        source = program.clone()
        methods = [analyse_method(source, m) for m in mains]
        layout = build_layout(source, methods, endpoints, trainers, mode == "sync",
                              split_method, slice_var_up, min_block_size)
        plan = TranspilePlan(layout, main=mains, mode=mode, split_method=split_method,
                             slice_var_up=slice_var_up, min_block_size=min_block_size,
                             seed=seed, device=device)
        plan._build_all()
    return plan
