"""Analysing a block for concrete feed types, before code is generated for it.

1. `_concrete_types`: rerun every op's shape rule with the real batch size;
2. `_live_ops`: drop ops whose results nobody needs (unless the op has a side effect);
3. `_fold_constants`: evaluate once, at plan time, ops that depend on no feed, parameter or
   random draw (the loss-gradient seed and what follows from it alone);
4. `buffers.assign_buffers`: give each temporary a preallocated buffer, reusing a buffer
   once the last reader of its previous owner has run, in place where an op allows it.
"""
from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, field
from typing import Any

from ...ir.blocks import declared_within, sub_block_index
from ...ir.records import BlockDesc, OpDesc, ProgramDesc, returned_names
from ...ops.apply import flat_inputs, flat_outputs, prepare_kernel
from ...ops.registry import get_spec
from ...ops.spec import Forward, OpSpec, TensorType, var_type
from .buffers import PlanMemory, Slots, assign_buffers
from .shapes import InferredTypes, Typing, concrete_types, describe_op, inherited

__all__ = ["Step", "BlockAnalysis", "analyse_block", "analyse_body", "describe_op", "op_rng"]


@dataclass
class Step:
    index: int                 # the op's index in its block
    op: OpDesc
    spec: OpSpec
    inputs: list[str]
    outputs: list[str]
    buffers: dict[str, list[Any]] = field(default_factory=dict)


@dataclass
class BlockAnalysis:
    types: dict[str, TensorType]
    steps: list[Step]
    constants: dict[str, Any]
    persistables: set[str]
    returned: set[str]
    typing: Typing
    # returned vars of sub-blocks: the plan gives back their values of every run, stacked
    collected: set[str] = field(default_factory=set)
    slots: Slots | None = None   # what made the steps' buffers


def has_effect(program: ProgramDesc, op: OpDesc) -> bool:
    """Whether ``op`` does something besides computing its outputs, or owns a block
    holding such an op (a Print inside a loop): it runs though no one reads its outputs."""
    if get_spec(op.type).effects:
        return True
    idx = sub_block_index(op)
    return idx is not None and any(has_effect(program, inner)
                                   for inner in program.blocks[idx].ops)


def _live_ops(program: ProgramDesc, block: BlockDesc, persistables: set[str],
              needed: set[str]) -> list[OpDesc]:
    needed = set(needed)
    live = []
    for op in reversed(block.ops):
        outs = op.output_names()
        if any(n in needed or n in persistables for n in outs) or has_effect(program, op):
            live.append(op)
            needed.update(op.input_names())
    live.reverse()
    return live


def _rewritten(ops: list[OpDesc]) -> set[str]:
    """Vars written by more than one op (a loop's carried vars): never constants."""
    seen: set[str] = set()
    again: set[str] = set()
    for op in ops:
        for n in op.output_names():
            (again if n in seen else seen).add(n)
    return again


def _fold_constants(ops: list[OpDesc], types: dict[str, TensorType], xp: Any,
                    persistables: set[str], inputs: Set[str] = frozenset()
                    ) -> tuple[list[OpDesc], dict[str, Any]]:
    """Ops computing values known at plan time run once, now; never one writing a
    persistable var, a var written twice or a var the block receives (a carried var), nor
    a random op (so no generator is needed)."""
    constants: dict[str, Any] = {}
    fixed = persistables | _rewritten(ops) | set(inputs)
    kept = []
    for op in ops:
        spec = get_spec(op.type)
        value_inputs = [n for s in spec.inputs if s.name not in spec.shape_only
                        for n in op.inputs.get(s.name, ())]
        foldable = (not spec.random and not spec.effects and spec.kernel is not None
                    and all(n in constants for n in value_inputs)
                    and not any(n in fixed for n in op.output_names())
                    and not any(d < 0 for n in op.input_names() + op.output_names()
                                for d in types[n].shape))
        if not foldable:
            kept.append(op)
            continue
        fn = prepare_kernel(op, types.__getitem__, xp)
        args: list[Any] = [constants.get(n) for n in flat_inputs(spec, op)]
        result = args[fn.input_index] if isinstance(fn, Forward) else fn(*args)
        outs = flat_outputs(spec, op)
        constants.update(zip(outs, (result,) if len(outs) == 1 else result))
    return kept, constants


def _steps(block: BlockDesc, ops: list[OpDesc]) -> list[Step]:
    index_of = {id(op): i for i, op in enumerate(block.ops)}
    steps = []
    for op in ops:
        spec = get_spec(op.type)
        steps.append(Step(index_of[id(op)], op, spec, flat_inputs(spec, op),
                          flat_outputs(spec, op)))
    return steps


@dataclass
class BlockMemo:
    """What the plans of one block for every size share: the types its shape rules gave
    (by op and input types), and the ops that run with the vars that are state, returned
    or gathered from sub-blocks, which no size changes."""
    inferred: InferredTypes = field(default_factory=InferredTypes)
    # (live ops, persistables, returned, collected)
    facts: tuple[list[OpDesc], frozenset[str], frozenset[str], frozenset[str]] | None = None


def analyse_block(program: ProgramDesc, block: BlockDesc, feed_types: dict[str, TensorType],
                  xp: Any, typing: Typing | None = None,
                  memory: PlanMemory | None = None, memo: BlockMemo | None = None
                  ) -> BlockAnalysis:
    """Everything code generation needs to know about a method's ``block`` for these feed
    types; its buffers are views of ``memory`` when given (buffers.py); ``memo``: what
    the block's plans for other sizes found, shared."""
    typing = typing or Typing(program)
    types = concrete_types(typing, block, feed_types,
                           inferred=memo.inferred if memo is not None else None)
    facts = memo.facts if memo is not None else None
    if facts is None:
        facts = _block_facts(program, block, types)
        if memo is not None:
            memo.facts = facts
    live, state, returned_, collected_ = facts
    persistables, returned, collected = set(state), set(returned_), set(collected_)
    for name in (returned - collected - types.keys()) & persistables:   # state as it is
        types[name] = var_type(program.var(block, name))
    ops, constants = _fold_constants(live, types, xp, persistables)
    steps = _steps(block, ops)
    no_buffer = persistables | returned | set(feed_types)
    slots = assign_buffers(steps, types, xp, no_buffer, memory)
    return BlockAnalysis(types, steps, constants, persistables, returned, typing, collected,
                         slots)


def _block_facts(program: ProgramDesc, block: BlockDesc, types: dict[str, TensorType]
                 ) -> tuple[list[OpDesc], frozenset[str], frozenset[str], frozenset[str]]:
    """The ops that run, and the vars that are state, returned, or gathered from the runs
    of sub-blocks (declared in none of the block's own scope)."""
    persistables = {n for op in block.ops for n in op.input_names() + op.output_names()
                    if program.var(block, n).persistable}
    returned = set(returned_names(block.returns))
    collected = {n for n in returned if program.find_var(block, n) is None}
    for name in returned - collected - types.keys():   # state returned as it is
        if program.var(block, name).persistable:
            persistables.add(name)
    ops = _live_ops(program, block, persistables,
                    returned | _owners_of(program, block, collected))
    return ops, frozenset(persistables), frozenset(returned), frozenset(collected)


def _owners_of(program: ProgramDesc, block: BlockDesc, names: set[str]) -> set[str]:
    """The outputs of the ops whose sub-blocks declare one of ``names``: a plan that
    gathers those vars' values runs those ops."""
    needed: set[str] = set()
    for op in block.ops:
        idx = sub_block_index(op)
        if idx is not None and names & declared_within(program, program.blocks[idx]):
            needed.update(op.output_names())
    return needed


def analyse_body(typing: Typing, block: BlockDesc, inputs: dict[str, TensorType],
                 results: list[str], xp: Any) -> BlockAnalysis:
    """The same for a sub-block run as a function: ``inputs`` are its parameters (feeds and
    the vars it reads of the blocks around), ``results`` what it gives back (its writes,
    returns and kept values), all without a buffer of the body's own: each run's results
    are new arrays, so nothing that outlives a run is overwritten by the next."""
    start = inherited(typing, block, inputs)
    start.update(inputs)
    types = concrete_types(typing, block, start)
    ops = _live_ops(typing.program, block, set(), set(results))
    ops, constants = _fold_constants(ops, types, xp, set(), set(inputs))
    steps = _steps(block, ops)
    assign_buffers(steps, types, xp, set(results) | set(inputs))
    return BlockAnalysis(types, steps, constants, set(), set(results), typing)


def op_rng(seed: int | None, block_idx: int, op_index: int, np_module) -> Any:
    """A generator per op: reproducible for a given program seed, independent across ops."""
    if seed is None:
        return np_module.random.default_rng()
    return np_module.random.default_rng([seed, block_idx, op_index + 1])
