"""Checkpoints of jobs with tables on the servers (`DistributedProgram.save` and ``load``).

A checkpoint is an ordinary one (`fluid.load` opens it as one process), in which each
table is saved as the rows its shards hold: ``<table>@IDS``, the live ids sorted, and the
table (and each accumulator kept per row) as those rows plus one zero row. The saved
program reads a table through ``lookup_index`` before each lookup: an id's row, or the
zero row for the padding id and, at inference, for an id the servers never saw, which is
what the cluster answered for them. So the loaded program predicts exactly what the
cluster predicted, hashed ids included. A training method of the loaded program refuses
ids it has never seen (one process does not make rows); training goes on on servers:
``launch(plan).load(dir)`` deals the saved rows to the shards of that plan, whatever
their number.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..ir.records import BlockDesc, OpDesc, OpRole, ProgramDesc, VarDesc
from ..ops.dist_table import shard_of
from ..ops.registry import get_spec
from ..passes.transpiler import ServedShard, TranspilePlan

IDS_SUFFIX = "@IDS"


def keys_name(table: str) -> str:
    return f"{table}{IDS_SUFFIX}"


def merge_shards(parts: Sequence[tuple[ServedShard, Mapping[str, Any]]]
                 ) -> dict[str, np.ndarray]:
    """One table's rows from its shards' (``{'ids', <local var>: rows}``): ``{'ids':
    sorted ids, <original var>: rows}``."""
    spec = parts[0][0]
    ids = np.concatenate([np.asarray(p["ids"], np.int64) for _, p in parts]) if parts else \
        np.zeros(0, np.int64)
    order = np.argsort(ids, kind="stable")
    out = {"ids": ids[order]}
    for k, init in enumerate(spec.state):
        rows = np.concatenate([np.asarray(p[s.state[k].local]) for s, p in parts])
        out[init.var] = rows[order].reshape(-1, spec.dim)
    return out


def split_rows(plan: TranspilePlan, table: str, rows: Mapping[str, np.ndarray],
               served: Mapping[str, ServedShard]) -> dict[str, dict[str, np.ndarray]]:
    """The rows of each shard of ``table`` in ``plan``, by shard name, named as the shard
    names its vars (a checkpoint's rows dealt to any number of servers)."""
    ids = np.asarray(rows["ids"], np.int64)
    pieces = plan.table_shards(table)
    which = shard_of(ids, plan.table_rule(table), [p.start for p in pieces],
                     served[pieces[0].name].capacity) if ids.size else np.zeros(0, np.int64)
    out = {}
    for j, piece in enumerate(pieces):
        spec = served[piece.name]
        mine = np.flatnonzero(which == j)
        out[piece.name] = {"ids": ids[mine], **{s.local: np.asarray(rows[s.var])[mine]
                                                 for s in spec.state}}
    return out


# --- the one-process program --------------------------------------------------------------------

def one_process(plan: TranspilePlan, state: Mapping[str, np.ndarray],
                tables: Mapping[str, Mapping[str, np.ndarray]]
                ) -> tuple[ProgramDesc, dict[str, np.ndarray]]:
    """The program and values a single process runs with the tables' live rows."""
    program = plan.program
    values = dict(state)
    g0 = program.global_block()
    for table, rows in tables.items():
        ids = np.asarray(rows["ids"], np.int64)
        n, dim = ids.size, g0.vars[table].shape[1]
        kept = [v for v in rows if v != "ids"]
        old = tuple(g0.vars[table].shape)
        for v in kept:
            g0.vars[v].shape = (n + 1, dim)
            values[v] = np.concatenate([np.asarray(rows[v]), np.zeros((1, dim), rows[v].dtype)])
        g0.ops = [op for op in g0.ops if not set(op.output_names()) <= set(kept)]
        g0.vars[keys_name(table)] = VarDesc(keys_name(table), (n,), "int64", persistable=True,
                                            stop_gradient=True)
        values[keys_name(table)] = ids
        for block in program.method_blocks():
            _index_lookups(block, table, n, _trains(block, table))
            _reshape_followers(block, set(kept), old, (n + 1, dim))
    return program, values


def _reshape_followers(block: BlockDesc, names: set[str], old: tuple, new: tuple) -> None:
    """Vars of ``block`` computed from the table (its gradient, an update's temporaries)
    that had its shape take its new one."""
    names = set(names)
    for op in block.ops:
        if not names & set(op.input_names()):
            continue
        for n in op.output_names():
            var = block.vars.get(n)
            if var is not None and tuple(var.shape) == old:
                var.shape = new
                names.add(n)


def _trains(block: BlockDesc, table: str) -> bool:
    return any(op.role & OpRole.OPTIMIZE and table in op.role_var[0::2] for op in block.ops)


def _index_lookups(block: BlockDesc, table: str, n: int, strict: bool) -> None:
    """Before the table's lookups in ``block``: each ids var through ``lookup_index``; the
    lookups read the zero row (``n``) for the padding id and unknown ids."""
    indexed: dict[str, str] = {}
    ops: list[OpDesc] = []
    for op in block.ops:
        rl = get_spec(op.type).row_lookup
        if rl is None or op.input(rl.table) != [table]:
            ops.append(op)
            continue
        ids = op.input(rl.ids)[0]
        if ids not in indexed:
            indexed[ids] = f"{ids}@{table}.row"
            var = block.vars.get(ids)
            block.vars[indexed[ids]] = VarDesc(indexed[ids], var.shape if var else (-1, 1),
                                               "int64", stop_gradient=True)
            pad = op.attrs.get(rl.padding)
            ops.append(OpDesc("lookup_index", {"Keys": [keys_name(table)], "Ids": [ids]},
                              {"Out": [indexed[ids]]},
                              {"table": table, "missing": n, "strict": strict,
                               "padding_idx": pad if isinstance(pad, int) else -1},
                              role=op.role & OpRole.BACKWARD, loc=op.loc))
        op.inputs[rl.ids] = [indexed[ids]]
        op.attrs[rl.padding] = n
        ops.append(op)
    block.ops = ops


def from_checkpoint(values: Mapping[str, Any], plan: TranspilePlan
                    ) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]]]:
    """(the ordinary values, each table's ``{'ids', <var>: rows}``) of a checkpoint written
    by `one_process`, for the tables of ``plan``."""
    plain = dict(values)
    out = {}
    for table in plan.tables():
        if keys_name(table) not in plain:
            raise KeyError(f"the checkpoint holds no rows of the table {table!r} (no "
                           f"{keys_name(table)}); it was not written by a job with that "
                           f"table on parameter servers")
        ids = np.asarray(plain.pop(keys_name(table)), np.int64)
        out[table] = {"ids": ids, **{v: np.asarray(plain.pop(v))[:ids.size]
                                     for v in [table, *plan.table_state(table)]}}
    return plain, out
