"""Undo for a compiled program: a bounded history of the changes made to its scope.

Every change to a compiled program's persistable state is one *change*: a call of a method
that changes state, a `set_var` / `set_parameters`, a `reset_readers`, a recompilation from
an edited class. With history on, each change keeps what it replaced:

* references to the arrays it overwrote. Arrays in a scope are never changed in place, so
  the reference *is* the snapshot: nothing is copied, and a step costs a tuple of
  references and one append. The exception is a table that a sparse update changes by
  rows in place: for it the change keeps the rows it overwrote (ops/row_journal.py), and
  a rewind writes them back;
* the positions of the readers it moved (a reader can go back to any batch, see
  `BatchReader.seek`), and the states of the generators its random ops drew from
  (`RandomStreams.tell`), so that the calls after a rewind draw the same values again;
* for a recompilation, the program it replaced and every value of it.

`CompiledProgram.rewind(n)` puts the last ``n`` changes back, newest first, so the scope
holds again what it held before them. The history is bounded: at most ``calls`` changes
and ``memory`` bytes of replaced arrays (the arrays only it still holds); the oldest
changes are forgotten first.

History is off by default (scripts pay nothing: the call path has no history code at
all); `history_defaults` turns it on for programs compiled from then on (the notebook
extension does so when it loads) and `CompiledProgram.keep_history` per program.
"""
from __future__ import annotations

import numbers
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ...errors import RewindError

MiB = 1 << 20
DEFAULT_CALLS = 1000
DEFAULT_MEMORY = 256 * MiB
#: What the budget counts for each array besides its data (the array object), and for
#: each change (its record): small arrays cost more in headers than in data.
ARRAY_OVERHEAD = 128
CHANGE_OVERHEAD = 256

_defaults: dict[str, Any] = {"enabled": False, "calls": DEFAULT_CALLS,
                             "memory": DEFAULT_MEMORY}


def _check_limits(calls: int | None, memory: int | None) -> None:
    for what, value in (("calls", calls), ("memory", memory)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 0):
            raise ValueError(f"history {what} must be an int >= 0 (memory in bytes), got "
                             f"{value!r}")


def history_defaults(enabled: bool | None = None, *, calls: int | None = None,
                     memory: int | None = None) -> dict[str, Any]:
    """Whether programs compiled from now on keep a history for `rewind`, and its bounds:
    at most ``calls`` changes and ``memory`` bytes of replaced arrays. Returns the
    settings (called with no argument, only returns them). Off in scripts; the notebook
    extension turns it on when it loads."""
    _check_limits(calls, memory)
    if enabled is not None:
        _defaults["enabled"] = bool(enabled)
    if calls is not None:
        _defaults["calls"] = calls
    if memory is not None:
        _defaults["memory"] = memory
    return dict(_defaults)


@dataclass(frozen=True)
class Site:
    """What one kind of change replaces; shared by every change of one method."""
    kind: str                    # 'call', 'set', 'reset_readers' or 'recompile'
    label: str                   # the method's name, 'set_var', ...
    names: tuple[str, ...] = ()  # the values it replaces
    readers: tuple[str, ...] = ()  # the readers whose position it moves
    nbytes: int = 0              # bytes of the arrays it replaces
    # the method's random generators (`RandomStreams`), whose states follow the readers'
    # positions in each change's positions, or None: its calls draw nothing
    streams: Any = None
    # its calls write rows of tables in place: each change's replaced values end with the
    # rows it overwrote (`RowUndo`s, oldest first), which a rewind writes back
    rows: bool = False


@dataclass(frozen=True)
class Generation:
    """A compiled program's code, as a recompilation found it: enough to put it back."""
    program: Any                 # the ProgramDesc
    origin: Any                  # its `Origin` (None: not compiled from a class)
    values: dict                 # every value of the scope (references)
    positions: dict              # reader name -> position


class Change(NamedTuple):
    """One entry of a program's history, as `CompiledProgram.history` lists it."""
    number: int                  # changes recorded before it, plus one
    kind: str
    label: str
    loss: float | None        # the loss the call returned, when it returned one
    nbytes: int                  # bytes of replaced arrays this entry holds


# (number, site, replaced values, reader positions, loss, generation or None)
_Entry = tuple


@dataclass
class RewindPlan:
    """What rewinding ``len(undone)`` changes does, computed before anything changes."""
    undone: list[Change]
    updates: dict[str, Any]      # name -> value to put back
    removed: set[str]            # names that did not exist before
    positions: dict[str, int]    # reader name -> position to seek to
    # id(streams) -> (the `RandomStreams` of a method, the states to put back)
    streams: dict[int, tuple[Any, dict]] = field(default_factory=dict)
    generation: Generation | None = None
    replace_all: bool = False    # the scope becomes exactly ``updates`` (past a recompile)
    # rows that calls overwrote in place (`RowUndo`), to write back first, in this order
    rows: list = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.undone)


def loss_of(result: Any) -> float | None:
    """The loss in a call's result, when there is an obvious one: a float, the first
    float of a tuple, a dict's ``loss`` / ``cost`` / ``avg_cost`` or first float."""
    if type(result) is float:
        return result
    if isinstance(result, dict):
        for key in ("loss", "cost", "avg_cost"):
            if type(result.get(key)) is float:
                return result[key]
        result = tuple(result.values())
    if isinstance(result, tuple):
        for item in result:
            if type(item) is float:
                return item
    return None


def program_nbytes(program: Any) -> int:
    """The memory a program description holds: its records, their containers and the
    strings in them, each object counted once (names are shared between ops)."""
    seen: set[int] = set()
    total = 0
    stack = [program]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or obj is None or isinstance(obj, (bool, int, float)):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif hasattr(obj, "__slots__"):
            stack.extend(getattr(obj, s) for s in obj.__slots__ if hasattr(obj, s))
    return total


def array_bytes(value: Any) -> int:
    """What keeping ``value`` costs: its data and the array object (0 for a reader)."""
    if not hasattr(value, "shape"):
        return 0
    return int(getattr(value, "nbytes", 0) or 0) + ARRAY_OVERHEAD


class History:
    """The bounded list of changes of one scope (see the module docstring). Methods that
    change it run under ``lock``, the scope's lock."""

    def __init__(self, lock: threading.RLock, enabled: bool | None = None,
                 calls: int | None = None, memory: int | None = None):
        self.lock = lock
        self.enabled = _defaults["enabled"] if enabled is None else bool(enabled)
        self.calls: int = _defaults["calls"] if calls is None else calls
        self.memory: int = _defaults["memory"] if memory is None else memory
        self._entries: deque[_Entry] = deque()
        self.nbytes = 0          # bytes of replaced arrays held
        self.count = 0           # the number of the last change recorded
        self.forgotten = 0       # changes dropped to stay within the bounds
        self.refused: tuple[str, int] | None = None  # (label, bytes) too large to keep

    # --- settings -----------------------------------------------------------------------

    def configure(self, enabled: bool | None = None, calls: int | None = None,
                  memory: int | None = None) -> None:
        _check_limits(calls, memory)
        with self.lock:
            if enabled is not None:
                self.enabled = bool(enabled)
                if not self.enabled:
                    self.clear()
            if calls is not None:
                self.calls = calls
            if memory is not None:
                self.memory = memory
            self._trim()

    def clear(self) -> None:
        with self.lock:
            self._entries.clear()
            self.nbytes = 0

    # --- recording ------------------------------------------------------------------------

    def record(self, site: Site, old: tuple, positions: tuple, result: Any = None,
               generation: Generation | None = None, nbytes: int | None = None
               ) -> None:
        """Keep one change (called under the lock, after the change committed)."""
        self.count += 1
        size = (site.nbytes if nbytes is None else nbytes) + CHANGE_OVERHEAD
        self._entries.append((self.count, site, old, positions, loss_of(result), generation,
                              size))
        self.nbytes += size
        if self.nbytes > self.memory or len(self._entries) > self.calls:
            self._trim()

    def recorder(self, site: Site) -> Callable[[tuple, tuple, Any], None]:
        """``record(old, positions, result)`` for the calls of one method: `record` with
        what is fixed per method bound once (it runs on every step)."""
        append, entries = self._entries.append, self._entries
        size = site.nbytes + CHANGE_OVERHEAD

        def record(old: tuple, positions: tuple, result: Any) -> None:
            self.count = count = self.count + 1
            held_here = size + (sum(undo.nbytes for undo in old[-1]) if site.rows else 0)
            append((count, site, old, positions,
                    result if type(result) is float else loss_of(result), None, held_here))
            self.nbytes = held = self.nbytes + held_here
            if held > self.memory or len(entries) > self.calls:
                self._trim()
        return record

    def _trim(self) -> None:
        entries = self._entries
        while entries and (self.nbytes > self.memory or len(entries) > self.calls):
            dropped = entries.popleft()
            self.nbytes -= dropped[6]
            self.forgotten += 1
            if not entries and dropped[6] > self.memory:
                self.refused = (dropped[1].label, dropped[6])
        if entries:
            self.refused = None

    # --- reading --------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        state = "on" if self.enabled else "off"
        return (f"<history {state}: {len(self._entries)} change(s) in {_mib(self.nbytes)} of "
                f"{_mib(self.memory)}, at most {self.calls} changes; changes() lists them>")

    def changes(self) -> list[Change]:
        """Every change that can be rewound, newest first."""
        with self.lock:
            return [_change(e) for e in reversed(self._entries)]

    # --- rewinding ------------------------------------------------------------------------

    def plan(self, n: int, label: str) -> RewindPlan:
        """What undoing the last ``n`` changes restores (nothing changes yet); ``label``
        names the program in messages."""
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise RewindError(f"rewind takes a number of changes >= 1, got {n!r}")
        n = int(n)
        if not self.enabled:
            raise RewindError(f"{label} keeps no history, so there is nothing to rewind: "
                              f"turn it on with prog.keep_history() (it is on by default "
                              f"for programs compiled in a notebook after %load_ext fluid)")
        if n > len(self._entries):
            raise RewindError(self._too_far(n, label))
        updates: dict[str, Any] = {}
        positions: dict[str, int] = {}
        plan = RewindPlan([], updates, set(), positions)
        for entry in list(reversed(self._entries))[:n]:
            _, site, old, moved, _, generation, _ = entry
            plan.undone.append(_change(entry))
            if generation is not None:   # everything newer is superseded
                plan.generation, plan.replace_all = generation, True
                updates.clear()
                updates.update(generation.values)
                positions.clear()
                positions.update(generation.positions)
                plan.streams.clear()   # the earlier program's methods start from the seed
                continue
            if site.rows:   # rows written in place: put back, newest first
                plan.rows.extend(reversed(old[-1]))
            updates.update(zip(site.names, old))
            positions.update(zip(site.readers, moved))
            if site.streams is not None:
                plan.streams[id(site.streams)] = (site.streams, moved[len(site.readers)])
        plan.removed = {name for name, value in updates.items() if value is None}
        for name in plan.removed:
            del updates[name]
        return plan

    def _too_far(self, n: int, label: str) -> str:
        held = len(self._entries)
        text = f"cannot rewind {n} change(s): the history of {label} holds {held}"
        if self.refused is not None and not held:
            what, size = self.refused
            return (text + f"; one change of {what} replaces {_mib(size)} of arrays, more "
                           f"than the history's memory budget of {_mib(self.memory)}: raise it "
                           f"with prog.keep_history(memory=...)")
        if self.forgotten:
            text += (f" (the last {held} within its bounds of {self.calls} changes and "
                     f"{_mib(self.memory)}; {self.forgotten} older change(s) were forgotten: "
                     f"prog.keep_history(calls=..., memory=...) keeps more)")
        return text + "; prog.history.changes() lists them"

    def drop_newest(self, n: int) -> None:
        """Forget the last ``n`` changes (they were rewound)."""
        for _ in range(n):
            entry = self._entries.pop()
            self.nbytes -= entry[6]
        self.count -= n   # changes are numbered consecutively


def _change(entry: _Entry) -> Change:
    number, site, _, _, loss, _, size = entry
    return Change(number, site.kind, site.label, loss, size)


def _mib(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n} bytes"


def method_site(label: str, names: Sequence[str], readers: Sequence[str],
                nbytes: int, streams: Any = None, rows: bool = False) -> Site:
    return Site("call", label, tuple(names), tuple(readers), nbytes, streams, rows)


def set_site(label: str, names: Iterable[str], old: Iterable[Any]) -> tuple[Site, tuple]:
    """The site and replaced values of a `set` of ``names``."""
    names, old = tuple(names), tuple(old)
    return Site("set", label, names, (), sum(array_bytes(v) for v in old)), old


@dataclass
class Rewound:
    """What `CompiledProgram.rewind` did."""
    label: str
    undone: list[Change] = field(default_factory=list)
    number: int = 0                          # the change the scope is at now
    program_restored: str | None = None   # the class whose program came back, if any
    readers: dict[str, int] = field(default_factory=dict)   # reader -> batch position

    def __str__(self) -> str:
        calls: dict[str, int] = {}
        for change in self.undone:
            calls[change.label] = calls.get(change.label, 0) + 1
        what = ", ".join(f"{label} x{k}" if k > 1 else label for label, k in calls.items())
        when = (f"after change {self.number}" if self.number else
                "when its history began")
        text = (f"fluid: rewound {self.label} by {len(self.undone)} change(s) ({what}); "
                f"its state is as it was {when}")
        if self.program_restored:
            text += f"; it runs the earlier program of {self.program_restored} again"
        if self.readers:
            text += "; " + ", ".join(f"{name} is back at batch {pos}"
                                     for name, pos in self.readers.items())
        return text
