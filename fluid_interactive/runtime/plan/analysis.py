"""Analysing a block for concrete feed types, before code is generated for it.

1. `_concrete_types`: rerun every op's shape rule with the real batch size;
2. `_live_ops`: drop ops whose results nobody needs;
3. `_fold_constants`: evaluate once, at plan time, ops that depend on no feed, parameter or
   random draw (the loss-gradient seed and what follows from it alone);
4. `buffers.assign_buffers`: give each temporary a preallocated buffer, reusing a buffer
   once the last reader of its previous owner has run, in place where an op allows it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...errors import ShapeError
from ...ir.records import BlockDesc, OpDesc, ProgramDesc, returned_names
from ...ir.source import format_location
from ...ir.text import format_loc, format_op
from ...ops.apply import flat_inputs, flat_outputs, infer_op, prepare_kernel
from ...ops.registry import get_spec
from ...ops.spec import Forward, OpSpec, TensorType
from .buffers import assign_buffers


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


def describe_op(program: ProgramDesc, block: BlockDesc, op: OpDesc) -> str:
    line = format_op(op, lambda n: program.find_var(block, n))
    where = format_loc(op.loc)
    return f"{line}" + (f"\n  recorded at {format_location(op.loc)}" if where else "")


def _concrete_types(program: ProgramDesc, block: BlockDesc,
                    feed_types: dict[str, TensorType]) -> dict[str, TensorType]:
    types = dict(feed_types)

    def type_of(name: str) -> TensorType:
        t = types.get(name)
        if t is None:
            v = program.find_var(block, name)
            t = TensorType(v.shape, v.dtype)
            types[name] = t
        return t

    for op in block.ops:
        try:
            out = infer_op(op, type_of)
        except ShapeError as e:
            raise ShapeError(f"{e}\n  in op: {describe_op(program, block, op)}\n"
                             f"  (with the fed shapes {_fmt_types(feed_types)})") from None
        for slot, ts in out.items():
            types.update(zip(op.outputs[slot], ts))
    return types


def _fmt_types(types: dict[str, TensorType]) -> str:
    return ", ".join(f"{n}: {t.dtype}{list(t.shape)}" for n, t in types.items()) or "none"


def _live_ops(block: BlockDesc, persistables: set[str], needed: set[str]) -> list[OpDesc]:
    needed = set(needed)
    live = []
    for op in reversed(block.ops):
        outs = op.output_names()
        if any(n in needed or n in persistables for n in outs):
            live.append(op)
            needed.update(op.input_names())
    live.reverse()
    return live


def _fold_constants(ops: list[OpDesc], types: dict[str, TensorType], xp: Any,
                    persistables: set[str], rng: Any) -> tuple[list[OpDesc], dict[str, Any]]:
    constants: dict[str, Any] = {}
    kept = []
    for op in ops:
        spec = get_spec(op.type)
        value_inputs = [n for s in spec.inputs if s.name not in spec.shape_only
                        for n in op.inputs.get(s.name, ())]
        foldable = (not spec.random and spec.kernel is not None
                    and all(n in constants for n in value_inputs)
                    and not any(n in persistables for n in op.output_names()))
        if not foldable:
            kept.append(op)
            continue
        fn = prepare_kernel(op, types.__getitem__, xp, rng=rng)
        args: list[Any] = [constants.get(n) for n in flat_inputs(spec, op)]
        result = args[fn.input_index] if isinstance(fn, Forward) else fn(*args)
        outs = flat_outputs(spec, op)
        constants.update(zip(outs, (result,) if len(outs) == 1 else result))
    return kept, constants


def analyse_block(program: ProgramDesc, block: BlockDesc, feed_types: dict[str, TensorType],
                  xp: Any, rng_for: Callable[[int], Any]) -> BlockAnalysis:
    """Everything code generation needs to know about ``block`` for these feed types."""
    types = _concrete_types(program, block, feed_types)
    persistables = {n for op in block.ops for n in op.input_names() + op.output_names()
                    if program.find_var(block, n).persistable}
    returned = set(returned_names(block.returns))
    ops = _live_ops(block, persistables, returned)
    ops, constants = _fold_constants(ops, types, xp, persistables, rng_for(-1))
    index_of = {id(op): i for i, op in enumerate(block.ops)}
    steps = []
    for op in ops:
        spec = get_spec(op.type)
        steps.append(Step(index_of[id(op)], op, spec, flat_inputs(spec, op),
                          flat_outputs(spec, op)))
    no_buffer = persistables | returned | set(feed_types)
    assign_buffers(steps, types, xp, no_buffer)
    return BlockAnalysis(types, steps, constants, persistables, returned)


def op_rng(seed: int | None, block_idx: int, op_index: int, np_module) -> Any:
    """A generator per op: reproducible for a given program seed, independent across ops."""
    if seed is None:
        return np_module.random.default_rng()
    return np_module.random.default_rng([seed, block_idx, op_index + 1])
