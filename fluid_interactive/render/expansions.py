"""The drawings a box of the drawing by layer opens into.

* a layer's box, and the folded backward pass, open into their ops, drawn op by op
  (`opgraph`);
* a box running a block (a loop, a branch, a StaticRNN step, the gradient of one) opens
  into its body drawn by layer, as the method around it is (`grouped`): from what the
  body takes to what it gives, its layers as boxes that open in turn, a loop nested in it
  as a box of its own that opens into the inner body, level by level. A gradient block
  has nothing but gradient ops; each is drawn as itself, joined op to op.

Each drawing is keyed by the node id its box has (a body's box is ``sb<block index>`` in
every drawing), so a notebook opens the right one whichever drawing was clicked.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..ir.records import BlockDesc, ProgramDesc
from .grouped import GroupedGraph, GroupOptions
from .groups import Group
from .nesting import body_word
from .opgraph import OpOptions, ProgramGraph
from .parts import Legend, MethodRef, as_program, document, plural, select_blocks

__all__ = ["layer_drawings"]

Drawing = tuple[str, str, str]    # (node id of the box, label, DOT text)

# A body's carried vars add edges back up the drawing, routed round its side; straight
# segments and closer nodes keep an LSTM step's gradient block (23 ops) within 1,100 px.
_BODY_LAYOUT = [("nodesep", 0.2), ("splines", "polyline")]


def _ops_drawing(program: ProgramDesc, node: str, block: BlockDesc, group: Group) -> Drawing:
    """A layer, or the folded backward pass, op by op."""
    ops = [block.ops[i] for i in group.ops]
    touched = {n for op in ops for n in op.input_names() + op.output_names()}
    part = dataclasses.replace(
        block, ops=ops, vars={n: v for n, v in block.vars.items() if n in touched},
        feeds=[n for n in block.feeds if n in touched], returns=None)
    label = (f"{group.layer} ({group.call})" if group.call > 1 else group.layer) \
        if group.kind == "forward" else f"{block.name or 'block'}: backward pass"
    lg = Legend()
    drawing = ProgramGraph(program, [part], OpOptions(show_global=False), lg,
                           global_all=False)
    drawing.cluster_labels[block.idx] = f"{label}: {plural(len(ops), 'op')}"
    return node, label, document(label, drawing.body(), lg, compound=drawing.has_bodies)


def _body_drawing(program: ProgramDesc, node: str, block: BlockDesc, group: Group,
                  path: str, forward_only: bool) -> tuple[Drawing, GroupedGraph]:
    """The block a box runs, drawn by layer; ``path`` labels the boxes it lies in."""
    op = block.ops[group.ops[0]]
    assert group.sub_block is not None
    body = program.blocks[group.sub_block]
    label = f"{group.short} ({op.type}): {body_word(op)}"
    if path:
        label = f"{path} › {label}"
    lg = Legend()
    graph = GroupedGraph(program, [body], GroupOptions(forward_only, loose_backward=True), lg)
    return (node, label, document(label, graph.body(), lg, compound=True,
                                  graph=_BODY_LAYOUT)), graph


def layer_drawings(program: Any, methods: None | MethodRef | Sequence[MethodRef] = None,
                   *, forward_only: bool = False, stack_methods: bool = False,
                   limit: int = 40) -> list[Drawing]:
    """What each box of `program_to_dot` (same arguments) opens into: ``(node id, label,
    DOT text)`` for its forward layers and its folded backward pass (op by op) and for
    each box running a block (its body by layer), then for the boxes of those bodies,
    level by level; at most ``limit`` of them. A notebook shows them under the drawing
    and opens one when its box is clicked."""
    program = as_program(program)
    top = GroupedGraph(program, select_blocks(program, methods),
                       GroupOptions(forward_only, frozenset(), stack_methods), Legend())
    out: list[Drawing] = []
    pending: list[tuple[GroupedGraph, str]] = [(top, "")]
    while pending and len(out) < limit:
        graph, path = pending.pop(0)
        for node, block, group in graph.folded:
            if len(out) == limit:
                break
            if group.runs_block:
                drawing, body = _body_drawing(program, node, block, group, path,
                                              forward_only)
                out.append(drawing)
                pending.append((body, drawing[1]))
            elif group.kind in ("forward", "backward"):
                out.append(_ops_drawing(program, node, block, group))
    return out
