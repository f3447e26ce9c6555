"""Programs that live across cells: which class each compiled program came from, and
recompiling live programs when their class is defined again.

In a notebook a class cell is run again and again. Each run makes a new class object, and
compiled programs of the old one would silently keep the old code. The engine records
where every compiled program came from (`CompiledProgram.origin`, given by `Compile()`)
and keeps a weak list of them (`runtime.live_programs`). When a cell
defines a `fluid.Program` subclass anew, the extension (`fluid.ipython`) calls `recompile`
for each live program of the old class, right at the class statement: the program is
rebuilt in place from the new class (the user's variable keeps working, and code below the
class in the same cell already runs the new program), and every persistable var that still
fits keeps its value (`CompiledProgram.recompile`, `fluid.diff`). Turn it off with
``fluid.live_reload(False)`` or ``%fluid live off``.

Nothing here imports IPython; the hooks that call it live in `fluid.ipython`.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fluid_interactive.frontend.program import Program
from fluid_interactive.runtime import CompiledProgram
from fluid_interactive.runtime import live_programs as _engine_live_programs
from fluid_interactive.runtime.live.recompile import Recompiled

__all__ = ["Origin", "origin_of", "live_programs", "named_live_programs", "live_reload",
           "is_live_reload", "user_namespace", "recompile", "Recompiled", "program_classes",
           "stale_programs", "is_redefinable"]


@dataclass
class Origin:
    """How a compiled program was made: ``cls(**options).Compile(**compile_args)``."""
    cls: type
    options: dict[str, Any]
    compile_args: dict[str, Any] = field(default_factory=dict)   # seed, device, ...

    @property
    def seed(self) -> int | None:
        return self.compile_args.get("seed")


_settings = {"live_reload": True}


def live_reload(enabled: bool | None = None) -> bool:
    """Turn recompiling live programs on class redefinition on or off; returns the setting
    (called with no argument, just returns it)."""
    if enabled is not None:
        _settings["live_reload"] = bool(enabled)
    return _settings["live_reload"]


def is_live_reload() -> bool:
    return _settings["live_reload"]


def origin_of(compiled: CompiledProgram) -> Origin | None:
    """Where ``compiled`` came from, as the engine recorded it; None for a program that
    was not compiled from a class (e.g. one from ``fluid.load``)."""
    origin = getattr(compiled, "origin", None)
    if origin is None:
        return None
    return Origin(origin.source_class, dict(origin.options), dict(origin.compile_args))


def live_programs() -> list[CompiledProgram]:
    """Every program compiled from a class that is still alive, oldest first."""
    return _engine_live_programs()


# --- recompiling ----------------------------------------------------------------------------

def recompile(compiled: CompiledProgram, new_cls: type) -> Recompiled:
    """Rebuild ``compiled`` from ``new_cls`` in place (`CompiledProgram.recompile`). On any
    error (the new class does not compile) the program is left exactly as it was and the
    error is returned in the report."""
    try:
        return compiled.recompile(new_cls)
    except Exception as exc:  # the old program keeps running
        origin = compiled.origin
        return Recompiled(compiled, origin.source_class if origin else None, new_cls,
                          error=exc)


# --- finding redefined classes --------------------------------------------------------------

def program_classes(namespace: dict) -> dict[str, type]:
    """Names in ``namespace`` bound to `fluid.Program` subclasses."""
    found = {}
    for name, value in list(namespace.items()):
        try:
            if isinstance(value, type) and issubclass(value, Program) and value is not Program:
                found[name] = value
        except TypeError:
            continue
    return found


def is_redefinable(cls: type, namespace: dict) -> bool:
    """Whether defining ``cls`` may replace an earlier class of live programs: a class
    statement at the top level of a cell (its module is the user namespace's, and it is
    not local to a function)."""
    return (cls.__module__ == namespace.get("__name__", "__main__")
            and "<locals>" not in cls.__qualname__)


def stale_programs(new_cls: type, programs: Iterable[CompiledProgram]) -> list[CompiledProgram]:
    """Live programs compiled from an earlier class of the same name and module."""
    out = []
    for compiled in programs:
        origin = origin_of(compiled)
        if origin is None or origin.cls is new_cls:
            continue
        old = origin.cls
        if (old.__qualname__, old.__module__) == (new_cls.__qualname__, new_cls.__module__):
            out.append(compiled)
    return out


# --- naming live programs ---------------------------------------------------------------------

def user_namespace() -> dict:
    """The namespace users' variables live in: IPython's when a shell is running (never
    importing IPython to find out), else ``__main__``'s."""
    import sys
    ipy = sys.modules.get("IPython")
    shell = ipy.get_ipython() if ipy is not None else None
    if shell is not None:
        return shell.user_ns
    main = sys.modules.get("__main__")
    return vars(main) if main is not None else {}


def named_live_programs(namespace: dict | None = None
                        ) -> list[tuple[str, CompiledProgram, str]]:
    """``(label, program, class name)`` for every live compiled program: those the
    extension tracked and those bound to a name in the namespace (e.g. from
    ``fluid.load``). The label is the program's variable name(s)."""
    ns = user_namespace() if namespace is None else namespace
    names: dict[int, list[str]] = {}
    found: dict[int, CompiledProgram] = {}
    for key, value in list(ns.items()):
        if isinstance(value, CompiledProgram) and not key.startswith("_"):
            names.setdefault(id(value), []).append(key)
            found[id(value)] = value
    for compiled in live_programs():
        found.setdefault(id(compiled), compiled)
    out = []
    for key, compiled in found.items():
        origin = origin_of(compiled)
        cls_name = origin.cls.__name__ if origin else (compiled.program.name or "?")
        label = ", ".join(names.get(key, [])) or f"<unnamed {cls_name} at {key:#x}>"
        out.append((label, compiled, cls_name))
    return out
