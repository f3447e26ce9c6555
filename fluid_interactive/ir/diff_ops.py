"""The op-level difference of one block: its ops aligned old against new, and for each pair
that differs, what differs (`Edit`s: the type, an attr, an input or output).

Ops have no identity of their own, so a block's ops are aligned by their sequence of
(type, role) with `difflib` (an inserted layer shows as inserted ops, not as every later op
changed); the key holds the layer of the op's first output too (`ir.layers`), so a block's
ops line up layer by layer, the way a recompilation carries parameters over by name.
Aligned ops are then compared structurally: temporaries are anonymous (a
temporary renamed because a layer was inserted earlier is the same temporary if the op that
computes it corresponds), while persistable vars and data vars are compared by name, since
a name is what ties a parameter to its value. Source locations are ignored: moving a line
is no change.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from .blocks import SUB_BLOCK, sub_block_index
from .layers import layer_of
from .records import BlockDesc, OpDesc, ProgramDesc, ReturnSpec, VarDesc
from .text import format_op, format_returns, short_type

__all__ = ["GLOBAL", "Edit", "OpChange", "BlockDiff", "diff_block", "whole_block"]

GLOBAL = "(global)"   # the name a diff gives block 0

Aligned = tuple[int | None, int | None]
Lookup = Callable[[str], "VarDesc | None"]


@dataclass(frozen=True)
class Edit:
    """One thing that differs between two aligned ops, or in a method's signature.

    ``what`` is 'type', 'attr', 'input' or 'output' for an op; ``key`` the attr or the
    slot; 'body' for a change inside the block the op runs (``key`` describes it, ``old``
    is the inner `OpChange`, ``new`` the inner edit it details, if any). For a
    slot, ``var`` is empty when the slot names other vars (``old``/``new`` are
    the name lists) and is the var's new name when only its type differs (``old``/``new``
    are the types, such as ``f32[?,64]``). A signature's edits are 'arguments',
    'returns' or 'is_test', ``old``/``new`` their text."""
    what: str
    key: str = ""
    old: Any = None
    new: Any = None
    var: str = ""

    def text(self, arrow: str = "->") -> str:
        if self.what == "type":
            return f"type {self.old} {arrow} {self.new}"
        if self.what == "attr":
            return f"attr {self.key}: {self.old!r} {arrow} {self.new!r}"
        if self.what in ("input", "output"):
            if self.var:
                return f"{self.what} {self.key} {self.var}: {self.old} {arrow} {self.new}"
            return f"{self.what} {self.key}: {_names(self.old)} {arrow} {_names(self.new)}"
        if self.what == "body":    # a change inside the block the op runs (a loop's body)
            return f"in its block: {self.key}"
        return f"{self.what} {self.old} {arrow} {self.new}"    # a block's signature

    @property
    def is_type_change(self) -> bool:
        """A slot whose var is the same but of another shape or dtype."""
        return self.what in ("input", "output") and bool(self.var)


@dataclass
class OpChange:
    """One op that differs: ``kind`` is 'added', 'removed' or 'changed'."""
    kind: str
    old: OpDesc | None = None
    new: OpDesc | None = None
    old_index: int | None = None
    new_index: int | None = None
    edits: list[Edit] = field(default_factory=list)   # what changed, for 'changed'

    @property
    def op(self) -> OpDesc:
        """The op as the new program has it (the old one for a removed op)."""
        op = self.new if self.new is not None else self.old
        if op is None:   # made only by the differ, always with one side
            raise ValueError("an OpChange holds an op on at least one side")
        return op

    @property
    def type(self) -> str:
        return self.op.type

    @property
    def details(self) -> list[str]:
        """What changed, one line each (``type relu -> tanh``)."""
        return [e.text() for e in self.edits]

    def describe(self, old_lookup: Lookup, new_lookup: Lookup) -> str:
        if self.kind == "removed":
            return "- " + format_op(self.op, old_lookup)
        return ("+ " if self.kind == "added" else "~ ") + format_op(self.op, new_lookup)


@dataclass
class BlockDiff:
    """The difference of one block: block 0 (named `GLOBAL`) or a method."""
    name: str
    status: str                       # 'same', 'changed', 'added' or 'removed'
    ops: list[OpChange] = field(default_factory=list)
    unchanged: int = 0                # ops that correspond and are equal
    signature_edits: list[Edit] = field(default_factory=list)   # feeds / returns / mode
    old_idx: int | None = None
    new_idx: int | None = None
    #: every op in order: (old index, new index), None on the side that lacks it
    aligned: list[Aligned] = field(default_factory=list)

    @property
    def signature(self) -> list[str]:
        """What differs in the method's arguments, returns or mode, one line each."""
        return [e.text() for e in self.signature_edits]

    def count(self, kind: str) -> int:
        return sum(1 for c in self.ops if c.kind == kind)

    def changed_ops(self) -> list[OpChange]:
        return [c for c in self.ops if c.kind == "changed"]


# --- aligning the ops of one block ----------------------------------------------------------

class _Sides:
    """Var lookups and the temporary-name correspondence while one block is compared."""

    def __init__(self, old_prog: ProgramDesc, old_block: BlockDesc, new_prog: ProgramDesc,
                 new_block: BlockDesc):
        self.old_prog, self.old_block = old_prog, old_block
        self.new_prog, self.new_block = new_prog, new_block
        self.renamed: dict[str, str] = {}   # old temporary -> new temporary

    def old_var(self, name: str) -> VarDesc | None:
        return self.old_prog.find_var(self.old_block, name)

    def new_var(self, name: str) -> VarDesc | None:
        return self.new_prog.find_var(self.new_block, name)

    def named(self, name: str, side: str) -> bool:
        """Whether ``name`` is compared by name: persistable or data (else a temporary)."""
        var = self.old_var(name) if side == "old" else self.new_var(name)
        return var is None or var.persistable or var.is_data

    def corresponds(self, old: str, new: str) -> bool:
        if self.named(old, "old") or self.named(new, "new"):
            return old == new
        return self.renamed.get(old, old) == new


def _pairs(old_ops: list[OpDesc], new_ops: list[OpDesc]) -> list[Aligned]:
    """Aligned (old index, new index) pairs in order; None on one side for an op only the
    other block has."""
    def key(op: OpDesc) -> tuple:
        first = next(iter(op.output_names()), "")
        return op.type, op.role, layer_of(first)

    matcher = SequenceMatcher(None, [key(o) for o in old_ops], [key(o) for o in new_ops],
                              autojunk=False)
    out: list[Aligned] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            out += list(zip(range(i1, i2), range(j1, j2)))   # a replaced run of one length:
            continue                                         # the same ops, edited
        if tag in ("replace", "delete"):
            out += [(i, None) for i in range(i1, i2)]
        if tag in ("replace", "insert"):
            out += [(None, j) for j in range(j1, j2)]
    return out


def _op_edits(sides: _Sides, old: OpDesc, new: OpDesc) -> list[Edit]:
    edits = []
    if old.type != new.type:
        edits.append(Edit("type", "", old.type, new.type))
    for key in list(old.attrs) + [k for k in new.attrs if k not in old.attrs]:
        a, b = old.attrs.get(key, "(unset)"), new.attrs.get(key, "(unset)")
        if key != SUB_BLOCK and (a != b or type(a) is not type(b)):   # an index: no change
            edits.append(Edit("attr", key, a, b))
    edits += _slot_edits(sides, old.inputs, new.inputs, "input")
    edits += _slot_edits(sides, old.outputs, new.outputs, "output")
    return edits + _body_edits(sides, old, new)


def _body_edits(sides: _Sides, old: OpDesc, new: OpDesc) -> list[Edit]:
    """The changes inside the blocks two aligned ops run (a loop's body), one edit each."""
    a, b = sub_block_index(old), sub_block_index(new)
    if a is None or b is None:
        return []
    old_block, new_block = sides.old_prog.blocks[a], sides.new_prog.blocks[b]
    inner = diff_block(sides.old_prog, old_block, sides.new_prog, new_block, "",
                       dict(sides.renamed))
    def old_var(name: str) -> VarDesc | None:
        return sides.old_prog.find_var(old_block, name)

    def new_var(name: str) -> VarDesc | None:
        return sides.new_prog.find_var(new_block, name)

    edits = []
    for change in inner.ops:   # ``old``: the inner change, ``new``: one of its edits
        edits.append(Edit("body", change.describe(old_var, new_var), change))
        edits += [Edit("body", f"  {e.text()}", change, e) for e in change.edits]
    return edits


def _slot_edits(sides: _Sides, old_slots: dict[str, list[str]],
                new_slots: dict[str, list[str]], what: str) -> list[Edit]:
    edits = []
    for slot in list(old_slots) + [s for s in new_slots if s not in old_slots]:
        a, b = old_slots.get(slot, []), new_slots.get(slot, [])
        if len(a) != len(b) or not all(sides.corresponds(x, y) for x, y in zip(a, b)):
            edits.append(Edit(what, slot, list(a), list(b)))
            continue
        for x, y in zip(a, b):
            tx, ty = short_type(sides.old_var(x)), short_type(sides.new_var(y))
            if tx != ty:
                edits.append(Edit(what, slot, tx, ty, var=y))
    return edits


def _names(names: list[str]) -> str:
    return "[" + ", ".join(names) + "]" if len(names) != 1 else names[0]


def _learn_names(sides: _Sides, old: OpDesc, new: OpDesc) -> None:
    for slot, names in old.outputs.items():
        for x, y in zip(names, new.outputs.get(slot, [])):
            if not sides.named(x, "old") and not sides.named(y, "new"):
                sides.renamed[x] = y


def _signature(sides: _Sides) -> list[Edit]:
    old, new = sides.old_block, sides.new_block
    out = []
    old_feeds = [f"{n}:{short_type(old.vars.get(n))}" for n in old.feeds]
    new_feeds = [f"{n}:{short_type(new.vars.get(n))}" for n in new.feeds]
    if old_feeds != new_feeds:
        out.append(Edit("arguments", "", f"({', '.join(old_feeds)})",
                        f"({', '.join(new_feeds)})"))
    if not _returns_correspond(sides, old.returns, new.returns):
        out.append(Edit("returns", "", format_returns(old.returns),
                        format_returns(new.returns)))
    if old.is_test != new.is_test:
        out.append(Edit("is_test", "", old.is_test, new.is_test))
    return out


def _returns_correspond(sides: _Sides, a: ReturnSpec, b: ReturnSpec) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return sides.corresponds(a, b)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_returns_correspond(sides, x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_returns_correspond(sides, a[k], b[k]) for k in a)
    return a is None and b is None


def diff_block(old_prog: ProgramDesc, old_block: BlockDesc, new_prog: ProgramDesc,
               new_block: BlockDesc, name: str, renamed: dict[str, str] | None = None
               ) -> BlockDiff:
    """The difference of two blocks that stand for the same thing (block 0, one method,
    or the body of a loop; ``renamed``: the correspondence of the blocks around it)."""
    sides = _Sides(old_prog, old_block, new_prog, new_block)
    sides.renamed.update(renamed or {})
    result = BlockDiff(name, "same", old_idx=old_block.idx, new_idx=new_block.idx)
    result.aligned = _pairs(old_block.ops, new_block.ops)
    for i, j in result.aligned:
        if i is not None and j is not None:
            old, new = old_block.ops[i], new_block.ops[j]
            _learn_names(sides, old, new)   # an op never reads its own temporaries
            edits = _op_edits(sides, old, new)
            if edits:
                result.ops.append(OpChange("changed", old, new, i, j, edits))
            else:
                result.unchanged += 1
        elif i is not None:
            result.ops.append(OpChange("removed", old=old_block.ops[i], old_index=i))
        elif j is not None:
            result.ops.append(OpChange("added", new=new_block.ops[j], new_index=j))
    result.signature_edits = _signature(sides)
    if result.ops or result.signature_edits:
        result.status = "changed"
    return result


def whole_block(block: BlockDesc, status: str) -> BlockDiff:
    """A method only one side has: every op ``status`` ('added' or 'removed')."""
    if status == "added":
        return BlockDiff(block.name, status, [
            OpChange("added", new=op, new_index=k) for k, op in enumerate(block.ops)],
            new_idx=block.idx, aligned=[(None, k) for k in range(len(block.ops))])
    return BlockDiff(block.name, status, [
        OpChange("removed", old=op, old_index=k) for k, op in enumerate(block.ops)],
        old_idx=block.idx, aligned=[(k, None) for k in range(len(block.ops))])
