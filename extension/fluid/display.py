"""Pictures and tables of programs for notebooks; nothing here imports IPython.

`graph(obj)` returns a `Graph`: DOT text from `fluid_interactive.render`, drawn as SVG when
graphviz's ``dot`` is on the PATH. Jupyter shows it through ``_repr_mimebundle_``; a plain
script can call ``.svg`` or ``.save('net.svg')``. `Table` is a small display object with a
text and an HTML form, used by ``%fluid programs`` and ``%fluid vars``.

The mimebundle helpers at the bottom are what the extension registers as IPython
formatters for `CompiledProgram`, `CompiledMethod` and `ProgramDesc`.
"""
from __future__ import annotations

import html
from collections import OrderedDict
from typing import Any, Iterable, Optional, Sequence

from fluid_interactive.ir import ProgramDesc, format_program
from fluid_interactive.passes.transpiler import TranspilePlan
from fluid_interactive.render import (DotError, block_to_dot, dot_to_svg, has_dot, program_to_dot,
                                     split_to_dot)
from fluid_interactive.runtime.compiled import CompiledMethod, CompiledProgram

__all__ = ["Graph", "graph", "Table", "NO_DOT_HINT", "svg_for", "text_for", "owner_of",
           "plan_to_dot"]

#: The one line shown under a program's text when graphviz is missing.
NO_DOT_HINT = ("(install graphviz to see this as a graph: `apt install graphviz`, "
               "`brew install graphviz` or `conda install graphviz`)")

#: Above this many ops, a default drawing folds backward and optimizer ops into one node
#: each per block, so the picture stays readable.
AUTO_COLLAPSE_OPS = 60

_SVG_CACHE: "OrderedDict[str, Optional[str]]" = OrderedDict()
_SVG_CACHE_SIZE = 32


def owner_of(method: CompiledMethod) -> CompiledProgram:
    """The compiled program a compiled method belongs to."""
    owner = getattr(method, "owner", None) or getattr(method, "_owner", None)
    if owner is None:
        raise TypeError(f"cannot find the program of {method!r}")
    return owner


def _svg(dot: str) -> Optional[str]:
    """SVG for DOT text, cached by the text (drawing the same program twice costs one run
    of dot); None without graphviz."""
    if dot in _SVG_CACHE:
        _SVG_CACHE.move_to_end(dot)
        return _SVG_CACHE[dot]
    svg = dot_to_svg(dot)
    if svg is not None and "<svg" in svg:
        svg = svg[svg.index("<svg"):]   # inline SVG: no XML declaration, doctype or comment
    _SVG_CACHE[dot] = svg
    while len(_SVG_CACHE) > _SVG_CACHE_SIZE:
        _SVG_CACHE.popitem(last=False)
    return svg


class Graph:
    """A drawing of a program, a method's block, or a set of them.

    ``dot`` is the DOT text; ``svg`` lays it out with graphviz (None without ``dot``).
    In a notebook it displays as the SVG, with the DOT text as the plain-text form.
    """

    def __init__(self, dot: str, title: str = "", text: str = ""):
        self.dot = dot
        self.title = title
        self.text = text    # the canonical text form of what is drawn, shown without graphviz

    @property
    def svg(self) -> Optional[str]:
        return _svg(self.dot)

    def save(self, path: str) -> str:
        """Write ``.svg`` (needs graphviz) or ``.dot`` depending on the file name."""
        if path.endswith(".dot") or path.endswith(".gv"):
            data = self.dot
        else:
            data = self.svg
            if data is None:
                raise RuntimeError(f"cannot write {path}: graphviz's dot is not installed; "
                                   f"save as .dot instead, or install graphviz")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(data)
        return path

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        svg = None
        try:
            svg = self.svg
        except DotError:
            svg = None
        plain = self.text or self.dot
        if svg is None:
            return {"text/plain": plain.rstrip("\n") + "\n" + NO_DOT_HINT}
        return {"image/svg+xml": svg, "text/plain": f"<graph {self.title}>"}

    def __repr__(self) -> str:
        return f"<fluid.Graph {self.title!r}: {self.dot.count(' -> ')} edges>"


def _op_count(program: ProgramDesc, block_idxs: Iterable[int]) -> int:
    return sum(len(program.blocks[i].ops) for i in block_idxs)


def graph(obj: Any, methods: Any = None, *, forward_only: bool = False,
          collapse_grads: Optional[bool] = None, show_global: bool = True,
          legend: bool = True) -> Graph:
    """Draw a compiled program, one of its methods (``prog.train_step``), a
    `ProgramDesc`, or a transpile plan (trainers and pservers side by side).

    ``methods`` picks method blocks of a program by name; ``forward_only`` leaves out the
    backward and optimizer ops; ``collapse_grads`` folds them into one node per block
    (default: only when the drawing would hold more than 60 ops).
    """
    if isinstance(obj, CompiledMethod):
        owner = owner_of(obj)
        program, block = owner.program, obj.block
        if collapse_grads is None:
            collapse_grads = len(block.ops) > AUTO_COLLAPSE_OPS
        dot = block_to_dot(program, block.idx, forward_only=forward_only,
                           collapse_grads=collapse_grads, show_global=show_global,
                           legend=legend)
        return Graph(dot, f"{program.name}.{block.name}", obj.text)
    if isinstance(obj, TranspilePlan):
        return Graph(plan_to_dot(obj, forward_only=forward_only,
                                 collapse_grads=bool(collapse_grads), legend=legend),
                     "distributed plan", obj.text())
    if isinstance(obj, CompiledProgram):
        program = obj.program
    elif isinstance(obj, ProgramDesc):
        program = obj
    else:
        raise TypeError(f"fluid.graph draws a compiled program, a compiled method, a "
                        f"ProgramDesc or a transpile plan; got {type(obj).__name__}")
    if collapse_grads is None:
        if methods is None:
            idxs = range(len(program.blocks))
        else:
            names = [methods] if isinstance(methods, (str, int)) else list(methods)
            idxs = [program.block(m).idx for m in names]
        collapse_grads = _op_count(program, idxs) > AUTO_COLLAPSE_OPS
    dot = program_to_dot(program, methods, forward_only=forward_only,
                         collapse_grads=collapse_grads, show_global=show_global, legend=legend)
    return Graph(dot, program.name or "program", format_program(program))


def plan_to_dot(plan: TranspilePlan, trainer_id: int = 0, **options: Any) -> str:
    """DOT text of a transpile plan: trainer ``trainer_id`` beside every parameter server,
    with an edge per send and receive (``options`` go to `split_to_dot`)."""
    programs = {f"trainer {trainer_id}": plan.trainer_program(trainer_id)}
    for ep in plan.endpoints:
        programs[f"pserver {ep}"] = plan.pserver_program(ep)
    return split_to_dot(programs, plan.edges(trainer_id), title=f"{plan.mode} transpile",
                        **options)


# --- formatters the extension registers ----------------------------------------------------

def svg_for(obj: Any) -> Optional[str]:
    """The SVG drawing of a program-like object, or None (no graphviz, or dot failed)."""
    try:
        return graph(obj).svg
    except DotError:
        return None


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


# --- tables --------------------------------------------------------------------------------

class Table:
    """Rows under a header; prints as aligned text and displays as an HTML table."""

    def __init__(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "",
                 align: str = ""):
        self.columns = list(columns)
        self.rows = [["" if v is None else str(v) for v in row] for row in rows]
        self.title = title
        # one letter per column: 'l' or 'r' (default: left for the first, right for numbers)
        self.align = align or "".join(
            "l" if i == 0 or not all(_numeric(r[i]) for r in self.rows if r[i]) else "r"
            for i in range(len(self.columns)))

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list[str]:
        i = self.columns.index(name)
        return [r[i] for r in self.rows]

    def __repr__(self) -> str:
        widths = [max([len(c)] + [len(r[i]) for r in self.rows])
                  for i, c in enumerate(self.columns)]

        def line(cells: Sequence[str]) -> str:
            return "  ".join(c.rjust(w) if a == "r" else c.ljust(w)
                             for c, w, a in zip(cells, widths, self.align)).rstrip()

        out = [self.title] if self.title else []
        out.append(line(self.columns))
        out.append("  ".join("-" * w for w in widths))
        out += [line(r) for r in self.rows]
        if not self.rows:
            out.append("(none)")
        return "\n".join(out)

    def _repr_html_(self) -> str:
        style = "text-align:{};padding:2px 8px;font-family:monospace"
        head = "".join(f'<th style="{style.format("left" if a == "l" else "right")}">'
                       f"{html.escape(c)}</th>" for c, a in zip(self.columns, self.align))
        body = "".join(
            "<tr>" + "".join(f'<td style="{style.format("left" if a == "l" else "right")}">'
                             f"{html.escape(v)}</td>" for v, a in zip(r, self.align)) + "</tr>"
            for r in self.rows)
        caption = (f'<caption style="text-align:left;font-weight:bold">'
                   f"{html.escape(self.title)}</caption>") if self.title else ""
        empty = "" if self.rows else f'<tr><td colspan="{len(self.columns)}">(none)</td></tr>'
        return (f'<table class="fluid-table">{caption}<thead><tr>{head}</tr></thead>'
                f"<tbody>{body}{empty}</tbody></table>")


def _numeric(text: str) -> bool:
    text = text.replace(",", "").replace(" ", "")
    for unit in ("KiB", "MiB", "GiB", "B"):
        if text.endswith(unit):
            text = text[:-len(unit)]
            break
    try:
        float(text)
        return True
    except ValueError:
        return text in ("-", "nan", "inf", "-inf")
