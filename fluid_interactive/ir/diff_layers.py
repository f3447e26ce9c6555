"""The layer-level view of a program difference: one entry per layer that changed, in the
model's order, saying what changed in a few words (``mlp/fc_0 (fc): size 64 → 48;
re-initialised w_0, b_0 with their adam state``), then one entry each for the methods,
the backward pass, the optimizer and the state that is no layer's (a learning rate, a
reader), where those changed in a way the layers do not already say.

Every op change and every persistable var is given to one entry (`Owners`), asked of the
IR: a forward op belongs to the layer of its first output (`ir.layers`), a Backward-role op
to the backward pass, an Optimize- or LR-schedule-role op to the optimizer, a parameter or
other state to the layer whose forward ops use it, and an optimizer accumulator to its
parameter's layer (through the ``op_role_var`` of the ops that update it) while that
parameter starts again with it, else to the optimizer.
"""
from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from .diff_ops import GLOBAL, BlockDiff, Edit, OpChange
from .diff_state import StateChange
from .layers import NOT_MODEL, layer_of, layer_type, model_ops
from .records import BlockDesc, OpDesc, OpRole, ProgramDesc
from .text import short_type

__all__ = ["LayerChange", "Owners", "layer_changes", "runs", "KINDS"]

#: Entry kinds in the order the view lists them.
KINDS = ("layer", "method", "backward", "optimizer", "communication", "state")
ARROW = "→"
Key = tuple[str, str]


@dataclass
class LayerChange:
    """One line of the layer-level view (and one box of its drawing).

    ``kind`` is one of `KINDS`; ``name`` the layer (``mlp/fc_0``), the method or the state
    var ('' for the backward pass, the optimizer and communication); ``status`` 'changed',
    'added' or 'removed'; ``notes`` what changed, a few words each. ``ops`` are the op
    changes behind it (block name, change), ``state`` the persistable vars that start
    again, come or go with it, ``values`` kept vars whose values differ."""
    kind: str
    name: str = ""
    status: str = "changed"
    notes: list[str] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    ops: list[tuple[str, OpChange]] = field(default_factory=list)
    state: list[StateChange] = field(default_factory=list)
    values: list[StateChange] = field(default_factory=list)

    @property
    def key(self) -> Key:
        return self.kind, self.name

    @property
    def layer_type(self) -> str:
        """``fc`` for layer ``mlp/fc_0``; '' for what is not a layer."""
        kind = layer_type(self.name) if self.kind == "layer" else ""
        return kind if kind != self.name.rpartition("/")[2] else ""

    @property
    def title(self) -> str:
        if self.kind == "layer":
            return self.name + (f" ({self.layer_type})" if self.layer_type else "")
        return self.name or {"backward": "backward pass"}.get(self.kind, self.kind)

    def line(self) -> str:
        return f"{self.title}: {'; '.join(self.notes)}"


class Owners:
    """Which entry each op change and each persistable var of a difference belongs to."""

    def __init__(self, old: ProgramDesc, new: ProgramDesc):
        self.param_layer: dict[str, str] = {}   # state a layer's forward ops use -> layer
        self.state_param: dict[str, str] = {}   # optimizer accumulator -> its parameter
        self.updates: dict[str, list[str]] = {}  # parameter -> types of the ops updating it
        self.order: dict[str, int] = {}          # layer -> its place in the model
        self.layers: dict[str, set[str]] = {"old": set(), "new": set()}
        self.methods_of: dict[str, set[str]] = {}   # layer -> methods of new that use it
        for side, program in (("new", new), ("old", old)):
            for block in program.method_blocks():
                self._learn_block(side, program, block)
            for block in program.blocks:
                self._learn_updates(program, block)

    def _learn_block(self, side: str, program: ProgramDesc, block: BlockDesc) -> None:
        for layer, op in model_ops(block):
            self.order.setdefault(layer, len(self.order))
            self.layers[side].add(layer)
            if side == "new":
                self.methods_of.setdefault(layer, set()).add(block.name)
            for n in op.input_names() + op.output_names():
                var = program.find_var(block, n)
                if var is not None and var.persistable and var.kind == "tensor":
                    self.param_layer.setdefault(n, layer)

    def _learn_updates(self, program: ProgramDesc, block: BlockDesc) -> None:
        for op in block.ops:
            if not op.role & OpRole.OPTIMIZE or not op.role_var:
                continue
            param = op.role_var[0]
            if param in op.output_names():
                kinds = self.updates.setdefault(param, [])
                if op.type not in kinds:
                    kinds.append(op.type)
            for n in op.output_names():
                var = program.find_var(block, n)
                if n != param and var is not None and var.persistable:
                    self.state_param.setdefault(n, param)

    def of_op(self, op: OpDesc, restarting: AbstractSet[str] = frozenset()) -> Key:
        """The entry a method's op belongs to; the update of a parameter in
        ``restarting`` (new, dropped or starting again) goes with its layer."""
        role = op.role
        if role & OpRole.BACKWARD:
            return "backward", ""
        if role & OpRole.OPTIMIZE and op.role_var and op.role_var[0] in restarting:
            layer = self.param_layer.get(op.role_var[0])
            if layer:
                return "layer", layer
        if role & (OpRole.OPTIMIZE | OpRole.LRSCHED):
            return "optimizer", ""
        if role & NOT_MODEL:
            return "communication", ""
        first = next(iter(op.output_names()), None)
        return "layer", layer_of(first) if first else op.type

    def of_state(self, name: str, restarting: AbstractSet[str]) -> Key:
        """The entry a persistable var belongs to; ``restarting``: the parameters that do
        not simply carry over (their accumulators go with them)."""
        param = self.state_param.get(name)
        if param is not None and param not in restarting:
            return "optimizer", ""
        owner = param or name
        layer = self.param_layer.get(owner)
        return ("layer", layer) if layer else ("state", owner)


class _Book:
    """The entries, made on first use."""

    def __init__(self) -> None:
        self.entries: dict[Key, LayerChange] = {}

    def get(self, key: Key) -> LayerChange:
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = LayerChange(*key)
        return entry


def layer_changes(old: ProgramDesc, new: ProgramDesc, blocks: list[BlockDiff],
                  state: list[StateChange]) -> list[LayerChange]:
    """The layer-level view of the difference ``blocks`` / ``state`` of ``old`` and
    ``new`` (see the module docstring): the entries with something to say, layers first in
    the model's order."""
    owners = Owners(old, new)
    book = _Book()
    kept_params = {s.name for s in state if s.status == "kept"}
    restarting = {s.name for s in state if s.status != "kept"}
    for b in blocks:
        if b.name != GLOBAL and b.status in ("added", "removed"):
            _method_entry(book.get(("method", b.name)), b, owners)
            continue
        if b.signature_edits:
            book.get(("method", b.name)).notes += [e.text(ARROW) for e in b.signature_edits]
        for change in b.ops:
            if b.name == GLOBAL:
                _initialiser(book, owners, change, kept_params, restarting)
            else:
                entry = book.get(owners.of_op(change.op, restarting))
                entry.ops.append((b.name, change))
                if b.name not in entry.methods:
                    entry.methods.append(b.name)
    _attach_state(book, owners, state)
    notes = _Notes(old, new, blocks, owners, book)
    for entry in book.entries.values():
        notes.write(entry)
    shown = [e for e in book.entries.values() if e.notes or e.values]
    return sorted(shown, key=lambda e: (KINDS.index(e.kind), owners.order.get(e.name, 1 << 30)))


def _method_entry(entry: LayerChange, b: BlockDiff, owners: Owners) -> None:
    entry.status = b.status
    entry.ops += [(b.name, c) for c in b.ops]
    layers = unique(owners.of_op(c.op)[1] for c in b.ops
                    if owners.of_op(c.op)[0] == "layer")
    shown = ", ".join(layers[:4]) + (", ..." if len(layers) > 4 else "")
    what = "new method" if b.status == "added" else "method removed"
    entry.notes.append(f"{what}, {plural(len(b.ops), 'op')}" + (f" ({shown})" if shown else ""))


def _initialiser(book: _Book, owners: Owners, change: OpChange, kept: set[str],
                 restarting: AbstractSet[str]) -> None:
    """An initialiser that differs goes with the state it initialises; it is said only for
    a parameter that keeps its value (state that starts again says so itself)."""
    name = next(iter(change.op.output_names()), None)
    if name is None:
        return
    key = owners.of_state(name, restarting)
    if name in kept and change.kind == "changed" and key[0] == "layer":
        short = strip_owner(name, key[1])
        book.get(key).notes.append(f"{short}'s initialiser changed, its value is kept")
    book.get(key).ops.append((GLOBAL, change))


def _attach_state(book: _Book, owners: Owners, state: list[StateChange]) -> None:
    restarting = {s.name for s in state if s.status != "kept"}
    for s in state:
        key = owners.of_state(s.name, restarting)
        if s.status != "kept":
            book.get(key).state.append(s)
        elif s.values:
            book.get(key).values.append(s)


class _Notes:
    """Writes the notes of each entry once every op and var has been given out."""

    def __init__(self, old: ProgramDesc, new: ProgramDesc, blocks: list[BlockDiff],
                 owners: Owners, book: _Book):
        self.new, self.owners = new, owners
        self.sides = {"old": old, "new": new}
        self.writer: dict[tuple[str, str, str], str] = {}   # (side, method, var) -> layer
        self.output: dict[tuple[str, str, str], str] = {}   # (side, method, layer) -> var
        for side, program in self.sides.items():
            for block in program.method_blocks():
                for layer, op in model_ops(block):
                    for n in op.output_names():
                        self.writer.setdefault((side, block.name, n), layer)
                    self.output[(side, block.name, layer)] = op.output_names()[0]
        self.resized: set[str] = set()                 # layers whose output changed
        for entry in book.entries.values():
            if entry.kind == "layer" and self._output_change(entry):
                self.resized.add(entry.name)

    def write(self, entry: LayerChange) -> None:
        ops = [c for b, c in entry.ops if b != GLOBAL]   # initialisers: said with the state
        if entry.kind == "layer":
            self._layer(entry)
        elif entry.kind in ("backward", "communication"):
            # ops added or removed here follow the layers' (their gradients, their sends)
            entry.notes += _edit_notes(ops, added_removed=False)
        elif entry.kind == "optimizer":
            entry.notes += _edit_notes(ops) + _state_counts(entry.state)
        elif entry.kind == "state":
            entry.notes += self._state(entry)

    def _state(self, entry: LayerChange) -> list[str]:
        """A var that is no layer's (a learning rate, a reader, a parameter no forward op
        reads, as on a parameter server), with the accumulators that go with it."""
        own = [_state_note(s) for s in entry.state if s.name == entry.name]
        tied = [s for s in entry.state if s.name != entry.name]
        if tied and own:
            kinds = "/".join(self.owners.updates.get(entry.name, [])) or "optimizer"
            own[0] += f" with its {kinds} state"
        return own or [_state_note(s) for s in tied]

    # --- layers ------------------------------------------------------------------------------
    def _layer(self, entry: LayerChange) -> None:
        layers = self.owners.layers
        in_old, in_new = entry.name in layers["old"], entry.name in layers["new"]
        if in_new and not in_old:
            entry.status = "added"
        elif in_old and not in_new:
            entry.status = "removed"
        ops = [c for b, c in entry.ops if b != GLOBAL and not c.op.role & NOT_MODEL]
        notes = self._layer_ops(entry, ops) if entry.status == "changed" else \
            [self._whole_layer(entry)]
        notes += self._layer_state(entry)
        if not notes and ops:
            notes.append(f"{plural(len(ops), 'op')} differ" if len(ops) > 1 else "1 op differs")
        used = self.owners.methods_of.get(entry.name, set())
        if notes and entry.methods and len(used) > 1 and set(entry.methods) < used:
            notes.append(f"only in {', '.join(entry.methods)}")
        entry.notes += notes

    def _whole_layer(self, entry: LayerChange) -> str:
        if entry.status == "removed":
            return "removed"
        kind = next((t for m in entry.methods if (t := self._type_of(
            "new", m, self.output.get(("new", m, entry.name)))) not in ("", "?")), "")
        return "new layer" + (f", output {kind}" if kind else "")

    def _layer_ops(self, entry: LayerChange, ops: list[OpChange]) -> list[str]:
        notes = _edit_notes(ops)
        size = self._output_change(entry)
        if size:
            notes.insert(0, size)
        notes += self._inputs(entry)
        return unique(notes)

    def _type_of(self, side: str, method: str, name: str | None) -> str:
        program = self.sides[side]
        if name is None or method not in {b.name for b in program.method_blocks()}:
            return ""
        return short_type(program.find_var(program.block(method), name))

    def _output_change(self, entry: LayerChange) -> str:
        """``size 64 → 48`` (or both types) when the type of the layer's output, the
        first output of its last op, differs in a method it changed in."""
        for method in entry.methods:
            old = self._type_of("old", method, self.output.get(("old", method, entry.name)))
            new = self._type_of("new", method, self.output.get(("new", method, entry.name)))
            if old and new and old != new:
                return _size(old, new)
        return ""

    def _inputs(self, entry: LayerChange) -> list[str]:
        """What the layer reads from outside that changed: another layer's output that
        changed (``input follows mlp/fc_0``), fed data, or other vars."""
        notes = []
        for method, change in entry.ops:
            if method == GLOBAL or change.op.role & NOT_MODEL:
                continue
            notes += [n for e in change.edits if e.what == "input"
                      for n in self._input_note(method, entry.name, e)]
        return notes

    def _source(self, side: str, method: str, name: str) -> str | None:
        """The layer that writes ``name`` (the name itself for fed data); None for state,
        which is said with the state."""
        program = self.sides[side]
        var = program.find_var(program.block(method), name)
        if var is not None and var.persistable:
            return None
        return self.writer.get((side, method, name), name)

    def _input_note(self, method: str, layer: str, e: Edit) -> list[str]:
        if not e.var:       # reads other vars
            was = unique(s for n in e.old if (s := self._source("old", method, n)))
            now = unique(s for n in e.new if (s := self._source("new", method, n)))
            if was == now:
                return []
            return [f"input from {', '.join(now) or 'nothing'} (was {', '.join(was) or 'nothing'})"]
        source = self._source("new", method, e.var)
        if source is None or source == layer:
            return []       # its own state, or its own temporaries (they follow its output)
        if source in self.resized:
            return [f"input follows {source}"]
        return [f"input {e.var} {e.old} {ARROW} {e.new}"]

    def _layer_state(self, entry: LayerChange) -> list[str]:
        own = [s for s in entry.state if s.name not in self.owners.state_param]
        tied = [s for s in entry.state if s.name in self.owners.state_param]
        notes = []
        for status, word in (("reinitialised", "re-initialised"), ("added", "new"),
                             ("dropped", "drops")):
            names = [s.name for s in own if s.status == status]
            if not names:
                continue
            text = f"{word} {', '.join(strip_owner(n, entry.name) for n in names)}"
            mine = [s for s in tied if self.owners.state_param[s.name] in names]
            if mine and status != "dropped":
                kinds = unique(k for n in names for k in self.owners.updates.get(n, []))
                whose = "its" if len(names) == 1 else "their"
                text += f" with {whose} {'/'.join(kinds) or 'optimizer'} state"
            notes.append(text)
        return notes


#: A run of at least this many layers that changed alike is told (and drawn) once.
RUN = 3


def runs(entries: list[LayerChange]) -> list[tuple[list[LayerChange], list[str]]]:
    """``entries`` as runs, with their notes: a run of `RUN` or more layers of one type
    that changed alike (every layer of a deep stack made tanh, or narrower, each following
    the one before) is one run, any other entry a run of its own."""
    out: list[tuple[list[LayerChange], list[str]]] = []
    k = 0
    while k < len(entries):
        first, end = entries[k], k + 1
        notes = _relative(first, entries[k - 1] if k else None)
        while end < len(entries) and first.kind == entries[end].kind == "layer" \
                and _relative(entries[end], entries[end - 1]) == notes \
                and (entries[end].status, entries[end].layer_type) == (first.status,
                                                                       first.layer_type):
            end += 1
        if end - k >= RUN:
            out.append((entries[k:end], notes))
        else:
            out += [([e], e.notes) for e in entries[k:end]]
        k = end
    return out


def _relative(entry: LayerChange, before: LayerChange | None) -> list[str]:
    """``entry``'s notes, saying "the layer before" for the entry listed just above."""
    if before is None:
        return entry.notes
    follows = f"input follows {before.name}"
    return ["input follows the layer before" if n == follows else n for n in entry.notes]


# --- small pieces ---------------------------------------------------------------------------

def _edit_notes(changes: Iterable[OpChange], added_removed: bool = True) -> list[str]:
    """Type and attr edits (``relu → tanh``, ``beta1 0.9 → 0.8``), deduplicated; with
    ``added_removed``, the types of the ops added and removed too."""
    notes: list[str] = []
    changes = list(changes)
    for c in changes:
        notes += _plain_notes(c.edits)
        body = [e for e in c.edits if e.what == "body"]   # inside the block it runs
        notes += [f"{c.type} body: {n}" for n in _plain_notes(
            [e.new for e in body if isinstance(e.new, Edit)])]
        inner = unique(e.old.kind + " " + e.old.type for e in body
                       if isinstance(e.old, OpChange) and e.old.kind != "changed")
        notes += [f"{c.type} body {'adds' if k.startswith('added') else 'drops'} "
                  f"{k.split(' ', 1)[1]}" for k in inner]
    if added_removed:
        notes += [f"adds {t}" for t in unique(c.type for c in changes if c.kind == "added")]
        notes += [f"drops {t}" for t in unique(c.type for c in changes if c.kind == "removed")]
    return unique(notes)


def _plain_notes(edits: Iterable[Edit]) -> list[str]:
    """``relu → tanh`` for a type edit, ``beta1 0.9 → 0.8`` for attr edits (only when the
    type stays: a new type's attrs are its own)."""
    edits = list(edits)
    retyped = [e for e in edits if e.what == "type"]
    said = retyped or [e for e in edits if e.what == "attr"]
    return [f"{e.old} {ARROW} {e.new}" if e.what == "type" else
            f"{e.key} {e.old!r} {ARROW} {e.new!r}" for e in said]


def _state_counts(state: list[StateChange]) -> list[str]:
    out = []
    for status, word in (("reinitialised", "start again"), ("added", "new"),
                         ("dropped", "dropped")):
        n = sum(1 for s in state if s.status == status)
        if n:
            out.append(f"{plural(n, 'state var')} {word}" if status != "added"
                       else f"{n} new state var{'s' if n > 1 else ''}")
    return out


def _state_note(s: StateChange) -> str:
    if s.status == "added":
        return "new"
    if s.status == "dropped":
        return "dropped"
    return f"starts again: {s.reason}" if s.reason else "starts again"


def _size(old: str, new: str) -> str:
    """``size 64 → 48`` when two types differ in one dimension only, else the types."""
    a, b = old.partition("["), new.partition("[")
    dims_a, dims_b = a[2].rstrip("]").split(","), b[2].rstrip("]").split(",")
    if a[0] == b[0] and len(dims_a) == len(dims_b):
        differ = [(x, y) for x, y in zip(dims_a, dims_b) if x != y]
        if len(differ) == 1:
            return f"size {differ[0][0]} {ARROW} {differ[0][1]}"
    return f"output {old} {ARROW} {new}"


def _names(names: list[str]) -> str:
    return ", ".join(names) if names else "nothing"


def strip_owner(name: str, owner: str) -> str:
    """``w_0`` for ``mlp/fc_0.w_0`` in layer ``mlp/fc_0``; other names as they are."""
    return name[len(owner) + 1:] if name.startswith(owner + ".") else name


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")
