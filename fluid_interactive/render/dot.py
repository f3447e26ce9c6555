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

import dataclasses
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..ir.records import BlockDesc, OpDesc, OpRole, ProgramDesc, VarDesc
from . import style as S
from .builder import Body, Pairs, quote
from .grouped import GroupedGraph, GroupOptions
from .groups import NOT_FORWARD as _NOT_FORWARD
from .parts import Legend as _Legend
from .parts import MethodRef, op_counts, op_node_attrs, stack_edges, var_node_attrs
from .parts import as_program as _as_program
from .parts import document as _document
from .parts import plural as _plural
from .parts import select_blocks as _select_blocks
from .parts import signature as _signature
from .parts import unique as _unique

__all__ = ["program_to_dot", "block_to_dot", "split_to_dot", "quote"]

@dataclass
class _Elem:
    """One op node (or one summary node standing for many ops) and its edges."""
    node_id: str
    attrs: list[tuple[str, Any]]
    ins: list[str]
    outs: list[str]
    border: str


@dataclass(frozen=True)
class _Options:
    forward_only: bool = False
    collapse_grads: bool = False
    show_global: bool = True


def _collapse_group(op: OpDesc, var_of: S.VarLookup) -> str | None:
    """Which summary node an op folds into under ``collapse_grads`` (None: drawn itself)."""
    if S.op_kind(op, var_of) in ("rpc", "dist", "reader", "unspecified"):
        return None
    if op.role & OpRole.BACKWARD:
        return "backward"
    if op.role & OpRole.OPTIMIZE:
        return "optimize"
    return None


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
        self.used: dict[tuple[int, str], VarDesc | None] = {}
        self._owner_cache: dict[tuple[int, str], tuple[int, VarDesc | None]] = {}
        self.elems: dict[int, list[_Elem]] = {}
        self.links: list[tuple[str, str, int]] = []   # summary -> summary, count
        self.cluster_labels: dict[int, str] = {}       # block idx -> label (default: signature)
        self.gradients = S.gradient_names(program)
        self._build(global_all)

    # ids
    def var_id(self, owner: int, name: str) -> str:
        return f"{self.prefix}v{owner}:{name}"

    def op_id(self, block: int, index: int) -> str:
        return f"{self.prefix}op{block}.{index}"

    def summary_id(self, block: int, group: str) -> str:
        return f"{self.prefix}{group}{block}"

    def lookup(self, block: BlockDesc) -> S.VarLookup:
        """Finds the vars the ops of ``block`` name."""
        return functools.partial(self.program.find_var, block)

    def owner(self, block: BlockDesc, name: str) -> tuple[int, VarDesc | None]:
        """The block whose node stands for ``name`` as seen from ``block``: the nearest
        declaring ancestor when that one is drawn (or global), else ``block`` itself."""
        key = (block.idx, name)
        hit = self._owner_cache.get(key)
        if hit is None:
            hit = (block.idx, None)
            b: BlockDesc | None = block
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
        var_of = self.lookup(block)
        return _Elem(self.op_id(block.idx, index), op_node_attrs(op, var_of, self.legend),
                     _unique(op.input_names()), _unique(op.output_names()),
                     S.OP_STYLES[S.op_kind(op, var_of)].border)

    def _summary_elem(self, block: BlockDesc, group: str, ops: list[OpDesc],
                      ins: list[str], outs: list[str]) -> _Elem:
        st = S.OP_STYLES[group]
        self.legend.summary = True
        self.legend.op_kinds.add(group)
        attrs: list[tuple[str, Any]] = [
            ("label", f"{group}: {_plural(len(ops), 'op')}"), ("shape", S.SUMMARY_SHAPE),
            ("style", "filled"), ("fillcolor", st.fill), ("color", st.border),
            ("tooltip", op_counts(ops))]
        return _Elem(self.summary_id(block.idx, group), attrs, _unique(ins), _unique(outs),
                     st.border)

    def _block_elems(self, block: BlockDesc) -> list[_Elem]:
        ops = [(i, op) for i, op in enumerate(block.ops)
               if not (self.opts.forward_only and op.role & _NOT_FORWARD)]
        if not self.opts.collapse_grads or self.opts.forward_only:
            return [self._op_elem(block, i, op) for i, op in ops]

        groups: dict[str, list[OpDesc]] = {"backward": [], "optimize": []}
        order: list[str | tuple[int, OpDesc]] = []
        normal: list[OpDesc] = []
        for i, op in ops:
            g = _collapse_group(op, self.lookup(block))
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
    def _add_var(self, body: Body, owner: int, name: str, var: VarDesc | None) -> None:
        body.node(self.var_id(owner, name), var_node_attrs(
            name, var, self.legend, gradient=name in self.gradients))

    def _add_vars_of(self, body: Body, block: BlockDesc) -> None:
        mine = [(n, var) for (owner, n), var in self.used.items() if owner == block.idx]
        order = {n: i for i, n in enumerate(block.vars)}
        declared = sorted((order[n], n, var) for n, var in mine if n in order)
        for _, n, var in declared:
            self._add_var(body, block.idx, n, var)
        # a var declared in an ancestor that is not drawn keeps first-use order, after
        for n, var in mine:
            if n not in order:
                self._add_var(body, block.idx, n, var)

    def node_body(self) -> Body:
        """The global block's cluster (or its vars, free), then one cluster per block."""
        body = Body()
        g0 = self.program.global_block()
        global_vars = Body()
        self._add_vars_of(global_vars, g0)
        global_ops = self.elems.get(0, [])
        if self.opts.show_global and (global_vars or global_ops):
            cluster = body.cluster(f"{self.cprefix}0", [
                ("label", _signature(self.program, g0)), ("style", "filled,rounded"),
                ("fillcolor", S.GLOBAL_CLUSTER_FILL), ("color", S.CLUSTER_COLOR)])
            cluster.add(global_vars)
            for e in global_ops:
                cluster.node(e.node_id, e.attrs)
        else:
            body.add(global_vars)
        for block in self.blocks:
            label = self.cluster_labels.get(block.idx) or _signature(self.program, block)
            cluster = body.cluster(f"{self.cprefix}{block.idx}", [
                ("label", label), ("style", "rounded"), ("color", S.CLUSTER_COLOR)])
            self._add_vars_of(cluster, block)
            for e in self.elems[block.idx]:
                cluster.node(e.node_id, e.attrs)
        return body

    @property
    def nodes(self) -> list[str]:
        """Every node id, vars first (for stacking programs)."""
        return ([self.var_id(owner, n) for owner, n in self.used]
                + [e.node_id for elems in self.elems.values() for e in elems])

    @property
    def flow(self) -> list[tuple[str, str]]:
        """The edges that rank nodes (write-backs and links do not)."""
        pairs = []
        for idx, elems in self.elems.items():
            block = self.program.blocks[idx]
            for e in elems:
                pairs += [(self.var_id(*self._key(block, n)), e.node_id) for n in e.ins]
                pairs += [(e.node_id, self.var_id(*self._key(block, n))) for n in e.outs
                          if n not in e.ins and self._key(block, n)[0] == block.idx]
        return pairs

    def edge_body(self) -> Body:
        body = Body()
        seen: set[tuple[str, str]] = set()

        def edge(src: str, dst: str, pairs: Pairs = ()) -> None:
            if (src, dst) not in seen:
                seen.add((src, dst))
                body.edge(src, dst, pairs)

        order = ([self.program.global_block()] if 0 in self.elems else []) + self.blocks
        for block in order:
            for e in self.elems[block.idx]:
                for n in e.ins:
                    edge(self.var_id(*self._key(block, n)), e.node_id)
                for n in e.outs:
                    owner = self._key(block, n)[0]
                    back = n in e.ins or owner != block.idx
                    edge(e.node_id, self.var_id(owner, n),
                         [("style", "dashed"), ("constraint", False),
                          ("color", e.border)] if back else ())
        for src, dst, count in self.links:
            edge(src, dst, [("label", _plural(count, "grad")), ("style", "dashed"),
                            ("fontsize", 9), ("fontcolor", S.EDGE_COLOR)])
        return body

    def body(self) -> Body:
        """Nodes, then edges."""
        body = self.node_body()
        body.add(self.edge_body())
        return body


# --- public entry points -------------------------------------------------------------------

DETAILS = ("layers", "ops")


def _check_detail(detail: str) -> None:
    if detail not in DETAILS:
        raise ValueError(f"detail must be 'layers' (one node per layer, the default) or "
                         f"'ops' (one node per op); got {detail!r}")


def _expand_set(expand: None | str | Iterable[str]) -> frozenset:
    if expand is None:
        return frozenset()
    if isinstance(expand, str):
        return frozenset([expand])
    return frozenset(expand)


def program_to_dot(program: Any, methods: None | MethodRef | Sequence[MethodRef] = None,
                   forward_only: bool = False, collapse_grads: bool = False,
                   show_global: bool = True, legend: bool = True, *,
                   detail: str = "layers", expand: None | str | Iterable[str] = None,
                   stack_methods: bool = False) -> str:
    """DOT text for a whole program (or the given methods of it).

    ``program`` is a `ProgramDesc` or a compiled program. ``methods`` names the method
    blocks to draw (names or block indices; default all).

    ``detail='layers'`` (the default) draws one node per layer, the layers of a
    ``var_scope`` inside a box named after it, the backward pass as one folded node and the
    optimizer as one node per parameter; ``expand`` names groups to draw op by op instead
    (a layer such as ``'mlp/fc_1'``, a scope such as ``'mlp'``, ``'backward'`` or
    ``'optimize'``) and ``stack_methods`` draws the method blocks one under the other
    rather than side by side. ``detail='ops'`` draws every op and var, with the global block:
    ``collapse_grads`` then folds each block's backward ops into one node and its optimize
    ops into another, and ``show_global`` draws block 0 as a cluster with its initialiser
    ops (without it, the global vars the methods read are free nodes).

    ``forward_only`` drops backward, optimize and LR-schedule ops and the vars only they
    touch. ``legend`` adds a legend of the colours used.
    """
    _check_detail(detail)
    program = _as_program(program)
    blocks = _select_blocks(program, methods)
    if detail == "layers":
        return _grouped_document(program, blocks, forward_only, expand, legend, stack_methods)
    lg = _Legend()
    opts = _Options(forward_only, collapse_grads, show_global)
    graph = _ProgramGraph(program, blocks, opts, lg,
                          global_all=methods is None and not forward_only)
    return _document(program.name, graph.body(), lg if legend else None)


def block_to_dot(program: Any, block: BlockDesc | MethodRef, forward_only: bool = False,
                 collapse_grads: bool = False, show_global: bool = True,
                 legend: bool = True, *, detail: str = "layers",
                 expand: None | str | Iterable[str] = None,
                 stack_methods: bool = False) -> str:
    """DOT text for one block: a method (by `BlockDesc`, name or index) with the global
    vars it reads, or block 0 on its own (all state and its initialisers). Options as
    for `program_to_dot`."""
    _check_detail(detail)
    program = _as_program(program)
    if isinstance(block, BlockDesc):
        block = block.idx
    if isinstance(block, int):
        if not 0 <= block < len(program.blocks):
            raise KeyError(f"program has no block {block}; "
                           f"it has blocks 0..{len(program.blocks) - 1}")
        target = program.blocks[block]
    else:
        target = program.block(block)
    if detail == "layers":
        return _grouped_document(program, [target], forward_only, expand, legend, stack_methods)
    if target.idx != 0:
        return program_to_dot(program, [target.idx], forward_only, collapse_grads,
                              show_global, legend, detail=detail)
    opts = _Options(forward_only, collapse_grads, True)
    lg = _Legend()
    graph = _ProgramGraph(program, [], opts, lg, global_all=True)
    return _document(program.name, graph.body(), lg if legend else None)


def _grouped_document(program: ProgramDesc, blocks: list[BlockDesc], forward_only: bool,
                      expand: None | str | Iterable[str], legend: bool,
                      stack_methods: bool) -> str:
    lg = _Legend()
    graph = GroupedGraph(program, blocks,
                         GroupOptions(forward_only, _expand_set(expand), stack_methods), lg)
    return _document(program.name, graph.body(), lg if legend else None, compound=True)


def layer_drawings(program: Any, methods: None | MethodRef | Sequence[MethodRef] = None,
                   *, forward_only: bool = False, stack_methods: bool = False,
                   limit: int = 40) -> list[tuple[str, str, str]]:
    """The op-level drawing of each group that `program_to_dot` (same arguments) draws as
    one node: ``(node id, label, DOT text)`` for its forward layers and its folded backward
    pass, at most ``limit`` of them. A notebook shows them as the layers' expansions."""
    program = _as_program(program)
    graph = GroupedGraph(program, _select_blocks(program, methods),
                         GroupOptions(forward_only, frozenset(), stack_methods), _Legend())
    out = []
    for node, block, group in graph.folded:
        if group.kind not in ("forward", "backward"):
            continue
        ops = [block.ops[i] for i in group.ops]
        touched = {n for op in ops for n in op.input_names() + op.output_names()}
        part = dataclasses.replace(
            block, ops=ops, vars={n: v for n, v in block.vars.items() if n in touched},
            feeds=[n for n in block.feeds if n in touched], returns=None)
        label = (f"{group.layer} ({group.call})" if group.call > 1 else group.layer) \
            if group.kind == "forward" else f"{block.name or 'block'}: backward pass"
        lg = _Legend()
        drawing = _ProgramGraph(program, [part], _Options(show_global=False), lg,
                                global_all=False)
        drawing.cluster_labels[block.idx] = f"{label}: {_plural(len(ops), 'op')}"
        out.append((node, label, _document(label, drawing.body(), lg)))
        if len(out) == limit:
            break
    return out


CrossEdge = tuple[str, str, str, str] | tuple[str, str, str, str, str]


def split_to_dot(programs: Mapping[str, Any], edges: Sequence[CrossEdge] = (), *,
                 forward_only: bool = False, collapse_grads: bool = False,
                 show_global: bool = True, legend: bool = True, title: str = "",
                 detail: str = "layers", stack: bool = True,
                 expand: None | str | Iterable[str] = None,
                 stack_methods: bool = True) -> str:
    """Several programs, each a cluster (with its blocks as clusters inside), and labelled
    edges between them.

    ``programs`` maps a display name to a program (in the order given). ``stack`` (the
    default) draws them one under the other, so a trainer and its servers grow downwards;
    ``stack=False`` puts them side by side (``stack_methods``: the same for the method
    blocks inside each program, with ``detail='layers'``; also on by default). Each edge
    is ``(from_program, var, to_program, var)`` with an optional fifth element, the label
    (default: the var name, or ``a -> b`` when the names differ), e.g. a trainer's
    ``send`` of ``w@GRAD`` to a pserver's ``w@GRAD``.

    With ``detail='ops'`` edge ends are var nodes (a var the options filtered out is drawn
    anyway when an edge needs it). With ``detail='layers'`` an edge ends at the node that
    uses the var (the last to touch it in the sending program, the first in the receiving
    one), and the edges between two programs are merged into one per pair of ends; where
    the vars of one program spread over several of its nodes, the merged edge ends at that
    program's border.
    """
    _check_detail(detail)
    lg = _Legend()
    names = list(programs)
    if detail == "layers":
        grouped = {name: GroupedGraph(_as_program(p), _select_blocks(_as_program(p), None),
                                      GroupOptions(forward_only, _expand_set(expand),
                                                   stack_methods), lg,
                                      id_prefix=f"p{i}.", cluster_prefix=f"p{i}_")
                   for i, (name, p) in enumerate(programs.items())}
        cross = _grouped_cross_edges(grouped, edges, names)
        graphs: Mapping[str, Any] = grouped
    else:
        graphs = {}
        for i, (name, prog) in enumerate(programs.items()):
            prog = _as_program(prog)
            graphs[name] = _ProgramGraph(prog, _select_blocks(prog, None),
                                         _Options(forward_only, collapse_grads, show_global),
                                         lg, global_all=not forward_only,
                                         id_prefix=f"p{i}.", cluster_prefix=f"p{i}_")
        cross = _op_cross_edges(graphs, edges)
    if cross:
        lg.cross = True
    body = Body()
    for i, (name, graph) in enumerate(graphs.items()):
        cluster = body.cluster(f"p{i}", [("label", name), ("style", "bold,rounded"),
                                          ("color", "#555555"), ("fontsize", 14)])
        cluster.add(graph.node_body())
    for graph in graphs.values():
        body.add(graph.edge_body())
    body.add(cross)
    if stack:
        for upper, lower in zip(list(graphs.values()), list(graphs.values())[1:]):
            stack_edges(body, upper.nodes, upper.flow, lower.nodes, lower.flow)
    return _document(title, body, lg if legend else None, compound=detail == "layers")


def _check_edge(e: Sequence[str]) -> str:
    if len(e) not in (4, 5):
        raise ValueError(f"a cross-program edge is (from_program, var, to_program, var"
                         f"[, label]); got {e!r}")
    return e[4] if len(e) == 5 else (e[1] if e[1] == e[3] else f"{e[1]} -> {e[3]}")


def _unknown_program(name: str, graphs: Mapping[str, Any]) -> KeyError:
    return KeyError(f"edge names program {name!r}; the programs are: "
                    f"{', '.join(repr(k) for k in graphs)}")


def _cross_attrs(label: str, tooltip: str = "", *, xlabel: bool = False
                 ) -> list[tuple[str, Any]]:
    """A cross-program edge; ``xlabel`` places its label after layout, so a long edge
    round the drawing does not widen it."""
    pairs: list[tuple[str, Any]] = [
        ("xlabel" if xlabel else "label", label), ("color", S.CROSS_EDGE_COLOR),
        ("fontcolor", S.CROSS_EDGE_COLOR), ("fontsize", 9), ("penwidth", 1.5),
        ("constraint", False)]
    if tooltip:
        pairs.append(("tooltip", tooltip))
    return pairs


def _op_cross_edges(graphs: Mapping[str, _ProgramGraph], edges: Sequence[CrossEdge]
                    ) -> Body:
    def end(prog_name: str, var: str) -> str:
        graph = graphs.get(prog_name)
        if graph is None:
            raise _unknown_program(prog_name, graphs)
        try:
            return graph.require_var(var)
        except KeyError:
            raise KeyError(f"program {prog_name!r} has no variable {var!r}") from None

    cross = Body()
    for e in edges:
        label = _check_edge(e)
        src, dst = end(e[0], e[1]), end(e[2], e[3])
        cross.edge(src, dst, _cross_attrs(label))
    return cross


def _grouped_cross_edges(graphs: Mapping[str, GroupedGraph], edges: Sequence[CrossEdge],
                         names: list[str]) -> Body:
    """One edge per pair of ends; an end whose vars spread over several nodes of its
    program is that program's border."""
    merged: dict[tuple[str, str], list[tuple[str, str, str, str]]] = {}
    for e in edges:
        label = _check_edge(e)
        for prog in (e[0], e[2]):
            if prog not in graphs:
                raise _unknown_program(prog, graphs)
        src = graphs[e[0]].last_touch.get(e[1])
        # a var the receiving program writes (a parameter coming back) ends where it is
        # written, one it only reads (a gradient arriving) where it is first read
        dst = graphs[e[2]].first_write.get(e[3]) or graphs[e[2]].first_touch.get(e[3])
        for node, prog, var in ((src, e[0], e[1]), (dst, e[2], e[3])):
            if node is None and not _declares(graphs[prog].program, var):
                raise KeyError(f"program {prog!r} has no variable {var!r}")
        if src is None or dst is None:
            continue     # a var no op of the drawing touches: nothing to join
        merged.setdefault((e[0], e[2]), []).append((src, dst, label, e[1]))
    out = Body()
    for (a, b), items in merged.items():
        srcs = _unique(s for s, _, _, _ in items)
        dsts = _unique(d for _, d, _, _ in items)
        groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for s, d, label, var in items:
            key = (s if len(srcs) == 1 else srcs[0], d if len(dsts) == 1 else dsts[0])
            groups.setdefault(key, []).append((label, var))
        for (s, d), labels in groups.items():
            texts = _unique(lb for lb, _ in labels)
            label = texts[0] if len(texts) == 1 and len(labels) == 1 else \
                _plural(len(labels), "var")
            pairs = _cross_attrs(label, "\n".join(lb for lb, _ in labels), xlabel=True)
            if len(srcs) > 1:
                pairs.append(("ltail", f"cluster_p{names.index(a)}"))
            if len(dsts) > 1:
                pairs.append(("lhead", f"cluster_p{names.index(b)}"))
            out.edge(s, d, pairs)
    return out


def _declares(program: ProgramDesc, var: str) -> bool:
    return any(var in b.vars for b in program.blocks)
