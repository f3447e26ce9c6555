"""DOT text for a program difference (`ir.diff.ProgramDiff`): the ops of each block that
changed, with what changed highlighted.

* one cluster per block that differs (a block that did not change is one line in the
  title); its ops are nodes, in the new program's order, and edges follow the data from
  the op that computes a value to each op that reads it;
* an added op is green, a removed op red and dashed (it exists only in the old program;
  its edges come from the ops that correspond to its old producers), a changed op orange
  with a thick border and ``old type -> new type`` when its type changed, and an
  unchanged op white; a changed op's tooltip lists what changed;
* state that does not simply carry over is drawn as a box next to the ops that read or
  write it: added (green), dropped (red, dashed) or reinitialised (orange);
* blocks with more than ``context_limit`` ops draw only the ops that differ and their
  direct neighbours; block 0 draws only the initialisers that differ.

Pure text over `ir` records, like `render.dot`; every name and detail goes through
`quote`.
"""
from __future__ import annotations

from typing import Any

from ..ir.diff import GLOBAL, BlockDiff, ProgramDiff
from ..ir.records import BlockDesc, OpDesc
from .builder import Body, Digraph, Raw
from .style import EDGE_COLOR, FONT

__all__ = ["diff_to_dot"]

#: kind -> (fill, border, line style, pen width)
LOOKS = {
    "added": ("#c8ecc9", "#2e7d32", "solid", 1.6),
    "removed": ("#f9d2d2", "#c62828", "dashed", 1.6),
    "changed": ("#ffe0b2", "#e65100", "solid", 2.4),
    "same": ("#ffffff", "#9a9a9a", "solid", 1.0),
    "reinitialised": ("#ffe0b2", "#e65100", "solid", 2.0),
    "dropped": ("#f9d2d2", "#c62828", "dashed", 1.6),
}
CONTEXT_LIMIT = 40


def _node(body: Body, node_id: str, label: str, kind: str, shape: str,
          tooltip: str = "") -> None:
    fill, border, style, width = LOOKS[kind]
    pairs: list[tuple[str, Any]] = [("label", label), ("shape", shape),
                                    ("style", f"filled,{style}"), ("fillcolor", fill),
                                    ("color", border), ("penwidth", width)]
    if tooltip:
        pairs.append(("tooltip", tooltip))
    body.node(node_id, pairs)


class _BlockDrawing:
    """The nodes and edges of one block's cluster."""

    def __init__(self, d: ProgramDiff, b: BlockDiff, context_limit: int):
        self.d, self.b = d, b
        self.old: BlockDesc | None = d.old.blocks[b.old_idx] if b.old_idx is not None \
            else None
        self.new: BlockDesc | None = d.new.blocks[b.new_idx] if b.new_idx is not None \
            else None
        self.prefix = f"b{b.new_idx if b.new_idx is not None else 'old' + str(b.old_idx)}"
        # an aligned entry (old index, new index) is exactly the indices of its change
        self.changes = {(c.old_index, c.new_index): c for c in b.ops}
        self.kinds = {e: self.changes[e].kind if e in self.changes else "same"
                      for e in b.aligned}
        self.shown = self._visible(context_limit)

    def node_id(self, i: int | None, j: int | None) -> str:
        return f"{self.prefix}_n{j}" if j is not None else f"{self.prefix}_r{i}"

    def op(self, i: int | None, j: int | None) -> OpDesc:
        return self.new.ops[j] if j is not None else self.old.ops[i]  # type: ignore[union-attr]

    def _edges(self) -> list[tuple[tuple, tuple, str]]:
        """(from entry, to entry, var name) for every value passed between ops."""
        producer_new: dict[str, tuple] = {}
        producer_old: dict[str, tuple] = {}
        entry_of_old = {i: (i, j) for i, j in self.b.aligned if i is not None}
        edges = []
        for i, j in self.b.aligned:
            op = self.op(i, j)
            producers = producer_new if j is not None else producer_old
            for name in op.input_names():
                source = producers.get(name)
                if source is not None and source != (i, j):
                    edges.append((source, (i, j), name))
            if i is not None:
                for name in self.old.ops[i].output_names():  # type: ignore[union-attr]
                    producer_old[name] = entry_of_old[i]
            if j is not None:
                for name in op.output_names():
                    producer_new[name] = (i, j)
        return edges

    def _visible(self, limit: int) -> set:
        entries = list(self.b.aligned)
        differ = {e for e in entries if self.kinds[e] != "same"}
        if self.b.name == GLOBAL:   # initialisers pass nothing to each other
            return differ
        if len(entries) <= limit:
            return set(entries)
        shown = set(differ)
        for a, b, _ in self._edges():
            if a in differ or b in differ:
                shown.update((a, b))
        return shown

    def write(self, body: Body) -> None:
        """The block's cluster of ops, and the edges between the drawn ones."""
        b = self.b
        title = "block 0: state and its initialisers" if b.name == GLOBAL else b.name
        hidden = len(b.aligned) - len(self.shown)
        if hidden:
            title += f" ({hidden} unchanged ops not drawn)"
        cluster = body.cluster(self.prefix, [("label", title + self._signature()),
                                             ("style", "rounded"), ("color", "#9a9a9a")])
        for entry in b.aligned:
            if entry in self.shown:
                self._op_node(cluster, entry)
        for a, c, name in self._edges():
            if a in self.shown and c in self.shown:
                kind = self.kinds[c] if self.kinds[c] in ("added", "removed") else \
                    self.kinds[a] if self.kinds[a] in ("added", "removed") else "same"
                color = LOOKS[kind][1] if kind != "same" else EDGE_COLOR
                style = "dashed" if kind == "removed" else "solid"
                body.edge(self.node_id(*a), self.node_id(*c),
                          [("tooltip", name), ("color", color), ("style", style)])

    def _signature(self) -> str:
        return "".join(f"\n{s}" for s in self.b.signature)

    def _op_node(self, body: Body, entry: tuple) -> None:
        i, j = entry
        kind, change = self.kinds[entry], self.changes.get(entry)
        op = self.op(i, j)
        label = op.type
        tooltip = ""
        if change is not None and change.kind == "changed":
            if change.old.type != change.new.type:  # type: ignore[union-attr]
                label = f"{change.old.type} -> {change.new.type}"  # type: ignore[union-attr]
            tooltip = "\n".join(change.details)
        elif kind in ("added", "removed"):
            tooltip = f"{kind}: " + ", ".join(op.output_names())
        if self.b.name == GLOBAL:   # an initialiser: say what it initialises
            label += "\n" + ", ".join(op.output_names())
        _node(body, self.node_id(i, j), label, kind, "ellipse", tooltip)


def _state_nodes(body: Body, d: ProgramDiff, drawings: list[_BlockDrawing]) -> None:
    """Boxes for state that does not carry over, joined to the drawn ops using it."""
    for s in d.state:
        if s.status == "kept":
            continue
        kind = "reinitialised" if s.status == "reinitialised" else (
            "added" if s.status == "added" else "dropped")
        node = f"state_{s.name}"
        tag = "param" if s.is_parameter else "state"
        _node(body, node, f"{s.name} [{tag}, {s.status}]", kind, "box", s.reason)
        for drawing in drawings:
            for entry in drawing.b.aligned:
                if entry not in drawing.shown:
                    continue
                op = drawing.op(*entry)
                if s.name in op.input_names() or s.name in op.output_names():
                    body.edge(node, drawing.node_id(*entry), [
                        ("color", LOOKS[kind][1]), ("style", "dotted"),
                        ("arrowhead", "none"), ("constraint", False)])


def _legend(body: Body, kinds: set[str]) -> None:
    """A swatch for each look the drawing uses."""
    rows = "".join(
        f'<tr><td bgcolor="{LOOKS[k][0]}" color="{LOOKS[k][1]}" border="1">{text}</td></tr>'
        for k, text in (("added", "added op / state"), ("removed", "removed op"),
                        ("changed", "changed op"), ("reinitialised", "state that starts again"),
                        ("dropped", "dropped state"), ("same", "unchanged op"))
        if k in kinds)
    if rows:
        body.node("legend", [("shape", "plaintext"), ("margin", 0), ("fontsize", 9), (
            "label", Raw('<<table border="0" cellborder="1" cellspacing="2" cellpadding="3">'
                         f'<tr><td border="0"><b>legend</b></td></tr>{rows}</table>>'))])


def diff_to_dot(d: ProgramDiff, context_limit: int = CONTEXT_LIMIT, legend: bool = True
                ) -> str:
    """DOT text for ``d`` (see the module docstring)."""
    drawings = [_BlockDrawing(d, b, context_limit) for b in d.blocks if b.status != "same"]
    same = [("block 0" if b.name == GLOBAL else b.name) for b in d.blocks
            if b.status == "same"]
    title = f"{d.old_label} -> {d.new_label}"
    if same:
        title += f"\nunchanged: {', '.join(same)}"
    if not drawings and not any(s.status != "kept" for s in d.state):
        title += "\nno differences"
    doc = Digraph("diff", graph=[("rankdir", "TB"), ("fontname", FONT), ("fontsize", 12),
                                  ("labelloc", "t"), ("labeljust", "l"), ("nodesep", 0.25),
                                  ("ranksep", 0.35)],
                  node=[("fontname", FONT), ("fontsize", 10), ("height", 0.3)],
                  edge=[("color", EDGE_COLOR), ("arrowsize", 0.6)],
                  statements=[("label", title)])
    for drawing in drawings:
        drawing.write(doc)
    _state_nodes(doc, d, drawings)
    if legend:
        kinds = {d_.kinds[e] for d_ in drawings for e in d_.shown}
        kinds |= {"reinitialised" if s.status == "reinitialised" else s.status
                  for s in d.state if s.status != "kept"}
        _legend(doc, kinds)
    return doc.text()
