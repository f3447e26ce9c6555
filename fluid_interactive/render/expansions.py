"""The drawings a box of the drawing by layer opens into.

* a layer's box opens into its ops, drawn op by op (`opgraph`);
* the folded backward pass opens into the gradient of each layer, one box per layer
  (`groups.gradient_layer`; a layer whose gradient is one op is that op), joined by the
  gradients they pass; each box opens op by op in turn. Drawn op by op, a model's whole
  backward pass is as wide as its parallel chains (an LSTM's: 2,643 px, labels shrunk to
  4 px in a notebook); by layer it reads at full size;
* a box running a block (a loop, a branch, a StaticRNN step, the gradient of one) opens
  into its body drawn by layer, as the method around it is (`grouped`): from what the
  body takes to what it gives, its layers as boxes that open in turn, a loop nested in it
  as a box of its own that opens into the inner body, level by level. A gradient block
  holds nothing but gradient ops: it is drawn by layer as the backward pass is, from the
  gradients it takes (the values the forward loop kept for it are not drawn) to those it
  gives.

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
# A layer's ops, and a layer's gradient op by op, sit closer than a method's too: their
# vars are narrow records (name over type), and their parameters free nodes at the sides.
_OPS_LAYOUT = [("nodesep", 0.15)]


def _part(block: BlockDesc, group: Group) -> BlockDesc:
    """``block`` with the ops of ``group`` only, and the vars they touch."""
    ops = [block.ops[i] for i in group.ops]
    touched = {n for op in ops for n in op.input_names() + op.output_names()}
    return dataclasses.replace(
        block, ops=ops, vars={n: v for n, v in block.vars.items() if n in touched},
        feeds=[n for n in block.feeds if n in touched], returns=None)


def _ops_label(block: BlockDesc, group: Group, path: str = "") -> str:
    """``fc_0``, ``train_step: backward pass``, ``train_step: fc_0 gradient``; in a
    gradient block, what the block's own drawing is labelled, then ``› fc_0 gradient``."""
    if group.kind == "forward":
        return f"{group.layer} ({group.call})" if group.call > 1 else group.layer
    where = f"{path} ›" if path else f"{block.name or 'block'}:"
    if group.layer:
        run = f" ({group.call})" if group.call > 1 else ""
        return f"{where} {group.layer} gradient{run}"
    return f"{where} backward pass"


def _ops_drawing(program: ProgramDesc, node: str, block: BlockDesc, group: Group,
                 path: str = "") -> Drawing:
    """A layer, or a layer's gradient, op by op."""
    part = _part(block, group)
    ops = part.ops
    label = _ops_label(block, group, path)
    lg = Legend()
    drawing = ProgramGraph(program, [part],
                           OpOptions(show_global=False, compact_layer=group.layer), lg,
                           global_all=False)
    drawing.cluster_labels[block.idx] = f"{label}: {plural(len(ops), 'op')}"
    return node, label, document(label, drawing.body(), lg, compound=drawing.has_bodies,
                                 graph=_OPS_LAYOUT)


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
    graph = GroupedGraph(program, [body], GroupOptions(forward_only, backward_layers=True), lg)
    return (node, label, document(label, graph.body(), lg, compound=True,
                                  graph=_BODY_LAYOUT)), graph


def _backward_drawing(program: ProgramDesc, node: str, block: BlockDesc, group: Group
                      ) -> tuple[Drawing, GroupedGraph]:
    """The folded backward pass, by the layer each of its ops differentiates."""
    label = _ops_label(block, group)
    lg = Legend()
    graph = GroupedGraph(program, [_part(block, group)],
                         GroupOptions(backward_layers=True), lg, box_prefix=f"{node}/")
    graph.cluster_labels[block.idx] = f"{label}: {plural(len(group.ops), 'op')}"
    return (node, label, document(label, graph.body(), lg, compound=True,
                                  graph=_BODY_LAYOUT)), graph


def layer_drawings(program: Any, methods: None | MethodRef | Sequence[MethodRef] = None,
                   *, forward_only: bool = False, stack_methods: bool = False,
                   limit: int = 40) -> list[Drawing]:
    """What each box of `program_to_dot` (same arguments) opens into: ``(node id, label,
    DOT text)`` for its forward layers (op by op), its folded backward pass (the gradient
    of each layer) and each box running a block (its body by layer), then for the boxes
    of those drawings, level by level; at most ``limit`` of them. A notebook shows them
    under the drawing and opens one when its box is clicked."""
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
            elif group.kind == "backward" and not group.layer:
                drawing, body = _backward_drawing(program, node, block, group)
                out.append(drawing)
                pending.append((body, path))
            elif group.kind in ("forward", "backward"):
                out.append(_ops_drawing(program, node, block, group, path))
    return out
