"""``%load_ext fluid``: what loading and unloading the extension does to an IPython shell.

Loading
  * puts ``fluid`` into the user namespace;
  * registers the ``%fluid`` line magic and the ``%%fluid`` cell magic (`fluid.magics`);
  * registers display formatters: a `CompiledProgram`, a `CompiledMethod` and a
    `ProgramDesc` show as a graph when graphviz's ``dot`` exists (HTML: the drawing fitted
    to the cell with zoom buttons; SVG for front ends without HTML); their text/plain
    form stays the canonical text (with a one-line hint when the graph cannot be drawn);
  * a `ProgramDiff` (`fluid.diff`) shows as its text and a drawing of what changed;
  * listens for `fluid.Program` class statements (`frontend.program.on_class_defined`):
    a class defined anew recompiles the live programs of the earlier class right there,
    so the rest of the cell runs the new program; the report, and the diff when the
    program changed, are shown (`fluid.live`, `fluid.timetravel`);
  * turns on the history that ``%fluid rewind`` and ``prog.rewind(n)`` use, for programs
    compiled from then on (`fluid_interactive.history_defaults`);
  * installs a traceback filter: an error raised through fluid's own frames is shown
    without them, ending at the user's line (``%fluid traceback full`` shows everything);
  * names cells as IPython does wherever fluid prints a location (the text form, graph
    tooltips, error messages): ``Cell In[14], line 12`` instead of the cell's temporary
    file ``/tmp/ipykernel_4242/675052645.py:12``.

Unloading undoes each of these, and loading twice does nothing the second time, so
``%reload_ext fluid`` always leaves exactly one set. The state lives on the shell object
(``shell._fluid_extension``), not in this module, so a reloaded module finds it.
"""
from __future__ import annotations

import gc
import os
import sys
import types
from typing import Any

from fluid_interactive.errors import FluidError
from fluid_interactive.frontend.program import on_class_defined
from fluid_interactive.ir import ProgramDesc
from fluid_interactive.ir.diff import ProgramDiff
from fluid_interactive.ir.source import add_file_labeller, is_internal, remove_file_labeller
from fluid_interactive.runtime.live.compiled import CompiledMethod, CompiledProgram
from fluid_interactive.runtime.live.history import history_defaults

from . import display, live, timetravel

__all__ = ["load_ipython_extension", "unload_ipython_extension", "FluidExtension",
           "strip_internal_frames"]

_STATE_ATTR = "_fluid_extension"
_DISPLAY_TYPES = (CompiledProgram, CompiledMethod, ProgramDesc)


# --- tracebacks ---------------------------------------------------------------------------------

def _frame_is_internal(frame: types.FrameType) -> bool:
    name = frame.f_code.co_filename
    if name.startswith("<fluid:"):          # generated entry points and plans
        return True
    if name.startswith("<"):
        return False
    return is_internal(os.path.abspath(name))


def strip_internal_frames(tb: types.TracebackType | None, force: bool = False
                          ) -> types.TracebackType | None:
    """The traceback without fluid's own frames (IPython's are kept: its display drops
    them anyway).

    Frames are removed when the innermost frame is the user's (an error in the user's
    network method, reached through Compile), or when ``force`` (a `FluidError`, whose
    message already names the user's line). An unexpected error inside fluid keeps every
    frame, so a bug in fluid can still be found.
    """
    frames = []
    t = tb
    while t is not None:
        frames.append(t)
        t = t.tb_next
    if not frames:
        return tb
    internal = [_frame_is_internal(t.tb_frame) for t in frames]
    if not any(internal) or (internal[-1] and not force):
        return tb
    kept = [t for t, inner in zip(frames, internal) if not inner]
    if not kept:
        return tb
    new_tb = None
    for t in reversed(kept):
        new_tb = types.TracebackType(new_tb, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return new_tb


def _custom_exc(shell: Any, etype: type, value: BaseException, tb: Any,
                tb_offset: int | None = None) -> None:
    """IPython's custom exception handler: show the traceback without fluid's frames."""
    state = getattr(shell, _STATE_ATTR, None)
    if issubclass(etype, SyntaxError):
        shell.showsyntaxerror()
        return None
    if state is not None and state.full_tracebacks:
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        return None
    stripped = strip_internal_frames(tb, force=issubclass(etype, FluidError))
    if stripped is not tb:
        value = value.with_traceback(stripped)
    shell.showtraceback((etype, value, stripped), tb_offset=tb_offset)
    return None


# --- formatters ---------------------------------------------------------------------------------

def _html_formatter(obj: Any) -> str | None:
    return display.html_for(obj)


def _svg_formatter(obj: Any) -> str | None:
    return display.svg_for(obj)


def _text_formatter(obj: Any, printer: Any, cycle: bool) -> None:
    printer.text(display.text_for(obj))


def _diff_formatter(obj: ProgramDiff) -> str:
    return timetravel.DiffView(obj)._repr_html_()


# --- the extension's state on one shell ----------------------------------------------------------

class FluidExtension:
    """Everything `load_ipython_extension` registered on one shell, so `unload` can remove
    exactly that."""

    def __init__(self, shell: Any):
        self.shell = shell
        self.full_tracebacks = False
        self._formatters: list[tuple[Any, type, Any]] = []   # (formatter, type, previous)
        self._events: list[tuple[str, Any]] = []
        self._custom_exc_before: tuple | None = None
        self._history_before: bool | None = None
        self._magics: Any = None
        self.reports: list[str] = []   # this cell's recompile reports (tests read them)

    # locations ----------------------------------------------------------------------------

    def file_label(self, filename: str) -> str | None:
        """``'Cell In[14]'`` for the file IPython compiled cell 14 into; None for others."""
        name = getattr(self.shell.compile, "format_code_name", None)
        parts = name(filename) if name is not None else None
        return " ".join(parts) if parts else None

    # cell hooks ---------------------------------------------------------------------------

    def pre_run_cell(self, info: Any = None) -> None:
        self.reports = []

    def class_defined(self, cls: type) -> None:
        """A `fluid.Program` subclass was just defined: recompile the live programs of an
        earlier class of that name, now, before the rest of the cell runs."""
        ns = self.shell.user_ns
        if not live.is_live_reload() or not live.is_redefinable(cls, ns):
            return
        if not live.stale_programs(cls, live.live_programs()):
            return
        gc.collect()   # programs nobody holds any more are not worth recompiling
        names = {id(p): label for label, p, _ in live.named_live_programs(ns)}
        for compiled in live.stale_programs(cls, live.live_programs()):
            report = live.recompile(compiled, cls)
            label = names.get(id(compiled), "")
            text = report.summary(label)
            self.reports.append(text)
            print(text, file=sys.stderr if report.error else sys.stdout)
            if report.diff is not None and report.diff.changed:
                from IPython.display import display as show
                show(timetravel.DiffView(report.diff, f"what changed in {label or cls.__name__}"))

    # load / unload ---------------------------------------------------------------------------

    def load(self) -> None:
        shell = self.shell
        from .magics import FluidMagics
        self._magics = FluidMagics(shell, self)
        shell.register_magics(self._magics)
        for mime, func in (("text/html", _html_formatter), ("image/svg+xml", _svg_formatter),
                           ("text/plain", _text_formatter)):
            formatter = shell.display_formatter.formatters[mime]
            for typ in _DISPLAY_TYPES:
                previous = formatter.type_printers.get(typ)
                formatter.for_type(typ, func)
                self._formatters.append((formatter, typ, previous))
        html = shell.display_formatter.formatters["text/html"]
        self._formatters.append((html, ProgramDiff, html.type_printers.get(ProgramDiff)))
        html.for_type(ProgramDiff, _diff_formatter)
        shell.events.register("pre_run_cell", self.pre_run_cell)
        self._events.append(("pre_run_cell", self.pre_run_cell))
        self._custom_exc_before = (shell.custom_exceptions, getattr(shell, "CustomTB", None))
        if not shell.custom_exceptions:   # never take the slot from another extension
            shell.set_custom_exc((Exception,), _custom_exc)
        on_class_defined(self.class_defined)
        self._history_before = history_defaults()["enabled"]
        history_defaults(True)
        add_file_labeller(self.file_label)
        shell.push({"fluid": sys.modules[__package__]})

    def unload(self) -> None:
        shell = self.shell
        mm = shell.magics_manager
        for kind in ("line", "cell"):
            if mm.magics[kind].get("fluid") is not None and getattr(
                    mm.magics[kind]["fluid"], "__self__", None) is self._magics:
                del mm.magics[kind]["fluid"]
        if mm.registry.get("FluidMagics") is self._magics:
            del mm.registry["FluidMagics"]
        for formatter, typ, previous in self._formatters:
            formatter.type_printers.pop(typ, None)
            if previous is not None:
                formatter.type_printers[typ] = previous
        self._formatters.clear()
        for event, callback in self._events:
            try:
                shell.events.unregister(event, callback)
            except ValueError:
                pass
        self._events.clear()
        if self._custom_exc_before is not None and shell.custom_exceptions == (Exception,):
            exc_tuple, custom_tb = self._custom_exc_before
            shell.custom_exceptions = exc_tuple
            if custom_tb is not None:
                shell.CustomTB = custom_tb
        on_class_defined(self.class_defined, add=False)
        if self._history_before is not None:
            history_defaults(self._history_before)
            self._history_before = None
        remove_file_labeller(self.file_label)
        if shell.user_ns.get("fluid") is sys.modules.get(__package__):
            shell.user_ns.pop("fluid", None)


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext fluid``; a second load on the same shell does nothing."""
    from . import magics  # noqa: F401  (IPython is needed from here on: fail before any change)
    if getattr(shell, _STATE_ATTR, None) is not None:
        shell.push({"fluid": sys.modules[__package__]})
        return
    state = FluidExtension(shell)
    setattr(shell, _STATE_ATTR, state)
    try:
        state.load()
    except BaseException:
        state.unload()
        setattr(shell, _STATE_ATTR, None)
        raise


def unload_ipython_extension(shell: Any) -> None:
    """``%unload_ext fluid``: remove everything the load registered."""
    state = getattr(shell, _STATE_ATTR, None)
    if state is None:
        return
    state.unload()
    setattr(shell, _STATE_ATTR, None)


def extension_state(shell: Any) -> FluidExtension | None:
    return getattr(shell, _STATE_ATTR, None)
