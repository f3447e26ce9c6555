"""How the drawing by layer (`grouped`) joins its nodes: a block's ops are walked in order,
and each var joins the node that last wrote it to each node that reads it.

A method starts at its feeds (data vars) and ends at what it returns; a block drawn on its
own (a loop's body) starts at what it takes (`nesting.interface`) and ends at what it
gives, a var it both takes and gives (carried to the next run) drawn once, with a dashed
edge back. The folded backward pass is drawn from the loss only; the box of a gradient
op running a block takes the gradients flowing into it.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..ir.records import BlockDesc, OpDesc, ProgramDesc, VarDesc, returned_names
from .builder import Body
from .groups import Group
from .nesting import interface, owner_of
from .parts import unique

__all__ = ["Drawn", "Walk", "Drawing"]


class Drawing(Protocol):
    """What a walk needs of the drawing it adds to (`grouped.GroupedGraph`)."""
    program: ProgramDesc
    cprefix: str
    first_touch: dict[str, str]
    last_touch: dict[str, str]
    first_write: dict[str, str]
    forward: set[str]           # forward values a backward group's reads skip

    def var(self, block: BlockDesc, name: str) -> VarDesc | None: ...

    def var_id(self, block: BlockDesc, name: str) -> str: ...

    def draw_var(self, body: Body, block: BlockDesc, name: str) -> None: ...

    def edge(self, src: str, dst: str, extra: Iterable[tuple[str, Any]] = (),
             ranks: bool = True) -> None: ...


@dataclass
class Drawn:
    """How one group is drawn: one node, or (expanded) one node per op in a cluster."""
    group: Group
    node: str | None                        # the group's node; None when expanded
    op_nodes: dict[int, str] = field(default_factory=dict)
    loss: bool = False


class Walk:
    """The edges of one block's grouped drawing, found by walking its ops in order: each
    var joins the node that last wrote it to each node that reads it."""

    def __init__(self, graph: Drawing, block: BlockDesc, plan: list[Drawn]):
        self.graph, self.block, self.plan = graph, block, plan
        self.node_of = {i: n for d in plan for i, n in d.op_nodes.items()}
        self.drawn_of = {i: d for d in plan for i in d.group.ops}
        self.loss_nodes = {n for d in plan if d.loss for n in d.op_nodes.values()}
        opt = [d for d in plan if d.group.kind == "optimize"]
        self.opt_first = (opt[0].node or next(iter(opt[0].op_nodes.values()))) if opt else None
        self.opt_members = {n for d in opt for n in d.op_nodes.values()}
        self.opt_cluster = f"{graph.cprefix}{block.idx}_opt"
        self.writer: dict[str, str] = {}
        self.kind_of: dict[str, str] = {}       # a writer node -> the kind of its group
        self.inner_vars: dict[int, Body] = {}   # expanded group -> its var nodes
        self.var_nodes = Body()
        self.drawn_vars: set[str] = set()
        self.outputs_of: dict[str, list[str]] = {}   # node -> the vars other nodes read
        self.owned = owner_of(graph.program, block) is not None
        if self.owned:     # a body on its own: what it takes and gives, state aside
            takes, gives = interface(graph.program, block)
            self.feeds = {n for n in takes if not self._is_state(n)}
            self.gives = [n for n in gives if not self._is_state(n)]
        else:
            # feeds are drawn for methods (blocks with forward ops), not a server's blocks
            self.feeds = set(block.feeds) if any(d.group.kind in ("forward", "reader")
                                                 for d in plan) else set()
            self.gives = unique(returned_names(block.returns))

    def _is_state(self, name: str) -> bool:
        var = self.graph.var(self.block, name)
        return var is not None and var.persistable

    def var_node(self, name: str, holder: Body | None = None) -> str:
        node = self.graph.var_id(self.block, name)
        if name not in self.drawn_vars:
            self.drawn_vars.add(name)
            self.graph.draw_var(holder if holder is not None else self.var_nodes,
                                 self.block, name)
        return node

    def _touch(self, name: str, node: str) -> None:
        g = self.graph
        g.first_touch.setdefault(name, node)
        g.last_touch[name] = node

    def op(self, i: int, op: OpDesc) -> None:
        node, d = self.node_of[i], self.drawn_of[i]
        for n in unique(op.input_names()):
            self._touch(n, node)
            self._read(n, node, d)
        for n in unique(op.output_names()):
            self._touch(n, node)
            self.graph.first_write.setdefault(n, node)
            writer = node
            if d.node is None and d.group.kind != "optimize" \
                    and len(d.group.ops) > 1 and n not in self.feeds:
                # an expanded group draws its vars: op -> var -> readers (a var the block
                # takes is drawn where it comes in, and gets its edge back in `finish`)
                writer = self.var_node(n, self.inner_vars.setdefault(id(d), Body()))
                self.graph.edge(node, writer)
            self.writer[n] = writer
            self.kind_of[writer] = d.group.kind

    def _skips(self, name: str, src: str | None, d: Drawn) -> bool:
        """Reads a backward box draws no edge for: the folded backward pass is drawn from
        the loss only (`finish`); the box of a gradient op running a block takes the
        gradients flowing into it, not the forward values it reads as well; a layer's
        gradient (or a backward op drawn as itself) skips the forward values it reads
        when the drawing names them (`Drawing.forward`)."""
        g = d.group
        if g.kind != "backward":
            return False
        if d.node is None or (g.layer and not g.runs_block):
            return src is None and name in self.graph.forward
        if not g.runs_block:
            return True
        if src is None:
            return not self.owned or name in self.graph.forward
        return self.kind_of.get(src) != "backward"

    def _read(self, name: str, node: str, d: Drawn) -> None:
        src = self.writer.get(name)
        if self._skips(name, src, d):
            return
        if src is None:
            var = self.graph.var(self.block, name)
            if name in self.feeds or (self.feeds and var is not None and var.is_data):
                self.graph.edge(self.var_node(name), node)
            return
        if src == node:
            return
        if self.opt_first is not None and node in self.opt_members \
                and src not in self.opt_members:
            self.graph.edge(src, self.opt_first, [("lhead", "cluster_" + self.opt_cluster)])
            return
        self.graph.edge(src, node)
        self.outputs_of.setdefault(src, []).append(name)

    def finish(self) -> None:
        """The loss into the folded backward pass, and what the block gives: the returned
        vars, and for a body the vars around it that it writes (a var it took as well is
        carried: a dashed edge back to where it came in)."""
        for d in self.plan:
            if d.group.kind == "backward" and d.node is not None and not d.group.runs_block:
                for src in self.loss_nodes:
                    self.graph.edge(src, d.node)
        for n in self.gives:
            writer = self.writer.get(n)
            carried = n in self.drawn_vars and n in self.feeds
            vnode = self.var_node(n)
            if writer is None:
                continue
            if carried:
                self.graph.edge(writer, vnode, [
                    ("style", "dashed"), ("tooltip", f"{n}: carried to the next run")],
                    ranks=False)
            else:
                self.graph.edge(writer, vnode)
            self.outputs_of.setdefault(writer, []).append(n)
