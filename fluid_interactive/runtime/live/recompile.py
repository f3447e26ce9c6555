"""Recompiling a live program from an edited class, in place.

`CompiledProgram.recompile(cls)` traces ``cls`` (through the program's `Origin`, never
``Compile()``) with the options it was compiled with, initialises the new program's state
with the same seed, then moves the state that still fits into it (`ir.diff.state_changes`
decides what fits: parameters by name, shape and dtype; other state while its initialiser
is unchanged; the optimizer state of a parameter that starts again starts again with it).
The compiled object stays the same, so the user's variable keeps working; with history on,
the change can be rewound, bringing the earlier program back.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...backend import to_device, to_host
from ...ir.diff import ProgramDiff, diff_programs
from ...ir.records import ProgramDesc
from .origin import Origin
from .owner import Owner
from .state import close_values, initial_state, is_array


@dataclass
class Recompiled:
    """What recompiling one live program did (or, with ``error``, why it did nothing)."""
    compiled: Owner
    old_class: type | None
    new_class: type
    kept: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)       # new vars, freshly initialised
    dropped: list[str] = field(default_factory=list)     # old vars the new class lacks
    reset: list[str] = field(default_factory=list)       # same name, starts again
    dropped_options: list[str] = field(default_factory=list)
    diff: ProgramDiff | None = None
    error: BaseException | None = None

    def summary(self, name: str = "") -> str:
        label = name or self.new_class.__name__
        if self.error is not None:
            return (f"fluid: could not recompile {label} from the new {self.new_class.__name__}"
                    f" ({type(self.error).__name__}: {self.error}); it keeps running the old "
                    f"code")

        def part(word: str, names: list[str]) -> str:
            if not names:
                return f"{word} 0"
            shown = ", ".join(names[:4]) + (f", ... ({len(names) - 4} more)"
                                            if len(names) > 4 else "")
            return f"{word} {len(names)} ({shown})"

        text = (f"fluid: recompiled {label} from the new {self.new_class.__name__}: "
                f"{part('kept', self.kept)}, {part('added', self.added)}, "
                f"{part('dropped', self.dropped)}")
        if self.reset:
            text += f", {part('reinitialised', self.reset)}"
        if self.dropped_options:
            text += f"; options no longer defined: {', '.join(self.dropped_options)}"
        return text


def same_value(a: Any, b: Any) -> bool:
    """Whether two scope values are the same object or equal arrays."""
    if a is b:
        return True
    if not (is_array(a) and is_array(b)):
        return False
    a, b = to_host(a), to_host(b)
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))


def recompile(compiled: Owner, source: type | None = None) -> Recompiled:
    """See `CompiledProgram.recompile`."""
    origin = compiled.origin
    if origin is None:
        if source is None:
            raise TypeError(f"{compiled.label} was not compiled from a fluid.Program class "
                            f"(it came from fluid.load or a ProgramDesc): give the class "
                            f"to recompile from, prog.recompile(MyProgram)")
        raise TypeError(f"{compiled.label} was not compiled from a fluid.Program class, so "
                        f"it cannot be recompiled from {source.__name__}: compile "
                        f"{source.__name__}().Compile() instead")
    cls = source if source is not None else origin.source_class
    report = Recompiled(compiled, origin.source_class, cls)
    options, report.dropped_options = origin.known_options(cls)
    traced = origin.retrace(cls, options)   # traces only: never distributes
    args = {**origin.compile_args, "device": compiled.device}   # where its state lives now
    fresh = initial_state(traced.program, compiled.seed, compiled.array_module,
                          {k: to_device(v, compiled.array_module)
                           for k, v in traced.initial_values.items()})
    try:
        values = _take_over(compiled, traced.program, fresh, cls, report)
        compiled.timeline.swap(traced.program, values,
                               Origin(cls, options, args, origin.retrace))
    except BaseException:
        close_values(fresh.values())
        raise
    close_values(v for k, v in fresh.items() if values.get(k) is not v)
    traced.attach(compiled)
    return report


def _take_over(compiled: Owner, program: ProgramDesc, fresh: dict[str, Any],
               cls: type, report: Recompiled) -> dict[str, Any]:
    """The state ``program`` starts from: each value of ``compiled`` that still fits it,
    ``fresh`` values for the rest; ``report`` says which is which."""
    with compiled.scope.lock:
        old = compiled.scope.snapshot()
        old_name = getattr(report.old_class, "__name__", compiled.program.name or "old")
        diff = diff_programs(compiled.program, program,
                             lambda n: same_value(old.get(n), fresh.get(n)),
                             old_label=old_name, new_label=cls.__name__)
        values: dict[str, Any] = {}
        for change in diff.state:
            name = change.name
            if change.status == "dropped":
                report.dropped.append(name)
            elif change.status == "kept" and name in old:
                values[name] = old[name]
                report.kept.append(name)
            elif name in fresh:
                values[name] = fresh[name]
                (report.added if change.status == "added" else report.reset).append(name)
        report.diff = diff
        return values
