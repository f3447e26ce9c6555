"""What the drawings share besides the DOT syntax (`builder`): HTML-like labels, the
legend, block signatures, choosing blocks, and the document around the body.

The op-level drawing (`dot`), the grouped one (`grouped`) and the difference of two
programs (`diff_dot`) draw their nodes with these, so they look alike.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..ir.blocks import check_nesting, method_of
from ..ir.records import BlockDesc, OpDesc, ProgramDesc, VarDesc
from ..ir.source import format_location
from ..ir.text import format_returns, short_type
from . import style as S
from .builder import Body, Digraph, Pairs, Raw, html, quote
from .nesting import describe, owner_of

MethodRef = str | int


# --- labels ------------------------------------------------------------------------------

def record(cells: list[str], st: S.VarStyle, first_bold: bool = False,
           stacked: bool = False) -> Raw:
    """A record-looking HTML-like table: one cell per field, side by side (``stacked``:
    one under the other).

    Graphviz's own ``shape=record`` fails on flat edges ("lost edge") as soon as an edge
    has ``constraint=false``, which the write-back edges need; tables draw the same."""
    tds = []
    for i, text in enumerate(cells):
        body = html(text)
        if i == 0 and first_bold:
            body = f"<b>{body}</b>"
        if st.fontcolor != "#000000":
            body = f'<font color="{st.fontcolor}">{body}</font>'
        tds.append(f"<td>{body}</td>")
    rows = "".join(f"<tr>{td}</tr>" for td in tds) if stacked else f"<tr>{''.join(tds)}</tr>"
    return Raw(f'<<table border="0" cellborder="{st.width}" cellspacing="0" cellpadding="3" '
               f'bgcolor="{st.fill}" color="{st.border}">{rows}</table>>')


def loc_text(op: OpDesc) -> str:
    """Where the user's code made ``op``, short: ``fit.py:21`` or ``Cell In[3], line 7``."""
    return format_location(op.loc, short=True)


def op_node_attrs(op: OpDesc, var_of: S.VarLookup, legend: Legend) -> list[tuple[str, Any]]:
    """An op drawn by itself: an ellipse labelled with its type, filled by its kind
    (`style.op_kind`), a red double border for the loss, and where the user's code made
    it as the tooltip."""
    kind = S.op_kind(op, var_of)
    st = S.OP_STYLES[kind]
    legend.op_kinds.add(kind)
    pairs: list[tuple[str, Any]] = [("label", op.type), ("shape", "ellipse"),
                                    ("style", "filled"), ("fillcolor", st.fill)]
    if S.is_loss(op):
        legend.loss = True
        pairs += [("color", S.LOSS_BORDER), ("penwidth", 2), ("peripheries", 2)]
    else:
        pairs.append(("color", st.border))
    pairs.append(("tooltip", loc_text(op) or f"{op.type} (no source line)"))
    return pairs


def var_node_attrs(name: str, var: VarDesc | None, legend: Legend, *, gradient: bool = False,
                   shown: str | None = None) -> list[tuple[str, Any]]:
    """A var drawn by itself: a record ``name | type | tag`` styled by its kind (parameter,
    state, data, gradient, ...), its type as the tooltip. ``shown``: a narrow node, that
    text over the type and tag (the full name stays in the tooltip)."""
    kind = S.var_kind(var, gradient)
    st = S.VAR_STYLES[kind]
    legend.var_kinds.add(kind)
    type_text = short_type(var)
    cells = [name if shown is None else shown, type_text] + ([st.tag] if st.tag else [])
    if shown is not None:
        cells = [cells[0], " ".join(cells[1:])]
    tooltip = f"{name}: {type_text}" + (f" ({st.tag})" if st.tag else "")
    if var is None:
        tooltip += " (not declared in any block)"
    return [("shape", "none"), ("margin", 0),
            ("label", record(cells, st, first_bold=st.bold, stacked=shown is not None)),
            ("tooltip", tooltip)]


def op_counts(ops: Iterable[OpDesc]) -> str:
    """The op types of ``ops`` in order of appearance, with counts: ``mul x2, relu``."""
    counts: dict[str, int] = {}
    for op in ops:
        counts[op.type] = counts.get(op.type, 0) + 1
    return ", ".join(f"{t} x{c}" if c > 1 else t for t, c in counts.items())


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


# --- what the graph holds ------------------------------------------------------------------

@dataclass
class Legend:
    """What the drawn graphs used, so the legend lists only that."""
    op_kinds: set = field(default_factory=set)
    var_kinds: set = field(default_factory=set)
    loss: bool = False
    summary: bool = False
    bodies: bool = False     # a box standing for an op that runs a block
    cross: bool = False
    diff_kinds: set = field(default_factory=set)   # looks of a difference (`diff_dot`)

    def cells(self) -> list[str]:
        """One HTML-like table cell per kind used: a swatch with its meaning."""
        out: list[str] = []

        def cell(text: str, fill: str, border: str, *, rounded: bool = False, width: int = 1,
                 font: str = "#000000") -> None:
            style = ' style="rounded"' if rounded else ""
            body = html(text)
            if font != "#000000":
                body = f'<font color="{font}">{body}</font>'
            out.append(f'<td bgcolor="{fill}" color="{border}" border="{width}"{style}>'
                       f"{body}</td>")

        for kind, st in S.OP_STYLES.items():
            if kind in self.op_kinds:
                cell(f"{st.legend} op", st.fill, st.border, rounded=True)
        if self.loss:
            cell("loss op (double border)", "#ffffff", S.LOSS_BORDER, rounded=True, width=2)
        if self.summary:
            cell("several ops drawn as one (box)", "#ffffff", S.EDGE_COLOR)
        if self.bodies:
            cell("loop or branch (folder)", "#ffffff", S.EDGE_COLOR)
        for kind, vs in S.VAR_STYLES.items():
            if kind in self.var_kinds:
                text = vs.legend + (f" [{vs.tag}]" if vs.tag else "")
                cell(text, vs.fill, vs.border, width=vs.width, font=vs.fontcolor)
        for kind, ds in S.DIFF_STYLES.items():
            if kind in self.diff_kinds:
                cell(ds.legend, ds.fill, ds.border, width=2 if ds.width > 2 else 1)
        if self.cross:
            cell("edge between programs", "#ffffff", S.CROSS_EDGE_COLOR,
                 font=S.CROSS_EDGE_COLOR)
        return out


def graph_label(title: str, legend: Legend | None, per_row: int = 3) -> str:
    """The drawing's label, above it: the title, then the legend in rows of ``per_row``
    swatches, so the legend never makes the drawing wider than a few swatches."""
    cells = legend.cells() if legend is not None else []
    if not cells:
        return quote(title) if title else ""
    rows = []
    if title:
        rows.append(f'<tr><td border="0" colspan="{per_row}" align="left">'
                    f'<font point-size="12">{html(title)}</font></td></tr>')
    rows.append(f'<tr><td border="0" colspan="{per_row}" align="left"><b>legend</b></td></tr>')
    for k in range(0, len(cells), per_row):
        rows.append("<tr>" + "".join(cells[k:k + per_row]) + "</tr>")
    return ('<<table border="0" cellborder="1" cellspacing="3" cellpadding="2">'
            + "".join(rows) + "</table>>")


def as_program(obj: Any) -> ProgramDesc:
    """The description to draw (a compiled program holds one), its nesting checked: a
    drawing walks the nesting, which a malformed program could make endless."""
    program = obj if isinstance(obj, ProgramDesc) else getattr(obj, "program", None)
    if isinstance(program, ProgramDesc):
        check_nesting(program)
        return program
    raise TypeError(f"expected a ProgramDesc or a compiled program (the result of "
                    f"Compile()), got {type(obj).__name__}")


def unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def signature(program: ProgramDesc, block: BlockDesc) -> str:
    """A block's title: ``block 1: train_step(x: f32[?,13]) -> avg_cost``; for the body
    of a loop or branch, what runs it (``while_1 (while): body, block 4, 7 ops, in
    train_step``)."""
    if block.idx == 0:
        return "global (block 0): parameters and state"
    owner = owner_of(program, block)
    if owner is not None:
        method = method_of(program, block)
        return describe(program, owner.block, owner.op) + (
            f", in {method.name}" if method.name else "")
    if not block.name:
        return f"block {block.idx} (parent {block.parent_idx})"
    args = [f"{n}: {short_type(program.find_var(block, n))}" for n in block.feeds]
    head, returns = f"block {block.idx}: {block.name}(", f") -> {format_returns(block.returns)}"
    line = head + ", ".join(args) + returns
    if len(line) <= TITLE_WIDTH:
        return line
    # One argument a line: a server's update blocks take a gradient from every trainer,
    # and on one line their titles made the drawing several times wider than a cell.
    return head + "\n" + ",\n".join("  " + a for a in args) + "\n" + returns


#: The longest block title drawn on one line (characters).
TITLE_WIDTH = 72


def select_blocks(program: ProgramDesc, methods: None | MethodRef | Sequence[MethodRef]
                   ) -> list[BlockDesc]:
    """The non-global blocks to draw: the named methods (by name or block index) and the
    sub-blocks under them; every non-global block when ``methods`` is None."""
    if methods is None:
        return [b for b in program.blocks if b.idx != 0]
    if isinstance(methods, (str, int, BlockDesc)):
        methods = [methods]
    chosen: set[int] = set()
    for m in methods:
        if isinstance(m, BlockDesc):
            m = m.idx
        if isinstance(m, int) and not 0 <= m < len(program.blocks):
            raise KeyError(f"program has no block {m}; it has blocks 0..{len(program.blocks) - 1}")
        chosen.add(program.block(m).idx)
    chosen.discard(0)
    picked = []
    for b in program.blocks:
        a: BlockDesc | None = b
        while a is not None and a.idx not in chosen:
            a = program.blocks[a.parent_idx] if a.parent_idx > 0 else None
        if a is not None:
            picked.append(b)
    return picked


GRAPH_ATTRS: list[tuple[str, Any]] = [
    ("rankdir", "TB"), ("newrank", True), ("nodesep", 0.3), ("ranksep", 0.4),
    ("fontname", S.FONT), ("fontsize", 12), ("labelloc", "t"), ("labeljust", "l")]
NODE_ATTRS: list[tuple[str, Any]] = [("fontname", S.FONT), ("fontsize", 10), ("height", 0.3)]
EDGE_ATTRS: list[tuple[str, Any]] = [("color", S.EDGE_COLOR), ("arrowsize", 0.6),
                                     ("fontname", S.FONT)]


def document(title: str, body: Body, legend: Legend | None, *, compound: bool = False,
             graph: Pairs = ()) -> str:
    """The text of the ``digraph`` around ``body``, labelled with the title and the legend
    (built after the body, so the legend lists what the body drew). ``compound`` lets
    edges end at a cluster's border (``lhead``/``ltail``); ``graph`` overrides default
    graph attributes."""
    statements: list[tuple[str, Any]] = [("compound", True)] if compound else []
    label = graph_label(title, legend)
    if label:
        statements.append(("label", Raw(label)))
    overrides = dict(graph)
    graph_attrs = [(k, overrides.pop(k, v)) for k, v in GRAPH_ATTRS] + list(overrides.items())
    doc = Digraph(title or "program", graph=graph_attrs, node=NODE_ATTRS, edge=EDGE_ATTRS,
                  statements=statements)
    doc.add(body)
    return doc.text()


def stack_edges(body: Body, upper_nodes: Sequence[str], upper_flow: Sequence[tuple[str, str]],
                lower_nodes: Sequence[str], lower_flow: Sequence[tuple[str, str]]) -> None:
    """Invisible edges that lay one part of a drawing out under another: every last node
    of the upper part (no ranking edge leaves it) comes before the lower part's first node,
    and the upper part's bottom node before each of the lower part's first nodes (no
    ranking edge enters them). Only the edge from the bottom node to the first node pulls,
    so the parts line up in one column instead of drifting apart."""
    sinks = [n for n in upper_nodes if n not in {a for a, _ in upper_flow}]
    sources = [n for n in lower_nodes if n not in {b for _, b in lower_flow}]
    if not sinks or not sources:
        return
    pairs = [(a, sources[0]) for a in sinks[:-1]] + [(sinks[-1], b) for b in sources[1:]]
    for a, b in pairs:
        body.edge(a, b, [("style", "invis"), ("weight", 0)])
    body.edge(sinks[-1], sources[0], [("style", "invis")])


def chain(body: Body, nodes: Sequence[str]) -> None:
    """Invisible edges that stack ``nodes`` in a column."""
    for a, b in zip(nodes, nodes[1:]):
        body.edge(a, b, [("style", "invis"), ("weight", 10)])


class Scopes:
    """Nested var_scope clusters: ``mlp/block_1`` sits inside ``mlp``."""

    def __init__(self) -> None:
        self.children: dict[str, Scopes] = {}
        self.body = Body()

    def add(self, scope: str, part: Body) -> None:
        node = self
        for piece in scope.split("/"):
            node = node.children.setdefault(piece, Scopes())
        node.body.add(part)

    def write(self, into: Body, prefix: str,
              style: Callable[[str], list[tuple[str, Any]]], path: str = "") -> None:
        for name, child in self.children.items():
            full = f"{path}/{name}" if path else name
            cluster = into.cluster(f"{prefix}{slug(full)}", style(full))
            child.write(cluster, prefix, style, full)
            cluster.add(child.body)


def slug(text: str) -> str:
    """A cluster-id-safe form of a scope path (ids are quoted elsewhere; cluster names are
    bare, so only letters, digits and '_')."""
    return "".join(c if c.isalnum() else f"_{ord(c):x}_" for c in text)
