"""The live object `Compile()` returns: one program, one scope, one callable per method.

The program it runs can change while it lives: `recompile` puts in the program of an edited
class, keeping the state that still fits, and `rewind` takes changes back, an earlier
program included (`runtime.versions`). The object, its scope and the user's variable stay
the same; method objects of the earlier program are retired and say so when called.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import weakref
import zlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...backend import array_module_for, get_device, resolve_device, to_device, to_host
from ...errors import FeedError, ProgramDefinitionError
from ...ir.records import BlockDesc, OpDesc, ProgramDesc, VarDesc, dtype_kind
from ...ir.text import format_block, format_program
from ...ops.registry import get_spec
from ..plan.entry import MISSING, Recording, make_entry
from ..plan.feed import bind_arguments, make_converter
from ..plan.runner import BlockRunner
from . import checkpoint
from .history import ARRAY_OVERHEAD, method_site
from .scope import Scope
from .versions import Versions, close_readers, no_history_reason, persistable_descs

if TYPE_CHECKING:
    from ..summary import Summary
    from .watch import Watched, WatchSet

#: Names a compiled program uses itself; a traced method may not take them.
RESERVED_NAMES = frozenset({
    "save", "parameters", "set_parameters", "get_var", "set_var", "var_names", "program",
    "scope", "methods", "close", "reset_readers", "reader_names", "device", "seed", "summary",
    "to_json", "source_class", "options", "compile_args", "history", "keep_history",
    "rewind", "recompile", "record_origin", "watch", "unwatch", "watched",
})


def _plan_view(block: BlockDesc, reads: list[OpDesc]) -> BlockDesc:
    """The block as its plans see it: entry ops (a reader's ``read``) run in the entry,
    before the plan is chosen (a short last batch needs its own plan), so their outputs
    become feeds."""
    if not reads:
        return block
    outputs = [n for op in reads for n in op.output("Out")]
    return dataclasses.replace(block, ops=[op for op in block.ops if op not in reads],
                               feeds=list(block.feeds) + outputs)


def changes_state(program: ProgramDesc, block: BlockDesc, is_test: bool) -> bool:
    """Whether a call of ``block`` changes anything that outlives it: it writes a
    persistable var, takes a reader's batch, or draws random numbers. Such calls run one
    at a time; the others may run concurrently."""
    for op in block.ops:
        spec = get_spec(op.type)
        if spec.entry:
            return True
        if spec.inert(spec.full_attrs(op.attrs), is_test):
            continue
        if spec.random or any(program.find_var(block, n).persistable
                              for n in op.output_names()):
            return True
    return False


def written_state(program: ProgramDesc, block: BlockDesc, is_test: bool) -> list[str]:
    """The persistable vars a call of ``block`` may write, in the order its ops do (an op
    that is inert in this mode commits nothing)."""
    out: list[str] = []
    for op in block.ops:
        spec = get_spec(op.type)
        if spec.inert(spec.full_attrs(op.attrs), is_test):
            continue
        for name in op.output_names():
            var = program.find_var(block, name)
            if var is not None and var.persistable and name not in out:
                out.append(name)
    return out


def _nbytes(var: VarDesc) -> int:
    """What the history counts for keeping a value of ``var`` (see `array_bytes`)."""
    if var.kind != "tensor" or any(d < 0 for d in var.shape):
        return 0
    return math.prod(var.shape) * np.dtype(var.dtype).itemsize + ARRAY_OVERHEAD


class CompiledMethod:
    """A traced method, callable with the values of its data vars."""

    def __new__(cls, owner: CompiledProgram, block: BlockDesc) -> CompiledMethod:
        # Each method gets its own subclass whose __call__ is generated for its data vars:
        # Python looks __call__ up on the type, and this is the hottest path of a step.
        subclass = type(cls.__name__, (cls,), {"__module__": cls.__module__})
        return super().__new__(subclass)

    def __init__(self, owner: CompiledProgram, block: BlockDesc):
        self._owner = owner
        self.block = block
        self.__name__ = block.name
        self._feeds = list(block.feeds)
        self._n = len(self._feeds)
        reads = [op for op in block.ops if get_spec(op.type).entry]
        self._runner = BlockRunner(owner.program, _plan_view(block, reads), owner._xp,
                                   owner.seed, is_test=block.is_test)
        self.changes_state = changes_state(owner.program, block, self._runner.is_test)
        self._reads = [(op.input("Reader")[0], len(op.output("Out"))) for op in reads]
        #: the persistable vars a call writes: what the history keeps of each call
        self.writes = written_state(owner.program, block, self._runner.is_test)
        self._make_entry()

    def _make_entry(self) -> None:
        """Generate the plain ``__call__`` for the owner's current settings (history on or
        off)."""
        type(self).__call__ = self.entry_for(self._runner)

    def entry_for(self, runner: BlockRunner) -> Any:
        """The generated ``__call__`` that runs ``runner``'s plans (the method's own, or a
        watching variant of it: see `watch`), recording each call in the program's history
        while that is on."""
        block, owner = self.block, self._owner
        feed_vars = [block.vars[n] for n in block.feeds]
        xp = owner._xp
        return make_entry(
            self._n, [v.shape for v in feed_vars], [np.dtype(v.dtype) for v in feed_vars],
            [make_converter(block.name, v) for v in feed_vars], self._bind,
            runner, owner.scope.values, runner.kernel_error,
            (lambda a: to_device(a, xp)) if owner.device == "gpu" else None,
            owner.scope.lock if self.changes_state else None, self._reads,
            self._recording() if self.changes_state else None)

    def _recording(self) -> Recording | None:
        history = self._owner.scope.history
        if not history.enabled:
            return None
        descs = self._owner.scope.descs
        site = method_site(self.block.name, self.writes, [r for r, _ in self._reads],
                           sum(_nbytes(descs[n]) for n in self.writes if n in descs))
        return Recording(site.names, history.recorder(site))

    def _retire(self, why: str) -> None:
        """Make calls of this method object fail with ``why`` (its program was replaced)."""
        def retired(self: CompiledMethod, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(why)
        type(self).__call__ = retired

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # replaced per method in __init__
        raise NotImplementedError

    def _bind(self, args: tuple, kwargs: dict) -> tuple:
        args = tuple(a for a in args if a is not MISSING)  # parameters the caller left out
        return bind_arguments(self.block.name, self._feeds, args, kwargs, self._option_hint)

    def _option_hint(self, key: str) -> str:
        """Where an option goes, when a call passes one of the class's options."""
        cls = self._owner.source_class
        names = getattr(cls, "option_names", None)
        if cls is None or names is None or key not in names():
            return ""
        return (f". {key!r} is an option of {cls.__name__}: options are fixed when the "
                f"program compiles, e.g. {cls.__name__}({key}=...).Compile()")

    @property
    def owner(self) -> CompiledProgram:
        """The compiled program whose scope this method reads and writes."""
        return self._owner

    @property
    def runner(self) -> BlockRunner:
        """What plans and runs this method: its block as planned (`block`), whether it runs
        in test mode (`is_test`) and its generated plans per feed signature (`plans`)."""
        return self._runner

    @property
    def source(self) -> str:
        """The generated Python of the most recently planned feed signature."""
        if not self._runner.plans:
            return (f"# {self.block.name}: no plan yet; a plan is generated on the first call "
                    f"for each distinct set of input shapes")
        return list(self._runner.plans.values())[-1].source

    @property
    def text(self) -> str:
        return format_block(self._owner.program, self.block)

    @property
    def watched(self) -> Watched:
        """The watched values of this method's last call (see `CompiledProgram.watch`)."""
        from .watch import Watched
        return self._owner._watch_set().by_method.get(self.block.name,
                                                      Watched(self.block.name, 0, {}))

    def __repr__(self) -> str:
        return self.text


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


# Programs compiled from a class (`Program.Compile`), oldest first; weakly held.
_compiled_from_classes: weakref.WeakValueDictionary[int, CompiledProgram] = \
    weakref.WeakValueDictionary()
_order = itertools.count()


def live_programs() -> list[CompiledProgram]:
    """Every program compiled from a `fluid.Program` class that is still alive, oldest
    first (what the notebook extension recompiles when a class is defined again)."""
    return [p for _, p in sorted(_compiled_from_classes.items())]


class CompiledProgram(Versions):
    """Owns a program description and the scope every method reads and writes."""

    def __init__(self, program: ProgramDesc, *, seed: int | None = None,
                 device: str | None = None, initialize: bool = True,
                 initial_values: Mapping[str, Any] | None = None):
        self.seed = check_seed(seed)
        self.device = resolve_device(device or get_device())   # 'auto' -> 'cpu' or 'gpu'
        self._xp = array_module_for(self.device)
        self.scope = Scope(persistable_descs(program))
        self.program = program
        self.methods: dict[str, CompiledMethod] = {}
        self.source_class: type | None = None   # set by Program.Compile (record_origin)
        self.options: dict[str, Any] = {}
        self.compile_args: dict[str, Any] = {}
        # Readers hold threads and files: close them when this program is collected.
        self._finalizer = weakref.finalize(self, close_readers, self.scope.values)
        if no_history_reason(program) is not None:
            self.scope.history.enabled = False
        for name, value in (initial_values or {}).items():
            self.scope.values[name] = to_device(value, self._xp)
        if initialize:
            self._run_startup()
        self._install(program)

    def _install(self, program: ProgramDesc) -> None:
        """Make ``program`` the code this object runs: one method per method block.
        Method objects of the previous program are retired."""
        for name, method in self.methods.items():
            method._retire(f"{name}() belongs to an earlier program of this object, which "
                           f"was recompiled or rewound; call the object's current method "
                           f"(e.g. prog.{name}(...)) instead of one kept from before")
            if self.__dict__.get(name) is method:
                delattr(self, name)
        self.program = program
        self.scope.descs = persistable_descs(program)
        self.methods = {}
        for block in program.method_blocks():
            if block.name in RESERVED_NAMES or block.name.startswith("_") or hasattr(
                    self, block.name):
                raise ProgramDefinitionError(
                    f"method name {block.name!r} is used by the compiled program itself; "
                    f"rename the method (reserved: {', '.join(sorted(RESERVED_NAMES))})")
            method = CompiledMethod(self, block)
            self.methods[block.name] = method
            setattr(self, block.name, method)
        self._rewatch()

    def record_origin(self, source_class: type, options: Mapping[str, Any],
                      compile_args: Mapping[str, Any]) -> None:
        """Remember how this program was made: ``source_class(**options).Compile(
        **compile_args)`` (`Program.Compile` calls this); `recompile` and the notebook's
        live reload read it."""
        self.source_class = source_class
        self.options = dict(options)
        self.compile_args = dict(compile_args)
        _compiled_from_classes[next(_order)] = self

    def _label(self) -> str:
        return self.program.name or "this program"

    # --- state -----------------------------------------------------------------------------

    def _run_startup(self, kinds: set[str] | None = None) -> None:
        """Run block 0's initialisers; only those creating vars of ``kinds`` when given
        (after a checkpoint restored the tensors, readers still need creating)."""
        block0 = self.program.global_block()
        if kinds is not None:
            block0 = dataclasses.replace(block0, ops=[
                op for op in block0.ops
                if any(block0.vars[n].kind in kinds for n in op.output_names())])

        def rng_for(op_index: int):
            # Seeded by the initialised var's name: adding a parameter leaves others' values.
            names = block0.ops[op_index].output_names() if op_index >= 0 else []
            salt = zlib.crc32("|".join(names).encode())
            if self.seed is None:
                return np.random.default_rng()
            return np.random.default_rng([self.seed, salt])

        BlockRunner(self.program, block0, self._xp, self.seed, rng_for).run_once(
            self.scope.values)

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

    def close(self) -> None:
        """Stop reader threads and close their files. The program stays usable: a reader
        reopens on its next read."""
        with self.scope.lock:
            close_readers(self.scope.values)

    def __enter__(self) -> CompiledProgram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        """Write the program and every persistable var to the directory ``path``,
        atomically; `fluid.load(path)` restores it in any process."""
        checkpoint.save(path, self.program, self.scope, self.seed)

    def _release(self) -> None:
        """Give up this object's state without closing it: another program took it."""
        self._finalizer.detach()
        for key in [k for k, p in _compiled_from_classes.items() if p is self]:
            _compiled_from_classes.pop(key, None)
        self.scope.values.clear()

    # --- watching values -----------------------------------------------------------------

    def _rewatch(self) -> None:
        """Give the methods, whose plain entries were just made anew (a recompilation,
        history turned on or off), their watching entries again."""
        watch = self.__dict__.get("_watch")
        if watch is not None and watch.patterns:
            from .watch import reinstall
            reinstall(self, watch)

    def _watch_set(self) -> WatchSet:
        from .watch import WatchSet
        return self.__dict__.setdefault("_watch", WatchSet())

    def watch(self, *names: str, methods: None | str | Sequence[str] = None
              ) -> dict[str, list[str]]:
        """Keep the values of the named vars after each call, to read from `watched`.

        A name is a var (``'mlp/fc_0.tmp_2'``, a gradient ``'mlp/fc_0.w_0@GRAD'``), a layer
        or a var_scope (``'mlp'``: all its activations and gradients), or a pattern with
        ``*``; ``methods`` limits watching to some methods. Calls add to what is watched;
        returns what each method now keeps. Unwatched methods run exactly as before."""
        from .watch import install, select
        watch = self._watch_set()
        patterns = list(dict.fromkeys(watch.patterns + list(names)))
        wanted = None if methods is None else {methods} if isinstance(methods, str) \
            else set(methods)
        for m in wanted or ():
            if m not in self.methods:
                raise KeyError(f"watch: no method {m!r}; the methods are: "
                               f"{', '.join(self.methods)}")
        persistable = {n: v for n, v in self.program.global_block().vars.items()
                       if v.persistable}
        for name in names:
            if not any(select(m.block, [name], persistable) for m in self.methods.values()
                       if wanted is None or m.block.name in wanted):
                raise KeyError(f"watch: {name!r} names no var of "
                               f"{'any method' if wanted is None else ', '.join(wanted)}; "
                               f"give a var, a layer or var_scope such as 'mlp', or a "
                               f"pattern such as '*@GRAD' (the text form lists the vars)")
        watch.patterns, watch.methods = patterns, wanted
        return install(self, watch)

    def unwatch(self, *names: str) -> dict[str, list[str]]:
        """Stop watching ``names`` (no names: everything); methods no longer watched run
        their plain entry again. Returns what each method still keeps."""
        from .watch import install
        watch = self._watch_set()
        watch.patterns = [p for p in watch.patterns if names and p not in names]
        return install(self, watch)

    @property
    def watched(self) -> Watched:
        """The watched values of the last call of any method (see `watch`): a mapping of var
        name to array, with ``.method`` and ``.call``."""
        return self._watch_set().last

    # --- printing --------------------------------------------------------------------------

    def summary(self, methods: None | str | Sequence[str] = None) -> Summary:
        """The model's layers in a table, as Keras' ``model.summary()``: each layer (under
        its var_scope) with its type, output shape and parameter count, then trainable,
        non-trainable and optimizer-state totals. ``methods`` limits it to some methods.
        Prints as text; displays as HTML in a notebook."""
        from ..summary import summarize
        return summarize(self.program, methods)

    def __str__(self) -> str:
        return format_program(self.program)

    def __repr__(self) -> str:
        params = self.parameters()
        count = sum(p.size for p in params.values())
        return (f"<compiled {self.program.name or 'program'}: methods "
                f"{', '.join(self.methods) or 'none'}; {len(params)} parameters "
                f"({count} values) on {self.device}>")
