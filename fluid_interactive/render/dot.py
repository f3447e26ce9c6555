"""DOT text for programs, blocks and sets of programs (the trainer/pserver split).

Everything here is pure Python over the `ir` records, so the text is testable without the
graphviz binary, and deterministic: the same program gives byte-identical text (every
collection is walked in the program's own order; nothing depends on ids, hashes, the time
or absolute paths; tooltips carry the *basename* of the user's file).

Drawing rules (DESIGN §3 Rendering, style L12):

* each block is a ``subgraph cluster_<idx>``; block 0 (parameters, other persistable state
  and the ops that initialise them) is labelled "global", a method block with the method's
  signature ``train_step(x: f32[?,13], y: f32[?,1]) -> avg_cost``;
* ops are ellipses labelled with their type and filled by role (`style.OP_STYLES`); the
  Loss bit adds a red double border; the tooltip is the user's ``file:line``;
* variables are records ``name | type | tag`` (tag ``param``, ``state`` or ``data``), drawn
  as one-row HTML-like tables; parameters and other persistables are filled, with a thick
  border and the name in bold;
* edges run var -> op for inputs and op -> var for outputs; an op that writes back a var it
  also reads (an optimizer updating a parameter) or a var of another block draws that edge
  dashed and without rank constraint, so the layout stays top-down;
* a var of block 0 is drawn once, and every method that reads it gets an edge from that one
  node.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from ..ir.records import BlockDesc, OpDesc, OpRole, ProgramDesc, VarDesc
from ..ir.text import format_returns, short_type
from . import style as S

__all__ = ["program_to_dot", "block_to_dot", "split_to_dot", "quote"]

MethodRef = Union[str, int]

# forward_only drops every op carrying one of these bits (LR schedule ops only feed the
# optimizer, so they go with it).
_NOT_FORWARD = OpRole.BACKWARD | OpRole.OPTIMIZE | OpRole.LRSCHED


# --- quoting -------------------------------------------------------------------------------

def quote(text: str) -> str:
    """A DOT double-quoted string whose *label* reads exactly ``text``.

    Inside quotes DOT only unescapes ``\\"``; labels then read backslash escapes (``\\n``,
    ``\\l``, ``\\N`` ...), so a literal backslash is doubled and a newline becomes ``\\n``.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class _Raw(str):
    """An attribute value already in DOT form (not quoted again)."""


def _html(text: str) -> str:
    """Text inside an HTML-like label (where backslashes are literal)."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _record(cells: list[str], st: "S.VarStyle", first_bold: bool = False) -> "_Raw":
    """A record-looking HTML-like table: one cell per field.

    Graphviz's own ``shape=record`` fails on flat edges ("lost edge") as soon as an edge
    has ``constraint=false``, which the write-back edges need; tables draw the same."""
    tds = []
    for i, text in enumerate(cells):
        body = _html(text)
        if i == 0 and first_bold:
            body = f"<b>{body}</b>"
        if st.fontcolor != "#000000":
            body = f'<font color="{st.fontcolor}">{body}</font>'
        tds.append(f"<td>{body}</td>")
    return _Raw(f'<<table border="0" cellborder="{st.width}" cellspacing="0" cellpadding="3" '
                f'bgcolor="{st.fill}" color="{st.border}"><tr>{"".join(tds)}</tr></table>>')


def _attrs(pairs: Iterable[tuple[str, Any]]) -> str:
    out = []
    for key, value in pairs:
        if isinstance(value, _Raw):
            text = str(value)
        elif isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (int, float)):
            text = repr(value)
        else:
            text = quote(str(value))
        out.append(f"{key}={text}")
    return "[" + ", ".join(out) + "]"


def _loc_text(op: OpDesc) -> str:
    if op.loc is None:
        return ""
    return f"{os.path.basename(op.loc.file)}:{op.loc.line}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


# --- what the graph holds ------------------------------------------------------------------

@dataclass
class _Legend:
    """What the drawn graphs used, so the legend lists only that."""
    op_kinds: set = field(default_factory=set)
    var_kinds: set = field(default_factory=set)
    loss: bool = False
    summary: bool = False
    cross: bool = False

    def lines(self, indent: str = "  ") -> list[str]:
        """One plain node holding an HTML-like table: a swatch per kind used."""
        rows: list[str] = []

        def cell(text: str, fill: str, border: str, *, rounded: bool = False, width: int = 1,
                 font: str = "#000000") -> None:
            style = ' style="rounded"' if rounded else ""
            body = _html(text)
            if font != "#000000":
                body = f'<font color="{font}">{body}</font>'
            rows.append(f'<tr><td bgcolor="{fill}" color="{border}" border="{width}"{style}>'
                        f"{body}</td></tr>")

        for kind, st in S.OP_STYLES.items():
            if kind in self.op_kinds:
                cell(f"{st.legend} op", st.fill, st.border, rounded=True)
        if self.loss:
            cell("loss op (double border)", "#ffffff", S.LOSS_BORDER, rounded=True, width=2)
        if self.summary:
            cell("collapsed ops (box)", "#ffffff", S.EDGE_COLOR)
        for kind, st in S.VAR_STYLES.items():
            if kind in self.var_kinds:
                text = st.legend + (f" [{st.tag}]" if st.tag else "")
                cell(text, st.fill, st.border, width=st.width, font=st.fontcolor)
        if self.cross:
            cell("edge between programs", "#ffffff", S.CROSS_EDGE_COLOR,
                 font=S.CROSS_EDGE_COLOR)
        if not rows:
            return []
        table = ('<table border="0" cellborder="1" cellspacing="2" cellpadding="3">'
                 '<tr><td border="0"><b>legend</b></td></tr>' + "".join(rows) + "</table>")
        return [f"{indent}\"legend\" [shape=plaintext, margin=0, fontsize=9, label=<{table}>];"]


@dataclass
class _Elem:
    """One op node (or one summary node standing for many ops) and its edges."""
    node_id: str
    attrs: str
    ins: list[str]
    outs: list[str]
    border: str


@dataclass(frozen=True)
class _Options:
    forward_only: bool = False
    collapse_grads: bool = False
    show_global: bool = True


def _as_program(program: Any) -> ProgramDesc:
    if isinstance(program, ProgramDesc):
        return program
    inner = getattr(program, "program", None)   # a compiled program holds its description
    if isinstance(inner, ProgramDesc):
        return inner
    raise TypeError(f"expected a ProgramDesc or a compiled program (the result of "
                    f"Compile()), got {type(program).__name__}")


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _collapse_group(op: OpDesc) -> Optional[str]:
    """Which summary node an op folds into under ``collapse_grads`` (None: drawn itself)."""
    if S.op_kind(op) in ("rpc", "dist", "reader", "unspecified"):
        return None
    if op.role & OpRole.BACKWARD:
        return "backward"
    if op.role & OpRole.OPTIMIZE:
        return "optimize"
    return None


def _signature(program: ProgramDesc, block: BlockDesc) -> str:
    if block.idx == 0:
        return "global (block 0): parameters and state"
    if not block.name:
        return f"block {block.idx} (parent {block.parent_idx})"
    args = ", ".join(f"{n}: {short_type(program.find_var(block, n))}" for n in block.feeds)
    return f"block {block.idx}: {block.name}({args}) -> {format_returns(block.returns)}"


class _ProgramGraph:
    """The nodes and edges of one program's drawing, built first and then written out."""

    def __init__(self, program: ProgramDesc, blocks: list[BlockDesc], opts: _Options,
                 legend: _Legend, *, global_all: bool, id_prefix: str = "",
                 cluster_prefix: str = "") -> None:
        self.program = program
        self.blocks = blocks
        self.drawn = {b.idx for b in blocks}
        self.opts = opts
        self.legend = legend
        self.prefix = id_prefix
        self.cprefix = cluster_prefix
        # (owner block idx, name) -> declaration (None: undeclared), in first-use order
        self.used: dict[tuple[int, str], Optional[VarDesc]] = {}
        self._owner_cache: dict[tuple[int, str], tuple[int, Optional[VarDesc]]] = {}
        self.elems: dict[int, list[_Elem]] = {}
        self.links: list[tuple[str, str, int]] = []   # summary -> summary, count
        self._build(global_all)

    # ids
    def var_id(self, owner: int, name: str) -> str:
        return f"{self.prefix}v{owner}:{name}"

    def op_id(self, block: int, index: int) -> str:
        return f"{self.prefix}op{block}.{index}"

    def summary_id(self, block: int, group: str) -> str:
        return f"{self.prefix}{group}{block}"

    def owner(self, block: BlockDesc, name: str) -> tuple[int, Optional[VarDesc]]:
        """The block whose node stands for ``name`` as seen from ``block``: the nearest
        declaring ancestor when that one is drawn (or global), else ``block`` itself."""
        key = (block.idx, name)
        hit = self._owner_cache.get(key)
        if hit is None:
            hit = (block.idx, None)
            b: Optional[BlockDesc] = block
            while b is not None:
                var = b.vars.get(name)
                if var is not None:
                    hit = (b.idx if b.idx == 0 or b.idx in self.drawn or b is block
                           else block.idx, var)
                    break
                b = self.program.blocks[b.parent_idx] if b.parent_idx >= 0 else None
            self._owner_cache[key] = hit
        return hit

    def _use(self, block: BlockDesc, names: Iterable[str]) -> None:
        for n in names:
            owner, var = self.owner(block, n)
            self.used.setdefault((owner, n), var)

    # building
    def _op_elem(self, block: BlockDesc, index: int, op: OpDesc) -> _Elem:
        kind = S.op_kind(op)
        st = S.OP_STYLES[kind]
        self.legend.op_kinds.add(kind)
        pairs: list[tuple[str, Any]] = [("label", op.type), ("shape", "ellipse"),
                                        ("style", "filled"), ("fillcolor", st.fill)]
        if S.is_loss(op):
            self.legend.loss = True
            pairs += [("color", S.LOSS_BORDER), ("penwidth", 2), ("peripheries", 2)]
        else:
            pairs.append(("color", st.border))
        pairs.append(("tooltip", _loc_text(op) or f"{op.type} (no source line)"))
        return _Elem(self.op_id(block.idx, index), _attrs(pairs),
                     _unique(op.input_names()), _unique(op.output_names()), st.border)

    def _summary_elem(self, block: BlockDesc, group: str, ops: list[OpDesc],
                      ins: list[str], outs: list[str]) -> _Elem:
        st = S.OP_STYLES[group]
        self.legend.summary = True
        self.legend.op_kinds.add(group)
        counts: dict[str, int] = {}
        for op in ops:
            counts[op.type] = counts.get(op.type, 0) + 1
        tooltip = ", ".join(f"{t} x{c}" if c > 1 else t for t, c in counts.items())
        attrs = _attrs([("label", f"{group}: {_plural(len(ops), 'op')}"),
                        ("shape", S.SUMMARY_SHAPE), ("style", "filled"), ("fillcolor", st.fill),
                        ("color", st.border), ("tooltip", tooltip)])
        return _Elem(self.summary_id(block.idx, group), attrs, _unique(ins), _unique(outs),
                     st.border)

    def _block_elems(self, block: BlockDesc) -> list[_Elem]:
        ops = [(i, op) for i, op in enumerate(block.ops)
               if not (self.opts.forward_only and op.role & _NOT_FORWARD)]
        if not self.opts.collapse_grads or self.opts.forward_only:
            return [self._op_elem(block, i, op) for i, op in ops]

        groups: dict[str, list[OpDesc]] = {"backward": [], "optimize": []}
        order: list[Union[str, tuple[int, OpDesc]]] = []
        normal: list[OpDesc] = []
        for i, op in ops:
            g = _collapse_group(op)
            if g is None:
                normal.append(op)
                order.append((i, op))
            else:
                if not groups[g]:
                    order.append(g)
                groups[g].append(op)
        normal_reads = {n for op in normal for n in op.input_names()}
        normal_writes = {n for op in normal for n in op.output_names()}
        loss_vars = _unique(n for op in normal if op.role & OpRole.LOSS
                            for n in op.output_names())

        def anchor(name: str) -> bool:
            """Summary nodes keep their edges to persistable vars and to the loss."""
            owner, var = self.owner(block, name)
            return owner == 0 or (var is not None and var.persistable) or name in loss_vars

        # the backward summary differentiates the loss: an edge from it, though the ops
        # themselves only read the seeded loss gradient
        bwd_in = (loss_vars if groups["backward"] else []) + [
            n for op in groups["backward"] for n in op.input_names() if anchor(n)]
        bwd_out = [n for op in groups["backward"] for n in op.output_names()
                   if anchor(n) or n in normal_reads]
        kept_bwd_out = set(bwd_out)
        opt_in = [n for op in groups["optimize"] for n in op.input_names()
                  if anchor(n) or n in normal_writes or n in kept_bwd_out]
        opt_out = [n for op in groups["optimize"] for n in op.output_names()
                   if anchor(n) or n in normal_reads]
        raw_bwd_out = {n for op in groups["backward"] for n in op.output_names()}
        hidden = _unique(n for op in groups["optimize"] for n in op.input_names()
                         if n in raw_bwd_out and n not in kept_bwd_out)
        if hidden and groups["backward"]:
            self.links.append((self.summary_id(block.idx, "backward"),
                               self.summary_id(block.idx, "optimize"), len(hidden)))
        io = {"backward": (bwd_in, bwd_out), "optimize": (opt_in, opt_out)}
        elems = []
        for item in order:
            if isinstance(item, str):
                elems.append(self._summary_elem(block, item, groups[item], *io[item]))
            else:
                elems.append(self._op_elem(block, *item))
        return elems

    def _build(self, global_all: bool) -> None:
        for block in self.blocks:
            elems = self._block_elems(block)
            self.elems[block.idx] = elems
            for e in elems:
                self._use(block, e.ins + e.outs)
            touched = {n for op in block.ops for n in op.input_names() + op.output_names()}
            self._use(block, [n for n in block.vars if n not in touched])  # declared, unused
        g0 = self.program.global_block()
        if global_all:
            self._use(g0, list(g0.vars))
        if self.opts.show_global:
            kept = [e for e in self._block_elems(g0)
                    if global_all or any((0, n) in self.used for n in e.outs)]
            self.elems[0] = kept
            for e in kept:
                self._use(g0, e.ins + e.outs)

    def require_var(self, name: str) -> str:
        """The node id of ``name``, adding the var to the drawing when it is not there yet
        (for edges drawn between programs)."""
        for (owner, n) in self.used:
            if n == name:
                return self.var_id(owner, n)
        candidates = [self.program.global_block()] + self.blocks
        for block in candidates:
            if name in block.vars:
                self._use(block, [name])
                return self.var_id(*self._key(block, name))
        for block in candidates:
            if any(name in op.input_names() or name in op.output_names() for op in block.ops):
                self._use(block, [name])
                return self.var_id(*self._key(block, name))
        raise KeyError(name)

    def _key(self, block: BlockDesc, name: str) -> tuple[int, str]:
        return self.owner(block, name)[0], name

    # writing
    def _var_line(self, owner: int, name: str, var: Optional[VarDesc]) -> str:
        kind = S.var_kind(name, var)
        st = S.VAR_STYLES[kind]
        self.legend.var_kinds.add(kind)
        type_text = short_type(var)
        cells = [name, type_text] + ([st.tag] if st.tag else [])
        tooltip = f"{name}: {type_text}" + (f" ({st.tag})" if st.tag else "")
        if var is None:
            tooltip += " (not declared in any block)"
        attrs = _attrs([("shape", "none"), ("margin", 0),
                        ("label", _record(cells, st, first_bold=st.bold)),
                        ("tooltip", tooltip)])
        return f"{quote(self.var_id(owner, name))} {attrs};"

    def _vars_of(self, block: BlockDesc) -> list[str]:
        mine = [(n, var) for (owner, n), var in self.used.items() if owner == block.idx]
        order = {n: i for i, n in enumerate(block.vars)}
        declared = sorted((order[n], n, var) for n, var in mine if n in order)
        # a var declared in an ancestor that is not drawn keeps first-use order, after
        return ([self._var_line(block.idx, n, var) for _, n, var in declared]
                + [self._var_line(block.idx, n, var) for n, var in mine if n not in order])

    def node_lines(self, indent: str) -> list[str]:
        i2 = indent * 2
        lines: list[str] = []
        g0 = self.program.global_block()
        global_vars = self._vars_of(g0)
        global_ops = self.elems.get(0, [])
        if self.opts.show_global and (global_vars or global_ops):
            lines.append(f"{indent}subgraph cluster_{self.cprefix}0 {{")
            lines.append(f"{i2}label={quote(_signature(self.program, g0))}; "
                         f"style=\"filled,rounded\"; fillcolor={quote(S.GLOBAL_CLUSTER_FILL)}; "
                         f"color={quote(S.CLUSTER_COLOR)};")
            lines.extend(i2 + v for v in global_vars)
            lines.extend(f"{i2}{quote(e.node_id)} {e.attrs};" for e in global_ops)
            lines.append(f"{indent}}}")
        else:
            lines.extend(indent + v for v in global_vars)
        for block in self.blocks:
            lines.append(f"{indent}subgraph cluster_{self.cprefix}{block.idx} {{")
            lines.append(f"{i2}label={quote(_signature(self.program, block))}; "
                         f"style=\"rounded\"; color={quote(S.CLUSTER_COLOR)};")
            lines.extend(i2 + v for v in self._vars_of(block))
            lines.extend(f"{i2}{quote(e.node_id)} {e.attrs};" for e in self.elems[block.idx])
            lines.append(f"{indent}}}")
        return lines

    def edge_lines(self, indent: str) -> list[str]:
        seen: set[tuple[str, str]] = set()
        lines: list[str] = []

        def edge(src: str, dst: str, attrs: str = "") -> None:
            if (src, dst) not in seen:
                seen.add((src, dst))
                lines.append(f"{indent}{quote(src)} -> {quote(dst)}{' ' + attrs if attrs else ''};")

        order = ([self.program.global_block()] if 0 in self.elems else []) + self.blocks
        for block in order:
            for e in self.elems[block.idx]:
                for n in e.ins:
                    edge(self.var_id(*self._key(block, n)), e.node_id)
                for n in e.outs:
                    owner = self._key(block, n)[0]
                    back = n in e.ins or owner != block.idx
                    edge(e.node_id, self.var_id(owner, n),
                         _attrs([("style", "dashed"), ("constraint", False),
                                 ("color", e.border)]) if back else "")
        for src, dst, count in self.links:
            edge(src, dst, _attrs([("label", _plural(count, "grad")), ("style", "dashed"),
                                   ("fontsize", 9), ("fontcolor", S.EDGE_COLOR)]))
        return lines


def _select_blocks(program: ProgramDesc, methods: Union[None, MethodRef, Sequence[MethodRef]]
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
        a: Optional[BlockDesc] = b
        while a is not None and a.idx not in chosen:
            a = program.blocks[a.parent_idx] if a.parent_idx > 0 else None
        if a is not None:
            picked.append(b)
    return picked


_GRAPH_ATTRS = _attrs([("rankdir", "TB"), ("newrank", True), ("nodesep", 0.3),
                       ("ranksep", 0.4), ("fontname", S.FONT), ("fontsize", 12),
                       ("labelloc", "t"), ("labeljust", "l")])
_NODE_ATTRS = _attrs([("fontname", S.FONT), ("fontsize", 10), ("height", 0.3)])
_EDGE_ATTRS = _attrs([("color", S.EDGE_COLOR), ("arrowsize", 0.6), ("fontname", S.FONT)])


def _document(title: str, body: list[str], legend: Optional[_Legend]) -> str:
    lines = [f"digraph {quote(title or 'program')} {{",
             f"  graph {_GRAPH_ATTRS};"]
    if title:
        lines.append(f"  label={quote(title)};")
    lines += [f"  node {_NODE_ATTRS};", f"  edge {_EDGE_ATTRS};"]
    lines += body
    if legend is not None:
        lines += legend.lines()
    lines.append("}")
    return "\n".join(lines) + "\n"


# --- public entry points -------------------------------------------------------------------

def program_to_dot(program: Any, methods: Union[None, MethodRef, Sequence[MethodRef]] = None,
                   forward_only: bool = False, collapse_grads: bool = False,
                   show_global: bool = True, legend: bool = True) -> str:
    """DOT text for a whole program (or the given methods of it).

    ``program`` is a `ProgramDesc` or a compiled program. ``methods`` names the method
    blocks to draw (names or block indices; default all). ``forward_only`` drops backward,
    optimize and LR-schedule ops and the vars only they touch. ``collapse_grads`` draws all
    backward ops of a block as one node and all optimize ops as another, keeping their
    edges to parameters, other persistable state and the loss. ``show_global`` draws block
    0 as a cluster with its initialiser ops; without it the global vars the methods read
    are drawn as free nodes. ``legend`` adds a legend of the colours used.
    """
    program = _as_program(program)
    blocks = _select_blocks(program, methods)
    opts = _Options(forward_only, collapse_grads, show_global)
    lg = _Legend()
    graph = _ProgramGraph(program, blocks, opts, lg,
                          global_all=methods is None and not forward_only)
    body = graph.node_lines("  ") + graph.edge_lines("  ")
    return _document(program.name, body, lg if legend else None)


def block_to_dot(program: Any, block: Union[BlockDesc, MethodRef], forward_only: bool = False,
                 collapse_grads: bool = False, show_global: bool = True,
                 legend: bool = True) -> str:
    """DOT text for one block: a method (by `BlockDesc`, name or index) with the global
    vars it reads, or block 0 on its own (all state and its initialisers)."""
    program = _as_program(program)
    if isinstance(block, BlockDesc):
        block = block.idx
    target = program.block(block) if not isinstance(block, int) else None
    if target is None:
        if not 0 <= block < len(program.blocks):
            raise KeyError(f"program has no block {block}; "
                           f"it has blocks 0..{len(program.blocks) - 1}")
        target = program.blocks[block]
    if target.idx != 0:
        return program_to_dot(program, [target.idx], forward_only=forward_only,
                              collapse_grads=collapse_grads, show_global=show_global,
                              legend=legend)
    opts = _Options(forward_only, collapse_grads, True)
    lg = _Legend()
    graph = _ProgramGraph(program, [], opts, lg, global_all=True)
    body = graph.node_lines("  ") + graph.edge_lines("  ")
    return _document(program.name, body, lg if legend else None)


CrossEdge = Union[tuple[str, str, str, str], tuple[str, str, str, str, str]]


def split_to_dot(programs: Mapping[str, Any], edges: Sequence[CrossEdge] = (), *,
                 forward_only: bool = False, collapse_grads: bool = False,
                 show_global: bool = True, legend: bool = True, title: str = "") -> str:
    """Several programs side by side, each a cluster (with its blocks as clusters inside),
    and labelled edges between them.

    ``programs`` maps a display name to a program (in the order given). Each edge is
    ``(from_program, var, to_program, var)`` with an optional fifth element, the label
    (default: the var name, or ``a -> b`` when the names differ), e.g. a trainer's
    ``send`` of ``w@GRAD`` to a pserver's ``w@GRAD``. Edge ends are var nodes; a var the
    options filtered out is drawn anyway when an edge needs it.
    """
    opts = _Options(forward_only, collapse_grads, show_global)
    lg = _Legend()
    graphs: dict[str, _ProgramGraph] = {}
    for i, (name, prog) in enumerate(programs.items()):
        prog = _as_program(prog)
        graphs[name] = _ProgramGraph(prog, _select_blocks(prog, None), opts, lg,
                                     global_all=not forward_only,
                                     id_prefix=f"p{i}.", cluster_prefix=f"p{i}_")

    def end(prog_name: str, var: str) -> str:
        graph = graphs.get(prog_name)
        if graph is None:
            raise KeyError(f"edge names program {prog_name!r}; the programs are: "
                           f"{', '.join(repr(k) for k in graphs)}")
        try:
            return graph.require_var(var)
        except KeyError:
            raise KeyError(f"program {prog_name!r} has no variable {var!r}") from None

    cross = []
    for e in edges:
        if len(e) not in (4, 5):
            raise ValueError(f"a cross-program edge is (from_program, var, to_program, var"
                             f"[, label]); got {e!r}")
        src, dst = end(e[0], e[1]), end(e[2], e[3])
        label = e[4] if len(e) == 5 else (e[1] if e[1] == e[3] else f"{e[1]} -> {e[3]}")
        cross.append(f"  {quote(src)} -> {quote(dst)} " + _attrs([
            ("label", label), ("color", S.CROSS_EDGE_COLOR), ("fontcolor", S.CROSS_EDGE_COLOR),
            ("fontsize", 9), ("penwidth", 1.5), ("constraint", False)]) + ";")
    if cross:
        lg.cross = True

    body: list[str] = []
    for i, (name, graph) in enumerate(graphs.items()):
        body.append(f"  subgraph cluster_p{i} {{")
        body.append(f"    label={quote(name)}; style=\"bold,rounded\"; color=\"#555555\"; "
                    f"fontsize=14;")
        body.extend(_reindent(graph.node_lines("  "), "  "))
        body.append("  }")
    for graph in graphs.values():
        body.extend(graph.edge_lines("  "))
    body.extend(cross)
    return _document(title, body, lg if legend else None)


def _reindent(lines: list[str], extra: str) -> list[str]:
    return [extra + line for line in lines]
