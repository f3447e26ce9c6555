"""Programs that live across cells: which class each compiled program came from, and
recompiling live programs when their class is defined again.

In a notebook a class cell is run again and again. Each run makes a new class object, and
compiled programs of the old one would silently keep the old code. With the extension
loaded, every `Compile()` is recorded here (weakly: a program nobody holds is forgotten).
When a cell defines a `fluid.Program` subclass anew, `recompile` rebuilds each live program
of the old class from the new one, in place (the user's variable keeps working), and keeps
every persistable var whose name, shape and dtype still match: trained weights survive an
edit that adds a method or changes a learning rate. Turn it off with
``fluid.live_reload(False)`` or ``%fluid live off``.

Nothing here imports IPython; the hooks that call it live in `fluid.ipython`.
"""
from __future__ import annotations

import functools
import inspect
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

import numpy as np

from fluid_interactive.backend import to_host
from fluid_interactive.frontend.program import Program
from fluid_interactive.runtime.compiled import CompiledProgram

__all__ = ["Origin", "origin_of", "track", "live_programs", "named_live_programs",
           "live_reload", "is_live_reload", "user_namespace", "install_compile_hook",
           "remove_compile_hook", "recompile", "Recompiled", "program_classes", "redefined",
           "stale_programs"]


@dataclass
class Origin:
    """How a compiled program was made: ``cls(**options).Compile(**compile_args)``."""
    cls: type
    options: dict[str, Any]
    compile_args: dict[str, Any] = field(default_factory=dict)   # seed, device, ...

    @property
    def seed(self) -> Optional[int]:
        return self.compile_args.get("seed")


_origins: "weakref.WeakKeyDictionary[CompiledProgram, Origin]" = weakref.WeakKeyDictionary()
_settings = {"live_reload": True}


def live_reload(enabled: Optional[bool] = None) -> bool:
    """Turn recompiling live programs on class redefinition on or off; returns the setting
    (called with no argument, just returns it)."""
    if enabled is not None:
        _settings["live_reload"] = bool(enabled)
    return _settings["live_reload"]


def is_live_reload() -> bool:
    return _settings["live_reload"]


def instance_options(instance: Program) -> dict[str, Any]:
    """The options an instance overrides (its own attributes that name class options)."""
    own = vars(instance)
    return {n: own[n] for n in type(instance).option_names() if n in own}


def track(compiled: CompiledProgram, cls: type, options: dict[str, Any],
          compile_args: Optional[dict[str, Any]] = None) -> CompiledProgram:
    _origins[compiled] = Origin(cls, dict(options), dict(compile_args or {}))
    return compiled


def origin_of(compiled: CompiledProgram) -> Optional[Origin]:
    """Where ``compiled`` came from, if known: recorded by the engine itself (when it sets
    ``source_class``/``options``) or by the extension's Compile hook."""
    cls = getattr(compiled, "source_class", None)
    if isinstance(cls, type):
        return Origin(cls, dict(getattr(compiled, "options", None) or {}),
                      {"seed": getattr(compiled, "seed", None)})
    return _origins.get(compiled)


def live_programs() -> list[CompiledProgram]:
    """Every tracked compiled program that is still alive, oldest first."""
    return list(_origins.keys())


# --- the Compile hook ------------------------------------------------------------------------

_hook: dict[str, Any] = {}


def install_compile_hook() -> bool:
    """Wrap `Program.Compile` so each compiled program records its class and options.
    Idempotent; returns whether a wrapper is in place."""
    current = Program.__dict__["Compile"]
    if getattr(current, "__fluid_live__", False):
        return True
    original = current

    signature = inspect.signature(original)

    @functools.wraps(original)
    def Compile(self, *args, **kwargs):  # noqa: N802 (the engine's spelling)
        compiled = original(self, *args, **kwargs)
        if isinstance(compiled, CompiledProgram):  # every live program is tracked, weakly
            try:
                bound = signature.bind(self, *args, **kwargs).arguments
            except TypeError:
                bound = {}
            bound.pop(next(iter(signature.parameters)), None)   # self
            track(compiled, type(self), instance_options(self), dict(bound))
        return compiled

    Compile.__fluid_live__ = True  # type: ignore[attr-defined]
    _hook.update(Compile=original, compile=Program.__dict__.get("compile"))
    Program.Compile = Compile
    Program.compile = Compile
    return True


def remove_compile_hook() -> None:
    """Put the engine's own `Program.Compile` back."""
    if not _hook:
        return
    Program.Compile = _hook["Compile"]
    if _hook.get("compile") is not None:
        Program.compile = _hook["compile"]
    _hook.clear()


def _original_compile() -> Callable:
    return _hook.get("Compile") or Program.__dict__["Compile"]


# --- recompiling ----------------------------------------------------------------------------

@dataclass
class Recompiled:
    """What recompiling one live program did."""
    compiled: CompiledProgram
    old_class: type
    new_class: type
    kept: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)       # new vars, freshly initialised
    dropped: list[str] = field(default_factory=list)     # old vars the new class lacks
    reset: list[str] = field(default_factory=list)       # same name, new shape/dtype/reader
    dropped_options: list[str] = field(default_factory=list)
    error: Optional[BaseException] = None

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


def _creator(program: Any, name: str) -> Optional[tuple]:
    """A comparable description of the block-0 op that creates ``name`` (for readers)."""
    for op in program.global_block().ops:
        if name in op.output_names():
            return (op.type, sorted((k, list(v)) for k, v in op.inputs.items()),
                    sorted((k, repr(v)) for k, v in op.attrs.items()))
    return None


def _same_state(old: CompiledProgram, new: CompiledProgram, name: str) -> bool:
    ov = old.program.global_block().vars[name]
    nv = new.program.global_block().vars[name]
    if (ov.shape, ov.dtype, ov.kind) != (nv.shape, nv.dtype, nv.kind):
        return False
    if ov.kind != "tensor" or not nv.is_parameter:
        # a reader (the same files and settings, or it starts over) or other state such as
        # a learning rate: kept only while the op that initialises it is unchanged, so an
        # edited learning rate takes effect; trained parameters are kept whatever their
        # initialiser
        creator = _creator(new.program, name)
        if creator != _creator(old.program, name):
            return False
        if creator is None:   # a constant the trace supplied (in-memory reader data)
            return _equal(old.scope.get(name), new.scope.get(name))
    value = old.scope.get(name)
    return value is not None and tuple(getattr(value, "shape", ())) == tuple(
        d for d in nv.shape)


def _equal(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if not (_is_array(a) and _is_array(b)):
        return False
    a, b = to_host(a), to_host(b)
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))


def _state_names(compiled: CompiledProgram) -> list[str]:
    """Every persistable var of block 0: tensors and readers alike."""
    return [v.name for v in compiled.program.global_block().vars.values() if v.persistable]


def _is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _close(value: Any) -> None:
    close = getattr(value, "close", None)
    if close is not None and not _is_array(value):
        close()


def _adopt(old: CompiledProgram, new: CompiledProgram) -> None:
    """Make ``old`` the program ``new`` is, keeping ``old``'s identity."""
    # a finalizer (readers' cleanup) registered for `new` must now follow `old`
    finalizers = []
    for obj in (old, new):
        for key, value in list(vars(obj).items()):
            if isinstance(value, weakref.finalize) and value.alive:
                if obj is new:
                    _, func, args, kwargs = value.peek()
                    finalizers.append((key, func, args, kwargs))
                value.detach()
    state = dict(vars(new))
    vars(old).clear()
    vars(old).update(state)
    for key, func, args, kwargs in finalizers:
        setattr(old, key, weakref.finalize(old, func, *args, **kwargs))
    # anything of the new program that points back at it (methods' owner) now points here
    for obj in list(state.values()) + list(getattr(old, "methods", {}).values()):
        try:
            attrs = vars(obj)
        except TypeError:
            continue
        for key, value in list(attrs.items()):
            if value is new:
                setattr(obj, key, old)
    vars(new).clear()


def recompile(compiled: CompiledProgram, new_cls: type) -> Recompiled:
    """Rebuild ``compiled`` from ``new_cls`` in place, keeping matching persistable vars.

    On any error (the new class does not compile) the program is left exactly as it was
    and the error is returned in the report.
    """
    origin = origin_of(compiled)
    old_cls = origin.cls if origin else type(None)
    report = Recompiled(compiled, old_cls, new_cls)
    options = dict(origin.options) if origin else {}
    known = set(new_cls.option_names())
    report.dropped_options = sorted(k for k in options if k not in known)
    options = {k: v for k, v in options.items() if k in known}
    try:
        instance = new_cls(**options)
        args = dict(origin.compile_args) if origin else {"seed": compiled.seed}
        args["device"] = compiled.device   # where its state lives now
        new = _original_compile()(instance, **args)
    except Exception as exc:  # the old program keeps running
        report.error = exc
        return report
    old_vars = _state_names(compiled)
    new_vars = set(_state_names(new))
    moved = set()
    for name in _state_names(new):
        if name not in old_vars:
            report.added.append(name)
        elif _same_state(compiled, new, name):
            displaced = new.scope.get(name)
            new.scope.values[name] = compiled.scope[name]
            if displaced is not None and displaced is not compiled.scope[name]:
                _close(displaced)
            moved.add(name)
            report.kept.append(name)
        else:
            report.reset.append(name)
    report.dropped = [n for n in old_vars if n not in new_vars]
    for name, value in compiled.scope.snapshot().items():
        if name not in moved:
            _close(value)
    _adopt(compiled, new)
    track(compiled, new_cls, options, origin.compile_args if origin else {"seed": compiled.seed})
    return report


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


def redefined(before: dict[str, type], after: dict[str, type]) -> list[type]:
    """Classes bound in ``after`` to a name that was bound to another class ``before``, or
    newly bound (a first definition can still replace a class of live programs, e.g. after
    ``del``)."""
    return [cls for name, cls in after.items() if before.get(name) is not cls]


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


def named_live_programs(namespace: Optional[dict] = None
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
