"""The op-level drawing of a program difference (``detail='ops'``): the ops of each block
that changed, with what changed highlighted.

* one cluster per block that differs; its ops are nodes, in the new program's order, and
  edges follow the data from the op that computes a value to each op that reads it;
* an added op is green, a removed op red and dashed (it exists only in the old program; its
  edges come from the ops that correspond to its old producers), a changed op orange with
  a thick border and ``old type → new type`` when its type changed, and an unchanged op
  white; a changed op's tooltip lists what changed;
* state that does not simply carry over is a box next to the ops that read or write it:
  added (green), dropped (red, dashed) or reinitialised (orange);
* blocks with more than ``context_limit`` ops draw only the ops that differ and their
  direct neighbours; block 0 draws only the initialisers that differ. ``only`` restricts
  the drawing to some ops (one layer's, for the layer-level drawing's expansions).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from ..ir.diff import GLOBAL, BlockDiff, ProgramDiff, StateChange
from ..ir.diff_layers import ARROW
from ..ir.records import BlockDesc, OpDesc
from . import style as S
from .builder import Body, Pairs, Raw
from .parts import Legend

__all__ = ["ops_diff_body", "CONTEXT_LIMIT", "Aligned"]

CONTEXT_LIMIT = 40
Aligned = tuple[int | None, int | None]


def diff_node(body: Body, node_id: str, label: str | Raw, kind: str, shape: str,
              legend: Legend, extra: Pairs = ()) -> None:
    """A node in the look of ``kind`` (`style.DIFF_STYLES`)."""
    st = S.DIFF_STYLES[kind]
    legend.diff_kinds.add(kind)
    body.node(node_id, [("label", label), ("shape", shape), ("style", f"filled,{st.line}"),
                        ("fillcolor", st.fill), ("color", st.border), ("penwidth", st.width),
                        *extra])


class _BlockDrawing:
    """The nodes and edges of one block's cluster."""

    def __init__(self, d: ProgramDiff, b: BlockDiff, context_limit: int,
                 only: set[Aligned] | None):
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
        self.shown = self._visible(context_limit) if only is None else \
            {e for e in b.aligned if e in only}

    def node_id(self, entry: Aligned) -> str:
        i, j = entry
        return f"{self.prefix}_n{j}" if j is not None else f"{self.prefix}_r{i}"

    def op(self, entry: Aligned) -> OpDesc:
        i, j = entry
        if j is not None and self.new is not None:
            return self.new.ops[j]
        assert i is not None and self.old is not None, "an aligned entry has a side"
        return self.old.ops[i]

    def _edges(self) -> Iterator[tuple[Aligned, Aligned, str]]:
        """(from entry, to entry, var name) for every value passed between ops."""
        producer_new: dict[str, Aligned] = {}
        producer_old: dict[str, Aligned] = {}
        for entry in self.b.aligned:
            i, j = entry
            op = self.op(entry)
            producers = producer_new if j is not None else producer_old
            for name in op.input_names():
                source = producers.get(name)
                if source is not None and source != entry:
                    yield source, entry, name
            if i is not None and self.old is not None:
                for name in self.old.ops[i].output_names():
                    producer_old[name] = entry
            if j is not None:
                for name in op.output_names():
                    producer_new[name] = entry

    def _visible(self, limit: int) -> set[Aligned]:
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

    def write(self, body: Body, legend: Legend) -> None:
        """The block's cluster of ops, and the edges between the drawn ones."""
        b = self.b
        title = "block 0: state and its initialisers" if b.name == GLOBAL else b.name
        hidden = len(b.aligned) - len(self.shown)
        if hidden:
            title += f" ({hidden} other ops not drawn)"
        cluster = body.cluster(self.prefix, [
            ("label", title + "".join(f"\n{s}" for s in b.signature)), ("style", "rounded"),
            ("color", S.CLUSTER_COLOR)])
        for entry in b.aligned:
            if entry in self.shown:
                self._op_node(cluster, entry, legend)
        for a, c, name in self._edges():
            if a in self.shown and c in self.shown:
                ends = {self.kinds[a], self.kinds[c]} & {"added", "removed"}
                kind = "removed" if "removed" in ends else ends.pop() if ends else ""
                color = S.DIFF_STYLES[kind].border if kind else S.EDGE_COLOR
                body.edge(self.node_id(a), self.node_id(c), [
                    ("tooltip", name), ("color", color),
                    ("style", "dashed" if kind == "removed" else "solid")])

    def _op_node(self, body: Body, entry: Aligned, legend: Legend) -> None:
        kind, change = self.kinds[entry], self.changes.get(entry)
        op = self.op(entry)
        label, tooltip = op.type, ""
        if change is not None and change.kind == "changed":
            retyped = [e for e in change.edits if e.what == "type"]
            if retyped:
                label = f"{retyped[0].old} {ARROW} {retyped[0].new}"
            tooltip = "\n".join(change.details)
        elif kind in ("added", "removed"):
            tooltip = f"{kind}: " + ", ".join(op.output_names())
        if self.b.name == GLOBAL:   # an initialiser: say what it initialises
            label += "\n" + ", ".join(op.output_names())
        diff_node(body, self.node_id(entry), label, kind, "ellipse", legend,
                  [("tooltip", tooltip)] if tooltip else [])


#: At most this many names in a state box (its tooltip lists them all).
STATE_NAMES = 10
_STATE_TITLES = {"reinitialised": "starts again", "added": "new state", "dropped": "dropped"}


def _state_nodes(body: Body, state: Iterable[StateChange], drawings: list[_BlockDrawing],
                 legend: Legend) -> None:
    """One box per status for the state that does not carry over (reinitialised, added,
    dropped), listing it, joined to the drawn ops that use it: one box, not one per var,
    so Adam's four accumulators per parameter do not spread the drawing out."""
    groups: dict[str, list[StateChange]] = {}
    for s in state:
        if s.status != "kept":
            groups.setdefault(s.status, []).append(s)
    for status, changes in groups.items():
        node = f"state:{status}"
        names = [f"{s.name} [{'param' if s.is_parameter else 'state'}]" for s in changes]
        shown = names[:STATE_NAMES] + ([f"... and {len(names) - STATE_NAMES} more"]
                                       if len(names) > STATE_NAMES else [])
        label = f"{_STATE_TITLES[status]} ({len(names)})\n" + "\n".join(shown)
        tooltip = "\n".join(f"{s.name}: {s.reason}" if s.reason else s.name for s in changes)
        diff_node(body, node, label, status, "box", legend, [("tooltip", tooltip)])
        mine = {s.name for s in changes}
        for drawing in drawings:
            for entry in drawing.b.aligned:
                op = drawing.op(entry)
                if entry in drawing.shown and mine.intersection(op.input_names()
                                                                + op.output_names()):
                    body.edge(node, drawing.node_id(entry), [
                        ("color", S.DIFF_STYLES[status].border), ("style", "dotted"),
                        ("arrowhead", "none"), ("constraint", False)])


def ops_diff_body(d: ProgramDiff, legend: Legend, context_limit: int = CONTEXT_LIMIT,
                  only: Mapping[str, set[Aligned]] | None = None,
                  state: Iterable[StateChange] | None = None) -> Body:
    """The nodes and edges of the op-level drawing of ``d``: every block that changed, or
    with ``only`` (block name -> aligned entries) those entries of those blocks; the state
    that does not carry over (``state``: only that state)."""
    body = Body()
    drawings = [_BlockDrawing(d, b, context_limit, None if only is None else only[b.name])
                for b in d.blocks if b.status != "same" and (only is None or b.name in only)]
    for drawing in drawings:
        if drawing.shown or only is None:
            drawing.write(body, legend)
    _state_nodes(body, d.state if state is None else state, drawings, legend)
    return body
