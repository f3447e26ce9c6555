"""Fusion passes run when a block is planned (pure: a new block, the input untouched;
ops they leave alone stay the same objects).

`fuse_optimizer_updates` replaces the per-parameter update ops of one optimizer (ops of
role Optimize whose spec names a ``fused`` type, with the same attrs, the same shared
inputs such as the learning-rate var, and parameters of one dtype) by one fused op, at
the place of the last of them (groups of one or two small parameters stay as they are).
Updates reading a rows-only gradient stay apart. It fuses only where that changes no
value: no other op between an update and that place may read what the update writes, or
write what it reads.
The fused op's kernels compute bit-identical values (ops/optim_fused.py).

`fuse_elementwise_chains` replaces a run of consecutive elementwise ops, each reading the
previous one's result (which nothing else reads), by one ``fused_elementwise`` op that
runs them in place in one array (ops/chain.py): ``fc``'s bias add and activation, say.
"""
from __future__ import annotations

import dataclasses
from bisect import bisect_right
from collections import defaultdict
from math import prod
from typing import Any

from ..ir.records import BlockDesc, OpDesc, OpRole, ProgramDesc, returned_names
from ..ops.chain import chainable
from ..ops.optim_fused import fused_slot
from ..ops.registry import get_spec


def _group_key(program: ProgramDesc, block: BlockDesc, op: OpDesc) -> Any:
    spec = get_spec(op.type)
    shared = tuple((s, tuple(op.inputs.get(s, ()))) for s in spec.fused_shared)
    param = op.inputs[spec.inputs[0].name][0]
    dtype = program.var(block, param).dtype
    attrs = tuple(sorted((k, repr(v)) for k, v in op.attrs.items()))
    return op.type, shared, attrs, dtype, op.role


def _positions(ops: list[OpDesc], skip: set[int]) -> tuple[dict, dict]:
    """var -> sorted indices of the ops (other than ``skip``) that read it / write it."""
    reads, writes = defaultdict(list), defaultdict(list)
    for i, op in enumerate(ops):
        if i in skip:
            continue
        for n in op.input_names():
            reads[n].append(i)
        for n in op.output_names():
            writes[n].append(i)
    return reads, writes


def _touched_between(index: dict, names: list[str], lo: int, hi: int) -> bool:
    """Some op at a position in (lo, hi) appears in ``index`` under one of ``names``."""
    for n in names:
        at = index.get(n)
        if at and bisect_right(at, lo) < len(at) and at[bisect_right(at, lo)] < hi:
            return True
    return False


def _can_delay(ops: list[OpDesc], members: list[int]) -> bool:
    """Every member may run at the last member's place instead of its own."""
    reads, writes = _positions(ops, set(members))
    last = members[-1]
    for i in members[:-1]:
        op = ops[i]
        if _touched_between(reads, op.output_names(), i, last) or \
                _touched_between(writes, op.output_names() + op.input_names(), i, last):
            return False
    return True


#: A group is fused when it has this many parameters, or this many values in all: below
#: both, the per-parameter kernels' few calls cost less than the fused kernel's
#: bookkeeping (fit_a_line's two parameters of 14 values: 2-3 µs a step).
FUSE_MIN_PARAMS, FUSE_MIN_VALUES = 3, 4096


def _worth_fusing(program: ProgramDesc, block: BlockDesc, members: list[OpDesc]) -> bool:
    if len(members) >= FUSE_MIN_PARAMS:
        return True
    spec = get_spec(members[0].type)
    first = spec.inputs[0].name
    values = sum(prod(program.var(block, op.inputs[first][0]).shape) for op in members)
    return values >= FUSE_MIN_VALUES


def _fused_op(ops: list[OpDesc], members: list[int]) -> OpDesc:
    first = ops[members[0]]
    spec = get_spec(first.type)
    inputs: dict[str, list[str]] = {}
    for slot in spec.inputs:
        name = fused_slot(spec, slot.name)
        if slot.name in spec.fused_shared:
            inputs[name] = list(first.inputs.get(slot.name, ()))
        else:
            inputs[name] = [n for i in members for n in ops[i].inputs.get(slot.name, ())]
    outputs = {fused_slot(spec, slot.name): [n for i in members
                                             for n in ops[i].outputs.get(slot.name, ())]
               for slot in spec.outputs}
    role_var = tuple(n for i in members for n in ops[i].role_var)
    return OpDesc(spec.fused, inputs, outputs, dict(first.attrs), first.role, role_var,
                  ops[members[-1]].loc)


def _all_tensors(program: ProgramDesc, block: BlockDesc, op: OpDesc) -> bool:
    """Whether every var the op reads is a plain tensor: an update reading a rows-only
    gradient (kind ``selected_rows``) runs on its own, touching only those rows."""
    return all(program.var(block, n).kind == "tensor" for n in op.input_names())


def fuse_optimizer_updates(program: ProgramDesc, block: BlockDesc) -> BlockDesc:
    ops = block.ops
    groups: dict[Any, list[int]] = defaultdict(list)
    for i, op in enumerate(ops):
        if op.role & OpRole.OPTIMIZE and get_spec(op.type).fused and \
                _all_tensors(program, block, op):
            groups[_group_key(program, block, op)].append(i)
    fused_at: dict[int, OpDesc] = {}
    removed: set[int] = set()
    for members in groups.values():
        if _worth_fusing(program, block, [ops[i] for i in members]) and \
                _can_delay(ops, members):
            fused_at[members[-1]] = _fused_op(ops, members)
            removed.update(members)
    if not fused_at:
        return block
    new_ops = [fused_at.get(i, op) for i, op in enumerate(ops)
               if i not in removed or i in fused_at]
    return dataclasses.replace(block, ops=new_ops)


def _protected(program: ProgramDesc, block: BlockDesc) -> set[str]:
    """Vars whose values outlive the ops that use them: fed, returned, persistable."""
    names = set(block.feeds) | set(returned_names(block.returns))
    names |= {n for op in block.ops for n in op.output_names()
              if program.var(block, n).persistable}
    return names


def _extends(program: ProgramDesc, block: BlockDesc, chain: list[OpDesc], op: OpDesc,
             reads: dict[str, int], protected: set[str]) -> bool:
    """``op`` may join ``chain``: it reads the chain's result as X (and nowhere else),
    nothing else reads that result, and its own result has the same declared type."""
    last = chain[-1]
    result = last.outputs["Out"][0]
    if not chainable(op) or op.inputs.get("X") != [result] or \
            result in op.inputs.get("Y", ()) or reads.get(result) != 1 or \
            result in protected or op.role != last.role or op.role_var:
        return False
    a, b = program.var(block, result), program.var(block, op.outputs["Out"][0])
    return a.shape == b.shape and a.dtype == b.dtype


def _chain_op(chain: list[OpDesc]) -> OpDesc:
    return OpDesc("fused_elementwise",
                  {"X": list(chain[0].inputs["X"]),
                   "Ys": [op.inputs["Y"][0] for op in chain if op.inputs.get("Y")]},
                  {"Out": list(chain[-1].outputs["Out"])},
                  {"ops": [[op.type, dict(op.attrs), bool(op.inputs.get("Y"))]
                           for op in chain]},
                  chain[0].role, (), chain[-1].loc)


def fuse_elementwise_chains(program: ProgramDesc, block: BlockDesc) -> BlockDesc:
    reads: dict[str, int] = defaultdict(int)
    for op in block.ops:
        for n in op.input_names():
            reads[n] += 1
    protected = _protected(program, block)
    new_ops: list[OpDesc] = []
    chain: list[OpDesc] = []

    def flush() -> None:
        new_ops.extend(chain if len(chain) < 2 else [_chain_op(chain)])
        chain.clear()

    for op in block.ops:
        if chain and _extends(program, block, chain, op, reads, protected):
            chain.append(op)
            continue
        flush()
        if chainable(op) and not op.role_var:
            chain.append(op)
        else:
            new_ops.append(op)
    flush()
    if len(new_ops) == len(block.ops):
        return block
    return dataclasses.replace(block, ops=new_ops)
