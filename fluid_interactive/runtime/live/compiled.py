"""The live object `Compile()` returns: one program, one scope, one callable per method.

A `CompiledProgram` owns the scope its methods share and the public verbs on it; what
else it does belongs to a component it holds: `timeline` (the history of changes,
`rewind`, putting in a recompiled program), `watcher` (the values `watch` keeps). Each
method (`CompiledMethod`) chooses its own entry. The program it runs can change while it
lives (a recompilation, a rewind past one); the object, its scope and the user's variable
stay the same, and method objects of an earlier program say so when called.
"""
from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...backend import array_module_for, get_device, resolve_device, to_device, to_host
from ...errors import FeedError, ProgramDefinitionError
from ...ir.blocks import check_nesting
from ...ir.records import ProgramDesc, VarDesc, dtype_kind
from ...ir.text import format_program
from ..summary import Summary, summarize
from . import checkpoint
from .history import History, Rewound
from .method import CompiledMethod, rows_state
from .origin import Origin, register_live
from .recompile import Recompiled, recompile
from .scope import Scope
from .state import close_values, initial_state, no_history_reason, persistable_descs
from .timeline import Timeline
from .watch import Watched, Watcher


class CompiledProgram:
    """Owns a program description and the scope every method reads and writes."""

    # Instance attributes (a traced method may not take these names either).
    program: ProgramDesc
    scope: Scope
    methods: dict[str, CompiledMethod]
    seed: int | None
    device: str
    origin: Origin | None
    timeline: Timeline
    watcher: Watcher

    def __init__(self, program: ProgramDesc, *, seed: int | None = None,
                 device: str | None = None, initial_values: Mapping[str, Any] | None = None,
                 origin: Origin | None = None, positions: Mapping[str, int] | None = None):
        """``initial_values``: values the state starts from (a checkpoint's, or arrays
        tracing fixed); every other persistable var is initialised by block 0's ops.
        ``origin``: how the program was traced, for `recompile`. ``positions``: reader
        name -> the batch it continues from (a checkpoint's). A program whose blocks do
        not nest as a tree is a `VerifyError` (`Compile()` and `fluid.load` verify
        everything else first)."""
        check_nesting(program)
        self.seed = check_seed(seed)
        self.device = resolve_device(device or get_device())   # 'auto' -> 'cpu' or 'gpu'
        self._xp = array_module_for(self.device)
        self.scope = Scope(persistable_descs(program))
        self.program, self.methods, self.origin = program, {}, None
        self.timeline, self.watcher = Timeline(self), Watcher()
        # Readers hold threads and files: close them when this program is collected.
        self._finalizer = weakref.finalize(self, close_values, self.scope.values.values())
        if no_history_reason(program) is not None:
            self.scope.history.enabled = False
        provided = {k: to_device(v, self._xp) for k, v in (initial_values or {}).items()}
        self.scope.values.update(initial_state(program, self.seed, self._xp, provided))
        for name, position in (positions or {}).items():
            reader = self.scope.get(name)
            if reader is not None and position:
                reader.seek(position)
        self.install(program, origin)
        if origin is not None:
            register_live(self)

    @property
    def array_module(self) -> Any:
        """The array module values live in: NumPy, or CuPy on a GPU."""
        return self._xp

    @property
    def source_class(self) -> type | None:
        """The `fluid.Program` class this program was compiled from (None: it came from
        `fluid.load` or a program description); subclass it to add methods."""
        return self.origin.source_class if self.origin is not None else None

    @property
    def label(self) -> str:
        """How messages name this program."""
        return self.program.name or "this program"

    def install(self, program: ProgramDesc, origin: Origin | None) -> None:
        """Make ``program`` (traced from ``origin``) the code this object runs: one method
        per method block. Method objects of the previous program are retired. The scope
        is the caller's business (`Timeline` swaps it alongside)."""
        for name, method in self.methods.items():
            method.retire(f"{name}() belongs to an earlier program of this object, which "
                          f"was recompiled or rewound; call the object's current method "
                          f"(e.g. prog.{name}(...)) instead of one kept from before")
            if self.__dict__.get(name) is method:
                delattr(self, name)
        self.program, self.origin, self.methods = program, origin, {}
        self.scope.descs = persistable_descs(program)
        self.scope.in_place = frozenset(
            n for block in program.method_blocks() for n in rows_state(program, block)[0])
        for block in program.method_blocks():
            if block.name in reserved_names() or block.name.startswith("_") or hasattr(
                    self, block.name):
                raise ProgramDefinitionError(
                    f"method name {block.name!r} is used by the compiled program itself; "
                    f"rename the method (reserved: {', '.join(sorted(reserved_names()))})")
            method = CompiledMethod(self, block)
            self.methods[block.name] = method
            setattr(self, block.name, method)

    def run(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call the method named ``method``: ``prog.run('infer', x)`` is ``prog.infer(x)``."""
        found = self.methods.get(method) if isinstance(method, str) else None
        if found is None:
            raise KeyError(f"run: no method {method!r}; the methods are: "
                           f"{', '.join(self.methods) or 'none'}")
        return found(*args, **kwargs)

    # --- state -----------------------------------------------------------------------------

    def _persistable(self, name: str) -> VarDesc:
        var = self.scope.descs.get(name)
        if var is None or not var.persistable:
            known = ", ".join(self.var_names())
            raise KeyError(f"{name!r} is not a variable of this program's scope; it holds: "
                           f"{known}")
        return var

    def var_names(self) -> list[str]:
        """Names of every persistable tensor (parameters, optimizer state, ...)."""
        return [v.name for v in self.program.global_block().vars.values()
                if v.persistable and v.kind == "tensor"]

    def parameters(self) -> dict[str, np.ndarray]:
        """The model's parameters only (name -> a NumPy copy), all from one moment: a
        step running in another thread is either wholly in them or not at all."""
        values = self.scope.snapshot()
        return {v.name: np.array(to_host(values[v.name]))
                for v in self.program.global_block().vars.values()
                if v.is_parameter and v.name in values}

    def get_var(self, name: str) -> np.ndarray:
        self._persistable(name)
        return np.array(to_host(self.scope[name]))

    def _checked(self, name: str, value: Any) -> Any:
        return to_device(checked_value(self._persistable(name), value), self._xp)

    def set_var(self, name: str, value: Any) -> None:
        """Replace one persistable var; see `set_parameters` for the checks."""
        self.scope.set({name: self._checked(name, value)}, label=f"set_var {name}")

    def set_parameters(self, values: Mapping[str, Any]) -> None:
        """Replace parameters by name, all or none: each value must have the parameter's
        shape; it is converted to the parameter's dtype within a kind (float64 values
        become float32, for instance), and an integer that does not fit is an error."""
        checked = {}
        for name, value in values.items():
            if not self._persistable(name).is_parameter:
                raise KeyError(f"{name!r} is not a parameter (use set_var for other state)")
            checked[name] = self._checked(name, value)
        self.scope.set(checked, label="set_parameters")

    def save(self, path: str) -> None:
        """Write the program, every persistable var and each reader's position to the
        directory ``path``, atomically; `fluid.load(path)` restores it in any process."""
        checkpoint.save(path, self.program, self.scope, self.seed)

    # --- readers -------------------------------------------------------------------------

    def reader_names(self) -> list[str]:
        return [v.name for v in self.program.global_block().vars.values() if v.kind == "reader"]

    def reset_readers(self, names: list[str] | None = None) -> None:
        """Start readers (all, or those named) again from their first epoch. Safe at any
        time: a reader that has not opened yet simply stays closed."""
        with self.scope.lock:  # never in the middle of a step that reads
            names = names if names is not None else self.reader_names()
            self.scope.record_reset(self.scope.positions(names))
            for name in names:
                reader = self.scope.get(name)
                if reader is not None:
                    reader.reset()

    def skip_batches(self, batches: int = 1, names: list[str] | None = None) -> None:
        """Drop the next ``batches`` batches of the readers (all, or those named), as if a
        call had read them: for a batch that makes every call fail (a failing call gives
        its batch back, so the next one would read it again). One change in the history,
        so `rewind` brings the batches back."""
        with self.scope.lock:
            names = names if names is not None else self.reader_names()
            self.scope.record_reset(self.scope.positions(names), label="skip_batches")
            for name in names:
                reader = self.scope.get(name)
                if reader is not None:
                    reader.skip(batches)

    def close(self) -> None:
        """Stop reader threads and close their files. The program stays usable: a reader
        reopens on its next read."""
        with self.scope.lock:
            close_values(self.scope.values.values())

    def __enter__(self) -> CompiledProgram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- history, rewind, recompile (the timeline) -----------------------------------------

    @property
    def history(self) -> History:
        """The changes `rewind` can take back, newest first (``history.changes()``), and
        the bounds they are kept within (``history.calls``, ``history.memory``)."""
        return self.scope.history

    def keep_history(self, enabled: bool = True, *, calls: int | None = None,
                     memory: int | None = None) -> History:
        """Keep (or stop keeping) what each change replaces, so `rewind` can take it back:
        at most ``calls`` changes and ``memory`` bytes of what they hold (replaced arrays,
        and the earlier program of a recompilation), the oldest forgotten first. Turning
        it off forgets the history. Returns the history."""
        return self.timeline.keep(enabled, calls=calls, memory=memory)

    def rewind(self, n: int = 1) -> Rewound:
        """Take back the last ``n`` changes (calls of methods that change state,
        `set_var`, `reset_readers`, recompilations), so parameters, optimizer state,
        counters and reader positions are what they were before them; past a
        recompilation, the earlier program comes back too. Raises `RewindError`, changing
        nothing, when the history does not reach that far."""
        return self.timeline.rewind(n)

    def recompile(self, source: type | None = None) -> Recompiled:
        """Rebuild this program from ``source`` (a `fluid.Program` subclass; default: the
        class it was compiled from), in place: the methods become the new class's, and
        each persistable var whose value still fits keeps it (`fluid.diff` tells which).
        The options and seed it was compiled with stay; options the new class no longer
        has are left out. If the new class does not compile, the error is raised and
        nothing changes. Nothing is distributed: only ``Compile()`` starts jobs."""
        return recompile(self, source)

    # --- watching values (the watcher) -----------------------------------------------------

    def watch(self, *names: str, methods: None | str | Sequence[str] = None
              ) -> dict[str, list[str]]:
        """Keep the values of the named vars after each call, to read from `watched`.

        A name is a var (``'mlp/fc_0.tmp_2'``, a gradient ``'mlp/fc_0.w_0@GRAD'``), a layer
        or a var_scope (``'mlp'``: all its activations and gradients), or a pattern with
        ``*``; ``methods`` limits watching to some methods. Calls add to what is watched;
        returns what each method now keeps. Unwatched methods run exactly as before."""
        blocks = {name: m.blocks for name, m in self.methods.items()}
        persistable = {n: v for n, v in self.scope.descs.items() if v.kind == "tensor"}
        self.watcher.add(names, methods, blocks, persistable)
        return self._refresh_watching()

    def unwatch(self, *names: str) -> dict[str, list[str]]:
        """Stop watching ``names`` (no names: everything); methods no longer watched run
        their plain entry again. Returns what each method still keeps."""
        self.watcher.remove(names)
        return self._refresh_watching()

    def _refresh_watching(self) -> dict[str, list[str]]:
        with self.scope.lock:
            for method in self.methods.values():
                method.refresh()
        kept = {name: self.watcher.names_for(m.blocks, self.scope.descs)
                for name, m in self.methods.items()}
        return {name: names for name, names in kept.items() if names}

    @property
    def watched(self) -> Watched:
        """The watched values of the last call of any method (see `watch`): a mapping of var
        name to array, with ``.method`` and ``.call``."""
        return self.watcher.last

    # --- printing --------------------------------------------------------------------------

    def summary(self, methods: None | str | Sequence[str] = None) -> Summary:
        """The model's layers in a table, as Keras' ``model.summary()``: each layer (under
        its var_scope) with its type, output shape and parameter count, then trainable,
        non-trainable and optimizer-state totals. ``methods`` limits it to some methods.
        Prints as text; displays as HTML in a notebook."""
        return summarize(self.program, methods)

    def __str__(self) -> str:
        return format_program(self.program)

    def __repr__(self) -> str:
        params = self.parameters()
        count = sum(p.size for p in params.values())
        return (f"<compiled {self.program.name or 'program'}: methods "
                f"{', '.join(self.methods) or 'none'}; {len(params)} parameters "
                f"({count} values) on {self.device}>")


def reserved_names() -> frozenset[str]:
    """Names a compiled program uses itself, so a traced method may not take them: every
    public attribute of `CompiledProgram`, derived from the class (never a hand-kept
    list)."""
    public = {n for n in dir(CompiledProgram) if not n.startswith("_")}
    return frozenset(public | {n for n in CompiledProgram.__annotations__
                               if not n.startswith("_")})


def check_seed(seed: Any) -> int | None:
    """``seed`` as an int in [0, 2**63), or None; a clear error for anything else."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not (
            0 <= int(seed) < 2 ** 63):
        raise ProgramDefinitionError(f"seed must be None or an int in [0, 2**63), got "
                                     f"{seed!r}")
    return int(seed)


def checked_value(var: VarDesc, value: Any) -> np.ndarray:
    """``value`` as a host array for the persistable ``var``: the same shape, converted to
    its dtype within a kind (floats to floats, integers and booleans to integers); an
    integer out of the dtype's range is an error instead of wrapping around."""
    arr = np.asarray(value)
    name = var.name
    if tuple(arr.shape) != var.shape:
        raise FeedError(f"{name!r} has shape {list(var.shape)}; got {list(arr.shape)}")
    allowed = "f" if dtype_kind(var.dtype) == "f" else "iub"  # cast within a kind only
    if arr.dtype.kind not in allowed:
        raise FeedError(f"{name!r} is {var.dtype}; got {arr.dtype}. Convert the value "
                        f"explicitly, e.g. np.asarray(value).astype('{var.dtype}')")
    if arr.dtype.kind in "iu" and arr.size and var.dtype != "bool":
        info = np.iinfo(var.dtype)
        low, high = int(arr.min()), int(arr.max())
        if low < info.min or high > info.max:
            raise FeedError(f"{name!r} is {var.dtype}, which holds {info.min}..{info.max}; "
                            f"the value holds {low}..{high}")
    return np.array(arr, dtype=var.dtype)
