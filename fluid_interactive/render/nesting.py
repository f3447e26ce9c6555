"""Control flow in the drawings: an op that owns a sub-block (a loop, a branch, a StaticRNN
step, or the gradient of one of them) is drawn as one box that opens into its body.

Everything here reads the structure through `ir.blocks` (``sub_block_index``,
``walk_ops``, ``outer_interface``) and the op's role, never an op's type: a program from
elsewhere with a control-flow op no spec here knows draws the same way.

The *construct* an op runs is named by the vars that are the op's own, the ones its body
neither reads nor writes (a loop's kept values ``while_1.step_scopes``, a StaticRNN's
stacked outputs ``static_rnn_0.out_0``): their layer (`ir.layers.layer_of`) is the name
the user's layer call gave it, ``while_1`` or ``static_rnn_0``, shared by the op and its
gradient op.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..ir.blocks import (
    body_ops,
    nested_blocks,
    outer_interface,
    owned_block,
    owners,
    sub_block_index,
)
from ..ir.layers import construct_name, own_names
from ..ir.records import BlockDesc, OpDesc, OpRole, ProgramDesc, returned_names

__all__ = ["Owner", "owner_of", "outermost", "own_names", "construct_name", "body_ops",
           "body_word", "describe", "interface", "owned_block"]


@dataclass(frozen=True)
class Owner:
    """The op that runs a sub-block: the block holding it, its index there, the op."""
    block: BlockDesc
    index: int
    op: OpDesc


def owner_of(program: ProgramDesc, block: BlockDesc) -> Owner | None:
    """The op owning ``block``, or None for block 0 and method blocks."""
    found = owners(program).get(block.idx)
    if found is None:
        return None
    holder, index = found
    return Owner(holder, index, holder.ops[index])


def outermost(program: ProgramDesc, blocks: Sequence[BlockDesc]) -> list[BlockDesc]:
    """``blocks`` without those an op of another of them runs (directly or deeper): a
    loop's body is drawn inside the method running it, not beside it. A block that names
    a parent but that no op runs stays."""
    inside = {b.idx for top in blocks for b in nested_blocks(program, top) if b is not top}
    return [b for b in blocks if b.idx not in inside]


def body_word(op: OpDesc) -> str:
    """``gradient block`` for an op with the Backward role (it replays a loop's
    iterations backwards), else ``body``."""
    return "gradient block" if op.role & OpRole.BACKWARD else "body"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def describe(program: ProgramDesc, block: BlockDesc, op: OpDesc) -> str:
    """``while_1 (while): body, block 4, 7 ops``; nested blocks are counted too."""
    body = owned_block(program, op)
    ops = body_ops(program, op)
    inner = sum(1 for o in ops if sub_block_index(o) is not None)
    where = f"block {body.idx}, " if body is not None else ""
    nested = f", {_plural(inner, 'nested block')}" if inner else ""
    return (f"{construct_name(program, block, op)} ({op.type}): {body_word(op)}, "
            f"{where}{_plural(len(ops), 'op')}{nested}")


def interface(program: ProgramDesc, block: BlockDesc) -> tuple[list[str], list[str]]:
    """What a sub-block takes and gives, as a drawing of it on its own shows them: its
    per-run feeds and the vars of the blocks around that it reads (``inputs``); its
    returns and the vars around that it writes (``outputs``; one in both is carried from
    one run to the next)."""
    reads, writes = outer_interface(program, block)
    inputs = list(dict.fromkeys(list(block.feeds) + reads))
    outputs = list(dict.fromkeys(returned_names(block.returns) + writes))
    return inputs, outputs
