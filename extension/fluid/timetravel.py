"""What a redefinition changes, and undo: the notebook side of `fluid.diff`,
`CompiledProgram.history` and `CompiledProgram.rewind`.

`DiffView` shows a `ProgramDiff` as text and as a drawing, by layer unless the diff was
asked for by op (`render.diff_dot`): clicking a changed layer's box opens it op by op, and
the text of every op that differs is one click away; `history_table` lists what a program
can rewind to; `pick_program` finds the program ``%fluid history`` / ``%fluid rewind`` mean
when none is named.
Nothing here imports IPython.
"""
from __future__ import annotations

import html
from typing import Any

from fluid_interactive.ir.diff import ProgramDiff
from fluid_interactive.render.diff_dot import diff_layer_drawings, diff_to_dot
from fluid_interactive.runtime.live.compiled import CompiledProgram
from fluid_interactive.util.table import Table

from .display import Graph
from .var_stats import format_bytes

__all__ = ["DiffView", "diff_html", "history_table", "programs_with_history", "pick_program"]


class DiffView:
    """A `ProgramDiff` for display: its text, and its drawing (a `Graph`, fitted to the
    cell like every drawing, each changed layer's box opening that layer op by op) when
    graphviz is there."""

    def __init__(self, diff: ProgramDiff, title: str = ""):
        self.diff = diff
        self.title = title
        by_layer = diff.detail == "layers"
        self.graph = Graph(diff_to_dot(diff), title or f"{diff.old_label} → {diff.new_label}",
                           diff.text(), layers=diff_layer_drawings(diff) if by_layer else ())

    @property
    def dot(self) -> str:
        return self.graph.dot

    @property
    def svg(self) -> str | None:
        return self.graph.svg

    def text(self) -> str:
        return (self.title + "\n" if self.title else "") + self.diff.text()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        return {"text/plain": self.text(), "text/html": self._repr_html_()}

    def _repr_html_(self) -> str:
        return diff_html(self.diff, self.title, self.graph._repr_html_())

    def __repr__(self) -> str:
        return self.text()


def diff_html(diff: ProgramDiff, title: str = "", drawing: str | None = None) -> str:
    """The diff's text (escaped) in a ``<pre>``, the drawing's HTML under it, and, for a
    diff by layer, every op that differs in a ``<details>`` (open on a click, with or
    without JavaScript)."""
    heading = f"<b>{html.escape(title)}</b>" if title else ""
    ops = ""
    if diff.detail == "layers" and any(b.ops or b.signature for b in diff.blocks):
        count = sum(len(b.ops) for b in diff.blocks)
        ops = (f'<details class="fluid-diff-ops" style="font:13px/1.5 sans-serif">'
               f"<summary>op by op ({count} op{'s' if count != 1 else ''} differ)</summary>"
               f'<pre style="font-size:11px">{html.escape(diff.text(detail="ops"))}</pre>'
               f"</details>")
    return (f'<div class="fluid-diff">{heading}<pre style="font-size:11px">'
            f"{html.escape(diff.text())}</pre>{drawing or ''}{ops}</div>")


def history_table(label: str, compiled: CompiledProgram, rows: int = 20) -> Table:
    """The newest ``rows`` changes ``compiled`` can rewind (all with ``rows=0``): ``n`` is
    what ``%fluid rewind n`` takes to undo that change and everything after it."""
    history = compiled.history
    changes = history.changes()
    shown = changes[:rows] if rows else changes
    table = []
    for n, change in enumerate(shown, start=1):
        loss = "-" if change.loss is None else f"{change.loss:.6g}"
        table.append([str(n), str(change.number), change.label, loss,
                      format_bytes(change.nbytes)])
    state = "on" if history.enabled else "off"
    title = (f"{label}: history {state}, {len(changes)} change(s) held in "
             f"{format_bytes(history.nbytes)} of {format_bytes(history.memory)} "
             f"(at most {history.calls} changes)")
    if history.forgotten:
        title += f"; {history.forgotten} older change(s) forgotten"
    if len(shown) < len(changes):
        title += (f"; the newest {len(shown)} shown (%fluid history {label.split(',')[0]} "
                  f"--all lists every one)")
    return Table(["n", "change", "what", "loss", "held"], table, title=title, align="rrlrr")


def programs_with_history(named: list[tuple[str, CompiledProgram, str]]
                          ) -> list[tuple[str, CompiledProgram]]:
    """(label, program) of the live programs whose history holds something."""
    return [(label, p) for label, p, _ in named if p.history.enabled and len(p.history)]


def pick_program(named: list[tuple[str, CompiledProgram, str]], what: str
                 ) -> tuple[str, CompiledProgram]:
    """The one program ``%fluid {what}`` means when none is named; a ValueError saying
    what to type when there is none or several."""
    candidates = programs_with_history(named)
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise ValueError(f"%fluid {what}: no live program has a history to rewind (history "
                         f"is on for programs compiled after %load_ext fluid; turn it on "
                         f"with prog.keep_history())")
    names = ", ".join(label for label, _ in candidates)
    raise ValueError(f"%fluid {what}: several programs have a history ({names}); name "
                     f"one, e.g. %fluid {what} {candidates[0][0].split(',')[0]}")
