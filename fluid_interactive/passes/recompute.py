"""Recomputation (Paddle's ``RecomputeOptimizer``): the backward part recomputes the forward
values between checkpoints instead of keeping them alive from the forward part.

`recompute_segments(program, block_idx, checkpoints)` runs after the backward pass, on a
copy. The checkpoints are forward vars (or the method's inputs); the forward ops after
the op writing one checkpoint, up to the op writing the next, form a segment (ops before the first
checkpoint and after the last are left alone, as in Paddle). Just before the first
backward op that reads a value a segment computed, copies of the segment's ops recompute
those values under new names (``<var>@RECOMPUTE``), and the backward ops read the copies.
The forward values then die at their last forward read, so the memory planner reuses
their buffers: the peak falls, and the values, from the same kernels on the same inputs,
are the same.

Kept as they are (never copied; their results stay alive): ops that draw random numbers
(a second draw would differ), write persistable state (a second run would update it
twice), own a sub-block, write a var they read, or write a var more than once; and
values that a nested block reads, that the method returns, or that are checkpoints.
"""
from __future__ import annotations

from collections.abc import Sequence

from ..errors import OpArgumentError
from ..ir.blocks import nested_blocks, sub_block_index
from ..ir.names import fresh_name
from ..ir.records import BlockDesc, OpDesc, OpRole, ProgramDesc, clone_op, clone_var, returned_names
from ..ops.registry import get_spec

_FORWARD = (OpRole.FORWARD, OpRole.FORWARD | OpRole.LOSS)


def _copyable(program: ProgramDesc, block: BlockDesc, op: OpDesc) -> bool:
    spec = get_spec(op.type)
    outs = op.output_names()
    return not (spec.random or spec.entry or sub_block_index(op) is not None
                or set(outs) & set(op.input_names())
                or any(program.var(block, n).persistable for n in outs))


def _segments(block: BlockDesc, checkpoints: Sequence[str]) -> list[list[int]]:
    """Forward op indices of each segment, from the checkpoints' writers (a fed value
    starts the first segment)."""
    forward = [i for i, op in enumerate(block.ops) if op.role in _FORWARD]
    writer = {n: i for i in forward for n in block.ops[i].output_names()}
    writer.update({n: -1 for n, v in block.vars.items() if v.is_data and n not in writer})
    missing = [c for c in checkpoints if c not in writer]
    if missing:
        raise OpArgumentError(f"recompute: checkpoint {missing[0]!r} is not computed by a "
                              f"forward op of {block.name!r}; checkpoints are the outputs of "
                              f"layers on the way to the loss (or the method's inputs)")
    ends = sorted({writer[c] for c in checkpoints})
    return [[i for i in forward if lo < i <= hi] for lo, hi in zip(ends, ends[1:])]


def _kept_names(program: ProgramDesc, block: BlockDesc, checkpoints: Sequence[str]) -> set[str]:
    """Values never recomputed: checkpoints, returned and fed vars, those nested blocks
    read, and those written more than once."""
    kept = set(checkpoints) | set(returned_names(block.returns)) | set(block.feeds)
    for b in list(nested_blocks(program, block))[1:]:
        for op in b.ops:
            kept.update(op.input_names())
    written: dict[str, int] = {}
    for op in block.ops:
        for n in op.output_names():
            written[n] = written.get(n, 0) + 1
    return kept | {n for n, count in written.items() if count > 1}


def recompute_segments(program: ProgramDesc, block_idx: int,
                       checkpoints: Sequence[str]) -> tuple[ProgramDesc, int]:
    """A copy of ``program`` whose method block ``block_idx`` recomputes its segments in
    its backward part; also the number of values recomputed."""
    prog = program.clone()
    block = prog.blocks[block_idx]
    kept = _kept_names(prog, block, checkpoints)
    taken = {n for b in prog.blocks for n in b.vars}
    count = 0
    for segment in reversed(_segments(block, checkpoints)):
        # an op is copied when it can run again and every value it writes may be
        # recomputed; the values of the others stay alive
        ops = [op for op in (block.ops[i] for i in segment)
               if _copyable(prog, block, op) and not kept.intersection(op.output_names())]
        count += _recompute(prog, block, _needed(block, ops), taken)
    return prog, count


def _needed(block: BlockDesc, ops: list[OpDesc]) -> list[OpDesc]:
    """Those of ``ops`` whose values a backward op reads, or a needed one of them."""
    wanted = {n for op in block.ops if op.role & OpRole.BACKWARD for n in op.input_names()}
    out = []
    for op in reversed(ops):
        if wanted.intersection(op.output_names()):
            out.append(op)
            wanted.update(op.input_names())
    return out[::-1]


def _recompute(program: ProgramDesc, block: BlockDesc, ops: list[OpDesc], taken: set[str]
               ) -> int:
    """Insert copies of ``ops`` before the first backward op reading one of their values,
    which from there on read the copies; returns how many values they recompute."""
    values = {n for op in ops for n in op.output_names()}
    first = next((i for i, op in enumerate(block.ops) if op.role & OpRole.BACKWARD
                  and values.intersection(op.input_names())), None)
    if first is None:
        return 0
    renamed = {}
    for n in sorted(values):
        renamed[n] = fresh_name(f"{n}@RECOMPUTE", taken.__contains__)
        taken.add(renamed[n])
        var = clone_var(program.var(block, n))
        var.name = renamed[n]
        block.vars[renamed[n]] = var
    copies = []
    for op in ops:
        copy = clone_op(op)
        copy.inputs = {s: [renamed.get(n, n) for n in ns] for s, ns in copy.inputs.items()}
        copy.outputs = {s: [renamed.get(n, n) for n in ns] for s, ns in copy.outputs.items()}
        copy.role, copy.role_var = OpRole.BACKWARD, ()
        copies.append(copy)
    for op in block.ops[first:]:
        op.inputs = {s: [renamed.get(n, n) for n in ns] for s, ns in op.inputs.items()}
    block.ops[first:first] = copies
    return len(values)
