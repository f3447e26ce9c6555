"""How a compiled program changes while it lives, and goes back: its history of changes,
`rewind`, and recompiling it in place from an edited class. `CompiledProgram` takes these
methods from `Versions`; they work on the program's own scope and methods.

* `keep_history` turns the history on or off (regenerating the methods' entry points, which
  record changes only while it is on);
* `rewind(n)` computes what the last ``n`` changes replaced (`History.plan`), moves the
  readers back first (all or none), then puts values, and past a recompilation the earlier
  program, back, all under the scope's lock;
* `recompile(cls)` builds the new program (`runtime.recompile`) and `_swap` installs it,
  recording the earlier program and state as one change.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...errors import RewindError
from ...ir.records import OpRole, ProgramDesc, VarDesc
from .history import Generation, History, Rewound, Site, array_bytes
from .recompile import Recompiled, recompile

if TYPE_CHECKING:
    from .scope import Scope


def close_readers(values: dict) -> None:
    for value in list(values.values()):
        close_value(value)


def close_value(value: Any) -> None:
    close = getattr(value, "close", None)
    if close is not None and not hasattr(value, "shape"):
        close()


def persistable_descs(program: ProgramDesc) -> dict[str, VarDesc]:
    return {v.name: v for v in program.global_block().vars.values() if v.persistable}


def no_history_reason(program: ProgramDesc) -> str | None:
    """Why ``program`` cannot keep a history, or None."""
    for block in program.blocks:
        if any(op.role & (OpRole.RPC | OpRole.DIST) for op in block.ops):
            return ("its methods send to and receive from parameter servers, whose state "
                    "a rewind of this program alone could not take back")
    return None


class Versions:
    """The history, rewind and recompile methods of `CompiledProgram`."""

    scope: Scope
    program: ProgramDesc
    methods: dict
    source_class: type | None
    options: dict
    compile_args: dict

    def _install(self, program: ProgramDesc) -> None:  # provided by CompiledProgram
        raise NotImplementedError

    def _label(self) -> str:  # provided by CompiledProgram
        raise NotImplementedError

    def _rewatch(self) -> None:  # provided by CompiledProgram
        raise NotImplementedError

    @property
    def history(self) -> History:
        """The changes `rewind` can take back, newest first (``history.changes()``), and
        the bounds they are kept within (``history.calls``, ``history.memory``)."""
        return self.scope.history

    def keep_history(self, enabled: bool = True, *, calls: int | None = None,
                     memory: int | None = None) -> History:
        """Keep (or stop keeping) what each change replaces, so `rewind` can take it back:
        at most ``calls`` changes and ``memory`` bytes of replaced arrays, the oldest
        forgotten first. Turning it off forgets the history. Returns the history."""
        reason = no_history_reason(self.program)
        if enabled and reason is not None:
            raise RewindError(f"{self._label()} cannot keep a history: {reason}")
        with self.scope.lock:
            self.scope.history.configure(enabled, calls, memory)
            for method in self.methods.values():
                method._make_entry()
            self._rewatch()
        return self.scope.history

    def rewind(self, n: int = 1) -> Rewound:
        """Take back the last ``n`` changes (calls of methods that change state,
        `set_var`, `reset_readers`, recompilations), so parameters, optimizer state,
        counters and reader positions are what they were before them; past a
        recompilation, the earlier program comes back too. Raises `RewindError`, changing
        nothing, when the history does not reach that far."""
        with self.scope.lock:
            history = self.scope.history
            plan = history.plan(n, self._label())
            after = plan.updates if plan.replace_all else {**self.scope.values,
                                                           **plan.updates}
            readers = self._seek_readers(after, plan.positions)
            leaving = [v for k, v in self.scope.values.items()
                       if after.get(k) is not v and not hasattr(v, "shape")]
            restored = None
            if plan.generation is not None:
                self._adopt_generation(plan.generation, plan.updates)
                restored = getattr(plan.generation.source_class, "__name__", self._label())
            else:
                self.scope.restore(plan.updates, plan.removed)
            staying = {id(v) for v in self.scope.values.values()}
            for value in leaving:
                if id(value) not in staying:
                    close_value(value)
            history.drop_newest(n)
            return Rewound(self._label(), plan.undone, history.count, restored, readers)

    def _seek_readers(self, values: Mapping[str, Any], positions: Mapping[str, int]
                      ) -> dict[str, int]:
        """Move each reader of ``values`` to its position; all or none."""
        moved: list[tuple[Any, int]] = []
        try:
            for name, position in positions.items():
                reader = values.get(name)
                if reader is None or not hasattr(reader, "seek"):
                    continue
                before = reader.tell()
                reader.seek(position)
                moved.append((reader, before))
        except BaseException:
            for reader, before in reversed(moved):
                try:
                    reader.seek(before)
                except Exception:   # the original error is the one to report
                    pass
            raise
        return {name: pos for name, pos in positions.items() if name in values}

    def _adopt_generation(self, generation: Generation, values: Mapping[str, Any]) -> None:
        self._install(generation.program)
        self.scope.replace(values, persistable_descs(generation.program))
        self.source_class = generation.source_class
        self.options = dict(generation.options)
        self.compile_args = dict(generation.compile_args)

    def _swap(self, program: ProgramDesc, values: Mapping[str, Any], source_class: type,
              options: Mapping[str, Any], compile_args: Mapping[str, Any]) -> None:
        """Run ``program`` from now on, with ``values`` as its state (a recompilation);
        one change in the history, which keeps the whole earlier program and state."""
        with self.scope.lock:
            history = self.scope.history
            before = self.scope.snapshot()
            keep = history.enabled and no_history_reason(program) is None
            if keep:
                generation = Generation(self.program, self.source_class, dict(self.options),
                                        dict(self.compile_args), before,
                                        self.scope.positions())
            self._install(program)
            self.scope.replace(values, persistable_descs(program))
            self.source_class, self.options = source_class, dict(options)
            self.compile_args = dict(compile_args)
            if keep:
                replaced = sum(array_bytes(v) for k, v in before.items()
                               if values.get(k) is not v)
                history.record(Site("recompile", f"recompile {source_class.__name__}"), (),
                               (), generation=generation, nbytes=replaced)
            elif history.enabled:   # the new program cannot keep one
                history.configure(enabled=False)
            for name, value in before.items():
                if values.get(name) is not value:
                    close_value(value)

    def recompile(self, source: type | None = None) -> Recompiled:
        """Rebuild this program from ``source`` (a `fluid.Program` subclass; default: the
        class it was compiled from), in place: the methods become the new class's, and
        each persistable var whose value still fits keeps it (`fluid.diff` tells which).
        The options and seed it was compiled with stay; options the new class no longer
        has are left out. If the new class does not compile, the error is raised and
        nothing changes."""
        return recompile(self, source)  # type: ignore[arg-type]

