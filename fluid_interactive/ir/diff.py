"""What changed between two program descriptions: per block, the ops added, removed and
changed (type, attrs, inputs, shapes), and per persistable var whether its value can be
kept, must start again, is new or is gone.

Ops have no identity of their own, so each block's ops are aligned by their sequence of
(type, role) with `difflib` (an inserted layer shows as inserted ops, not as every later op
changed). Aligned ops are then compared structurally: temporaries are anonymous (a
temporary renamed because a layer was inserted earlier is the same temporary if the op
that computes it corresponds), while persistable vars and data vars are compared by name,
since a name is what ties a parameter to its value. Source locations are ignored: moving
a line is no change.

`state_changes` is the one rule for what a recompilation keeps (the live reload and
`fluid.diff` both use it):

* a parameter is kept when its name, shape and dtype still match, whatever its
  initialiser (trained weights survive an edit of the initialiser);
* other state (learning rates, optimizer accumulators, readers, counters) is kept only
  while the op that initialises it is unchanged too, so an edited learning rate or reader
  takes effect;
* the optimizer state of a parameter that starts again starts again with it: every var
  written by an optimizer op whose ``op_role_var`` names the parameter (Adam's moments
  *and* its beta-power accumulators), found from the ops, never from names.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from .blocks import SUB_BLOCK, sub_block_index
from .records import BlockDesc, OpDesc, OpRole, ProgramDesc, VarDesc
from .text import format_op, format_returns, short_shape, short_type

__all__ = ["OpChange", "BlockDiff", "StateChange", "ProgramDiff", "diff_programs",
           "state_changes"]

GLOBAL = "(global)"   # the name a diff gives block 0


@dataclass
class OpChange:
    """One op that differs: ``kind`` is 'added', 'removed' or 'changed'."""
    kind: str
    old: OpDesc | None = None
    new: OpDesc | None = None
    old_index: int | None = None
    new_index: int | None = None
    details: list[str] = field(default_factory=list)   # what changed, for 'changed'

    @property
    def type(self) -> str:
        return (self.new or self.old).type   # type: ignore[union-attr]

    def describe(self, old_lookup: Callable, new_lookup: Callable) -> str:
        if self.kind == "added":
            return "+ " + format_op(self.new, new_lookup)  # type: ignore[arg-type]
        if self.kind == "removed":
            return "- " + format_op(self.old, old_lookup)  # type: ignore[arg-type]
        return "~ " + format_op(self.new, new_lookup)  # type: ignore[arg-type]


@dataclass
class BlockDiff:
    """The difference of one block: block 0 (named `GLOBAL`) or a method."""
    name: str
    status: str                       # 'same', 'changed', 'added' or 'removed'
    ops: list[OpChange] = field(default_factory=list)
    unchanged: int = 0                # ops that correspond and are equal
    signature: list[str] = field(default_factory=list)   # feeds / returns / mode changes
    old_idx: int | None = None
    new_idx: int | None = None
    #: every op in order: (old index, new index), None on the side that lacks it
    aligned: list[tuple[int | None, int | None]] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(1 for c in self.ops if c.kind == kind)

    def changed_ops(self) -> list[OpChange]:
        return [c for c in self.ops if c.kind == "changed"]


@dataclass
class StateChange:
    """One persistable var: ``status`` is 'kept', 'added', 'dropped' or 'reinitialised'."""
    name: str
    status: str
    old: VarDesc | None = None
    new: VarDesc | None = None
    reason: str = ""                 # why it starts again
    values: str = ""                 # for kept tensors with values on both sides

    @property
    def is_parameter(self) -> bool:
        var = self.new or self.old
        return bool(var is not None and var.is_parameter)


@dataclass
class ProgramDiff:
    """`diff_programs`' result; ``str()`` is the text form."""
    old: ProgramDesc
    new: ProgramDesc
    blocks: list[BlockDiff]
    state: list[StateChange]
    old_label: str = "old"
    new_label: str = "new"

    def block(self, name: str) -> BlockDiff:
        for b in self.blocks:
            if b.name == name:
                return b
        raise KeyError(f"no block {name!r} in this diff; it has: "
                       f"{', '.join(b.name for b in self.blocks)}")

    def names(self, status: str) -> list[str]:
        """Persistable vars with this status ('kept', 'added', 'dropped',
        'reinitialised')."""
        return [s.name for s in self.state if s.status == status]

    @property
    def kept(self) -> list[str]:
        return self.names("kept")

    @property
    def added(self) -> list[str]:
        return self.names("added")

    @property
    def dropped(self) -> list[str]:
        return self.names("dropped")

    @property
    def reinitialised(self) -> list[str]:
        return self.names("reinitialised")

    @property
    def changed(self) -> bool:
        """Whether anything differs (ops, signatures, or state that starts again)."""
        return (any(b.status != "same" for b in self.blocks)
                or any(s.status != "kept" for s in self.state)
                or any(s.values for s in self.state))

    def text(self) -> str:
        return "\n".join(_text_lines(self))

    __str__ = text

    def _repr_pretty_(self, printer, cycle: bool) -> None:   # IPython's text form
        printer.text(self.text())

    def __repr__(self) -> str:
        parts = []
        for b in self.blocks:
            if b.status != "same":
                parts.append(f"{b.name}: {b.status}")
        return (f"<ProgramDiff {self.old_label} -> {self.new_label}: "
                f"{'; '.join(parts) or 'no op changes'}>")


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


def _pairs(old_ops: list[OpDesc], new_ops: list[OpDesc]
           ) -> list[tuple[int | None, int | None]]:
    """Aligned (old index, new index) pairs in order; None on one side for an op only the
    other block has."""
    def key(op: OpDesc) -> tuple:
        return op.type, op.role

    matcher = SequenceMatcher(None, [key(o) for o in old_ops], [key(o) for o in new_ops],
                              autojunk=False)
    out: list[tuple[int | None, int | None]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            out += list(zip(range(i1, i2), range(j1, j2)))   # a replaced run of one length:
            continue                                         # the same ops, edited
        if tag in ("replace", "delete"):
            out += [(i, None) for i in range(i1, i2)]
        if tag in ("replace", "insert"):
            out += [(None, j) for j in range(j1, j2)]
    return out


def _slot_names(op: OpDesc, outputs: bool) -> dict[str, list[str]]:
    return op.outputs if outputs else op.inputs


def _op_details(sides: _Sides, old: OpDesc, new: OpDesc) -> list[str]:
    details = []
    if old.type != new.type:
        details.append(f"type {old.type} -> {new.type}")
    for key in list(old.attrs) + [k for k in new.attrs if k not in old.attrs]:
        a, b = old.attrs.get(key, "(unset)"), new.attrs.get(key, "(unset)")
        if key != SUB_BLOCK and (a != b or type(a) is not type(b)):
            details.append(f"attr {key}: {a!r} -> {b!r}")
    for outputs in (False, True):
        details += _slot_details(sides, _slot_names(old, outputs), _slot_names(new, outputs),
                                 "output" if outputs else "input")
    return details + _sub_block_details(sides, old, new)


def _sub_block_details(sides: _Sides, old: OpDesc, new: OpDesc) -> list[str]:
    """The changes inside the blocks two aligned ops run (a loop's body), one line each;
    the blocks' indices themselves are no change."""
    a, b = sub_block_index(old), sub_block_index(new)
    if a is None or b is None:
        return []
    inner = diff_block(sides.old_prog, sides.old_prog.blocks[a], sides.new_prog,
                       sides.new_prog.blocks[b], "", dict(sides.renamed))
    old_block, new_block = sides.old_prog.blocks[a], sides.new_prog.blocks[b]
    lines = []
    for change in inner.ops:
        lines.append("in its block: " + change.describe(
            lambda n: sides.old_prog.find_var(old_block, n),
            lambda n: sides.new_prog.find_var(new_block, n)))
        lines += [f"  {detail}" for detail in change.details]
    return lines


def _slot_details(sides: _Sides, old_slots: dict, new_slots: dict, what: str) -> list[str]:
    details = []
    for slot in list(old_slots) + [s for s in new_slots if s not in old_slots]:
        a, b = old_slots.get(slot, []), new_slots.get(slot, [])
        if len(a) != len(b) or not all(sides.corresponds(x, y) for x, y in zip(a, b)):
            details.append(f"{what} {slot}: {_names(a)} -> {_names(b)}")
            continue
        for x, y in zip(a, b):
            tx, ty = short_type(sides.old_var(x)), short_type(sides.new_var(y))
            if tx != ty:
                details.append(f"{what} {slot} {y}: {tx} -> {ty}")
    return details


def _names(names: list[str]) -> str:
    return "[" + ", ".join(names) + "]" if len(names) != 1 else names[0]


def _learn_names(sides: _Sides, old: OpDesc, new: OpDesc) -> None:
    for slot, names in old.outputs.items():
        for x, y in zip(names, new.outputs.get(slot, [])):
            if not sides.named(x, "old") and not sides.named(y, "new"):
                sides.renamed[x] = y


def _signature(sides: _Sides) -> list[str]:
    old, new = sides.old_block, sides.new_block
    out = []
    old_feeds = [f"{n}:{short_type(old.vars.get(n))}" for n in old.feeds]
    new_feeds = [f"{n}:{short_type(new.vars.get(n))}" for n in new.feeds]
    if old_feeds != new_feeds:
        out.append(f"arguments ({', '.join(old_feeds)}) -> ({', '.join(new_feeds)})")
    if not _returns_correspond(sides, old.returns, new.returns):
        out.append(f"returns {format_returns(old.returns)} -> {format_returns(new.returns)}")
    if old.is_test != new.is_test:
        out.append(f"is_test {old.is_test} -> {new.is_test}")
    return out


def _returns_correspond(sides: _Sides, a, b) -> bool:
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
    sides = _Sides(old_prog, old_block, new_prog, new_block)
    sides.renamed.update(renamed or {})   # temporaries of the blocks around a sub-block
    result = BlockDiff(name, "same", old_idx=old_block.idx, new_idx=new_block.idx)
    result.aligned = _pairs(old_block.ops, new_block.ops)
    for i, j in result.aligned:
        if j is None:
            result.ops.append(OpChange("removed", old=old_block.ops[i], old_index=i))
            continue
        if i is None:
            result.ops.append(OpChange("added", new=new_block.ops[j], new_index=j))
            continue
        old, new = old_block.ops[i], new_block.ops[j]
        _learn_names(sides, old, new)   # an op never reads its own temporaries
        details = _op_details(sides, old, new)
        if details:
            result.ops.append(OpChange("changed", old, new, i, j, details))
        else:
            result.unchanged += 1
    result.signature = _signature(sides)
    if result.ops or result.signature:
        result.status = "changed"
    return result


def _whole_block(program: ProgramDesc, block: BlockDesc, status: str) -> BlockDiff:
    kind = "added" if status == "added" else "removed"
    ops = [OpChange(kind, **({"new": op, "new_index": k} if kind == "added"
                             else {"old": op, "old_index": k}))
           for k, op in enumerate(block.ops)]
    aligned = [(None, k) if kind == "added" else (k, None) for k in range(len(block.ops))]
    return BlockDiff(block.name, status, ops, new_idx=block.idx if kind == "added" else None,
                     old_idx=block.idx if kind == "removed" else None, aligned=aligned)


# --- state ---------------------------------------------------------------------------------

def _persistables(program: ProgramDesc) -> dict[str, VarDesc]:
    return {v.name: v for v in program.global_block().vars.values() if v.persistable}


def _creator(program: ProgramDesc, name: str) -> OpDesc | None:
    for op in program.global_block().ops:
        if name in op.output_names():
            return op
    return None


def _creator_change(old: OpDesc | None, new: OpDesc | None) -> str | None:
    """Why an initialiser differs (None when it does not)."""
    if old is None or new is None:
        return None if old is new else "its initialiser was added or removed"
    if old.type != new.type:
        return f"its initialiser changed from {old.type} to {new.type}"
    for key in list(old.attrs) + [k for k in new.attrs if k not in old.attrs]:
        a, b = old.attrs.get(key, "(unset)"), new.attrs.get(key, "(unset)")
        if a != b or type(a) is not type(b):
            return f"its initialiser's {key} changed from {a!r} to {b!r}"
    if old.inputs != new.inputs:
        return "its initialiser reads other inputs"
    return None


def _var_change(old: VarDesc, new: VarDesc) -> str | None:
    if old.kind != new.kind:
        return f"it was a {old.kind} and is now a {new.kind}"
    if old.shape != new.shape:
        return f"shape {short_shape(old.shape)} -> {short_shape(new.shape)}"
    if old.dtype != new.dtype:
        return f"dtype {old.dtype} -> {new.dtype}"
    return None


def optimizer_state_of(program: ProgramDesc, param: str) -> list[str]:
    """The persistable vars optimizer ops keep for ``param``: everything written by an op
    with the Optimize role whose ``op_role_var`` names it, except the parameter itself."""
    found: list[str] = []
    state = _persistables(program)
    for block in program.blocks:
        for op in block.ops:
            if not op.role & OpRole.OPTIMIZE or param not in op.role_var[:1]:
                continue
            for name in op.output_names():
                if name != param and name in state and name not in found:
                    found.append(name)
    return found


def state_changes(old: ProgramDesc, new: ProgramDesc,
                  same_constant: Callable[[str], bool] | None = None
                  ) -> list[StateChange]:
    """What becomes of each persistable var when ``old``'s state moves to ``new`` (the
    module docstring has the rules). ``same_constant(name)`` decides for a var no op
    initialises (arrays the trace supplied, such as in-memory reader data); without it
    such a var is kept."""
    old_vars, new_vars = _persistables(old), _persistables(new)
    changes: dict[str, StateChange] = {}
    for name, nv in new_vars.items():
        ov = old_vars.get(name)
        if ov is None:
            changes[name] = StateChange(name, "added", new=nv)
            continue
        reason = _var_change(ov, nv)
        if reason is None and not nv.is_parameter:
            creator = _creator(new, name)
            reason = _creator_change(_creator(old, name), creator)
            if reason is None and creator is None and same_constant is not None and \
                    not same_constant(name):
                reason = "its value (given when the program compiled) differs"
        status = "kept" if reason is None else "reinitialised"
        changes[name] = StateChange(name, status, ov, nv, reason or "")
    for param in [n for n, c in changes.items() if c.status != "kept" and c.is_parameter]:
        for name in optimizer_state_of(new, param):
            change = changes.get(name)
            if change is not None and change.status == "kept":
                change.status = "reinitialised"
                change.reason = f"optimizer state of {param}, which starts again"
    dropped = [StateChange(n, "dropped", old=v) for n, v in old_vars.items()
               if n not in new_vars]
    return list(changes.values()) + dropped


# --- the whole program ---------------------------------------------------------------------

def diff_programs(old: ProgramDesc, new: ProgramDesc,
                  same_constant: Callable[[str], bool] | None = None,
                  old_label: str = "old", new_label: str = "new") -> ProgramDiff:
    """Every difference between ``old`` and ``new``: block 0 first (as `GLOBAL`), then
    each method of ``new`` in its order, then methods only ``old`` has."""
    blocks = [diff_block(old, old.global_block(), new, new.global_block(), GLOBAL)]
    old_methods = {b.name: b for b in old.method_blocks()}
    for block in new.method_blocks():
        before = old_methods.pop(block.name, None)
        if before is None:
            blocks.append(_whole_block(new, block, "added"))
        else:
            blocks.append(diff_block(old, before, new, block, block.name))
    blocks += [_whole_block(old, b, "removed") for b in old_methods.values()]
    return ProgramDiff(old, new, blocks, state_changes(old, new, same_constant),
                       old_label, new_label)


# --- text ----------------------------------------------------------------------------------

def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _block_headline(b: BlockDiff) -> str:
    title = "block 0 (state and its initialisers)" if b.name == GLOBAL else b.name
    if b.status in ("added", "removed"):
        return f"{title}: {b.status} ({_plural(len(b.ops), 'op')})"
    if b.status == "same":
        return f"{title}: unchanged ({_plural(b.unchanged, 'op')})"
    counts = [f"{b.count(k)} {k}" for k in ("changed", "added", "removed") if b.count(k)]
    return f"{title}: {', '.join(counts) or 'ops unchanged'}; {b.unchanged} unchanged"


def _text_lines(d: ProgramDiff) -> list[str]:
    lines = [f"diff {d.old_label} -> {d.new_label}"]
    for b in d.blocks:
        lines.append("  " + _block_headline(b))
        lines += [f"    signature: {s}" for s in b.signature]
        old_block = d.old.blocks[b.old_idx] if b.old_idx is not None else None
        new_block = d.new.blocks[b.new_idx] if b.new_idx is not None else None

        def old_lookup(n: str, blk=old_block):
            return d.old.find_var(blk, n) if blk is not None else None

        def new_lookup(n: str, blk=new_block):
            return d.new.find_var(blk, n) if blk is not None else None

        if b.status in ("added", "removed"):
            continue
        for change in b.ops:
            lines.append("    " + change.describe(old_lookup, new_lookup))
            lines += [f"        {detail}" for detail in change.details]
    lines.append("  state: " + _state_line(d))
    for s in d.state:
        if s.status == "reinitialised":
            lines.append(f"    reinitialised {s.name}: {s.reason}")
        elif s.values:
            lines.append(f"    {s.name}: {s.values}")
    return lines


def _state_line(d: ProgramDiff) -> str:
    parts = []
    for status in ("kept", "added", "dropped", "reinitialised"):
        names = d.names(status)
        shown = ", ".join(names[:6]) + (f", ... ({len(names) - 6} more)"
                                        if len(names) > 6 else "")
        parts.append(f"{status} {len(names)}" + (f" ({shown})" if names else ""))
    return ", ".join(parts)
