"""The one way the drawings write DOT: a graph is a tree of bodies (the graph itself and its
clusters) holding node, edge and attribute statements; `Digraph.text` writes it out.

Every drawing (a program or block op by op, the grouped drawing, a program difference)
builds its text here, so all of them quote ids and strings, escape HTML-like labels and
name clusters the same way. Names, attrs and file names from a program are untrusted:
they only ever reach the text through `quote` (DOT strings) or `html` (label tables).

    g = Digraph("net", graph=[("rankdir", "TB")], node=[("fontsize", 10)])
    c = g.cluster("1", [("label", "train_step"), ("style", "rounded")])
    c.node("op1.0", [("label", "mul"), ("shape", "ellipse")])
    g.edge("op1.0", "op1.1", [("style", "dashed")])
    print(g.text())
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = ["Raw", "Pairs", "quote", "html", "attrs", "Body", "Cluster", "Digraph"]

#: Attribute pairs in the order they are written.
Pairs = Iterable[tuple[str, Any]]

_BARE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def quote(text: str) -> str:
    """A DOT double-quoted string whose *label* reads exactly ``text``.

    Inside quotes DOT only unescapes ``\\"``; labels then read backslash escapes (``\\n``,
    ``\\l``, ``\\N`` ...), so a literal backslash is doubled and a newline becomes ``\\n``.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class Raw(str):
    """An attribute value already in DOT form (an HTML-like label): written as it is."""


def html(text: str) -> str:
    """Text inside an HTML-like label (where backslashes are literal)."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def value(v: Any) -> str:
    """One attribute value: `Raw` as it is, booleans and numbers bare, the rest quoted."""
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return quote(str(v))


def attrs(pairs: Pairs) -> str:
    """``[key=value, ...]``."""
    return "[" + ", ".join(f"{key}={value(v)}" for key, v in pairs) + "]"


def _cluster_name(name: str) -> str:
    """``cluster_<name>``, bare when it is a plain identifier, else quoted (graphviz makes
    a subgraph a cluster by its name's prefix, which survives quoting)."""
    full = f"cluster_{name}"
    return full if _BARE_ID.fullmatch(full) else quote(full)


class Body:
    """The statements of a graph or a cluster, in order."""

    def __init__(self) -> None:
        self._items: list[str | Cluster] = []

    def node(self, node_id: str, pairs: Pairs = ()) -> None:
        pairs = list(pairs)
        self._items.append(quote(node_id) + (f" {attrs(pairs)}" if pairs else "") + ";")

    def edge(self, src: str, dst: str, pairs: Pairs = ()) -> None:
        pairs = list(pairs)
        self._items.append(f"{quote(src)} -> {quote(dst)}"
                           + (f" {attrs(pairs)}" if pairs else "") + ";")

    def cluster(self, name: str, pairs: Pairs = ()) -> Cluster:
        """A new cluster at this point of the body; fill it through the result."""
        child = Cluster(name, pairs)
        self._items.append(child)
        return child

    def add(self, other: Body) -> None:
        """The statements of ``other`` (not a cluster of it), at this point."""
        self._items.extend(other._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def lines(self, indent: str = "  ") -> list[str]:
        out: list[str] = []
        for item in self._items:
            if isinstance(item, Cluster):
                out += item.lines(indent)
            else:
                out.append(indent + item)
        return out


class Cluster(Body):
    """A ``subgraph cluster_<name>``: a box around its statements, its attributes on one
    line under the opening."""

    def __init__(self, name: str, pairs: Pairs = ()) -> None:
        super().__init__()
        self.name = name
        self.pairs = list(pairs)

    def lines(self, indent: str = "  ") -> list[str]:
        inner = indent + "  "
        head = [f"{indent}subgraph {_cluster_name(self.name)} {{"]
        if self.pairs:
            head.append(inner + " ".join(f"{k}={value(v)};" for k, v in self.pairs))
        return head + super().lines(inner) + [f"{indent}}}"]


class Digraph(Body):
    """A whole drawing: its name, the default attributes of the graph, its nodes and its
    edges, graph-level statements (``label=...``, ``compound=true``), then the body."""

    def __init__(self, name: str, *, graph: Pairs = (), node: Pairs = (), edge: Pairs = (),
                 statements: Pairs = ()) -> None:
        super().__init__()
        self.name = name
        self.defaults = [(kind, list(p)) for kind, p in (("graph", graph), ("node", node),
                                                          ("edge", edge))]
        self.statements = list(statements)

    def text(self) -> str:
        lines = [f"digraph {quote(self.name)} {{"]
        (_, graph), (_, node), (_, edge) = self.defaults
        if graph:
            lines.append(f"  graph {attrs(graph)};")
        lines += [f"  {k}={value(v)};" for k, v in self.statements]
        lines += [f"  {kind} {attrs(p)};" for kind, p in (("node", node), ("edge", edge)) if p]
        lines += self.lines("  ")
        lines.append("}")
        return "\n".join(lines) + "\n"
