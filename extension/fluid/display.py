"""Pictures and tables of programs for notebooks; nothing here imports IPython.

`graph(obj)` returns a `Graph`: DOT text from `fluid_interactive.render`, drawn as SVG when
graphviz's ``dot`` is on the PATH. Jupyter shows it through ``_repr_mimebundle_`` as HTML
(see `graph_html`): the title, the drawing fitted to the width of the cell, zoom buttons
and, underneath, what its boxes open into: the layers drawn op by op, and the body of each
loop or branch (drawn by layer, its own loops opening in turn); a plain script can call
``.svg`` or
``.save('net.svg')``. When ``dot`` fails, the cell says why and how to fix it. `Table` is a
small display object with a text and an HTML form, used by ``%fluid programs``, ``%fluid
vars`` and ``prog.summary()``.

The helpers at the bottom are what the extension registers as IPython formatters for
`CompiledProgram`, `CompiledMethod` and `ProgramDesc`.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from fluid_interactive.ir import ProgramDesc, format_program
from fluid_interactive.ir.blocks import sub_block_index
from fluid_interactive.passes.transpiler import TranspilePlan
from fluid_interactive.render import (
    DETAILS,
    DotError,
    block_to_dot,
    dot_to_svg,
    dots_to_svgs,
    has_dot,
    layer_drawings,
    program_to_dot,
    split_to_dot,
)
from fluid_interactive.render.svg import DEFAULT_TIMEOUT
from fluid_interactive.runtime.live.compiled import CompiledMethod, CompiledProgram
from fluid_interactive.util.table import Table

from .graph_html import error_html, graph_html, svg_size

__all__ = ["Graph", "graph", "Table", "NO_DOT_HINT", "svg_for", "html_for", "text_for",
           "owner_of", "plan_to_dot", "WIDTH_BUDGET_PX"]

#: The one line shown under a program's text when graphviz is missing.
NO_DOT_HINT = ("(install graphviz to see this as a graph: `apt install graphviz`, "
               "`brew install graphviz` or `conda install graphviz`)")

#: Above this many ops, an op-level drawing (detail='ops') folds backward and optimizer ops
#: into one node each per block, so the picture stays readable.
AUTO_COLLAPSE_OPS = 60

#: A drawing whose methods side by side are wider than this (in CSS pixels at 100%) is
#: drawn with its methods one under the other instead, when that is narrower. Fitted to
#: JupyterLab's output area at a 1280 px window (about 850 px with the file browser open),
#: a drawing this wide keeps its 13 px labels at least 10 px tall.
WIDTH_BUDGET_PX = 1100

_SVG_CACHE: OrderedDict[str, str | None] = OrderedDict()
_SVG_CACHE_SIZE = 32


def owner_of(method: CompiledMethod) -> CompiledProgram:
    """The compiled program a compiled method belongs to."""
    owner = getattr(method, "owner", None) or getattr(method, "_owner", None)
    if owner is None:
        raise TypeError(f"cannot find the program of {method!r}")
    return owner


def _inline(svg: str | None) -> str | None:
    if svg is not None and "<svg" in svg:
        svg = svg[svg.index("<svg"):]   # inline SVG: no XML declaration, doctype or comment
    return svg


def _svg(dot: str, timeout: float | None = DEFAULT_TIMEOUT) -> str | None:
    """SVG for DOT text, cached by the text (drawing the same program twice costs one run
    of dot); None without graphviz. A `DotError` is not cached: the next try runs dot
    again."""
    if dot in _SVG_CACHE:
        _SVG_CACHE.move_to_end(dot)
        return _SVG_CACHE[dot]
    svg = _inline(dot_to_svg(dot, timeout))
    _SVG_CACHE[dot] = svg
    while len(_SVG_CACHE) > _SVG_CACHE_SIZE:
        _SVG_CACHE.popitem(last=False)
    return svg


class Graph:
    """A drawing of a program, a method's block, or a set of them.

    ``dot`` is the DOT text; ``svg`` lays it out with graphviz (None without ``dot``).
    ``title`` heads the drawing in a notebook; ``text`` (the canonical text form) is
    shown when there is no graphviz. ``narrow`` is a second DOT text with the methods
    stacked, drawn instead when ``dot`` comes out wider than `WIDTH_BUDGET_PX` and it is
    narrower (``dot`` then becomes it). ``layers`` are ``(node id, label, DOT)`` drawings
    of what the boxes open into (single layers, the bodies of loops), shown under the
    drawing, headed ``layers_title``. ``timeout`` limits each run of ``dot`` (None:
    `render.svg.DEFAULT_TIMEOUT`).
    """

    def __init__(self, dot: str, title: str = "", text: str = "", *,
                 narrow: str | None = None,
                 layers: Sequence[tuple[str, str, str]] = (),
                 timeout: float | None = None, layers_title: str = "the layers op by op"):
        self.dot = dot
        self.title = title
        self.text = text    # the canonical text form of what is drawn, shown without graphviz
        self.narrow = narrow
        self.layers = list(layers)
        self.layers_title = layers_title
        self.timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        self._layers_svg: list[str] | None = None

    @property
    def svg(self) -> str | None:
        """The SVG drawing (None without graphviz); raises `DotError` when dot fails."""
        svg = _svg(self.dot, self.timeout)
        if svg is not None and self.narrow is not None and self.narrow != self.dot:
            narrow, self.narrow = self.narrow, None
            if svg_size(svg)[0] > WIDTH_BUDGET_PX:
                stacked = _svg(narrow, self.timeout)
                if stacked is not None and svg_size(stacked)[0] < svg_size(svg)[0]:
                    self.dot, svg = narrow, stacked
        return svg

    def layer_svgs(self) -> list[tuple[str, str, str]]:
        """``(node id, label, SVG)`` for each layer drawing (one run of dot for all)."""
        if not self.layers:
            return []
        if self._layers_svg is None:
            svgs = dots_to_svgs([d for _, _, d in self.layers], self.timeout)
            self._layers_svg = [_inline(s) or "" for s in svgs or []]
        return [(node, label, svg) for (node, label, _), svg
                in zip(self.layers, self._layers_svg)]

    def save(self, path: str) -> str:
        """Write ``.svg`` (needs graphviz) or ``.dot`` depending on the file name."""
        if path.endswith(".dot") or path.endswith(".gv"):
            if has_dot():
                try:
                    _ = self.svg     # settles which layout (side by side or stacked) is drawn
                except DotError:
                    pass
            data = self.dot
        else:
            svg = self.svg
            if svg is None:
                raise RuntimeError(f"cannot write {path}: graphviz's dot is not installed; "
                                   f"save as .dot instead, or install graphviz")
            data = svg
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(data)
        return path

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        plain = (self.text or self.dot).rstrip("\n")
        try:
            svg = self.svg
            layers = self.layer_svgs() if svg is not None else []
        except DotError as exc:
            head = f"{self.title}: " if self.title else ""
            return {"text/html": error_html(self.title, exc.reason, exc.fix, plain),
                    "text/plain": f"{head}the graph could not be drawn: {exc.reason}\n"
                                  f"{exc.fix}\n\n{plain}"}
        if svg is None:
            return {"text/plain": plain + "\n" + NO_DOT_HINT}
        return {"text/html": graph_html(svg, self.title, layers, self.layers_title),
                "image/svg+xml": svg,
                "text/plain": f"<graph {self.title}>"}

    def _repr_html_(self) -> str | None:
        return self._repr_mimebundle_().get("text/html")

    def __repr__(self) -> str:
        return f"<fluid.Graph {self.title!r}: {self.dot.count(' -> ')} edges>"


def _op_count(program: ProgramDesc, block_idxs: Iterable[int]) -> int:
    return sum(len(program.blocks[i].ops) for i in block_idxs)


Draw = Callable[..., str]


def _variants(draw: Callable[[bool], str], layered: bool, stack: bool | None
              ) -> tuple[str, str | None]:
    """(the DOT to draw, the stacked DOT to draw instead when it is too wide or None): by
    layer, the methods side by side unless ``stack`` says otherwise."""
    if not layered:
        return draw(False), None
    if stack is not None:
        return draw(stack), None
    return draw(False), draw(True)


def _subject(obj: Any, methods: Any) -> tuple[ProgramDesc, Any, str, str, Draw]:
    """(program, blocks to draw, title, text form, DOT function) of a compiled method, a
    compiled program or a ProgramDesc."""
    if isinstance(obj, CompiledMethod):
        program, block = owner_of(obj).program, obj.block

        def draw_block(**kw: Any) -> str:
            return block_to_dot(program, block.idx, **kw)

        return program, [block.idx], f"{program.name}.{block.name}", obj.text, draw_block
    if isinstance(obj, (CompiledProgram, ProgramDesc)):
        desc = obj.program if isinstance(obj, CompiledProgram) else obj

        def draw_program(**kw: Any) -> str:
            return program_to_dot(desc, methods, **kw)

        return desc, methods, desc.name or "program", format_program(desc), draw_program
    raise TypeError(f"fluid.graph draws a compiled program, a compiled method, a "
                    f"ProgramDesc or a transpile plan; got {type(obj).__name__}")


def _needs_collapse(program: ProgramDesc, blocks: Any) -> bool:
    """Whether an op-level drawing of ``blocks`` (None: all) holds too many ops to read
    without folding the backward and optimizer ops."""
    idxs = range(len(program.blocks)) if blocks is None else [
        program.block(m).idx for m in ([blocks] if isinstance(blocks, (str, int)) else blocks)]
    return _op_count(program, idxs) > AUTO_COLLAPSE_OPS


def graph(obj: Any, methods: Any = None, *, detail: str = "layers",
          expand: None | str | Iterable[str] = None, forward_only: bool = False,
          collapse_grads: bool | None = None, show_global: bool = True,
          stack: bool | None = None, legend: bool = True, trainer: int = 0,
          timeout: float | None = None) -> Graph:
    """Draw a compiled program, one of its methods (``prog.train_step``), a
    `ProgramDesc`, or a transpile plan (trainer ``trainer`` with the parameter servers
    stacked under it).

    By default every layer is one box (``detail='layers'``): its parameters and output
    type inside, the layers of a ``var_scope`` in a box named after the scope, the whole
    backward pass folded into one node and the optimizer as one box per parameter.
    ``expand`` draws some of them op by op (``'mlp/fc_1'``, a whole scope ``'mlp'``,
    ``'backward'``, ``'optimize'``); ``detail='ops'`` draws every op and var.

    ``methods`` picks method blocks of a program by name; ``forward_only`` leaves out the
    backward and optimizer ops; ``stack`` puts the methods one under the other (default:
    only when side by side would be too wide to read in a notebook cell). With
    ``detail='ops'``, ``collapse_grads`` folds backward and optimizer ops into one node per
    block (default: only when the drawing would hold more than 60 ops) and
    ``show_global`` draws block 0 with its initialisers. ``timeout`` (seconds) limits
    graphviz.
    """
    if detail not in DETAILS:
        raise ValueError(f"detail must be 'layers' or 'ops'; got {detail!r}")
    layered = detail == "layers"
    options: dict[str, Any] = {"forward_only": forward_only, "show_global": show_global,
                               "legend": legend, "detail": detail, "expand": expand}
    if isinstance(obj, TranspilePlan):
        title = f"{obj.mode} transpile: trainer {trainer} and {len(obj.endpoints)} " \
                f"parameter servers"
        wide, narrow = _variants(lambda s: plan_to_dot(
            obj, trainer, **options, collapse_grads=bool(collapse_grads), stack_methods=s,
            title=title), layered, stack)
        return Graph(wide, "distributed plan", obj.text(), narrow=narrow, timeout=timeout)
    program, blocks, title, text, draw = _subject(obj, methods)
    if collapse_grads is None and not layered:
        collapse_grads = _needs_collapse(program, blocks)
    wide, narrow = _variants(lambda s: draw(**options, collapse_grads=bool(collapse_grads),
                                            stack_methods=s), layered, stack)
    layers = layer_drawings(program, blocks, forward_only=forward_only) if layered else []
    heading = ("the layers op by op and the bodies of loops and branches"
               if _has_bodies(program) else "the layers op by op")
    return Graph(wide, title, text, narrow=narrow, layers=layers, timeout=timeout,
                 layers_title=heading)


def _has_bodies(program: ProgramDesc) -> bool:
    """Whether an op of ``program`` runs a block (a loop, a branch)."""
    return any(sub_block_index(op) is not None for b in program.blocks for op in b.ops)


def plan_to_dot(plan: TranspilePlan, trainer_id: int = 0, **options: Any) -> str:
    """DOT text of a transpile plan: trainer ``trainer_id`` with every parameter server
    stacked under it, and the sends and receives between them (``options`` go to
    `split_to_dot`)."""
    programs = {f"trainer {trainer_id}": plan.trainer_program(trainer_id)}
    for ep in plan.endpoints:
        programs[f"pserver {ep}"] = plan.pserver_program(ep)
    options.setdefault("title", f"{plan.mode} transpile")
    return split_to_dot(programs, plan.edges(trainer_id), **options)


# --- formatters the extension registers ----------------------------------------------------

def svg_for(obj: Any) -> str | None:
    """The SVG drawing of a program-like object, or None (no graphviz, or dot failed)."""
    try:
        return graph(obj).svg
    except DotError:
        return None


def html_for(obj: Any) -> str | None:
    """The notebook view of a program-like object (fitted drawing, zoom, layers), or the
    error that kept graphviz from drawing it; None without graphviz."""
    return graph(obj)._repr_mimebundle_().get("text/html")


def text_for(obj: Any) -> str:
    """The canonical text form of a program-like object, plus the graphviz hint when the
    graph cannot be drawn."""
    if isinstance(obj, CompiledProgram):
        text = repr(obj) + "\n" + format_program(obj.program)
    elif isinstance(obj, ProgramDesc):
        text = format_program(obj)
    else:
        text = repr(obj)
    text = text.rstrip("\n")
    if not has_dot():
        text += "\n" + NO_DOT_HINT
    return text
