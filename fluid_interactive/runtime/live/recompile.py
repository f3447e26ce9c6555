"""Recompiling a live program from an edited class, in place.

`CompiledProgram.recompile(cls)` compiles ``cls`` with the options and seed the program
was compiled with, then moves the state that still fits into it (`ir.diff.state_changes`
decides what fits: parameters by name, shape and dtype; other state while its initialiser
is unchanged; the optimizer state of a parameter that starts again starts again with it).
The compiled object stays the same, so the user's variable keeps working; with history on,
the change can be rewound, bringing the earlier program back.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ...backend import to_host
from ...ir.diff import ProgramDiff, diff_programs

if TYPE_CHECKING:
    from .compiled import CompiledProgram


@dataclass
class Recompiled:
    """What recompiling one live program did (or, with ``error``, why it did nothing)."""
    compiled: CompiledProgram
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


def _is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


def same_value(a: Any, b: Any) -> bool:
    """Whether two scope values are the same object or equal arrays."""
    if a is b:
        return True
    if not (_is_array(a) and _is_array(b)):
        return False
    a, b = to_host(a), to_host(b)
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))


def recompile(compiled: CompiledProgram, source: type | None = None) -> Recompiled:
    """See `CompiledProgram.recompile`."""
    old_cls = compiled.source_class
    cls = source if source is not None else old_cls
    if cls is None:
        raise TypeError(f"{compiled.program.name or 'this program'} was not compiled from a "
                        f"fluid.Program class (it came from fluid.load or a ProgramDesc): "
                        f"give the class to recompile from, prog.recompile(MyProgram)")
    report = Recompiled(compiled, old_cls, cls)
    known = set(cls.option_names())
    report.dropped_options = sorted(k for k in compiled.options if k not in known)
    options = {k: v for k, v in compiled.options.items() if k in known}
    args = dict(compiled.compile_args) or {"seed": compiled.seed}
    args["device"] = compiled.device   # where its state lives now
    fresh = cls(**options).Compile(**args)
    try:
        _take_over(compiled, fresh, cls, options, args, report)
    finally:
        fresh._release()
    return report


def _take_over(compiled: CompiledProgram, fresh: CompiledProgram, cls: type,
               options: dict, args: dict, report: Recompiled) -> None:
    """Move ``fresh``'s program, and the state of ``compiled`` that fits it, into
    ``compiled``."""
    with compiled.scope.lock:
        old, new = compiled.scope.snapshot(), fresh.scope.snapshot()
        old_name = getattr(report.old_class, "__name__", compiled.program.name or "old")
        diff = diff_programs(compiled.program, fresh.program,
                             lambda n: same_value(old.get(n), new.get(n)),
                             old_label=old_name, new_label=cls.__name__)
        values: dict[str, Any] = {}
        for change in diff.state:
            name = change.name
            if change.status == "dropped":
                report.dropped.append(name)
            elif change.status == "kept" and name in old:
                values[name] = old[name]
                report.kept.append(name)
            elif name in new:
                values[name] = new[name]
                (report.added if change.status == "added" else report.reset).append(name)
        report.diff = diff
        compiled._swap(fresh.program, values, cls, options, args)
        for name, value in new.items():   # what fresh made but ``compiled`` did not take
            close = getattr(value, "close", None)
            if values.get(name) is not value and close is not None and not _is_array(value):
                close()
