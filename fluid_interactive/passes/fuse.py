"""Fusion passes run when a block is planned (pure: a new block, the input untouched).

`fuse_optimizer_updates` replaces the per-parameter update ops of one optimizer (ops of
role Optimize whose spec names a ``fused`` type, with the same attrs, the same shared
inputs such as the learning-rate var, and parameters of one dtype) by one fused op, at
the place of the last of them. It fuses only where that changes no value: no other op
between an update and that place may read what the update writes, or write what it reads.
The fused op's kernels compute bit-identical values (ops/optim_fused.py).
"""
from __future__ import annotations

import dataclasses
from bisect import bisect_right
from collections import defaultdict
from typing import Any

from ..ir.records import BlockDesc, OpDesc, OpRole, ProgramDesc
from ..ops.optim_fused import fused_slot
from ..ops.registry import get_spec


def _group_key(program: ProgramDesc, block: BlockDesc, op: OpDesc) -> Any:
    spec = get_spec(op.type)
    shared = tuple((s, tuple(op.inputs.get(s, ()))) for s in spec.fused_shared)
    param = op.inputs[spec.inputs[0].name][0]
    dtype = program.find_var(block, param).dtype
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


def fuse_optimizer_updates(program: ProgramDesc, block: BlockDesc) -> BlockDesc:
    ops = block.ops
    groups: dict[Any, list[int]] = defaultdict(list)
    for i, op in enumerate(ops):
        if op.role & OpRole.OPTIMIZE and get_spec(op.type).fused:
            groups[_group_key(program, block, op)].append(i)
    fused_at: dict[int, OpDesc] = {}
    removed: set[int] = set()
    for members in groups.values():
        if _can_delay(ops, members):
            fused_at[members[-1]] = _fused_op(ops, members)
            removed.update(members)
    if not fused_at:
        return block
    new_ops = [fused_at[i] if i in fused_at else op for i, op in enumerate(ops)
               if i not in removed or i in fused_at]
    return dataclasses.replace(block, ops=new_ops)
