"""Export rules of branches: ``conditional_block`` and ``select_input`` as ONNX ``If``.

`cond` records two conditional blocks, one run when its predicate is true and one when it
is false, then a ``select_input`` per value it returns, picking by the predicate cast to
int32. Those ops together are one ``If``: its then branch is the first block, its else
branch the second, its outputs the select_inputs' outputs. Each branch gives the values it
computes, so the file imports back as a `cond` again (an If per block, giving a
placeholder for what the block does not set, would hand `cond` two types per value).

Any other ``conditional_block`` (a ``Switch`` case, which writes vars set before it) is an
``If`` whose else branch passes those vars on unchanged; a value only its block sets is
an empty placeholder in the else branch, never read (a ``select_input`` skips it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir.blocks import sub_block_index
from ..ir.records import BlockDesc, OpDesc, returned_names
from ..ops.tensor_array import ARRAY
from .export_control import Subgraph, original_op, outer_values, scalar_bool
from .export_registry import GraphBuilder, OpExport, export_rule
from .proto import onnx_dtype


@dataclass
class _Choice:
    """A `cond`: the block run when the predicate holds, the one run when it does not,
    and the select_inputs choosing between their values (``X=[other's, taken's]``)."""
    taken: OpDesc
    other: OpDesc
    selects: list[OpDesc] = field(default_factory=list)


def _choices(block: BlockDesc) -> list[_Choice]:
    """The `cond`s of ``block`` whose two blocks' values only their select_inputs read."""
    producers = {n: op for op in block.ops for n in op.output_names()}
    reads: dict[str, int] = {}
    for op in block.ops:
        for n in op.input_names():
            reads[n] = reads.get(n, 0) + 1
    for n in returned_names(block.returns):
        reads[n] = reads.get(n, 0) + 1
    found: dict[tuple[int, int], _Choice] = {}
    for op in block.ops:
        pair = _pair(op, producers)
        if pair is not None:
            found.setdefault((id(pair[0]), id(pair[1])), _Choice(*pair)).selects.append(op)
    return [c for c in found.values() if _closed(c, reads)]


def _pair(select: OpDesc, producers: dict[str, OpDesc]) -> tuple[OpDesc, OpDesc] | None:
    """The (taken, other) conditional blocks ``select`` chooses between, when it is one
    of `cond`'s: other's condition is ``logical_not`` of taken's, the mask its ``cast``."""
    if select.type != "select_input" or len(select.input("X")) != 2:
        return None
    other, taken = (producers.get(n) for n in select.input("X"))
    if taken is None or other is None or taken is other or \
            {taken.type, other.type} != {"conditional_block"}:
        return None
    pred = taken.input("Cond")[0]
    negated = producers.get(other.input("Cond")[0])
    mask = producers.get(select.input("Mask")[0])
    if negated is None or negated.type != "logical_not" or negated.input("X") != [pred] or \
            mask is None or mask.type != "cast" or mask.input("X") != [pred]:
        return None
    return taken, other


def _closed(choice: _Choice, reads: dict[str, int]) -> bool:
    """Whether every value of the two blocks is new (not a var set before) and read once,
    by one of the select_inputs, each of which takes one value of each block."""
    taken = [s.input("X")[1] for s in choice.selects]
    other = [s.input("X")[0] for s in choice.selects]
    return all(
        sorted(values) == sorted(op.output("Out")) and len(set(values)) == len(values)
        and not set(values) & set(op.input("Input")) and all(reads.get(n) == 1 for n in values)
        for values, op in ((taken, choice.taken), (other, choice.other)))


def _choice_of(e: OpExport) -> _Choice | None:
    """The `cond` that ``e.op`` is part of, if any."""
    return next((c for c in _choices(e.block)
                 if e.op is c.taken or e.op is c.other or any(e.op is s for s in c.selects)),
                None)


def _branch(e: OpExport, block_op: OpDesc, values: list[str], hint: str) -> Any:
    """The subgraph running ``block_op``'s block and giving its ``values`` (names in
    ``e.block``), in order."""
    original = original_op(e, block_op)
    idx = sub_block_index(original)
    assert idx is not None   # a conditional_block always runs a block
    branch = Subgraph(e, outer_values(e, "Input", block_op), e.program.blocks[idx])
    branch.run()
    named = dict(zip(block_op.output("Out"), original.output("Out")))
    return branch.make([(branch.env[named[v]], named[v]) for v in values], hint)


def _export_choice(e: OpExport, choice: _Choice) -> None:
    """The one If of a `cond`, written where its first select_input stands."""
    stem = f"{e.method}.block{sub_block_index(original_op(e, choice.taken))}"
    e.node("If", [scalar_bool(e, choice.taken.input("Cond")[0])],
           [s.output("Out")[0] for s in choice.selects],
           then_branch=_branch(e, choice.taken, [s.input("X")[1] for s in choice.selects],
                               stem),
           else_branch=_branch(e, choice.other, [s.input("X")[0] for s in choice.selects],
                               f"{stem}.else"))


# --- a conditional block on its own ----------------------------------------------------------

def _empty(graph: GraphBuilder, var: Any, hint: str) -> str:
    """Zeros of ``var``'s type, none along a dim unknown until run time (for a tensor
    array, an empty sequence): what a branch gives for a var that only the other branch
    sets (`select_input` never takes it)."""
    if var.kind == ARRAY:
        out = graph.fresh(hint)
        graph.node("SequenceEmpty", [], [out], name=f"{out}/SequenceEmpty",
                   dtype=onnx_dtype(var.dtype))
        return out
    shape = [0 if d < 0 else d for d in var.shape]
    return graph.constant(np.zeros(shape, dtype=var.dtype), graph.fresh(hint))


def _passed(e: OpExport, branch: Subgraph, value: str, var: str, hint: str) -> str:
    """``value`` (of var ``var``) as an output of ``branch``, unchanged: an Identity node,
    which takes a sequence (a tensor array) from opset 14 on."""
    if e.var(var).kind == ARRAY and e.opset < 14:
        e.fail(f"passes the tensor array {var!r} through a branch unchanged, which takes "
               f"ONNX's Identity of a sequence (opset 14); export with opset=14 or later "
               f"(this export uses {e.opset})")
    return branch.node("Identity", [value], hint)


@export_rule("conditional_block")
def _conditional_block(e: OpExport) -> None:
    if _choice_of(e) is not None:
        return   # the If of its cond, written at the select_input
    op = original_op(e)
    outer = outer_values(e, "Input")
    then = Subgraph(e, outer)
    then.run()
    names = op.output("Out")
    other = Subgraph(e, outer)
    kept = [_passed(e, other, outer[n], n, f"{n}.kept") if n in outer
            else _empty(other.graph, e.var(n), f"{n}.unset") for n in names]
    e.node("If", [scalar_bool(e, e.input("Cond"))], e.outputs("Out"),
           then_branch=then.make([(then.env[n], n) for n in names],
                                 f"{e.method}.block{then.block.idx}"),
           else_branch=other.make(list(zip(kept, names)), f"{e.method}.block{then.block.idx}.else"))


def _identity_branch(e: OpExport, value: str, like: str, hint: str) -> Any:
    branch = Subgraph(e, {}, e.block)
    return branch.make([(_passed(e, branch, value, like, hint), like)], hint)


@export_rule("select_input")
def _select_input(e: OpExport) -> None:
    choice = _choice_of(e)
    if choice is not None:
        if e.op is choice.selects[0]:
            _export_choice(e, choice)
        return
    xs = e.inputs("X")
    if len(xs) != 2:
        e.fail(f"selects among {len(xs)} values; ONNX export takes two (the branches of cond)")
    mask = e.node("Cast", [e.input("Mask")], [e.tmp("mask")], to=onnx_dtype("bool"))[0]
    e.node("If", [scalar_bool(e, mask)], [e.output("Out")],
           then_branch=_identity_branch(e, xs[1], xs[1], e.tmp_hint("then")),
           else_branch=_identity_branch(e, xs[0], xs[0], e.tmp_hint("else")))
