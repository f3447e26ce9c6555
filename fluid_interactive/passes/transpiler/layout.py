"""Steps 2 and 3 put together: the layout of a transpiled program.

`build_layout` slices every updated parameter (but one whose update reads it whole,
joints.py), places its blocks, and names everything the trainer and parameter-server
programs share: gradient blocks (and the per-trainer names
they arrive under in sync mode) and accumulator blocks. The program builders (`trainer.py`,
`pserver.py`) and the runtime read names only from here.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import cached_property
from math import prod

from ...errors import ProgramDefinitionError
from ...ir.names import fresh_name
from ...ir.records import ProgramDesc, VarDesc
from .placement import dispatch
from .roles import MethodRoles, UpdateGroup
from .slicing import VarBlock, make_blocks, slice_rows
from .tables import TableLayout, TablePair, find_tables, table_pair


@dataclass
class ParamLayout:
    """One updated parameter: its row blocks and where each lives."""
    param: str
    var: VarDesc
    blocks: list[VarBlock]
    endpoints: list[str]

    @property
    def split(self) -> bool:
        return len(self.blocks) > 1


@dataclass
class PairLayout:
    """One (param, grad) update group with its names on the parameter servers."""
    group: UpdateGroup
    param: ParamLayout
    remote_grad: str                      # the averaged gradient's name on the servers
    grad_blocks: list[VarBlock]           # named as on the servers (and on the trainer)
    state_blocks: dict[str, list[VarBlock]] = field(default_factory=dict)
    state_sliced: dict[str, bool] = field(default_factory=dict)

    @property
    def method(self) -> str:
        return self.group.method

    def local_name(self, name: str, i: int) -> str:
        """The name a var of this group has in parameter block i's optimize block."""
        g = self.group
        if name == g.param:
            return self.param.blocks[i].name
        if name == g.grad:
            return self.grad_blocks[i].name
        if name in self.state_blocks:
            return self.state_blocks[name][i].name
        if name in g.temps and self.param.split:
            return f"{name}.block{i}"
        return name


@dataclass
class Layout:
    program: ProgramDesc
    methods: list[MethodRoles]
    params: dict[str, ParamLayout]
    pairs: list[PairLayout]
    endpoints: list[str]
    trainers: int
    sync: bool
    tables: dict[str, TableLayout] = field(default_factory=dict)   # tables.py
    table_pairs: list[TablePair] = field(default_factory=list)
    # Indexes of the lists above, which never change once the layout is built: the
    # program builders ask them once per server or method, so each answer costs what it
    # returns rather than a scan of every pair.
    _roles: dict[str, MethodRoles] = field(init=False, repr=False, compare=False)
    _of: dict[str, list[PairLayout]] = field(init=False, repr=False, compare=False)
    _on: dict[str, list[tuple[PairLayout, int]]] = field(init=False, repr=False,
                                                          compare=False)

    def __post_init__(self) -> None:
        self._roles = {}
        for m in self.methods:
            self._roles.setdefault(m.method, m)
        self._of, self._on = {}, {}
        for p in self.pairs:
            self._of.setdefault(p.method, []).append(p)
            for i, ep in enumerate(p.param.endpoints):
                self._on.setdefault(ep, []).append((p, i))
        self._table_of: dict[str, list[TablePair]] = {}
        self._table_on: dict[str, list[tuple[TablePair, int]]] = {}
        for tp in self.table_pairs:
            self._table_of.setdefault(tp.method, []).append(tp)
            for shard in tp.table.shards:
                self._table_on.setdefault(shard.endpoint, []).append((tp, shard.index))

    @cached_property
    def global_writers(self) -> dict[str, list[int]]:
        """The indices of the block-0 ops (initialisers) that write each var, ascending."""
        writers: dict[str, list[int]] = {}
        for k, op in enumerate(self.program.global_block().ops):
            for n in dict.fromkeys(op.output_names()):
                writers.setdefault(n, []).append(k)
        return writers

    @property
    def averaged(self) -> bool:
        """Whether each trainer's gradient arrives under its own name (sync, trainers > 1)."""
        return self.sync and self.trainers > 1

    def arrivals(self, name: str) -> list[str]:
        """The names a value the trainers send arrives under on a server: one per trainer
        when they are averaged, else the name itself."""
        if self.averaged:
            return [f"{name}.trainer_{k}" for k in range(self.trainers)]
        return [name]

    def sent(self, name: str, trainer_id: int) -> str:
        return f"{name}.trainer_{trainer_id}" if self.averaged else name

    def arrival_names(self, pair: PairLayout, i: int) -> list[str]:
        """The feeds of gradient block i's optimize block: the gradient block, then any
        side values (a fed learning rate), as they arrive."""
        out = self.arrivals(pair.grad_blocks[i].name)
        for s in pair.group.side:
            out += self.arrivals(s)
        return out

    def sent_name(self, pair: PairLayout, i: int, trainer_id: int) -> str:
        return self.sent(pair.grad_blocks[i].name, trainer_id)

    def pairs_of(self, method: str) -> list[PairLayout]:
        return list(self._of.get(method, ()))

    def table_pairs_of(self, method: str) -> list[TablePair]:
        return list(self._table_of.get(method, ()))

    def table_pairs_on(self, endpoint: str) -> list[tuple[TablePair, int]]:
        """Each table update with a shard on ``endpoint`` and that shard's index."""
        return list(self._table_on.get(endpoint, ()))

    def roles_of(self, method: str) -> MethodRoles:
        return self._roles[method]

    def pairs_on(self, endpoint: str) -> list[tuple[PairLayout, int]]:
        """Each pair with a block on ``endpoint`` and that block's index, in pair order."""
        return list(self._on.get(endpoint, ()))

    def joint_endpoints(self, method: str, param: str) -> list[str]:
        """The servers that need ``param``'s gradient to run a joint op of ``method`` (those
        holding a parameter the joint reads), or [] when no joint reads it."""
        joint = self.roles_of(method).joint_of(param)
        if joint is None:
            return []
        eps = {ep for p in joint.params for ep in self.params[p].endpoints}
        return [ep for ep in self.endpoints if ep in eps]

    def idle_endpoints(self) -> list[str]:
        used = {ep for p in self.params.values() for ep in p.endpoints}
        used |= {ep for t in self.tables.values() for ep in t.endpoints}
        return [ep for ep in self.endpoints if ep not in used]


def _unique(name: str, method: str, taken: set[str]) -> str:
    candidate = name if name not in taken else \
        fresh_name(f"{name}@{method}", taken.__contains__, sep=".")
    taken.add(candidate)
    return candidate


def build_layout(program: ProgramDesc, methods: list[MethodRoles], endpoints: list[str],
                 trainers: int, sync: bool, split_method: str, slice_var_up: bool,
                 min_block_size: int) -> Layout:
    tables = find_tables(program, methods, endpoints)
    params = _place_params(program, methods, endpoints, split_method,
                           len(endpoints) if slice_var_up else 1, min_block_size, tables)
    taken: set[str] = set(program.global_block().vars)
    pairs, table_pairs = [], []
    for m in methods:
        for grp in m.groups:
            _check_shared(grp, params, tables)
            if grp.param in tables:
                table_pairs.append(table_pair(program, grp, tables[grp.param],
                                              _unique(grp.grad, m.method, taken)))
            else:
                pairs.append(_pair_layout(program, m.method, grp, params, taken))
    _check_schedule_names(methods)
    layout = Layout(program, methods, params, pairs, endpoints, trainers, sync, tables,
                    table_pairs)
    idle = layout.idle_endpoints()
    if idle:
        blocks = sum(len(p.blocks) for p in params.values()) + sum(
            len(t.shards) for t in tables.values())
        warnings.warn(
            f"transpile: {len(idle)} of {len(endpoints)} parameter servers get no parameter "
            f"block and will be idle ({', '.join(idle)}): {blocks} block(s) were "
            f"placed by {split_method}; use fewer pservers, a smaller min_block_size, or "
            f"round_robin", UserWarning,
            stacklevel=3)
    return layout


def _place_params(program: ProgramDesc, methods: list[MethodRoles], endpoints: list[str],
                  split_method: str, slice_count: int, min_block_size: int,
                  tables: dict[str, TableLayout]) -> dict[str, ParamLayout]:
    """Every updated parameter but the tables cut into row blocks, in the order of its
    first update, and the blocks dealt to servers in that order."""
    g0 = program.global_block()
    params: dict[str, ParamLayout] = {}
    for m in methods:
        for grp in m.groups:
            if grp.param in params or grp.param in tables:
                continue
            var = g0.vars[grp.param]
            whole = any(g.whole for mm in methods for g in mm.groups if g.param == grp.param)
            rows = slice_rows(var.shape, 1 if whole else slice_count, min_block_size)
            params[grp.param] = ParamLayout(grp.param, var, make_blocks(var.name, var.shape,
                                                                        rows), [])
    all_blocks = [b.name for p in params.values() for b in p.blocks]
    placed = dict(zip(all_blocks, dispatch(all_blocks, endpoints, split_method)))
    for p in params.values():
        p.endpoints = [placed[b.name] for b in p.blocks]
    return params


def _check_shared(grp: UpdateGroup, params: dict[str, ParamLayout],
                  tables: dict[str, TableLayout]) -> None:
    for n in grp.shared:
        if n in params or n in tables:
            raise ProgramDefinitionError(
                f"transpile: the update of {grp.param!r} reads the parameter {n!r}, "
                f"which is itself updated on a parameter server; a server cannot see "
                f"another server's parameter")


def _pair_layout(program: ProgramDesc, method: str, grp: UpdateGroup,
                 params: dict[str, ParamLayout], taken: set[str]) -> PairLayout:
    """One update group's names on the servers: its gradient blocks and state blocks."""
    pl = params[grp.param]
    remote = _unique(grp.grad, method, taken)
    grad_blocks = [VarBlock(grp.grad, f"{remote}.block{b.index}" if pl.split else remote,
                            b.index, b.count, b.start, b.rows, b.shape)
                   for b in pl.blocks]
    pair = PairLayout(grp, pl, remote, grad_blocks)
    for s in grp.state:
        pair.state_blocks[s], pair.state_sliced[s] = _state_blocks(
            program.global_block().vars[s], grp.param, pl)
    return pair


def _state_blocks(svar: VarDesc, param: str, pl: ParamLayout) -> tuple[list[VarBlock], bool]:
    """How an accumulator follows its parameter's blocks, and whether it is cut like it:
    whole with a whole parameter, cut when it has the parameter's shape, copied per block
    when it holds one element."""
    s = svar.name
    if not pl.split:
        return make_blocks(s, svar.shape, [svar.shape[0]] if svar.shape else [1]), False
    if tuple(svar.shape) == tuple(pl.var.shape):
        return [VarBlock(s, f"{s}.block{b.index}", b.index, b.count, b.start, b.rows,
                         b.shape) for b in pl.blocks], True
    if prod(svar.shape) == 1:
        return [VarBlock(s, f"{s}.block{b.index}", b.index, b.count, 0, 1,
                         tuple(svar.shape)) for b in pl.blocks], False
    raise ProgramDefinitionError(
        f"transpile: optimizer state {s!r} {list(svar.shape)} of {param!r} "
        f"{list(pl.var.shape)} has neither the parameter's shape nor a single element, so it "
        f"cannot follow the parameter's {len(pl.blocks)} row blocks; transpile with "
        f"slice_var_up=False or a larger min_block_size")


def _check_schedule_names(methods: list[MethodRoles]) -> None:
    lr_names: dict[str, str] = {}
    for m in methods:
        for n in m.lr_temps:
            if n in lr_names and lr_names[n] != m.method:
                raise ProgramDefinitionError(
                    f"transpile: learning-rate schedule results of methods {lr_names[n]!r} "
                    f"and {m.method!r} share the name {n!r}; parameter servers keep them "
                    f"side by side, so give them different names")
            lr_names[n] = m.method
