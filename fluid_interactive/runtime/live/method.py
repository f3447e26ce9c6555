"""`CompiledMethod`: one traced method of a compiled program, callable with the values of
its data vars.

A call goes through a generated entry (`runtime.plan.entry`) that is made for the method's
data vars, so the common call costs a type check per argument and a dict lookup before
the plan runs. The entry comes in variants: plain; recording each call in the program's
history; watching (running a plan that also hands back the watched vars); and retired
(the program was replaced). The method alone chooses and installs its entry
(`refresh`), asking the program's history and watcher what they need; nothing else
assigns ``__call__``.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from ...backend import to_device
from ...ir.blocks import nested_blocks, walk_ops
from ...ir.records import BlockDesc, OpDesc, ProgramDesc, VarDesc
from ...ir.text import format_block
from ...ops.registry import get_spec
from ...ops.row_journal import rows_written
from ..plan.entry import MISSING, Recording, make_entry
from ..plan.feed import bind_arguments, make_converter
from ..plan.runner import BlockRunner
from ..plan.streams import RandomStreams
from .history import ARRAY_OVERHEAD, method_site
from .owner import Owner
from .watch import Watched


def plan_view(block: BlockDesc, reads: list[OpDesc]) -> BlockDesc:
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
    persistable var, takes a reader's batch, draws random numbers or calls out of the
    program (`OpSpec.effects`). Such calls run one at a time; the others may run
    concurrently."""
    for inner, op in walk_ops(program, block):   # a loop's body counts
        spec = get_spec(op.type)
        if spec.entry:
            return True
        if spec.inert(spec.full_attrs(op.attrs), is_test):
            continue
        if spec.random or spec.effects or any(_persistable(program, inner, n)
                                              for n in op.output_names()):
            return True
    return False


def draws(program: ProgramDesc, block: BlockDesc, is_test: bool) -> bool:
    """Whether a call of ``block`` (or of a block nested in it) runs a random op that
    draws in this mode."""
    for _, op in walk_ops(program, block):
        spec = get_spec(op.type)
        if spec.random and not spec.inert(spec.full_attrs(op.attrs), is_test):
            return True
    return False


def written_state(program: ProgramDesc, block: BlockDesc, is_test: bool) -> list[str]:
    """The persistable vars a call of ``block`` may write, in the order its ops do (an op
    that is inert in this mode commits nothing)."""
    out: list[str] = []
    seen: set[str] = set()   # out's names: a list lookup made this quadratic in the state
    for inner, op in walk_ops(program, block):
        spec = get_spec(op.type)
        if spec.inert(spec.full_attrs(op.attrs), is_test):
            continue
        new = [n for n in op.output_names() if n not in seen and _persistable(program, inner, n)]
        out += new
        seen.update(new)
    return out


def rows_state(program: ProgramDesc, block: BlockDesc) -> tuple[list[str], list[str]]:
    """(the persistable vars a call of ``block`` writes by rows in place, those of them
    that no op of it writes whole): ops/row_journal.py."""
    by_rows: dict[str, None] = {}
    whole: set[str] = set()
    for inner, op in walk_ops(program, block):
        spec = get_spec(op.type)

        def kind_of(name: str, where: BlockDesc = inner) -> str:
            return program.var(where, name).kind
        names = rows_written(op, spec.row_writes, spec.full_attrs(op.attrs), kind_of)
        by_rows.update((n, None) for n in names if _persistable(program, inner, n))
        whole.update(n for n in op.output_names() if n not in names)
    return list(by_rows), [n for n in by_rows if n not in whole]


def reads_state(program: ProgramDesc, block: BlockDesc, names: AbstractSet[str]) -> bool:
    """Whether a call of ``block`` reads one of ``names``."""
    return any(n in names for _, op in walk_ops(program, block) for n in op.input_names())


def _persistable(program: ProgramDesc, block: BlockDesc, name: str) -> bool:
    var = program.find_var(block, name)
    return var is not None and var.persistable


def _nbytes(var: VarDesc) -> int:
    """What the history counts for keeping a value of ``var`` (see `array_bytes`)."""
    if var.kind != "tensor" or any(d < 0 for d in var.shape):
        return 0
    return math.prod(var.shape) * np.dtype(var.dtype).itemsize + ARRAY_OVERHEAD


class CompiledMethod:
    """A traced method, callable with the values of its data vars."""

    def __new__(cls, owner: Owner, block: BlockDesc) -> CompiledMethod:
        # Each method gets its own subclass whose __call__ is generated for its data vars:
        # Python looks __call__ up on the type, and this is the hottest path of a step.
        subclass = type(cls.__name__, (cls,), {"__module__": cls.__module__})
        return super().__new__(subclass)

    def __init__(self, owner: Owner, block: BlockDesc):
        self._owner = owner
        self.block = block
        self.__name__ = block.name
        self._feeds = list(block.feeds)
        reads = [op for op in block.ops if get_spec(op.type).entry]
        #: the generators of its random ops, shared by every plan (streams.py)
        self.streams = RandomStreams(owner.seed)
        self._runner = BlockRunner(owner.program, plan_view(block, reads),
                                   owner.array_module, owner.seed, is_test=block.is_test,
                                   streams=self.streams)
        self.changes_state = changes_state(owner.program, block, self._runner.is_test)
        self._draws = draws(owner.program, block, self._runner.is_test)
        self._reads = [(op.input("Reader")[0], len(op.output("Out"))) for op in reads]
        #: its block and the blocks nested in it (the bodies of its loops and branches)
        self.blocks = list(nested_blocks(owner.program, block))
        #: the persistable vars a call writes: what the history keeps of each call
        self.writes = written_state(owner.program, block, self._runner.is_test)
        #: those it writes by rows in place (a sparse update's table), and of them those
        #: it writes by rows alone: the history keeps their rows, not the whole arrays
        self.rows_written, self._rows_only = rows_state(owner.program, block)
        # A call that reads a table another call changes in place runs under the lock, so
        # it never sees half of a step's rows.
        self._locked = self.changes_state or reads_state(owner.program, block,
                                                         owner.scope.in_place)
        self._watch_runners: dict[tuple[str, ...], BlockRunner] = {}
        # (watched names, recording history) -> the generated entry of that variant
        self._entries: dict[tuple[tuple[str, ...], bool], Callable[..., Any]] = {}
        self._retired: str | None = None
        self.refresh()

    # --- the entry: chosen and installed here only ----------------------------------------

    def refresh(self) -> None:
        """Install the entry the program's settings ask for now: plain or recording the
        history, watching or not; a retired method's entry only raises."""
        if self._retired is not None:
            self._install(_retired_entry(self._retired))
            return
        names = tuple(self._owner.watcher.names_for(self.blocks, self._owner.scope.descs))
        key = (names, self.changes_state and self._owner.scope.history.enabled)
        entry = self._entries.get(key)
        if entry is None:   # each variant is generated once; switching back reuses it
            if not names:
                entry = self._entry(self._runner)
            else:
                entry = _watching_entry(self._entry(self._watch_runner(names)),
                                        self.block.name, self._owner.watcher.record)
            self._entries = {k: e for k, e in self._entries.items() if not k[0]}
            self._entries[key] = entry
        self._install(entry)

    def _install(self, entry: Callable[..., Any]) -> None:
        # The one place an entry is installed: on this method's own subclass, where
        # Python looks ``__call__`` up (see __new__).
        type(self).__call__ = entry  # type: ignore[method-assign]

    def retire(self, why: str) -> None:
        """From now on calls of this method object fail with ``why`` (its program was
        replaced by a recompilation or a rewind)."""
        self._retired = why
        self.refresh()

    def _entry(self, runner: BlockRunner) -> Callable[..., Any]:
        """The generated ``__call__`` that runs ``runner``'s plans."""
        block, owner = self.block, self._owner
        feed_vars = [block.vars[n] for n in block.feeds]
        xp = owner.array_module
        return make_entry(
            len(self._feeds), [v.shape for v in feed_vars],
            [np.dtype(v.dtype) for v in feed_vars],
            [make_converter(block.name, v) for v in feed_vars], self._bind,
            runner, owner.scope.values, self._error_maker(runner),
            (lambda a: to_device(a, xp)) if owner.device == "gpu" else None,
            owner.scope.lock if self._locked else None, self._reads,
            self._recording() if self.changes_state else None,
            runner.journal if self.rows_written else None)

    def _error_maker(self, runner: BlockRunner) -> Callable[..., Exception]:
        """How a failing call is reported: the runner's error naming the op, and for a
        method that reads batches, what happened to its batch and how to drop it."""
        if not self._reads:
            return runner.kernel_error

        def kernel_error(error: Exception, code: Any) -> Exception:
            report = runner.kernel_error(error, code)
            return type(report)(f"{report}\n  Its batch was given back: the next call reads "
                                f"it again. To drop it, call prog.skip_batches() first.")
        return kernel_error

    def _recording(self) -> Recording | None:
        history = self._owner.scope.history
        if not history.enabled:
            return None
        descs = self._owner.scope.descs
        streams = self.streams if self._draws else None
        whole = [n for n in self.writes if n not in self._rows_only]
        site = method_site(self.block.name, whole, [r for r, _ in self._reads],
                           sum(_nbytes(descs[n]) for n in whole if n in descs), streams,
                           rows=bool(self.rows_written))
        return Recording(site.names, history.recorder(site), streams)

    def _watch_runner(self, names: tuple[str, ...]) -> BlockRunner:
        """A runner of this method's block whose plans also return ``names`` (kept per
        set of names, so watching on and off again plans nothing anew)."""
        runner = self._watch_runners.get(names)
        if runner is None:
            block = self._runner.block
            runner = BlockRunner(
                self._owner.program,
                dataclasses.replace(block, returns=(block.returns, {n: n for n in names})),
                self._owner.array_module, self._owner.seed, is_test=self._runner.is_test,
                streams=self.streams)
            self._watch_runners = {names: runner}   # an earlier selection is not reused
        return runner

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # replaced per method by refresh
        raise NotImplementedError

    # --- arguments ------------------------------------------------------------------------

    def _bind(self, args: tuple, kwargs: dict) -> tuple:
        args = tuple(a for a in args if a is not MISSING)  # parameters the caller left out
        return bind_arguments(self.block.name, self._feeds, args, kwargs, self._option_hint)

    def _option_hint(self, key: str) -> str:
        """Where an option goes, when a call passes one of the class's options."""
        origin = self._owner.origin
        cls = origin.source_class if origin is not None else None
        if cls is None or key not in getattr(cls, "option_names", list)():
            return ""
        name = cls.__name__
        return (f". {key!r} is an option of {name}: options are fixed when the program "
                f"compiles, e.g. {name}({key}=...).Compile()")

    # --- reading ----------------------------------------------------------------------------

    @property
    def owner(self) -> Owner:
        """The compiled program whose scope this method reads and writes."""
        return self._owner

    @property
    def runner(self) -> BlockRunner:
        """What plans and runs this method: its block as planned (`block`), whether it runs
        in test mode (`is_test`) and its generated plans per feed signature (`plans`)."""
        return self._runner

    @property
    def plans(self) -> list:
        """The plans kept now, by the shapes they serve (`family.PlanFamily`): a dim
        declared -1 (the batch, a sequence's length) is any size, served by one generated
        function over one memory of buffers; each lists the ops whose kernels are
        prepared for each concrete shape it was called with."""
        return self._runner.families()

    @property
    def tier(self) -> str:
        """Which kernels this method's latest plan runs: 'numpy'; 'compiling' or
        'loading' (NumPy meanwhile, compiled kernels being built in the background); or
        'compiled' (the `fast` extra; docs/architecture.md, "The compiled tier")."""
        return self._runner.tier

    @property
    def source(self) -> str:
        """The generated Python of the most recently planned feed signature."""
        if not self._runner.plans:
            return (f"# {self.block.name}: no plan yet; a plan is generated on the first call "
                    f"for each distinct set of input shapes")
        return list(self._runner.plans.values())[-1].code.source

    @property
    def text(self) -> str:
        return format_block(self._owner.program, self.block)

    @property
    def watched(self) -> Watched:
        """The watched values of this method's last call (see `CompiledProgram.watch`)."""
        return self._owner.watcher.last_of(self.block.name)

    def __repr__(self) -> str:
        return self.text


def _retired_entry(why: str) -> Callable[..., Any]:
    def retired(self: CompiledMethod, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(why)
    return retired


def _watching_entry(entry: Callable[..., Any], method: str,
                    record: Callable[[str, dict], None]) -> Callable[..., Any]:
    """An entry that runs ``entry`` (whose plan returns ``(result, watched)``), keeps the
    watched values and returns the result."""
    # The entry calls itself for keyword or converted arguments; that inner call must give
    # back the pair too, so it goes to the entry directly, not through this wrapper.
    run = type("_WatchingEntry", (), {"__call__": entry})()

    def watching(self: CompiledMethod, *args: Any, **kwargs: Any) -> Any:
        result, kept = run(*args, **kwargs)
        record(method, kept)
        return result
    return watching
