"""The trainer's side of the tables kept on parameter servers (tables.py).

In every method block that reads a table (trainer.py calls `rewrite_lookups`):

* its lookups become one ``prefetch`` at the first of them: the rows of the batch's
  distinct ids, from the servers, in the lookups' outputs;
* the lookups' gradient ops become ``prefetch_grad``: the gradient of those rows only,
  ``[distinct ids, dim]`` (every var on the way to the table's gradient is declared so);
* in a training method, ``send_rows`` (`send_rows_ops`) right after the table's
  gradient is complete hands the rows' ids and gradient to the shards holding them.

The trainer never declares the table itself (trainer.py drops it with its initialiser).
"""
from __future__ import annotations

from ...errors import ProgramDefinitionError
from ...ir.records import BlockDesc, OpDesc, OpRole, VarDesc
from ...ops.dist import COMM_VAR
from .layout import Layout
from .tables import TableLayout, TablePair, method_padding, row_lookup


def row_ids_name(table: str) -> str:
    return f"{table}@PREFETCH.ids"


def rewrite_lookups(block: BlockDesc, layout: Layout, trainer_id: int,
                    grow: set[str]) -> None:
    """Replace the lookups of every table ``block`` reads (see the module docstring);
    ``grow``: the tables this method updates."""
    for table in layout.tables.values():
        readers = [k for k, op in enumerate(block.ops) if table.param in op.input_names()]
        if not readers:
            continue
        fwd = [k for k in readers if not row_lookup(block.ops[k]).table_grad]
        if not fwd:
            raise ProgramDefinitionError(
                f"transpile: {block.name!r} computes the gradient of the table "
                f"{table.param!r} without looking it up")
        _check_ids_ready(block, table, fwd)
        pad = table.padding.get(block.name, -1) if block.name in table.padding else \
            method_padding(block, table)
        prefetch, local_of = _prefetch_op(block, table, fwd, pad, trainer_id,
                                          table.param in grow)
        grads = {k: _grad_op(block, table, block.ops[k], local_of, pad)
                 for k in readers if k not in fwd}
        ops: list[OpDesc] = []
        for k, op in enumerate(block.ops):
            if k == fwd[0]:
                ops.append(prefetch)
            if k not in fwd:
                ops.append(grads.get(k, op))
        block.ops = ops
        _redeclare_grads(block, table, [n for g in grads.values() for n in g.output_names()])


def _check_ids_ready(block: BlockDesc, table: TableLayout, fwd: list[int]) -> None:
    """One prefetch at the first lookup serves them all: their ids must be known there."""
    first = fwd[0]
    for k in fwd[1:]:
        rl = row_lookup(block.ops[k])
        ids = block.ops[k].input(rl.ids)[0]
        late = [j for j in range(first, k) if ids in block.ops[j].output_names()]
        if late:
            raise ProgramDefinitionError(
                f"transpile: the lookups of the table {table.param!r} in {block.name!r} are "
                f"served by one prefetch at the first of them, but the ids {ids!r} of a "
                f"later lookup are computed after it (by op {block.ops[late[0]].type!r}); "
                f"compute every id before the first lookup")


def _prefetch_op(block: BlockDesc, table: TableLayout, fwd: list[int], pad: int,
                 trainer_id: int, grow: bool) -> tuple[OpDesc, dict[str, str]]:
    ops = [block.ops[k] for k in fwd]
    ids = [op.input(row_lookup(op).ids)[0] for op in ops]
    outs = [op.output(row_lookup(op).out)[0] for op in ops]
    local_of: dict[str, str] = {}
    local = []
    for n, name in enumerate(ids):
        lname = f"{name}@{table.param}.local{n}"
        local_of.setdefault(name, lname)
        local.append(lname)
        source = block.vars.get(name)
        shape = source.shape if source is not None else (-1, 1)
        block.vars[lname] = VarDesc(lname, shape, "int64", stop_gradient=True)
    row_ids = row_ids_name(table.param)
    block.vars[row_ids] = VarDesc(row_ids, (-1,), "int64", stop_gradient=True)
    attrs = {**table.op_attrs(), "varnames": [s.name for s in table.shards],
             "trainer_id": trainer_id, "dim": table.dim, "dtype": table.var.dtype,
             "padding_idx": pad, "grow": grow}
    op = OpDesc("prefetch", {"Comm": [COMM_VAR], "Ids": ids},
                {"CommOut": [COMM_VAR], "Out": outs, "Local": local, "RowIds": [row_ids]},
                attrs, role=OpRole.RPC, loc=ops[0].loc)
    return op, local_of


def _grad_op(block: BlockDesc, table: TableLayout, op: OpDesc, local_of: dict[str, str],
             pad: int) -> OpDesc:
    rl = row_lookup(op)
    ids = op.input(rl.ids)[0]
    if ids not in local_of:
        raise ProgramDefinitionError(
            f"transpile: {block.name!r} computes the gradient of a lookup of the table "
            f"{table.param!r} with the ids {ids!r}, which no lookup of it reads")
    return OpDesc("prefetch_grad",
                  {"Local": [local_of[ids]], "RowIds": [row_ids_name(table.param)],
                   "Out@GRAD": op.input(rl.out_grad)},
                  {"Grad": op.output(rl.table_grad)}, {"padding_idx": pad},
                  role=op.role, role_var=op.role_var, loc=op.loc)


def _redeclare_grads(block: BlockDesc, table: TableLayout, first: list[str]) -> None:
    """The gradient of the prefetched rows, and what the backward pass makes of it (the
    sum of several lookups' gradients), is ``[distinct ids, dim]``, not the table's shape."""
    names = set(first)
    for op in block.ops:
        if not op.role & OpRole.BACKWARD or not names & set(op.input_names()):
            continue
        for n in op.output_names():
            var = block.vars.get(n)
            if var is not None and tuple(var.shape) == tuple(table.var.shape):
                names.add(n)
    for n in names:
        block.vars[n] = VarDesc(n, (-1, table.dim), table.var.dtype)


def send_rows_ops(layout: Layout, tp: TablePair, trainer_id: int, loc) -> list[OpDesc]:
    """``send_rows`` of the table's gradient to every shard, and the values the update
    reads from the trainer (a fed learning rate) to every shard's server."""
    table, g = tp.table, tp.group
    rv = (g.param, g.grad)
    ops = [OpDesc(
        "send_rows", {"Comm": [COMM_VAR], "RowIds": [row_ids_name(table.param)],
                      "Grad": [g.grad]}, {"CommOut": [COMM_VAR]},
        {**table.op_attrs(), "trainer_id": trainer_id,
         "send_varnames": [layout.sent(tp.grad_name(s.index), trainer_id)
                           for s in table.shards],
         "padding_idx": table.padding.get(tp.method, -1),
         "sync_mode": layout.sync},
        role=OpRole.RPC, role_var=rv, loc=loc)]
    if g.side:
        eps = list(dict.fromkeys(table.endpoints))
        names = [side for side in g.side for _ in eps]
        ops.append(OpDesc(
            "send", {"Comm": [COMM_VAR], "X": names}, {"CommOut": [COMM_VAR]},
            {"epmap": eps * len(g.side), "send_varnames": [layout.sent(n, trainer_id)
                                                           for n in names],
             "trainer_id": trainer_id, "sync_mode": layout.sync},
            role=OpRole.RPC, role_var=rv, loc=loc))
    return ops
