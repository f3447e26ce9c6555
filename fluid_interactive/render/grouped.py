"""The grouped drawing of a program: one node per layer, not per op.

This is the drawing a notebook shows by default. Each method block is a cluster; inside it
every layer (see `groups`) is one box listing its parameters and its output type, layers of
one ``var_scope`` sit in a cluster named after the scope, the whole backward pass is one
folded box, and the optimizer is a column with one box per parameter (its update and its
state), so a model grows downwards and stays readable however many accumulators its
optimizer keeps. Data vars and returned vars are drawn as in the op-level drawing.

Groups named in ``expand`` (a layer such as ``mlp/fc_1``, a scope such as ``mlp``, or
``backward`` / ``optimize``) are drawn op by op inside a cluster of their own.

Only layers that connect are joined by edges: an edge stands for one or more vars a group
writes and another reads. Parameters and other state are listed inside the boxes, not drawn
as nodes, so no edge crosses the drawing to reach them.

An op that runs a block (a loop, a branch, a StaticRNN step, and the gradient op replaying
it) is one box, a folder, named after what it runs (``while_1  while``, ``body: 7 ops``),
with the edges of what it reads and writes around it; its node id is ``sb<block index>``,
the same in every drawing of the program. The gradient op's box sits under the folded
backward pass, joined to it and to the optimizer by the gradients it takes and gives. A
block drawn on its own (the body such a box opens into, `expansions`) starts at what it
takes (its per-run feeds and the vars around it that it reads) and ends at what it gives;
a var it both reads and writes is carried to the next run, drawn once, with a dashed edge
back to it.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..ir.blocks import sub_block_index
from ..ir.records import BlockDesc, OpDesc, OpRole, ProgramDesc, VarDesc
from ..ir.text import short_type
from . import style as S
from .builder import Body, Raw, html
from .groups import Group, forward_values, group_ops, layer_type
from .nesting import body_ops, body_word, describe, outermost
from .parts import (
    Legend,
    Scopes,
    chain,
    loc_text,
    op_counts,
    op_node_attrs,
    plural,
    signature,
    stack_edges,
    unique,
    var_node_attrs,
)
from .walk import Drawn, Walk

__all__ = ["GroupedGraph", "GroupOptions"]

_MUTED = "#555555"


@dataclass(frozen=True)
class GroupOptions:
    forward_only: bool = False
    expand: frozenset = frozenset()   # layer names, scopes, 'backward', 'optimize'
    stack: bool = False               # method blocks one under the other
    # the backward ops grouped by the layer they differentiate, one box each, joined by
    # the gradients they pass (the backward pass or a gradient block drawn on its own)
    backward_layers: bool = False


def _strip_prefix(name: str, owner: str) -> str:
    """A var's name without the parts it shares with its owner's: ``mlp/fc_0.w_0`` in
    layer ``mlp/fc_0`` -> ``w_0``; state ``w_0_moment1_0.block1`` of the parameter block
    ``w_0.block1`` -> ``moment1_0``. Only whole name parts are dropped."""
    def boundary(k: int) -> bool:
        if k >= len(name) or name[k] not in "._/":
            return False
        return k == len(owner) or owner[k] in "./"

    k = 0
    while k < min(len(name), len(owner)) and name[k] == owner[k]:
        k += 1
    while k and not boundary(k):
        k -= 1
    rest = name[k + 1:] if k else name
    j = 0   # a shared suffix such as '.block1'
    while j < min(len(rest), len(owner)) and rest[-1 - j] == owner[-1 - j]:
        j += 1
    while j and rest[-j] != ".":
        j -= 1
    if j and rest[:-j]:
        rest = rest[:-j]
    return rest or name


class GroupedGraph:
    """The nodes and edges of one program's grouped drawing."""

    def __init__(self, program: ProgramDesc, blocks: list[BlockDesc], opts: GroupOptions,
                 legend: Legend, *, id_prefix: str = "", cluster_prefix: str = "",
                 box_prefix: str = "") -> None:
        self.program = program
        self.blocks = blocks = outermost(program, blocks)
        self.opts = opts
        self.legend = legend
        self.prefix = id_prefix
        self.box_prefix = box_prefix      # of a layer box's id: a drawing of part of a block
        self.cluster_labels: dict[int, str] = {}   # block -> its cluster's label, if not
                                                   # its signature
        self.cprefix = cluster_prefix
        self.body_of_block: dict[int, Body] = {}
        self.flow: list[tuple[str, str]] = []     # edges that rank (for stacking programs)
        self.nodes: list[str] = []
        self._edges = Body()
        self._seen: set[tuple[str, str]] = set()
        self.first_touch: dict[str, str] = {}     # var -> node of the first op touching it
        self.last_touch: dict[str, str] = {}      # var -> node of the last op touching it
        self.first_write: dict[str, str] = {}     # var -> node of the first op writing it
        self.single: dict[int, str] = {}          # block drawn as one node -> that node
        self.folded: list[tuple[str, BlockDesc, Group]] = []   # (node, block, group)
        self.gradients = S.gradient_names(program)
        # what a backward box reads of the forward pass draws no edge (`Walk`)
        self.forward = forward_values(program) if opts.backward_layers else set()
        # optimizer state several parameters' updates read (a learning rate)
        self.shared_state = self._shared(blocks)
        self._block_ends: list[tuple[list[str], list[tuple[str, str]]]] = []
        for block in blocks:
            nodes, flow = len(self.nodes), len(self.flow)
            self.body_of_block[block.idx] = self._block(block)
            self._block_ends.append((self.nodes[nodes:], self.flow[flow:]))

    # --- ids ----------------------------------------------------------------------------------
    def _id(self, text: str) -> str:
        return f"{self.prefix}{text}"

    def var_id(self, block: BlockDesc, name: str) -> str:
        return self._id(f"v{block.idx}:{name}")

    # --- edges --------------------------------------------------------------------------------
    def edge(self, src: str, dst: str, extra: Iterable[tuple[str, Any]] = (),
              ranks: bool = True) -> None:
        if src == dst or (src, dst) in self._seen:
            return
        self._seen.add((src, dst))
        pairs = list(extra)
        if not ranks:
            pairs.append(("constraint", False))
        else:
            self.flow.append((src, dst))
        self._edges.edge(src, dst, pairs)

    def edge_body(self) -> Body:
        return self._edges

    # --- labels -------------------------------------------------------------------------------
    def var(self, block: BlockDesc, name: str) -> VarDesc | None:
        return self.program.find_var(block, name)

    def draw_var(self, body: Body, block: BlockDesc, name: str) -> None:
        node = self.var_id(block, name)
        self.nodes.append(node)
        body.node(node, var_node_attrs(name, self.var(block, name), self.legend,
                                       gradient=name in self.gradients))

    def _op_node(self, body: Body, block: BlockDesc, node: str, op: OpDesc) -> None:
        self.nodes.append(node)
        body.node(node, op_node_attrs(op, functools.partial(self.var, block), self.legend))

    def _state_of(self, block: BlockDesc, group: Group) -> tuple[list[str], list[str]]:
        """(parameters, other persistable vars) the group's ops read or write."""
        params: list[str] = []
        state: list[str] = []
        for i in group.ops:
            op = block.ops[i]
            for n in op.input_names() + op.output_names():
                var = self.var(block, n)
                if var is None or not var.persistable or var.kind != "tensor":
                    continue
                (params if var.is_parameter else state).append(n)
        return unique(params), [n for n in unique(state) if n not in params]

    def _heading(self, block: BlockDesc, g: Group) -> tuple[str, str, str]:
        """(title, note, owner) of a box: ``fc_0  fc`` for a layer, the parameter, its type
        and update op for an optimizer box; ``owner`` is what names inside are relative to."""
        if g.kind == "forward":
            return (g.short + (f" ({g.call})" if g.call > 1 else ""), layer_type(g.layer),
                    g.layer)
        if g.kind == "backward" and g.layer:
            return g.short + (f" ({g.call})" if g.call > 1 else ""), "gradient", g.layer
        if g.kind == "optimize":
            var = self.var(block, g.layer)
            updates = unique(block.ops[i].type for i in g.ops
                             if g.layer in block.ops[i].output_names())
            note = " · ".join(x for x in (short_type(var) if var is not None else "",
                                          ", ".join(updates)) if x)
            return g.layer or "optimizer", note, g.layer
        return _GROUP_TITLES.get(g.kind, g.kind), "", ""

    def _rows(self, block: BlockDesc, g: Group, outputs: list[str]) -> tuple[list[str], str]:
        """The lines of a box (HTML-like markup) and its title."""
        title, note, owner = self._heading(block, g)
        params, state = self._state_of(block, g)
        of_layer = g.kind == "forward" or (g.kind == "backward" and bool(g.layer))
        params = [p for p in params if p != g.layer] if of_layer else []
        state = [n for n in state if n not in self.shared_state and n != g.layer]
        rows = [f"<b>{html(title)}</b>" + (f'  <font color="{_MUTED}">{html(note)}</font>'
                                           if note else "")]
        if g.kind in ("backward", "rpc", "lrsched") or (g.kind == "forward" and not params):
            rows.append(f'<font color="{_MUTED}">{html(plural(len(g.ops), "op"))}</font>')
        rows += [f'<font color="{S.VAR_STYLES["param"].border}">{html(_strip_prefix(p, owner))} '
                 f"{html(short_type(self.var(block, p)))}</font>" for p in params]
        names = [_strip_prefix(n, owner) for n in state]
        rows += [f'<font color="{_MUTED}">{html(", ".join(names[k:k + 2]))}</font>'
                 for k in range(0, len(names), 2)]     # two per line keeps the box narrow
        if g.kind == "forward" and outputs:
            rows.append(f'<font color="{_MUTED}">&#8594; '
                        f"{html(short_type(self.var(block, outputs[0])))}</font>")
        return rows, title

    def _body_rows(self, block: BlockDesc, g: Group, outputs: list[str]) -> list[str]:
        """The lines of a box running a block: what it runs and its type, how many ops
        its body holds, the parameters the body reads, what it gives on."""
        op = block.ops[g.ops[0]]
        ops = body_ops(self.program, op)
        inner = sum(1 for o in ops if sub_block_index(o) is not None)
        size = plural(len(ops), "op") + (f", {plural(inner, 'nested block')}" if inner else "")
        rows = [f"<b>{html(g.short)}</b>  <font color=\"{_MUTED}\">{html(op.type)}</font>",
                f'<font color="{_MUTED}">&#9656; {html(body_word(op))}: {html(size)}</font>']
        if g.kind == "forward":
            params = self._state_of(block, g)[0]
            rows += [f'<font color="{S.VAR_STYLES["param"].border}">'
                     f"{html(_strip_prefix(p, g.layer))} "
                     f"{html(short_type(self.var(block, p)))}</font>" for p in params]
            if outputs:
                rows.append(f'<font color="{_MUTED}">&#8594; '
                            f"{html(short_type(self.var(block, outputs[0])))}</font>")
        return rows

    def _body_tooltip(self, block: BlockDesc, g: Group) -> str:
        op = block.ops[g.ops[0]]
        lines = [describe(self.program, block, op),
                 "ops: " + op_counts(body_ops(self.program, op))]
        if op.loc is not None:
            lines.append("at " + loc_text(op))
        return "\n".join(lines)

    @staticmethod
    def _tooltip(block: BlockDesc, g: Group, title: str, head: str) -> str:
        """The layer's full name, its ops with counts, where the user's code made them."""
        ops = [block.ops[i] for i in g.ops]
        lines = ([head] if head else []) + [g.layer or title, "ops: " + op_counts(ops)]
        locs = unique(loc_text(op) for op in ops if op.loc is not None)
        if locs:
            lines.append("at " + "; ".join(locs[:4]) + (" ..." if len(locs) > 4 else ""))
        return "\n".join(lines)

    def _group_node(self, body: Body, block: BlockDesc, drawn: Drawn, outputs: list[str],
                    tooltip_head: str = "") -> str:
        """One box standing for a group of ops; returns its node id."""
        g, node = drawn.group, drawn.node
        assert node is not None, "an expanded group has no node of its own"
        st = S.OP_STYLES[g.kind]
        self.legend.op_kinds.add(g.kind)
        if g.runs_block:
            self.legend.bodies = True
            rows = self._body_rows(block, g, outputs)
            shape, style, tooltip = S.BODY_SHAPE, "filled", self._body_tooltip(block, g)
        else:
            self.legend.summary = True
            rows, title = self._rows(block, g, outputs)
            folded = g.kind == "backward" and not g.layer    # the whole backward pass
            shape, style = (S.SUMMARY_SHAPE, "filled") if folded else ("box", "rounded,filled")
            tooltip = self._tooltip(block, g, title, tooltip_head)
        label = ('<<table border="0" cellborder="0" cellspacing="0" cellpadding="1">'
                 + "".join(f'<tr><td align="left">{r}</td></tr>' for r in rows) + "</table>>")
        pairs: list[tuple[str, Any]] = [
            ("shape", shape), ("style", style), ("fillcolor", st.fill),
            ("label", Raw(label)), ("tooltip", tooltip), ("margin", "0.08,0.04")]
        if drawn.loss:
            self.legend.loss = True
            pairs += [("color", S.LOSS_BORDER), ("penwidth", 2), ("peripheries", 2)]
        else:
            pairs.append(("color", st.border))
        self.nodes.append(node)
        body.node(node, pairs)
        return node

    # --- one block ----------------------------------------------------------------------------
    def _expanded(self, g: Group) -> bool:
        wanted = self.opts.expand
        if not wanted:
            return False
        if g.kind == "forward":
            layer = g.layer
            return g.key in wanted or layer in wanted or any(
                layer.startswith(s.rstrip("/") + "/") for s in wanted)
        names = {"backward": "backward", "optimize": "optimize", "lrsched": "lr",
                 "rpc": "communication", "reader": "reader"}
        return names.get(g.kind) in wanted or (g.kind == "optimize" and g.layer in wanted)

    def _shared(self, blocks: list[BlockDesc]) -> list[str]:
        """Persistable non-parameters that several optimize groups read (a learning rate):
        named once on the optimizer's cluster, not in every box."""
        seen: dict[str, int] = {}
        for block in blocks:
            for g in group_ops(self.program, block, forward_only=self.opts.forward_only):
                if g.kind == "optimize":
                    for n in self._state_of(block, g)[1]:
                        seen[n] = seen.get(n, 0) + 1
        return [n for n, k in seen.items() if k > 1]

    def _plan(self, block: BlockDesc, groups: list[Group]) -> list[Drawn]:
        plan = []
        for gi, g in enumerate(groups):
            loss = g.kind == "forward" and any(block.ops[i].role & OpRole.LOSS for i in g.ops)
            if g.runs_block:       # one box, the same id wherever the program is drawn
                node = self._id(f"sb{g.sub_block}")
                plan.append(Drawn(g, node, {g.ops[0]: node}, loss))
                self.folded.append((node, block, g))
                continue
            single_op = len(g.ops) == 1 and g.kind != "optimize" and (
                g.kind != "backward" or bool(g.layer))
            if single_op and g.kind == "forward":
                single_op = not self._state_of(block, g)[0]   # a one-op layer with weights
            if self._expanded(g) or single_op:
                d = Drawn(g, None, {i: self._id(f"op{block.idx}.{i}") for i in g.ops}, loss)
            else:
                node = self._id(f"{self.box_prefix}g{block.idx}.{gi}")
                d = Drawn(g, node, dict.fromkeys(g.ops, node), loss)
                self.folded.append((node, block, g))
            plan.append(d)
        return plan

    def _block(self, block: BlockDesc) -> Body:
        groups = _params_in_declared_order(
            self.program, group_ops(self.program, block, forward_only=self.opts.forward_only,
                                    backward_layers=self.opts.backward_layers))
        walk = Walk(self, block, self._plan(block, groups))
        for i, op in enumerate(block.ops):
            if i in walk.node_of:
                walk.op(i, op)
        walk.finish()
        plan = walk.plan
        if len(plan) == 1 and plan[0].node is not None and not walk.var_nodes:
            body = Body()
            self.single[block.idx] = self._group_node(body, block, plan[0], [],
                                                      signature(self.program, block))
            return body
        return self._layout_block(block, walk)

    def _drawn_group(self, block: BlockDesc, k: int, d: Drawn, walk: Walk
                     ) -> tuple[Body, str]:
        """One group's statements (its box, or its ops and vars in a cluster when it is
        expanded) and its first node."""
        g, body = d.group, Body()
        if d.node is not None:
            self._group_node(body, block, d, unique(walk.outputs_of.get(d.node, [])))
            return body, d.node
        target = body
        if len(g.ops) > 1:
            target = body.cluster(f"{self.cprefix}{block.idx}_g{k}", [
                ("label", g.layer or _GROUP_TITLES.get(g.kind, g.kind)),
                ("style", "rounded,dashed"), ("color", S.OP_STYLES[g.kind].border)])
        for i in g.ops:
            self._op_node(target, block, d.op_nodes[i], block.ops[i])
        target.add(walk.inner_vars.get(id(d), Body()))
        return body, d.op_nodes[g.ops[0]]

    def _layout_block(self, block: BlockDesc, walk: Walk) -> Body:
        """The block's statements: scopes and expanded groups as nested clusters, the
        optimizer as one column."""
        tree = Scopes()
        loose, opt = Body(), Body()
        opt_chain: list[str] = []
        for k, d in enumerate(walk.plan):
            part, first = self._drawn_group(block, k, d, walk)
            if d.group.kind == "optimize":
                opt.add(part)
                opt_chain.append(first)
            elif d.group.scope:
                tree.add(d.group.scope, part)
            else:
                loose.add(part)
        out = Body()
        out.add(walk.var_nodes)
        tree.write(out, f"{self.cprefix}{block.idx}_s", self._scope_style)
        out.add(loose)
        if opt:
            cluster = out.cluster(walk.opt_cluster, [
                ("label", self._optimizer_label(block, walk.plan, len(opt_chain))),
                ("style", "rounded"), ("color", S.OP_STYLES["optimize"].border)])
            cluster.add(opt)
            chain(cluster, opt_chain)
        return out

    def _optimizer_label(self, block: BlockDesc, plan: list[Drawn], params: int) -> str:
        """``optimizer: adam (6 parameters; learning_rate_0)``: the update ops, how many
        parameters, the state they share."""
        updates = [d.group for d in plan if d.group.kind == "optimize"]
        kinds = unique(block.ops[i].type for g in updates for i in g.ops
                       if g.layer in block.ops[i].output_names())
        shared = [n for n in self.shared_state
                  if any(n in block.ops[i].input_names() for g in updates for i in g.ops)]
        return ("optimizer" + (f": {', '.join(kinds)}" if kinds else "")
                + f" ({plural(params, 'parameter')}"
                + (f"; {', '.join(shared)}" if shared else "") + ")")

    @staticmethod
    def _scope_style(name: str) -> list[tuple[str, Any]]:
        return [("label", name), ("style", "rounded"), ("color", S.CLUSTER_COLOR)]

    # --- the whole program ----------------------------------------------------------------
    def node_body(self) -> Body:
        """Every block as a cluster labelled with its signature; a block drawn as one node
        (a server's optimize block) is that node alone, stacked under the previous one."""
        body = Body()
        for block in self.blocks:
            inner = self.body_of_block[block.idx]
            if block.idx in self.single:
                body.add(inner)
                continue
            label = self.cluster_labels.get(block.idx) or signature(self.program, block)
            cluster = body.cluster(f"{self.cprefix}{block.idx}", [
                ("label", label), ("style", "rounded"),
                ("color", S.CLUSTER_COLOR)])
            cluster.add(inner)
        chain(body, list(self.single.values()))
        if self.opts.stack:
            for upper, lower in zip(self._block_ends, self._block_ends[1:]):
                stack_edges(body, *upper, *lower)
        return body

    def body(self) -> Body:
        """Nodes, then edges."""
        body = self.node_body()
        body.add(self.edge_body())
        return body


_GROUP_TITLES = {"backward": "backward", "rpc": "send / recv", "lrsched": "learning rate",
                 "reader": "reader", "optimize": "optimizer"}


def _params_in_declared_order(program: ProgramDesc, groups: list[Group]) -> list[Group]:
    """Optimize groups in the order their parameters are declared (``fc_0.w_0`` before
    ``fc_0.b_0`` before ``fc_1.w_0``), where the backward pass made them in reverse."""
    order = {n: k for k, n in enumerate(program.global_block().vars)}
    opt = sorted((g for g in groups if g.kind == "optimize"),
                 key=lambda g: order.get(g.layer, len(order)))
    it = iter(opt)
    return [next(it) if g.kind == "optimize" else g for g in groups]
