"""The variable explorer: pick a live program and one of its vars, see its statistics and a
histogram of its values.

    fluid.explore(prog)          # or %fluid explore prog

Built from core ipywidgets only (Dropdowns, a Button and an HTML pane holding an SVG), so it
renders in JupyterLab, Notebook 7, VS Code and in static HTML exports alike; no custom
browser code is needed. Without ipywidgets, `explore` returns the same content as a static
table.
"""
from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from fluid_interactive.runtime.live.compiled import CompiledProgram

from .live import named_live_programs
from .training import in_kernel
from .var_stats import format_bytes, histogram_svg, var_stats, vars_table

__all__ = ["explore", "Explorer", "stats_html"]


def stats_html(compiled: CompiledProgram, name: str) -> str:
    """The explorer pane for one var: a table of statistics and a histogram."""
    s = var_stats(compiled, name, keep_values=True)
    rows = [("kind", s.kind), ("shape", str(list(s.shape))), ("dtype", s.dtype),
            ("bytes", format_bytes(s.nbytes)), ("device", s.device)]
    if s.min is not None:
        rows += [("min", f"{s.min:.6g}"), ("max", f"{s.max:.6g}"), ("mean", f"{s.mean:.6g}"),
                 ("std", f"{s.std:.6g}")]
    if s.nonfinite:
        rows.append(("non-finite", str(s.nonfinite)))
    table = "".join(f'<tr><th style="text-align:left;padding-right:12px">{html.escape(k)}</th>'
                    f'<td style="font-family:monospace">{html.escape(v)}</td></tr>'
                    for k, v in rows)
    hist = histogram_svg(s.values) if s.values is not None else ""
    return (f'<div class="fluid-explorer-pane"><b>{html.escape(name)}</b>'
            f'<div style="display:flex;gap:16px;align-items:flex-start">'
            f"<table>{table}</table>{hist}</div></div>")


class Explorer:
    """The widget behind `explore`. ``widget`` is the ipywidgets box; ``select(name)``
    and ``refresh()`` drive it from code (tests use them)."""

    def __init__(self, programs: Sequence[tuple[str, CompiledProgram]],
                 var: str | None = None):
        import ipywidgets as w
        self._programs = dict(programs)
        labels = list(self._programs)
        self.program_picker = w.Dropdown(options=labels, value=labels[0] if labels else None,
                                         description="program")
        self.var_picker = w.Dropdown(options=[], description="var",
                                     layout=w.Layout(width="420px"))
        self.refresh_button = w.Button(description="refresh", icon="refresh",
                                       tooltip="read the values again (after training)")
        self.pane = w.HTML()
        self.widget = w.VBox([w.HBox([self.program_picker, self.var_picker,
                                      self.refresh_button]), self.pane])
        self.widget.add_class("fluid-explorer")
        self.program_picker.observe(self._on_program, names="value")
        self.var_picker.observe(lambda change: self.refresh(), names="value")
        self.refresh_button.on_click(lambda button: self.refresh())
        self._on_program(None)
        if var is not None:
            self.select(var)

    @property
    def program(self) -> CompiledProgram | None:
        return self._programs.get(self.program_picker.value)

    def _on_program(self, change: Any) -> None:
        prog = self.program
        names = prog.var_names() if prog is not None else []
        params = ([n for n in names if prog.program.global_block().vars[n].is_parameter]
                  if prog is not None else [])
        ordered = params + [n for n in names if n not in params]   # parameters first
        self.var_picker.options = ordered
        self.var_picker.value = ordered[0] if ordered else None
        self.refresh()

    def select(self, name: str) -> None:
        if name not in self.var_picker.options:
            raise KeyError(f"{name!r} is not a var of this program; it has: "
                           f"{', '.join(self.var_picker.options)}")
        self.var_picker.value = name
        self.refresh()

    def refresh(self) -> None:
        prog, name = self.program, self.var_picker.value
        if prog is None:
            self.pane.value = "<i>no live compiled programs</i>"
        elif name is None:
            self.pane.value = "<i>this program holds no persistable vars</i>"
        else:
            self.pane.value = stats_html(prog, name)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        return self.widget._repr_mimebundle_(include=include, exclude=exclude)


class _StaticExplorer:
    """What `explore` shows without ipywidgets: every var of each program, and the
    histogram of one."""

    def __init__(self, programs: Sequence[tuple[str, CompiledProgram]], var: str | None):
        self.programs, self.var = list(programs), var

    def _repr_html_(self) -> str:
        parts = []
        for label, prog in self.programs:
            parts.append(vars_table(prog, title=label)._repr_html_())
            if self.var is not None and self.var in prog.var_names():
                parts.append(stats_html(prog, self.var))
        return "".join(parts) or "<i>no live compiled programs</i>"

    def __repr__(self) -> str:
        return "\n\n".join(repr(vars_table(p, title=label)) for label, p in self.programs) \
            or "(no live compiled programs)"


def explore(program: CompiledProgram | None = None, var: str | None = None) -> Any:
    """A variable explorer for ``program`` (default: every live compiled program, to pick
    from). ``var`` preselects a variable."""
    if program is not None and not isinstance(program, CompiledProgram):
        raise TypeError(f"explore() takes a compiled program (the result of Compile() or "
                        f"fluid.load); got {type(program).__name__}")
    named = [(label, prog) for label, prog, _ in named_live_programs()]
    if program is not None:
        label = next((lb for lb, p in named if p is program and not lb.startswith("<")),
                     program.program.name or "program")   # a name it is bound to, if any
        programs = [(label, program)]
    else:
        programs = named
    if not in_kernel():
        return _StaticExplorer(programs, var)
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return _StaticExplorer(programs, var)
    return Explorer(programs, var)
