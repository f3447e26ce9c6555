"""Step 5: the parameter-server programs.

The main program of the server at ``endpoint`` has

* block 0: its parameter blocks, their accumulator blocks, and replicas of what the updates
  only read (learning rates) or what schedule ops compute, all persistable; no ops;
* per transpiled method with learning-rate schedule ops: one block holding copies of them
  (run before that method's updates, each round);
* one optimize block per (parameter block, gradient) pair placed here. Its feeds are the
  gradient block as it arrives: in sync mode with several trainers one feed per trainer
  (``<grad>.trainer_<k>``), averaged first by ``sum`` and ``scale(1/trainers)``; otherwise
  the gradient block itself. Values the update reads from the trainer besides the
  gradient (a learning rate passed as an argument) arrive and are averaged the same way.
  Then the group's optimize ops, renamed to the blocks.

The startup program creates the same state: it copies the original initialiser of each var
(same output name, so the same random stream: the server starts from exactly the values a
single process would) and cuts the blocks out with ``slice`` (``assign`` for one-element
accumulators, which every block of a split parameter carries its own copy of).

`PServerInfo` says, for a runtime, which block to run for which arriving gradients.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

from ...errors import ProgramDefinitionError
from ...ir.names import fresh_name
from ...ir.records import BlockDesc, OpDesc, OpRole, ProgramDesc, VarDesc, clone_op, clone_var
from ...ops.apply import infer_op
from ...ops.registry import get_spec
from ...ops.spec import TensorType
from .joints import Joint
from .layout import Layout, PairLayout
from .tables import TablePair


@dataclass(frozen=True)
class OptimizeBlock:
    """One optimize block: run it with its feeds once they have all arrived."""
    block_idx: int
    method: str
    param: str          # the original parameter
    param_block: str    # its block's name on this server
    grad_block: str     # the (averaged) gradient block's name
    feeds: tuple[str, ...]


@dataclass(frozen=True)
class JointBlock:
    """A block of joint ops (joints.py): run it, once its feeds (every gradient the joint
    reads) have arrived, before the optimize blocks; it writes what they read."""
    block_idx: int
    method: str
    params: tuple[str, ...]
    feeds: tuple[str, ...]


@dataclass(frozen=True)
class RowInit:
    """How the rows of one var of a table shard start: its initialiser (an op whose spec
    has ``rows``) and where the shard keeps it."""
    var: str        # the var of the original program
    local: str      # its name on the server
    op_type: str
    attrs: tuple[tuple[str, object], ...]


@dataclass(frozen=True)
class ServedShard:
    """One shard of a table held by this server (tables.py): ids are dealt by ``rule``
    (with 'range', this shard's ids are ``[start, start + rows)``); it holds at most
    ``rows`` rows of ``dim`` values; ``state``: the table first, then each accumulator
    shaped like it, as they start."""
    table: str
    name: str
    index: int
    count: int
    rule: str
    start: int
    rows: int
    capacity: int     # the whole table's
    dim: int
    dtype: str
    state: tuple[RowInit, ...]


@dataclass(frozen=True)
class TableBlock:
    """The update of one table shard: run it with the gradient rows as they arrive (and
    side values) and, after them, the rows of each var in ``rows`` (``(var, feed)``: the
    table first): it returns their new values, in that order. ``lazy``: the update asks
    to change the batch's rows only (Adam's lazy_mode)."""
    block_idx: int
    method: str
    table: str
    shard: str
    arrivals: tuple[str, ...]
    rows: tuple[tuple[str, str], ...]
    lazy: bool


@dataclass
class PServerInfo:
    endpoint: str
    index: int
    lr_blocks: dict[str, int] = field(default_factory=dict)   # method -> block idx
    optimize_blocks: list[OptimizeBlock] = field(default_factory=list)
    joint_blocks: list[JointBlock] = field(default_factory=list)
    table_blocks: list[TableBlock] = field(default_factory=list)
    tables: list[ServedShard] = field(default_factory=list)

    @property
    def param_blocks(self) -> list[str]:
        return list(dict.fromkeys(b.param_block for b in self.optimize_blocks))

    @property
    def idle(self) -> bool:
        return not self.optimize_blocks and not self.table_blocks


def _copy_var(var: VarDesc, **changes) -> VarDesc:
    v = clone_var(var)
    for k, value in changes.items():
        setattr(v, k, value)
    return v


def _methods_on(layout: Layout, endpoint: str) -> list[str]:
    on = {pair.method for pair, _ in layout.pairs_on(endpoint)}
    on |= {tp.method for tp, _ in layout.table_pairs_on(endpoint)}
    return [m.method for m in layout.methods if m.method in on]


def _declare_state(layout: Layout, endpoint: str, block0: BlockDesc) -> None:
    og0 = layout.program.global_block()

    def add(var: VarDesc) -> None:
        if var.name not in block0.vars:
            block0.vars[var.name] = var

    for pair, i in layout.pairs_on(endpoint):
        pvar = pair.param.var
        pb = pair.param.blocks[i]
        add(_copy_var(pvar, name=pb.name, shape=pb.shape))
        for s, blocks in pair.state_blocks.items():
            sb = blocks[i]
            add(_copy_var(og0.vars[s], name=sb.name, shape=sb.shape))
        for n in pair.group.shared:
            add(_copy_var(og0.vars[n]))
    for tp, j in layout.table_pairs_on(endpoint):
        for s in tp.scalar_state:
            add(_copy_var(og0.vars[s], name=tp.local_name(s, j)))
        for n in tp.group.shared:
            add(_copy_var(og0.vars[n]))
    for method in _methods_on(layout, endpoint):
        roles = layout.roles_of(method)
        mblock = layout.program.blocks[roles.block_idx]
        for n in roles.lr_state + roles.lr_reads:
            add(_copy_var(og0.vars[n]))
        joint_reads = {n for pair, _ in layout.pairs_on(endpoint) if pair.method == method
                       for n in pair.group.joint_inputs}
        for n in roles.lr_temps + sorted(joint_reads):
            add(_copy_var(mblock.vars[n], persistable=True, is_data=False))


def build_pserver_program(layout: Layout, endpoint: str) -> tuple[ProgramDesc, PServerInfo]:
    index = layout.endpoints.index(endpoint)
    program = ProgramDesc(name=f"{layout.program.name or 'program'}.pserver_{index}")
    block0 = BlockDesc(0, -1)
    program.blocks.append(block0)
    _declare_state(layout, endpoint, block0)
    info = PServerInfo(endpoint, index)
    names: set[str] = set()
    for method in _methods_on(layout, endpoint):
        roles = layout.roles_of(method)
        source = layout.program.blocks[roles.block_idx]
        if roles.lr_ops:
            lr = BlockDesc(len(program.blocks), 0, _unique_block(f"lr_schedule:{method}", names))
            lr.ops = [clone_op(source.ops[i]) for i in roles.lr_ops]
            program.blocks.append(lr)
            info.lr_blocks[method] = lr.idx
        for joint in roles.joints:
            if endpoint in layout.joint_endpoints(method, joint.params[0]):
                info.joint_blocks.append(_joint_block(program, layout, method, joint, source,
                                                      names))
        for pair in layout.pairs_of(method):
            for i, ep in enumerate(pair.param.endpoints):
                if ep != endpoint:
                    continue
                blk = _optimize_block(program, layout, pair, i, source, names)
                info.optimize_blocks.append(OptimizeBlock(
                    blk.idx, method, pair.group.param, pair.param.blocks[i].name,
                    pair.grad_blocks[i].name, tuple(blk.feeds)))
        for tp in layout.table_pairs_of(method):
            for shard in tp.table.shards:
                if shard.endpoint == endpoint:
                    info.table_blocks.append(_table_block(program, layout, tp, shard.index,
                                                          source, names))
    info.tables = _served_shards(layout, endpoint)
    return program, info


def _table_block(program: ProgramDesc, layout: Layout, tp: TablePair, j: int,
                 source: BlockDesc, names: set[str]) -> TableBlock:
    """Shard j's update: the arriving gradient rows (averaged like a gradient block),
    then the group's ops on the rows fed after them; each write of a row var makes a new
    var (``<name>@OUT<k>``), and the last ones are returned."""
    table, shard = tp.table, tp.table.shards[j]
    blk = BlockDesc(len(program.blocks), 0, _unique_block(f"optimize:{shard.name}", names))
    program.blocks.append(blk)
    rv = (shard.name, tp.grad_name(j))
    loc = source.ops[tp.group.ops[-1]].loc
    received = [(tp.grad_name(j), VarDesc(tp.grad_name(j), (-1, table.dim), table.var.dtype))]
    received += [(s, source.vars[s]) for s in tp.group.side]
    for name, var in received:
        _receive(blk, layout, name, var, rv, loc)
    arrivals = tuple(blk.feeds)
    rows = [(v, tp.local_name(v, j)) for v in [tp.group.param, *tp.row_state]]
    for _, local in rows:
        blk.vars[local] = VarDesc(local, (-1, table.dim), table.var.dtype, is_data=True,
                                  stop_gradient=True)
        blk.feeds.append(local)
    current = {local: local for _, local in rows}
    for k in tp.group.ops:
        op = clone_op(source.ops[k])
        op.inputs = {sl: [current.get(tp.local_name(n, j), tp.local_name(n, j)) for n in ns]
                     for sl, ns in op.inputs.items()}
        outputs: dict[str, list[str]] = {}
        for sl, ns in op.outputs.items():
            outputs[sl] = []
            for n in ns:
                local = tp.local_name(n, j)
                if local in current:
                    current[local] = f"{local}@OUT{len(blk.ops)}"
                    local = current[local]
                outputs[sl].append(local)
        op.outputs, op.role_var = outputs, rv
        blk.ops.append(op)
    blk.returns = tuple(current[local] for _, local in rows)
    _declare_results(program, blk)
    lazy = any(bool(source.ops[k].attrs.get("lazy_mode")) for k in tp.group.ops)
    return TableBlock(blk.idx, tp.method, table.param, shard.name, arrivals, tuple(rows), lazy)


def _served_shards(layout: Layout, endpoint: str) -> list[ServedShard]:
    """The table shards this server holds, with how their rows start."""
    out: dict[str, ServedShard] = {}
    for tp, j in layout.table_pairs_on(endpoint):
        table, shard = tp.table, tp.table.shards[j]
        if shard.name in out:
            continue
        state = tuple(_row_init(layout, v, tp.local_name(v, j))
                      for v in [table.param, *tp.row_state])
        out[shard.name] = ServedShard(table.param, shard.name, j, len(table.shards),
                                      table.rule, shard.start, shard.rows, table.capacity,
                                      table.dim, table.var.dtype, state)
    return list(out.values())


def _row_init(layout: Layout, var: str, local: str) -> RowInit:
    writers = layout.global_writers.get(var, [])
    ops = [layout.program.global_block().ops[k] for k in writers]
    if len(ops) != 1 or get_spec(ops[0].type).rows is None or ops[0].input_names():
        what = ", ".join(op.type for op in ops) or "none"
        raise ProgramDefinitionError(
            f"transpile: {var!r} of a table kept on the parameter servers is initialised by "
            f"{what}, which cannot make its rows one at a time; a table makes each row when "
            f"it is first used: initialise it with Constant, Uniform, Normal, "
            f"TruncatedNormal or Xavier")
    op = ops[0]
    return RowInit(var, local, op.type, tuple(sorted(op.attrs.items())))


def _unique_block(name: str, taken: set[str]) -> str:
    candidate = fresh_name(name, taken.__contains__, sep="#", start=2)
    taken.add(candidate)
    return candidate


def _optimize_block(program: ProgramDesc, layout: Layout, pair: PairLayout, i: int,
                    source: BlockDesc, names: set[str]) -> BlockDesc:
    pb, gb = pair.param.blocks[i], pair.grad_blocks[i]
    dtype = pair.param.var.dtype
    blk = BlockDesc(len(program.blocks), 0, _unique_block(f"optimize:{pb.name}", names))
    program.blocks.append(blk)
    rv = (pb.name, gb.name)
    loc = source.ops[pair.group.ops[-1]].loc
    received = [(gb.name, VarDesc(gb.name, gb.shape, dtype))]
    received += [(s, source.vars[s]) for s in pair.group.side]
    for name, var in received:
        _receive(blk, layout, name, var, rv, loc)
    # the ops feeding a joint ran in its block already
    _copy_group_ops(blk, pair, i, source,
                    [j for j in pair.group.ops if j not in pair.group.joint_feeds], rv)
    _declare_results(program, blk)
    return blk


def _receive(blk: BlockDesc, layout: Layout, name: str, var: VarDesc, rv: tuple[str, ...],
             loc) -> None:
    """Feed ``blk`` the value the trainers send as ``name``: as it arrives, averaged over
    the trainers when each sends its own (``sum`` and ``scale(1/trainers)``)."""
    arrivals = layout.arrivals(name)
    for f in arrivals:
        blk.vars[f] = VarDesc(f, var.shape, var.dtype, is_data=True, stop_gradient=True)
        blk.feeds.append(f)
    if layout.averaged:   # the mean over trainers
        total = f"{name}@SUM"
        blk.ops.append(OpDesc("sum", {"X": list(arrivals)}, {"Out": [total]}, {},
                              role=OpRole.OPTIMIZE, role_var=rv, loc=loc))
        blk.ops.append(OpDesc("scale", {"X": [total]}, {"Out": [name]},
                              {"scale": 1.0 / layout.trainers},
                              role=OpRole.OPTIMIZE, role_var=rv, loc=loc))


def _copy_group_ops(blk: BlockDesc, pair: PairLayout, i: int, source: BlockDesc,
                    ops: list[int], rv: tuple[str, ...]) -> None:
    """Copies of the group's ``ops``, renamed to parameter block i."""
    for j in ops:
        op = clone_op(source.ops[j])
        op.inputs = {s: [pair.local_name(n, i) for n in ns] for s, ns in op.inputs.items()}
        op.outputs = {s: [pair.local_name(n, i) for n in ns] for s, ns in op.outputs.items()}
        op.role_var = rv
        blk.ops.append(op)


def _joint_block(program: ProgramDesc, layout: Layout, method: str, joint: Joint,
                 source: BlockDesc, names: set[str]) -> JointBlock:
    """The joint's block: every gradient it reads, averaged, through the ops of each group
    that feed the joint, then the joint ops; what the updates read is block-0 state."""
    blk = BlockDesc(len(program.blocks), 0, _unique_block(f"joint:{method}", names))
    program.blocks.append(blk)
    pairs = {p.group.param: p for p in layout.pairs_of(method)}
    loc = source.ops[joint.ops[-1]].loc
    for param in joint.params:
        pair = pairs[param]
        rv = (param, pair.grad_blocks[0].name)
        gb = pair.grad_blocks[0]
        _receive(blk, layout, gb.name, VarDesc(gb.name, gb.shape, pair.param.var.dtype), rv, loc)
        _copy_group_ops(blk, pair, 0, source, pair.group.joint_feeds, rv)
    for j in joint.ops:
        op = clone_op(source.ops[j])
        op.role_var = tuple(n for p in joint.params
                            for n in (p, pairs[p].grad_blocks[0].name))
        blk.ops.append(op)
    _declare_results(program, blk)
    return JointBlock(blk.idx, method, tuple(joint.params), tuple(blk.feeds))


def _declare_results(program: ProgramDesc, blk: BlockDesc) -> None:
    """Declare each op's results that are not declared yet, with the types its shape rule
    gives for the block shapes."""
    def type_of(name: str) -> TensorType:
        v = program.find_var(blk, name)
        if v is None:
            raise ProgramDefinitionError(f"transpile: pserver block {blk.name!r} reads "
                                         f"{name!r}, which it never declares")
        return TensorType(v.shape, v.dtype)

    for op in blk.ops:
        for slot, types in infer_op(op, type_of).items():
            for name, t in zip(op.outputs[slot], types):
                if program.find_var(blk, name) is None:
                    blk.vars[name] = VarDesc(name, t.shape, t.dtype)


# --- startup ------------------------------------------------------------------------------------

#: (name on this server, original var, rows start, rows, 'whole' | 'slice' | 'copy')
_Cut = tuple[str, str, int, int, str]


def build_pserver_startup(layout: Layout, endpoint: str, main: ProgramDesc) -> ProgramDesc:
    index = layout.endpoints.index(endpoint)
    og0 = layout.program.global_block()
    program = ProgramDesc(name=f"{layout.program.name or 'program'}.pserver_{index}.startup")
    block0 = BlockDesc(0, -1)
    program.blocks.append(block0)
    for var in main.global_block().vars.values():
        block0.vars[var.name] = clone_var(var)
    cuts, needed = _cuts(layout, endpoint)
    for k in _initialisers(layout, needed, endpoint):
        op = clone_op(og0.ops[k])
        block0.ops.append(op)
        for n in op.input_names() + op.output_names():
            if n not in block0.vars:
                block0.vars[n] = _copy_var(og0.vars[n], persistable=False, is_parameter=False)
    seen: set[str] = set()
    for name, origin, start, rows, mode in cuts:
        if mode == "whole" or name in seen:
            continue
        seen.add(name)
        if mode == "slice":
            block0.ops.append(OpDesc("slice", {"X": [origin]}, {"Out": [name]},
                                     {"axes": [0], "starts": [start], "ends": [start + rows]},
                                     role=OpRole.DIST))
        else:
            block0.ops.append(OpDesc("assign", {"X": [origin]}, {"Out": [name]},
                                     role=OpRole.DIST))
    return program


def _cuts(layout: Layout, endpoint: str) -> tuple[list[_Cut], list[str]]:
    """How each var of the server comes from a var of the original program, and the
    original vars it needs, in order."""
    cuts: list[_Cut] = []
    needed: dict[str, None] = {}   # insertion-ordered set
    for pair, i in layout.pairs_on(endpoint):
        pb = pair.param.blocks[i]
        needed[pair.group.param] = None
        cuts.append((pb.name, pair.group.param, pb.start, pb.rows,
                     "slice" if pair.param.split else "whole"))
        for s, blocks in pair.state_blocks.items():
            sb = blocks[i]
            needed[s] = None
            mode = "whole" if not pair.param.split else (
                "slice" if pair.state_sliced[s] else "copy")
            cuts.append((sb.name, s, sb.start, sb.rows, mode))
        for n in pair.group.shared:
            needed[n] = None
    for tp, j in layout.table_pairs_on(endpoint):
        for s in tp.scalar_state:   # the rows themselves are made when first used
            needed[s] = None
            cuts.append((tp.local_name(s, j), s, 0, 1, "copy"))
        for n in tp.group.shared:
            needed[n] = None
    for method in _methods_on(layout, endpoint):
        roles = layout.roles_of(method)
        for n in roles.lr_state + roles.lr_reads:
            needed[n] = None
    return cuts, list(needed)


def _initialisers(layout: Layout, needed: list[str], endpoint: str) -> list[int]:
    """The indices of the original initialisers of ``needed`` and of everything they
    read, in program order: the block-0 ops that write a needed var, and those that write
    a var a chosen op reads, before that op. Found from the layout's index of writers, so
    each server costs what it needs, not a walk over every initialiser."""
    og0 = layout.program.global_block()
    writers = layout.global_writers
    for n in needed:
        if n not in writers:
            raise ProgramDefinitionError(
                f"transpile: {n!r} has no initialiser in block 0, so parameter server "
                f"{endpoint} cannot create it")
    todo = [k for n in needed for k in writers[n]]
    chosen: set[int] = set()
    queued_below: dict[str, int] = {}   # var -> its writers before this index are queued
    while todo:
        k = todo.pop()
        if k in chosen:
            continue
        chosen.add(k)
        for n in og0.ops[k].input_names():
            below = queued_below.get(n, 0)
            if k > below and n in writers:
                ws = writers[n]
                todo.extend(ws[bisect_left(ws, below):bisect_left(ws, k)])
                queued_below[n] = k
    return sorted(chosen)
