"""What changed between two program descriptions, at two levels of detail.

* **By layer** (the default view, `ProgramDiff.layers`, `ir.diff_layers`): one line per
  layer that changed (``mlp/fc_0 (fc): size 64 → 48; re-initialised w_0, b_0 with their
  adam state``), then the methods, the optimizer and the state that changed in a way the
  layers do not already say.
* **By op** (``text(detail='ops')``, `ir.diff_ops`): per block the ops added, removed and
  changed (type, attrs, inputs, shapes), and per persistable var whether its value is kept,
  must start again, is new or is gone (`ir.diff_state`: the one rule for what a
  recompilation keeps, which the live reload and `fluid.diff` both use).

The pieces are re-exported here: `OpChange`, `BlockDiff`, `StateChange`, `LayerChange`,
`state_changes`, `optimizer_state_of`, `GLOBAL`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .blocks import check_nesting
from .diff_layers import ARROW, LayerChange, layer_changes, plural, runs, strip_owner
from .diff_ops import GLOBAL, BlockDiff, Edit, OpChange, diff_block, whole_block
from .diff_state import StateChange, optimizer_state_of, state_changes
from .records import BlockDesc, ProgramDesc, VarDesc

__all__ = ["OpChange", "Edit", "BlockDiff", "StateChange", "LayerChange", "ProgramDiff",
           "diff_programs", "state_changes", "optimizer_state_of", "GLOBAL", "DETAILS"]

#: The levels of detail of a diff's text and drawing.
DETAILS = ("layers", "ops")


def check_detail(detail: str) -> str:
    if detail not in DETAILS:
        raise ValueError(f"detail must be 'layers' (one line per changed layer, the default) "
                         f"or 'ops' (every op that differs); got {detail!r}")
    return detail


@dataclass
class ProgramDiff:
    """`diff_programs`' result; ``str()`` is its text at ``detail`` ('layers' by default,
    'ops' for every op)."""
    old: ProgramDesc
    new: ProgramDesc
    blocks: list[BlockDiff]
    state: list[StateChange]
    old_label: str = "old"
    new_label: str = "new"
    detail: str = "layers"

    def __post_init__(self) -> None:
        check_detail(self.detail)

    def block(self, name: str) -> BlockDiff:
        for b in self.blocks:
            if b.name == name:
                return b
        raise KeyError(f"no block {name!r} in this diff; it has: "
                       f"{', '.join(b.name for b in self.blocks)}")

    @cached_property
    def layers(self) -> list[LayerChange]:
        """The layer-level view: one entry per changed layer, then methods, optimizer and
        other state (`ir.diff_layers`)."""
        return layer_changes(self.old, self.new, self.blocks, self.state)

    @property
    def headline(self) -> str:
        """What changed, in one line: ``2 layers changed; 1 method added``."""
        return _headline(self, [e for e in self.layers if e.notes])

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

    def text(self, detail: str | None = None) -> str:
        """The text form: by layer (``detail='layers'``) or by op (``'ops'``); default
        this diff's ``detail``."""
        if check_detail(detail or self.detail) == "ops":
            return "\n".join(_op_lines(self))
        return "\n".join(_layer_lines(self))

    def __str__(self) -> str:
        return self.text()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:   # IPython's text form
        printer.text(self.text())

    def __repr__(self) -> str:
        parts = [f"{b.name}: {b.status}" for b in self.blocks if b.status != "same"]
        return (f"<ProgramDiff {self.old_label} -> {self.new_label}: "
                f"{'; '.join(parts) or 'no op changes'}>")


def diff_programs(old: ProgramDesc, new: ProgramDesc,
                  same_constant: Callable[[str], bool] | None = None,
                  old_label: str = "old", new_label: str = "new",
                  detail: str = "layers") -> ProgramDiff:
    """Every difference between ``old`` and ``new``: block 0 first (as `GLOBAL`), then
    each method of ``new`` in its order, then methods only ``old`` has. ``same_constant``
    decides for state no op initialises (see `state_changes`); ``detail`` is the level of
    the result's text. Either program nesting its blocks otherwise than as a tree
    (`check_nesting`) is a `VerifyError`."""
    check_nesting(old)
    check_nesting(new)
    blocks = [diff_block(old, old.global_block(), new, new.global_block(), GLOBAL)]
    old_methods = {b.name: b for b in old.method_blocks()}
    for block in new.method_blocks():
        before = old_methods.pop(block.name, None)
        if before is None:
            blocks.append(whole_block(block, "added"))
        else:
            blocks.append(diff_block(old, before, new, block, block.name))
    blocks += [whole_block(b, "removed") for b in old_methods.values()]
    return ProgramDiff(old, new, blocks, state_changes(old, new, same_constant),
                       old_label, new_label, check_detail(detail))


# --- text by layer -------------------------------------------------------------------------

def _layer_lines(d: ProgramDiff) -> list[str]:
    entries = [e for e in d.layers if e.notes]
    lines = [f"diff {d.old_label} {ARROW} {d.new_label}: {d.headline}"]
    lines += ["  " + line for line in _entry_lines(entries)]
    same = [b.name for b in d.blocks if b.name != GLOBAL and b.status == "same"]
    if same and len(same) < len(d.blocks) - 1:
        lines.append(f"  unchanged methods: {', '.join(same)}")
    lines.append("  state: " + _state_summary(d))
    differ = [_values_of(e) for e in d.layers if e.values]
    if differ:
        lines.append(f"  values differ: {'; '.join(differ)}")
    told = {id(c) for e in entries for _, c in e.ops}
    rest = sum(1 for b in d.blocks for c in b.ops if id(c) not in told)
    total = sum(len(b.ops) for b in d.blocks)
    if total:
        more = f", {rest} of them only following the lines above" if rest else ""
        lines.append(f"  op by op: {plural(total, 'op')} differ{more}; "
                     f"text(detail='ops') lists them")
    return lines


def _entry_lines(entries: list[LayerChange]) -> list[str]:
    """One line per entry, or per run of layers that changed alike (`runs`)."""
    lines = []
    for run, notes in runs(entries):
        if len(run) == 1:
            lines.append(run[0].line())
            continue
        kind = f" {run[0].layer_type}" if run[0].layer_type else ""
        lines.append(f"{run[0].name} … {run[-1].name} ({len(run)}{kind} layers): "
                     f"{'; '.join(notes)}")
    return lines


def _headline(d: ProgramDiff, entries: list[LayerChange]) -> str:
    counts: dict[str, int] = {}
    for e in entries:
        if e.kind in ("layer", "method"):
            key = f"{e.kind} {e.status}"
            counts[key] = counts.get(key, 0) + 1
    words = [f"{plural(n, key.split()[0])} {key.split()[1]}" for key, n in counts.items()]
    others = [e for e in entries if e.kind not in ("layer", "method")]
    if others:
        words.append(", ".join(e.title for e in others) + " changed")
    if not words:
        return "values differ" if any(s.values for s in d.state) else "no differences"
    return "; ".join(words)


def _state_summary(d: ProgramDiff) -> str:
    n = len(d.state)
    kept = len(d.kept)
    if kept == n:
        return f"all {n} kept" if n else "none"
    parts = [f"{kept} kept"]
    for status, word in (("reinitialised", "start again"), ("added", "new"),
                         ("dropped", "dropped")):
        k = len(d.names(status))
        if k:
            parts.append(f"{k} {word}")
    return ", ".join(parts)


def _values_of(e: LayerChange) -> str:
    """``mlp/fc_0 (w_0, b_0)``, or a count for what is not a layer."""
    if e.kind != "layer":
        return f"{e.title} ({plural(len(e.values), 'var')})"
    names = [strip_owner(s.name, e.name) for s in e.values]
    return f"{e.name} ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''})"


# --- text by op ----------------------------------------------------------------------------

def _block_headline(b: BlockDiff) -> str:
    title = "block 0 (state and its initialisers)" if b.name == GLOBAL else b.name
    if b.status in ("added", "removed"):
        return f"{title}: {b.status} ({plural(len(b.ops), 'op')})"
    if b.status == "same":
        return f"{title}: unchanged ({plural(b.unchanged, 'op')})"
    counts = [f"{b.count(k)} {k}" for k in ("changed", "added", "removed") if b.count(k)]
    return f"{title}: {', '.join(counts) or 'ops unchanged'}; {b.unchanged} unchanged"


def _lookup(program: ProgramDesc, idx: int | None) -> Callable[[str], VarDesc | None]:
    block: BlockDesc | None = program.blocks[idx] if idx is not None else None

    def find(name: str) -> VarDesc | None:
        return program.find_var(block, name) if block is not None else None
    return find


def _op_lines(d: ProgramDiff) -> list[str]:
    lines = [f"diff {d.old_label} -> {d.new_label}"]
    for b in d.blocks:
        lines.append("  " + _block_headline(b))
        lines += [f"    signature: {s}" for s in b.signature]
        if b.status in ("added", "removed"):
            continue
        old_lookup, new_lookup = _lookup(d.old, b.old_idx), _lookup(d.new, b.new_idx)
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
