"""The op-level drawing of a program (``detail="ops"``): every op an ellipse, every var a
record, each block a cluster; the entry points are in `dot`.

Rules (DESIGN §3 Rendering, style L12):

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
  node;
* an op that runs a block (a loop, a branch, a StaticRNN step, the gradient of one) is that
  block, drawn as a cluster inside the block holding the op, labelled with what runs it
  (``while_1 (while): body, block 4, 7 ops``) and bordered in the op's colour; nested
  loops nest. The body's ops join the vars around it directly (a write to one is a dashed
  write-back); what the op itself reads and makes (a loop's condition, a sequence it
  slices, its stacked outputs) joins the cluster's border.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..ir.records import SELECTED_ROWS, BlockDesc, OpDesc, OpRole, ProgramDesc, VarDesc
from . import style as S
from .builder import Body, Pairs
from .groups import NOT_FORWARD
from .nesting import describe, outermost, own_names, owned_block
from .parts import (
    Legend,
    loc_text,
    op_counts,
    op_node_attrs,
    plural,
    signature,
    unique,
    var_node_attrs,
)

__all__ = ["ProgramGraph", "OpOptions"]


@dataclass
class _Elem:
    """One op node (or one summary node standing for many ops) and its edges; or an op
    running a block, drawn as that block's cluster (``body``: its index; ``attrs`` are
    the cluster's; ``ins`` and ``outs`` what the op reads and makes itself)."""
    node_id: str
    attrs: list[tuple[str, Any]]
    ins: list[str]
    outs: list[str]
    border: str
    body: int | None = None


@dataclass(frozen=True)
class OpOptions:
    forward_only: bool = False
    collapse_grads: bool = False
    show_global: bool = True
    # narrow var nodes (the drawing of one layer's ops): the name relative to this layer
    # (``lstm/fc_0.w_0`` -> ``w_0``, ``lstm/split_0.tmp_1`` -> ``split_0.tmp_1``), its type
    # under it
    compact_layer: str | None = None


def _relative(name: str, layer: str) -> str:
    """``name`` without what it shares with ``layer``: the layer itself for its own vars,
    else the layer's scope."""
    scope = layer.rpartition("/")[0]
    for prefix in (layer + ".", scope + "/" if scope else ""):
        if prefix and name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix):]
    return name


def _collapse_group(op: OpDesc, var_of: S.VarLookup) -> str | None:
    """Which summary node an op folds into under ``collapse_grads`` (None: drawn itself)."""
    if S.op_kind(op, var_of) in ("rpc", "dist", "reader", "unspecified"):
        return None
    if op.role & OpRole.BACKWARD:
        return "backward"
    if op.role & OpRole.OPTIMIZE:
        return "optimize"
    return None


class ProgramGraph:
    """The nodes and edges of one program's drawing, built first and then written out."""

    def __init__(self, program: ProgramDesc, blocks: list[BlockDesc], opts: OpOptions,
                 legend: Legend, *, global_all: bool, id_prefix: str = "",
                 cluster_prefix: str = "") -> None:
        self.program = program
        self.blocks = blocks = outermost(program, blocks)
        self.drawn: set[int] = set()            # filled as blocks are built, outer first
        self.drawn_blocks: list[BlockDesc] = []   # the blocks drawn, nested ones included
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
        body = owned_block(self.program, op)
        if body is not None and body.ops:
            return self._body_elem(block, op, body)
        return _Elem(self.op_id(block.idx, index), op_node_attrs(op, var_of, self.legend),
                     unique(op.input_names()), unique(op.output_names()),
                     S.OP_STYLES[S.op_kind(op, var_of)].border)

    def _body_elem(self, block: BlockDesc, op: OpDesc, body: BlockDesc) -> _Elem:
        """An op running ``body``: the body's cluster, bordered in the op's colour."""
        kind = S.op_kind(op, self.lookup(block))
        st = S.OP_STYLES[kind]
        self.legend.op_kinds.add(kind)
        ins, outs = own_names(self.program, op)
        where = f"{op.type} at {loc_text(op)}" if op.loc is not None else op.type
        attrs: list[tuple[str, Any]] = [
            ("label", describe(self.program, block, op)), ("style", "rounded"),
            ("color", st.border), ("penwidth", 1.6), ("tooltip", where)]
        return _Elem(f"{self.prefix}sb{body.idx}", attrs, ins, outs, st.border, body.idx)

    def _summary_elem(self, block: BlockDesc, group: str, ops: list[OpDesc],
                      ins: list[str], outs: list[str]) -> _Elem:
        st = S.OP_STYLES[group]
        self.legend.summary = True
        self.legend.op_kinds.add(group)
        attrs: list[tuple[str, Any]] = [
            ("label", f"{group}: {plural(len(ops), 'op')}"), ("shape", S.SUMMARY_SHAPE),
            ("style", "filled"), ("fillcolor", st.fill), ("color", st.border),
            ("tooltip", op_counts(ops))]
        return _Elem(self.summary_id(block.idx, group), attrs, unique(ins), unique(outs),
                     st.border)

    def _block_elems(self, block: BlockDesc) -> list[_Elem]:
        ops = [(i, op) for i, op in enumerate(block.ops)
               if not (self.opts.forward_only and op.role & NOT_FORWARD)]
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
        loss_vars = unique(n for op in normal if op.role & OpRole.LOSS
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
        hidden = unique(n for op in groups["optimize"] for n in op.input_names()
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

    def _build_block(self, block: BlockDesc) -> None:
        self.drawn.add(block.idx)
        self.drawn_blocks.append(block)
        elems = self._block_elems(block)
        self.elems[block.idx] = elems
        for e in elems:
            self._use(block, e.ins + e.outs)
            if e.body is not None:
                self._build_block(self.program.blocks[e.body])
        touched = {n for op in block.ops for n in op.input_names() + op.output_names()}
        self._use(block, [n for n in block.vars if n not in touched])  # declared, unused

    @property
    def has_bodies(self) -> bool:
        """Whether a block is drawn inside another (edges then end at cluster borders)."""
        return len(self.drawn_blocks) > len(self.blocks)

    def _build(self, global_all: bool) -> None:
        for block in self.blocks:
            self._build_block(block)
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
        layer = self.opts.compact_layer
        shown = None if layer is None else _relative(name, layer)
        body.node(self.var_id(owner, name), var_node_attrs(
            name, var, self.legend, gradient=name in self.gradients, shown=shown))

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
                ("label", signature(self.program, g0)), ("style", "filled,rounded"),
                ("fillcolor", S.GLOBAL_CLUSTER_FILL), ("color", S.CLUSTER_COLOR)])
            cluster.add(global_vars)
            for e in global_ops:
                cluster.node(e.node_id, e.attrs)
        else:
            body.add(global_vars)
        for block in self.blocks:
            label = self.cluster_labels.get(block.idx) or signature(self.program, block)
            cluster = body.cluster(f"{self.cprefix}{block.idx}", [
                ("label", label), ("style", "rounded"), ("color", S.CLUSTER_COLOR)])
            self._write_block(cluster, block)
        return body

    def _write_block(self, cluster: Body, block: BlockDesc) -> None:
        """A block's vars and ops; the block an op runs as a cluster in its place."""
        self._add_vars_of(cluster, block)
        for e in self.elems[block.idx]:
            if e.body is None:
                cluster.node(e.node_id, e.attrs)
            else:
                inner = cluster.cluster(f"{self.cprefix}{e.body}", e.attrs)
                self._write_block(inner, self.program.blocks[e.body])

    def _ends(self, idx: int) -> tuple[str, str] | None:
        """The first and last op nodes drawn in block ``idx`` (and the blocks inside it):
        where an edge to or from its cluster's border is attached."""
        nodes: list[str] = []
        for e in self.elems.get(idx, []):
            if e.body is None:
                nodes.append(e.node_id)
            elif (inner := self._ends(e.body)) is not None:
                nodes += inner
        return (nodes[0], nodes[-1]) if nodes else None

    @property
    def nodes(self) -> list[str]:
        """Every node id, vars first (for stacking programs)."""
        return ([self.var_id(owner, n) for owner, n in self.used]
                + [e.node_id for elems in self.elems.values() for e in elems
                   if e.body is None])

    @property
    def flow(self) -> list[tuple[str, str]]:
        """The edges that rank nodes (write-backs and links do not)."""
        pairs = []
        for idx, elems in self.elems.items():
            block = self.program.blocks[idx]
            for e in elems:
                if e.body is not None:
                    continue
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

        order = ([self.program.global_block()] if 0 in self.elems else []) + self.drawn_blocks
        for block in order:
            for e in self.elems[block.idx]:
                src, dst, head, tail = e.node_id, e.node_id, [], []
                if e.body is not None:      # a block's cluster: edges end at its border
                    ends = self._ends(e.body)
                    if ends is None:
                        continue
                    (dst, src), cluster = ends, f"cluster_{self.cprefix}{e.body}"
                    head, tail = [("lhead", cluster)], [("ltail", cluster)]
                for n in e.ins:
                    edge(self.var_id(*self._key(block, n)), dst, head + self._rows(block, n))
                for n in e.outs:
                    owner = self._key(block, n)[0]
                    back = n in e.ins or owner != block.idx
                    edge(src, self.var_id(owner, n), tail + self._rows(block, n) + (
                         [("style", "dashed"), ("constraint", False),
                          ("color", e.border)] if back else []))
        for src, dst, count in self.links:
            edge(src, dst, [("label", plural(count, "grad")), ("style", "dashed"),
                            ("fontsize", 9), ("fontcolor", S.EDGE_COLOR)])
        return body

    def _rows(self, block: BlockDesc, name: str) -> list[tuple[str, Any]]:
        """The label of an edge carrying a rows-only value (a sparse gradient)."""
        var = self.program.find_var(block, name)
        if var is None or var.kind != SELECTED_ROWS:
            return []
        return [("label", "SelectedRows"), ("fontsize", 9), ("fontcolor", S.EDGE_COLOR)]

    def body(self) -> Body:
        """Nodes, then edges."""
        body = self.node_body()
        body.add(self.edge_body())
        return body
