"""Step 4: the trainer program.

A copy of the input program in which each transpiled method

* keeps its forward and backward ops and loses its optimize and LR-schedule ops;
* right after the op that computes each parameter gradient: ``split`` (role Dist) cuts it
  into the parameter's row blocks when the parameter is split, and ``send`` (role RPC)
  hands the blocks to their parameter servers;
* at the end: ``send_barrier`` (sync mode), one ``recv`` per updated parameter (its blocks,
  or the parameter itself when whole), ``fetch_barrier`` (sync mode) and ``concat`` (role
  Dist) joining split parameters again.

Every new op carries ``op_role_var`` (param, grad). Block 0 loses the optimizer state that
moved to the servers (accumulators, learning rates) with the ops that initialised it, and
gains the communicator var the RPC ops talk through. File readers read trainer ``i``'s
shard of their files. Trainer ``i`` differs from trainer 0
only in attrs: its ``trainer_id`` and, in sync mode, the names its gradients arrive under
(``<grad>.trainer_<i>``), so the servers can average them.
"""
from __future__ import annotations

from copy import deepcopy
from dataclasses import replace

from ...errors import ProgramDefinitionError
from ...ir.records import (
    AttrValue,
    BlockDesc,
    OpDesc,
    OpRole,
    ProgramDesc,
    VarDesc,
    clone_op,
    clone_var,
    returned_names,
)
from ...ops.dist import COMM_KIND, COMM_VAR
from .layout import Layout, PairLayout
from .roles import MethodRoles, UpdateGroup
from .table_trainer import rewrite_lookups, send_rows_ops
from .tables import TablePair


def build_trainer_program(layout: Layout, trainer_id: int) -> ProgramDesc:
    source = layout.program
    if COMM_VAR in source.global_block().vars:
        raise ProgramDefinitionError(f"transpile: the program already has a var named "
                                     f"{COMM_VAR!r}, which the trainer program needs")
    # Ops are copied only where they stay: the updates and the initialisers of their state
    # (over half of a large program's ops with Adam) move to the servers.
    program = ProgramDesc([_declarations(b) for b in source.blocks],
                          f"{source.name or 'program'}.trainer_{trainer_id}", source.version)
    for roles in layout.methods:
        _rewrite_method(program, layout, roles, trainer_id)
    rewritten = {roles.block_idx for roles in layout.methods}
    for block, src in zip(program.blocks[1:], source.blocks[1:]):
        if block.idx not in rewritten:
            block.ops = [clone_op(op) for op in src.ops]
            if block.name and layout.tables:   # other methods read tables too
                rewrite_lookups(block, layout, trainer_id, set())
    _prune_global(program, layout)
    _shard_readers(program, trainer_id, layout.trainers)
    program.global_block().vars[COMM_VAR] = VarDesc(COMM_VAR, (), "float32", persistable=True,
                                                    kind=COMM_KIND)
    return program


def _declarations(block: BlockDesc) -> BlockDesc:
    """A copy of ``block`` without its ops."""
    return replace(block, vars={n: clone_var(v) for n, v in block.vars.items()}, ops=[],
                   feeds=list(block.feeds), returns=deepcopy(block.returns))


def _shard_readers(program: ProgramDesc, trainer_id: int, trainers: int) -> None:
    """File readers that allow it (attr ``trainer_shard``, on by default) read every
    ``trainers``-th sample, starting at ``trainer_id``: trainers see different samples, and
    together those of the batches one process with ``trainers`` times the batch size
    would read."""
    if trainers < 2:
        return
    for op in program.global_block().ops:
        if op.attrs.get("trainer_shard") and op.attrs.get("files"):
            op.attrs["shard_index"] = trainer_id
            op.attrs["num_shards"] = trainers


def _rewrite_method(program: ProgramDesc, layout: Layout, roles: MethodRoles,
                    trainer_id: int) -> None:
    block = program.blocks[roles.block_idx]
    moved = roles.moved
    old = layout.program.blocks[roles.block_idx].ops   # read only: kept ops are copied
    params = set(layout.params) | set(layout.tables)
    moved_results = {n for i in moved for n in old[i].output_names()} - params
    for i, op in enumerate(old):
        if i in moved:
            continue
        for n in op.input_names():
            if n in moved_results:
                raise ProgramDefinitionError(
                    f"transpile: {roles.method!r} computes {n!r} in its update ops, which "
                    f"move to the parameter servers, but a trainer op reads it")
    for n in returned_names(block.returns):
        if n in moved_results:
            raise ProgramDefinitionError(
                f"transpile: {roles.method!r} returns {n!r}, which its update ops compute; "
                f"those move to the parameter servers, so the trainer cannot return it")

    pairs = layout.pairs_of(roles.method)
    last_writer: dict[str, int] = {}   # var -> the last op that stays and writes it
    for i, op in enumerate(old):
        if i not in moved:
            last_writer.update(dict.fromkeys(op.output_names(), i))
    tpairs = layout.table_pairs_of(roles.method)
    after: dict[int, list[PairLayout]] = {}
    after_tables: dict[int, list[TablePair]] = {}
    for pair in pairs:
        after.setdefault(_send_point(pair.group, last_writer), []).append(pair)
    for tp in tpairs:
        after_tables.setdefault(_send_point(tp.group, last_writer), []).append(tp)

    ops: list[OpDesc] = []
    for i, op in enumerate(old):
        if i in moved:
            continue
        ops.append(clone_op(op))
        for pair in after.get(i, []):
            ops.extend(_send_ops(block, layout, pair, trainer_id, old[pair.group.ops[-1]].loc))
        for tp in after_tables.get(i, []):
            ops.extend(send_rows_ops(layout, tp, trainer_id, old[tp.group.ops[-1]].loc))
    locs = {p.group.param: old[p.group.ops[-1]].loc for p in pairs}
    locs.update({p.group.param: old[p.group.ops[-1]].loc for p in tpairs})
    ops.extend(_receive_ops(block, layout, roles, pairs, trainer_id, locs))
    block.ops = ops
    rewrite_lookups(block, layout, trainer_id, {tp.table.param for tp in tpairs})

    # Declarations only the moved ops used go with them.
    used = {n for op in ops for n in op.input_names() + op.output_names()}
    used |= set(block.feeds) | set(returned_names(block.returns))
    for i in moved:
        for n in old[i].input_names() + old[i].output_names():
            if n in block.vars and n not in used:
                del block.vars[n]
    if block.is_test is None:
        block.is_test = False   # it trains, although its update ops now run elsewhere


def _send_point(group: UpdateGroup, last_writer: dict[str, int]) -> int:
    """After the gradient and any side value it sends along are computed (fed values are
    there from the start)."""
    sent = {group.grad, *group.side}
    return max(last_writer[n] for n in sent if n in last_writer)


def _declare(block: BlockDesc, name: str, shape, dtype: str) -> None:
    block.vars[name] = VarDesc(name, tuple(shape), dtype)


def _send_ops(block: BlockDesc, layout: Layout, pair: PairLayout, trainer_id: int,
              loc) -> list[OpDesc]:
    g, p = pair.group.grad, pair.group.param
    dtype = pair.param.var.dtype
    rv = (p, g)
    ops = []
    if pair.param.split:
        names = [b.name for b in pair.grad_blocks]
        for b in pair.grad_blocks:
            _declare(block, b.name, b.shape, dtype)
        ops.append(OpDesc("split", {"X": [g]}, {"Out": list(names)},
                          {"axis": 0, "sections": [b.rows for b in pair.grad_blocks]},
                          role=OpRole.DIST, role_var=rv, loc=loc))
    else:
        names = [g]
    epmap = list(pair.param.endpoints)
    remote = [layout.sent_name(pair, i, trainer_id) for i in range(len(pair.grad_blocks))]
    # A whole gradient a joint op reads goes to every server running that joint.
    for ep in layout.joint_endpoints(pair.method, p):
        if ep not in epmap:
            names.append(g)
            epmap.append(ep)
            remote.append(remote[0])
    # Side values (a fed learning rate) go once to every server holding a block.
    for side in pair.group.side:
        for ep in dict.fromkeys(pair.param.endpoints):
            names.append(side)
            epmap.append(ep)
            remote.append(layout.sent(side, trainer_id))
    ops.append(OpDesc(
        "send", {"Comm": [COMM_VAR], "X": names}, {"CommOut": [COMM_VAR]},
        {"epmap": epmap, "send_varnames": remote, "trainer_id": trainer_id,
         "sync_mode": layout.sync},
        role=OpRole.RPC, role_var=rv, loc=loc))
    return ops


def _receive_ops(block: BlockDesc, layout: Layout, roles: MethodRoles,
                 pairs: list[PairLayout], trainer_id: int, locs: dict) -> list[OpDesc]:
    """Each new op records the line of the update it stands for (the user's minimize)."""
    last = list(locs.values())[-1]
    used = {ep for pair in pairs for ep in pair.param.endpoints}
    used |= {ep for tp in layout.table_pairs_of(roles.method) for ep in tp.table.endpoints}
    endpoints = [ep for ep in layout.endpoints if ep in used]
    barrier_attrs: dict[str, AttrValue] = {"endpoints": endpoints, "trainer_id": trainer_id}
    comm = {"Comm": [COMM_VAR]}
    comm_out = {"CommOut": [COMM_VAR]}
    ops: list[OpDesc] = []
    if layout.sync:
        ops.append(OpDesc("send_barrier", dict(comm), dict(comm_out), dict(barrier_attrs),
                          role=OpRole.RPC, loc=last))
    joins: list[OpDesc] = []
    grads_of: dict[str, list[str]] = {}
    for pair in pairs:
        grads_of.setdefault(pair.group.param, []).append(pair.group.grad)
    for p in roles.params():
        pl = layout.params.get(p)
        if pl is None:   # a table: its rows come with the next step's prefetch
            continue
        rv = tuple(n for g in grads_of.get(p, ()) for n in (p, g))
        names = [b.name for b in pl.blocks]
        if pl.split:
            for b in pl.blocks:
                _declare(block, b.name, b.shape, pl.var.dtype)
        ops.append(OpDesc(
            "recv", dict(comm), {"CommOut": [COMM_VAR], "Out": names},
            {"epmap": list(pl.endpoints), "recv_varnames": list(names),
             "shapes": [list(b.shape) for b in pl.blocks],
             "dtypes": [pl.var.dtype] * len(pl.blocks), "trainer_id": trainer_id},
            role=OpRole.RPC, role_var=rv, loc=locs[p]))
        if pl.split:
            joins.append(OpDesc("concat", {"X": names}, {"Out": [p]}, {"axis": 0},
                                role=OpRole.DIST, role_var=rv, loc=locs[p]))
    if layout.sync:
        ops.append(OpDesc("fetch_barrier", dict(comm), dict(comm_out), dict(barrier_attrs),
                          role=OpRole.RPC, loc=last))
    return ops + joins


def _prune_global(program: ProgramDesc, layout: Layout) -> None:
    """Drop block-0 state that only the moved ops used, and the ops initialising it."""
    g0 = program.global_block()
    initialisers = layout.program.global_block().ops   # read only: kept ops are copied
    candidates: set[str] = set()
    for roles in layout.methods:
        candidates |= set(roles.lr_state) | set(roles.lr_reads)
        for grp in roles.groups:
            candidates |= set(grp.state) | set(grp.shared)
    candidates -= set(layout.params)
    candidates |= set(layout.tables)   # a trainer never holds a table
    referenced: set[str] = set()
    for block in program.blocks[1:]:
        for op in block.ops:
            referenced.update(op.input_names(), op.output_names())
        referenced.update(returned_names(block.returns))
    removed = {n for n in candidates if n in g0.vars and n not in referenced}
    while True:
        kept = [op for op in initialisers
                if not (op.output_names() and set(op.output_names()) <= removed)]
        needed = {n for op in kept for n in op.input_names() + op.output_names()} & removed
        if not needed:
            break
        removed -= needed
    g0.ops = [clone_op(op) for op in kept]
    for n in removed:
        del g0.vars[n]
