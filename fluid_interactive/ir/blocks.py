"""Blocks nested by control flow: which op owns which block, and what a block reads and
writes of the blocks around it.

An op owns a sub-block through its ``sub_block`` attribute (the block's index, as Paddle
stores a BLOCK attribute); the sub-block's ``parent_idx`` is the block holding that op.
A name resolves to the innermost enclosing block that declares it
(`ProgramDesc.find_var`), so a sub-block reads the vars of its ancestors and may write
them: such a write is how a loop carries a value from one iteration to the next.

Nothing here knows an op type: what an op does with its sub-block is its spec's business
(``OpSpec.sub_block``); this module only reads the structure.
"""
from __future__ import annotations

from collections.abc import Iterator

from ..errors import VerifyError
from .names import printable
from .records import BlockDesc, OpDesc, ProgramDesc

#: The attribute through which an op owns a sub-block.
SUB_BLOCK = "sub_block"

#: The deepest nesting of sub-blocks a program may have: far more than any program
#: needs (a loop inside a branch inside a loop is 3), and shallow enough that every walk
#: over the nesting stays far from Python's recursion limit.
MAX_NESTING = 100


def check_nesting(program: ProgramDesc) -> None:
    """Raise `VerifyError` unless the blocks form a tree every walk over them can trust:
    each block's ``idx`` is its position, each parent comes before its child, each
    ``sub_block`` attr names a later block whose parent holds the op, and no nesting is
    deeper than `MAX_NESTING`. Every entry point that takes a program from outside (text,
    drawings, diffs, transpiling, compiling, loading) checks this first, so that no walk
    loops for ever or recurses past the interpreter's limit on a hostile program. (That
    every sub-block has exactly one owner is the verifier's business: an unowned block
    only goes undrawn and unrun.)"""
    for i, block in enumerate(program.blocks):
        if block.idx != i:
            raise VerifyError(f"block at position {i} says its idx is {block.idx}")
        if i == 0 and block.parent_idx != -1:
            raise VerifyError("block 0 must have parent_idx -1")
        if i > 0 and not (isinstance(block.parent_idx, int) and 0 <= block.parent_idx < i):
            raise VerifyError(f"block {i} has parent {block.parent_idx!r}; a parent must "
                              f"come first")
    _check_sub_block_attrs(program)
    depth = [0] * len(program.blocks)
    for block in program.blocks[1:]:
        depth[block.idx] = depth[block.parent_idx] + 1
        if depth[block.idx] > MAX_NESTING:
            raise VerifyError(f"block {block.idx} is nested {depth[block.idx]} blocks deep; "
                              f"a program may nest at most {MAX_NESTING}")


def _check_sub_block_attrs(program: ProgramDesc) -> None:
    """Every ``sub_block`` attr names a later block whose parent holds the op."""
    for block in program.blocks:
        for index, op in enumerate(block.ops):
            if SUB_BLOCK not in op.attrs:
                continue
            where = f"block {block.idx}, op {index} ({printable(str(op.type))})"
            idx = sub_block_index(op)
            if idx is None or not 0 < idx < len(program.blocks):
                raise VerifyError(f"{where}: attr {SUB_BLOCK}={op.attrs[SUB_BLOCK]!r} is not "
                                  f"the index of a block of the program")
            if program.blocks[idx].parent_idx != block.idx:
                raise VerifyError(f"{where}: owns block {idx}, whose parent is block "
                                  f"{program.blocks[idx].parent_idx}, not this block "
                                  f"{block.idx}")


def sub_block_index(op: OpDesc) -> int | None:
    """The index of the block ``op`` owns, or None."""
    value = op.attrs.get(SUB_BLOCK)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def owned_blocks(program: ProgramDesc, block: BlockDesc) -> list[BlockDesc]:
    """The sub-blocks owned by the ops of ``block`` (not their own sub-blocks), in op
    order."""
    found = []
    for op in block.ops:
        idx = sub_block_index(op)
        if idx is not None and 0 <= idx < len(program.blocks):
            found.append(program.blocks[idx])
    return found


def nested_blocks(program: ProgramDesc, block: BlockDesc) -> Iterator[BlockDesc]:
    """``block`` and every block nested in it, outermost first."""
    yield block
    for sub in owned_blocks(program, block):
        yield from nested_blocks(program, sub)


def walk_ops(program: ProgramDesc, block: BlockDesc) -> Iterator[tuple[BlockDesc, OpDesc]]:
    """``(block, op)`` for every op of ``block`` and of the blocks nested in it; an op
    owning a sub-block comes before the sub-block's ops."""
    for op in block.ops:
        yield block, op
        idx = sub_block_index(op)
        if idx is not None and 0 <= idx < len(program.blocks):
            yield from walk_ops(program, program.blocks[idx])


def owned_block(program: ProgramDesc, op: OpDesc) -> BlockDesc | None:
    """The block ``op`` runs, or None (no ``sub_block`` attr, or one naming no block)."""
    idx = sub_block_index(op)
    if idx is None or not 0 < idx < len(program.blocks):
        return None
    return program.blocks[idx]


def body_ops(program: ProgramDesc, op: OpDesc) -> list[OpDesc]:
    """Every op ``op`` runs: those of its block and of the blocks nested in it."""
    body = owned_block(program, op)
    return [] if body is None else [o for _, o in walk_ops(program, body)]


def owners(program: ProgramDesc) -> dict[int, tuple[BlockDesc, int]]:
    """sub-block index -> (the block holding its owner, the owner's op index)."""
    found: dict[int, tuple[BlockDesc, int]] = {}
    for block in program.blocks:
        for i, op in enumerate(block.ops):
            idx = sub_block_index(op)
            if idx is not None:
                found.setdefault(idx, (block, i))
    return found


def declared_within(program: ProgramDesc, block: BlockDesc) -> set[str]:
    """Names declared in ``block`` or in a block nested in it."""
    return {n for b in nested_blocks(program, block) for n in b.vars}


def outer_interface(program: ProgramDesc, block: BlockDesc) -> tuple[list[str], list[str]]:
    """What the ops of ``block`` (and of the blocks nested in it) read and write of the
    vars declared outside it: ``(reads, writes)``, each in order of first use. A var both
    read and written is carried from one run of the block to the next."""
    inner = declared_within(program, block)
    reads: dict[str, None] = {}
    writes: dict[str, None] = {}
    for op in block.ops:   # a nested owner's slots already list what its block uses
        reads.update((n, None) for n in op.input_names() if n not in inner)
        writes.update((n, None) for n in op.output_names() if n not in inner)
    return list(reads), list(writes)


def is_nested_in(program: ProgramDesc, block: BlockDesc, ancestor: BlockDesc) -> bool:
    """Whether ``block`` is ``ancestor`` or lies inside it."""
    b: BlockDesc | None = block
    while b is not None:
        if b.idx == ancestor.idx:
            return True
        b = program.blocks[b.parent_idx] if b.parent_idx >= 0 else None
    return False


def method_of(program: ProgramDesc, block: BlockDesc) -> BlockDesc:
    """The method block (a child of block 0) that ``block`` lies in; ``block`` itself for
    block 0 and for method blocks."""
    b = block
    while b.parent_idx > 0:
        b = program.blocks[b.parent_idx]
    return b
