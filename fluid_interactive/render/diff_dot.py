"""DOT text for a program difference (`ir.diff.ProgramDiff`), by layer or by op.

By layer (``detail='layers'``, the default) it is the drawing of `ProgramDiff.layers`, in
the look of every other drawing of a program:

* one box per layer that changed, orange (changed), green (added) or red and dashed
  (removed), headed by the layer's name and type and listing what changed in a few words
  (``size 64 → 48``, ``re-initialised w_0, b_0 with their adam state``); the layers of a
  ``var_scope`` sit in a box named after the scope;
* the unchanged layers next to a changed one (what feeds it, what it feeds) as plain white
  boxes, so the change is seen in place; the others are left out and counted in the title;
* edges follow the data between the layers drawn;
* the methods, the backward pass, the optimizer and other state that changed, one box
  each, in a column of their own.

`diff_layer_drawings` gives each box's op-level drawing (the notebook opens it when the box
is clicked); ``detail='ops'`` draws every op that differs (`diff_ops_dot`).
"""
from __future__ import annotations

import textwrap
from typing import Any

from ..ir.diff import GLOBAL, LayerChange, ProgramDiff, check_detail
from ..ir.diff_layers import ARROW, Owners, runs
from ..ir.layers import model_ops, scope_of
from . import style as S
from .builder import Body, Raw, html
from .diff_ops_dot import CONTEXT_LIMIT, Aligned, diff_node, ops_diff_body
from .parts import Legend, Scopes, chain, document, plural

__all__ = ["diff_to_dot", "diff_layer_drawings", "CONTEXT_LIMIT"]

_MUTED = "#555555"
_WRAP = 56            # characters per line of a note, so a box stays narrow


def diff_to_dot(d: ProgramDiff, context_limit: int = CONTEXT_LIMIT, legend: bool = True, *,
                detail: str | None = None) -> str:
    """DOT text for ``d``: by layer or by op (``detail``, default ``d.detail``; see the
    module docstring). ``context_limit``: by op, a block with more ops draws only those
    that differ and their neighbours."""
    lg = Legend()
    title = f"{d.old_label} {ARROW} {d.new_label}: {d.headline}"
    if check_detail(detail or d.detail) == "ops":
        body = ops_diff_body(d, lg, context_limit)
    else:
        drawing = _LayerDrawing(d)
        body = drawing.body(lg)
        if drawing.left_out:
            title += f" ({plural(drawing.left_out, 'unchanged layer')} not drawn)"
    return document(title, body, lg if legend else None, compound=True)


def diff_layer_drawings(d: ProgramDiff, limit: int = 40) -> list[tuple[str, str, str]]:
    """``(node id, label, DOT text)``: the op-level drawing of each box of the drawing by
    layer (its ops in each block, with the state that starts again with it), at most
    ``limit`` of them."""
    drawing = _LayerDrawing(d)
    out = []
    for run, _ in drawing.runs[:limit]:
        entry = run[0]     # a run of layers that changed alike: its first one
        lg = Legend()
        only = drawing.aligned_of(entry)
        if not only and not entry.state:
            continue
        body = ops_diff_body(d, lg, only=only, state=entry.state)
        label = entry.title + (f" (and {len(run) - 1} alike)" if len(run) > 1 else "") + \
            ": op by op"
        out.append((drawing.node_of[entry.key], label, document(label, body, lg)))
    return out


class _LayerDrawing:
    """The boxes of the drawing by layer, and the data flow between them."""

    def __init__(self, d: ProgramDiff):
        self.d = d
        self.entries = [e for e in d.layers if e.notes]
        self.runs = runs(self.entries)
        # a run of layers that changed alike is one box, named after its first
        self.node_of = {e.key: f"e{k}" for k, (run, _) in enumerate(self.runs) for e in run}
        self.owners = Owners(d.old, d.new)
        self.changed = [e.name for e in self.entries if e.kind == "layer"]
        self.flow = _layer_flow(d)
        near = {b for a, b in self.flow if a in self.changed} | \
            {a for a, b in self.flow if b in self.changed}
        every = {layer for program in (d.old, d.new) for block in program.method_blocks()
                 for layer, _ in model_ops(block)}
        self.context = sorted(near - set(self.changed), key=_order(d))
        self.left_out = len(every - set(self.changed) - set(self.context))

    def layer_node(self, layer: str) -> str:
        return self.node_of.get(("layer", layer), f"c:{layer}")

    def body(self, legend: Legend) -> Body:
        body = Body()
        if not self.entries:
            diff_node(body, "same", "no differences", "same", "box", legend)
            return body
        tree, loose = Scopes(), Body()
        for layer in self.context:
            self._context_box(tree if scope_of(layer) else loose, layer, legend)
        for run, notes in self.runs:
            scope = scope_of(run[0].name)
            if run[0].kind == "layer":
                target = Body()
                self._entry_box(target, run, notes, legend, short=bool(scope))
                tree.add(scope, target) if scope else loose.add(target)
        tree.write(body, "s", lambda name: [("label", name), ("style", "rounded"),
                                            ("color", S.CLUSTER_COLOR)])
        body.add(loose)
        self._others(body, legend)
        drawn = set(self.changed) | set(self.context)
        gone = {e.name for e in self.entries if e.kind == "layer" and e.status == "removed"}
        seen: set[tuple[str, str]] = set()
        for a, b in self.flow:
            ends = (self.layer_node(a), self.layer_node(b))
            if a in drawn and b in drawn and ends[0] != ends[1] and ends not in seen:
                seen.add(ends)
                body.edge(*ends, [("style", "dashed"),
                                  ("color", S.DIFF_STYLES["removed"].border)]
                          if {a, b} & gone else [])
        return body

    def _others(self, body: Body, legend: Legend) -> None:
        """Methods, backward pass, optimizer, state: a column beside the layers."""
        others = [(run, notes) for run, notes in self.runs if run[0].kind != "layer"]
        if not others:
            return
        cluster = body.cluster("other", [("label", "methods, training and state"),
                                         ("style", "rounded"), ("color", S.CLUSTER_COLOR)])
        for run, notes in others:
            self._entry_box(cluster, run, notes, legend)
        chain(cluster, [self.node_of[run[0].key] for run, _ in others])

    def _entry_box(self, body: Body, run: list[LayerChange], notes: list[str],
                   legend: Legend, *, short: bool = False) -> None:
        """The box of an entry, or of a run of layers that changed alike."""
        entry = run[0]

        def name(e: LayerChange) -> str:
            return e.name.rpartition("/")[2] if short else e.name

        title = name(entry) if short else entry.title
        note = entry.layer_type if short else ""
        if len(run) > 1:
            title = f"{name(entry)} … {name(run[-1])}"
            note = f"{len(run)} {entry.layer_type} layers".replace("  ", " ")
        if entry.status != "changed":
            note = " · ".join(x for x in (note, "new" if entry.status == "added"
                                          else "removed") if x)
        rows = [_heading(title, note)]
        rows += [html(line) for text in notes for line in textwrap.wrap(text, _WRAP)]
        details = [f"{m}: {x}" for m, c in entry.ops for x in c.details][:12]
        members = [e.name for e in run[:12]] + (["..."] if len(run) > 12 else [])
        tooltip = "\n".join(([", ".join(members)] if len(run) > 1 else [])
                            + [entry.line()] + details)
        diff_node(body, self.node_of[entry.key], _table(rows), entry.status, "box", legend,
                  [("tooltip", tooltip), ("margin", "0.08,0.04")])

    def _context_box(self, holder: Scopes | Body, layer: str, legend: Legend) -> None:
        part = Body()
        short = layer.rpartition("/")[2] if scope_of(layer) else layer
        diff_node(part, self.layer_node(layer), _table([_heading(short, "unchanged")]), "same",
                  "box", legend, [("tooltip", f"{layer}: unchanged"), ("margin", "0.08,0.04")])
        if isinstance(holder, Scopes):
            holder.add(scope_of(layer), part)
        else:
            holder.add(part)

    def aligned_of(self, entry: LayerChange) -> dict[str, set[Aligned]]:
        """The ops of ``entry`` in each method, by (old index, new index): its changes, and
        for a layer its unchanged ops too (a layer's initialisers are left to its state box;
        a state var's initialiser is all it has)."""
        only: dict[str, set[Aligned]] = {}
        for block, change in entry.ops:
            if block != GLOBAL or entry.kind == "state":
                only.setdefault(block, set()).add((change.old_index, change.new_index))
        if entry.kind == "layer":
            owners = self.owners
            for b in self.d.blocks:
                if b.name == GLOBAL or b.new_idx is None or b.status != "changed":
                    continue
                ops = self.d.new.blocks[b.new_idx].ops
                only.setdefault(b.name, set()).update(
                    (i, j) for i, j in b.aligned
                    if j is not None and owners.of_op(ops[j]) == entry.key)
        return {k: v for k, v in only.items() if v}


def _heading(name: str, note: str) -> str:
    return f"<b>{html(name)}</b>" + (f'  <font color="{_MUTED}">{html(note)}</font>'
                                     if note else "")


def _table(rows: list[str]) -> Raw:
    return Raw('<<table border="0" cellborder="0" cellspacing="0" cellpadding="1">'
               + "".join(f'<tr><td align="left">{r}</td></tr>' for r in rows) + "</table>>")


def _layer_flow(d: ProgramDiff) -> list[tuple[str, str]]:
    """(layer, layer) for each layer whose output another reads, in the new program's
    methods, and in the old program's where a layer is gone."""
    flow: dict[tuple[str, str], None] = {}
    new_layers = {layer for b in d.new.method_blocks() for layer, _ in model_ops(b)}
    for side, program in (("new", d.new), ("old", d.old)):
        for block in program.method_blocks():
            writer: dict[str, str] = {}
            for layer, op in model_ops(block):
                for n in op.input_names():
                    src = writer.get(n)
                    if src is not None and src != layer and (
                            side == "new" or src not in new_layers or layer not in new_layers):
                        flow[(src, layer)] = None
                for n in op.output_names():
                    writer[n] = layer
    return list(flow)


def _order(d: ProgramDiff) -> Any:
    place: dict[str, int] = {}
    for program in (d.new, d.old):
        for block in program.method_blocks():
            for layer, _ in model_ops(block):
                place.setdefault(layer, len(place))
    return lambda layer: place.get(layer, len(place))
