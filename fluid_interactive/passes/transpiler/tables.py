"""Tables kept on the parameter servers: which parameters, cut how, updated where.

A parameter is a *table* when a training method updates it and every op that reads it
outside the updates is a row lookup (`OpSpec.row_lookup`: an embedding and its gradient)
with the lookup's ``is_sparse`` or ``is_distributed`` set. Such a table lives only on the
servers, as shards; trainers read the rows of their batch (``prefetch``) and send back
the gradient of those rows only (``send_rows``); see ops/dist_table.py.

Unlike a parameter block, a shard holds no row until that row is first used: ``size[0]``
of the table is its *capacity*. How the ids are dealt to shards:

* ``is_distributed=True``: shard ``id % shards``, any int64 id (hashed features);
* ``is_sparse=True`` alone: row ranges ``[start, start + rows)`` of ``[0, capacity)``, as
  Paddle 1.x cut a sparse table, and ids in that range, as the one-process table takes.

Either way a table has one shard per server (fewer for a table of fewer rows than
servers), shard j on server j, and shard j may hold at most its share of the capacity
(its row range's length).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import ProgramDefinitionError
from ...ir.records import BlockDesc, OpDesc, ProgramDesc, VarDesc
from ...ops.registry import get_spec
from ...ops.spec import RowLookup
from .roles import MethodRoles, UpdateGroup
from .slicing import slice_rows


@dataclass(frozen=True)
class TableShard:
    """Shard ``index`` of a table, on ``endpoint`` as ``name``; at most ``rows`` rows
    (with the 'range' rule: the ids ``[start, start + rows)``)."""
    index: int
    endpoint: str
    name: str
    start: int
    rows: int


@dataclass
class TableLayout:
    param: str
    var: VarDesc
    rule: str                      # 'mod' | 'range' (ops/dist_table.py)
    shards: list[TableShard]
    padding: dict[str, int] = field(default_factory=dict)   # method -> padding id (-1)

    @property
    def capacity(self) -> int:
        return int(self.var.shape[0])

    @property
    def dim(self) -> int:
        return int(self.var.shape[1])

    @property
    def starts(self) -> list[int]:
        return [s.start for s in self.shards]

    @property
    def endpoints(self) -> list[str]:
        return [s.endpoint for s in self.shards]

    def op_attrs(self) -> dict:
        """The attrs every table op of the trainer carries."""
        return {"table": self.param, "epmap": self.endpoints,
                "shard_rule": self.rule, "starts": self.starts, "capacity": self.capacity}


@dataclass
class TablePair:
    """One (table, grad) update group: its names on the servers."""
    group: UpdateGroup
    table: TableLayout
    remote_grad: str
    row_state: list[str]       # accumulators shaped like the table: kept per row
    scalar_state: list[str]    # one-element accumulators: one copy per shard

    @property
    def method(self) -> str:
        return self.group.method

    def grad_name(self, j: int) -> str:
        return f"{self.remote_grad}.shard{j}"

    def local_name(self, name: str, j: int) -> str:
        """The name a var of this group has in shard j's optimize block."""
        g = self.group
        if name == g.param:
            return self.table.shards[j].name
        if name == g.grad:
            return self.grad_name(j)
        if name in self.row_state or name in self.scalar_state or name in g.temps:
            return f"{name}.shard{j}"
        return name


# --- which parameters are tables ----------------------------------------------------------------

def lookup_of(op: OpDesc) -> RowLookup | None:
    return get_spec(op.type).row_lookup


def row_lookup(op: OpDesc) -> RowLookup:
    """The row lookup of an op known to be one."""
    rl = get_spec(op.type).row_lookup
    if rl is None:
        raise ProgramDefinitionError(f"transpile: op {op.type!r} is not a row lookup")
    return rl


def _flags(program: ProgramDesc, param: str) -> tuple[bool, bool]:
    """(read by a lookup asking for a served table, asking for id % shards)."""
    served = distributed = False
    for block in program.method_blocks():
        for op in block.ops:
            rl = lookup_of(op)
            if rl is None or op.input(rl.table) != [param] or rl.table_grad:
                continue
            served |= bool(op.attrs.get(rl.sparse)) or bool(op.attrs.get(rl.distributed))
            distributed |= bool(op.attrs.get(rl.distributed))
    return served, distributed


def find_tables(program: ProgramDesc, methods: list[MethodRoles], endpoints: list[str]
                ) -> dict[str, TableLayout]:
    """Every updated parameter that is read by lookups asking for a served table."""
    tables: dict[str, TableLayout] = {}
    for m in methods:
        for grp in m.groups:
            if grp.param in tables:
                continue
            served, distributed = _flags(program, grp.param)
            if not served:
                continue
            var = program.global_block().vars[grp.param]
            if len(var.shape) != 2:
                raise ProgramDefinitionError(f"transpile: the table {grp.param!r} "
                                             f"{list(var.shape)} must be 2-D [rows, dim]")
            _check_readers(program, grp.param, methods)
            table = _table_layout(grp.param, var, distributed, endpoints)
            for block in program.method_blocks():
                table.padding[block.name] = method_padding(block, table)
            tables[grp.param] = table
    return tables


def _table_layout(param: str, var: VarDesc, distributed: bool, endpoints: list[str]
                  ) -> TableLayout:
    rows = slice_rows(var.shape, len(endpoints), 1) if var.shape[0] >= len(endpoints) \
        else [1] * var.shape[0]
    shards, start = [], 0
    for j, r in enumerate(rows):
        shards.append(TableShard(j, endpoints[j], f"{param}.shard{j}", start, r))
        start += r
    return TableLayout(param, var, "mod" if distributed else "range", shards)


def _check_readers(program: ProgramDesc, param: str, methods: list[MethodRoles]) -> None:
    """A table is read by lookups in method blocks only (updates aside)."""
    moved = {(m.block_idx, i) for m in methods for i in m.moved}
    method_blocks = {b.idx for b in program.method_blocks()}
    for block in program.blocks[1:]:
        for i, op in enumerate(block.ops):
            if param not in op.input_names() or (block.idx, i) in moved:
                continue
            rl = lookup_of(op)
            if rl is not None and op.input(rl.table) == [param] and block.idx in method_blocks:
                continue
            where = "a control-flow block" if block.idx not in method_blocks else \
                f"method {block.name!r}"
            raise ProgramDefinitionError(
                f"transpile: the table {param!r} is kept on the parameter servers "
                f"(is_sparse/is_distributed), but op {op.type!r} in {where} reads it whole; "
                f"only embedding lookups in a method's own block may read such a table. "
                f"Read it with fluid.layers.embedding, or drop is_sparse/is_distributed")


def table_pair(program: ProgramDesc, grp: UpdateGroup, table: TableLayout,
               remote: str) -> TablePair:
    """Sort the group's accumulators: shaped like the table (kept per row) or of one
    element (a copy per shard)."""
    if grp.whole:
        raise ProgramDefinitionError(
            f"transpile: the update of the table {grp.param!r} reads it whole (a norm of "
            f"the table or of its gradient), which a table cut into shards of rows cannot "
            f"give; use an optimizer or clip that works row by row for it")
    row, scalar = [], []
    g0 = program.global_block()
    for s in grp.state:
        shape = tuple(g0.vars[s].shape)
        if shape == tuple(table.var.shape):
            row.append(s)
        elif all(d == 1 for d in shape):
            scalar.append(s)
        else:
            raise ProgramDefinitionError(
                f"transpile: optimizer state {s!r} {list(shape)} of the table {grp.param!r} "
                f"{list(table.var.shape)} is neither shaped like the table nor of one "
                f"element, so it cannot live beside the table's rows")
    return TablePair(grp, table, remote, row, scalar)


def method_padding(block: BlockDesc, table: TableLayout) -> int:
    """The padding id of the table's lookups in ``block`` (-1: none); they must agree."""
    found: dict[int, None] = {}
    for op in block.ops:
        rl = lookup_of(op)
        if rl is None or rl.table_grad or op.input(rl.table) != [table.param]:
            continue
        pad = op.attrs.get(rl.padding)
        found[-1 if not isinstance(pad, int) or pad < 0 else pad] = None
    if len(found) > 1:
        raise ProgramDefinitionError(
            f"transpile: the lookups of the table {table.param!r} in {block.name!r} have "
            f"different padding ids ({', '.join(map(str, found))}); one prefetch serves them "
            f"all, so give them one padding_idx")
    return next(iter(found), -1)
