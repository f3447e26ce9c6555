"""How a compiled program changes while it lives, and goes back: `Timeline` is the
component a `CompiledProgram` holds for its history of changes, `rewind`, and putting in
the program of an edited class (a recompilation, `runtime.live.recompile`).

* `keep_history` turns the history on or off; each method then installs the entry that
  records its calls, or the one that does not;
* `rewind(n)` computes what the last ``n`` changes replaced (`History.plan`), moves the
  readers back first (all or none), then writes back the rows sparse updates overwrote in
  place, and puts values, random generators' states, and past
  a recompilation the earlier program, back, all under the scope's lock;
* `swap` puts in a recompiled program with its state, recording the earlier program and
  state as one change.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import RewindError
from ...ir.records import ProgramDesc
from .history import Generation, History, Rewound, Site, array_bytes, program_nbytes
from .origin import Origin
from .owner import Owner
from .state import close_value, no_history_reason, persistable_descs


class Timeline:
    """The history, rewind and swap of one compiled program's code and state."""

    def __init__(self, owner: Owner):
        self._owner = owner

    @property
    def history(self) -> History:
        return self._owner.scope.history

    def keep(self, enabled: bool = True, *, calls: int | None = None,
             memory: int | None = None) -> History:
        """See `CompiledProgram.keep_history`."""
        owner = self._owner
        reason = no_history_reason(owner.program)
        if enabled and reason is not None:
            raise RewindError(f"{owner.label} cannot keep a history: {reason}")
        with owner.scope.lock:
            self.history.configure(enabled, calls, memory)
            for method in owner.methods.values():
                method.refresh()
        return self.history

    def rewind(self, n: Any = 1) -> Rewound:
        """See `CompiledProgram.rewind`."""
        owner, scope = self._owner, self._owner.scope
        with scope.lock:
            history = self.history
            plan = history.plan(n, owner.label)
            after = plan.updates if plan.replace_all else {**scope.values, **plan.updates}
            readers = _seek_readers(after, plan.positions)
            for undo in plan.rows:   # rows sparse updates wrote in place, newest first
                undo.apply()
            leaving = [v for k, v in scope.values.items()
                       if after.get(k) is not v and not hasattr(v, "shape")]
            restored = None
            if plan.generation is not None:
                generation = plan.generation
                owner.install(generation.program, generation.origin)
                scope.replace(plan.updates, persistable_descs(generation.program))
                restored = (generation.origin.source_class.__name__
                            if generation.origin is not None else owner.label)
            else:
                scope.restore(plan.updates, plan.removed)
            for streams, states in plan.streams.values():
                streams.seek(states)
            staying = {id(v) for v in scope.values.values()}
            for value in leaving:
                if id(value) not in staying:
                    close_value(value)
            history.drop_newest(plan.count)
            return Rewound(owner.label, plan.undone, history.count, restored, readers)

    def swap(self, program: ProgramDesc, values: Mapping[str, Any], origin: Origin) -> None:
        """Run ``program`` from now on, with ``values`` as its state (a recompilation);
        one change in the history, which keeps the whole earlier program and state and is
        charged for what only it holds: the earlier program and the values the new state
        no longer has."""
        owner, scope = self._owner, self._owner.scope
        with scope.lock:
            history = self.history
            before = scope.snapshot()
            keep = history.enabled and no_history_reason(program) is None
            generation = Generation(owner.program, owner.origin, before, scope.positions())
            owner.install(program, origin)
            scope.replace(values, persistable_descs(program))
            if keep:
                kept = {id(v) for v in values.values()}
                only_here = sum(array_bytes(v) for v in before.values() if id(v) not in kept)
                history.record(Site("recompile", f"recompile {origin.source_class.__name__}"),
                               (), (), generation=generation,
                               nbytes=only_here + program_nbytes(generation.program))
            elif history.enabled:   # the new program cannot keep one
                history.configure(enabled=False)
                for method in owner.methods.values():
                    method.refresh()
            for name, value in before.items():
                if values.get(name) is not value:
                    close_value(value)


def _seek_readers(values: Mapping[str, Any], positions: Mapping[str, int]) -> dict[str, int]:
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
