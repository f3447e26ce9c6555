"""DOT text for programs, blocks and sets of programs (the trainer/pserver split).

Everything here is pure Python over the `ir` records, so the text is testable without the
graphviz binary, and deterministic: the same program gives byte-identical text (every
collection is walked in the program's own order; nothing depends on ids, hashes, the time
or absolute paths; tooltips carry the *basename* of the user's file).

The op-level drawing is `opgraph.ProgramGraph`, the drawing by layer
`grouped.GroupedGraph`; the drawings a box opens into are in `expansions`.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..ir.records import BlockDesc, ProgramDesc
from . import style as S
from .builder import Body, quote
from .grouped import GroupedGraph, GroupOptions
from .opgraph import OpOptions, ProgramGraph
from .parts import Legend, MethodRef, stack_edges
from .parts import as_program as _as_program
from .parts import document as _document
from .parts import plural as _plural
from .parts import select_blocks as _select_blocks
from .parts import unique as _unique

__all__ = ["program_to_dot", "block_to_dot", "split_to_dot", "quote", "DETAILS"]


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
    lg = Legend()
    opts = OpOptions(forward_only, collapse_grads, show_global)
    graph = ProgramGraph(program, blocks, opts, lg,
                         global_all=methods is None and not forward_only)
    return _document(program.name, graph.body(), lg if legend else None,
                     compound=graph.has_bodies)


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
    opts = OpOptions(forward_only, collapse_grads, True)
    lg = Legend()
    graph = ProgramGraph(program, [], opts, lg, global_all=True)
    return _document(program.name, graph.body(), lg if legend else None)


def _grouped_document(program: ProgramDesc, blocks: list[BlockDesc], forward_only: bool,
                      expand: None | str | Iterable[str], legend: bool,
                      stack_methods: bool) -> str:
    lg = Legend()
    graph = GroupedGraph(program, blocks,
                         GroupOptions(forward_only, _expand_set(expand), stack_methods), lg)
    return _document(program.name, graph.body(), lg if legend else None, compound=True)


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
    lg = Legend()
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
            graphs[name] = ProgramGraph(prog, _select_blocks(prog, None),
                                         OpOptions(forward_only, collapse_grads, show_global),
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
    compound = detail == "layers" or any(g.has_bodies for g in graphs.values())
    return _document(title, body, lg if legend else None, compound=compound)


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


def _op_cross_edges(graphs: Mapping[str, ProgramGraph], edges: Sequence[CrossEdge]
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
