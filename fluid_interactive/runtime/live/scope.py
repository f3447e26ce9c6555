"""The scope: the values of one compiled program's persistable vars and readers.

Every method of a compiled program reads and writes one `Scope`. Generated code works on
``scope.values`` (a plain dict, the fastest thing to index) and commits a step's writes in
one ``dict.update`` at its end; everything else goes through the methods here: `set`
(values replaced between steps, recorded as one change), `replace` (a recompilation
puts in another program's state) and `restore` (a rewind).

``descs`` describes each persistable var (its `VarDesc`: shape, dtype, kind), so what
reads or writes the scope without the program at hand (checkpoints, the explorer) can
check values against it. ``history`` keeps what each change replaced, when it is on
(`runtime.history`).

Two rules make concurrent use safe (see docs/api.md, "Concurrency"):

* an array in the scope is never changed in place: a step puts new arrays in, so a reader
  holding the old ones (another thread's call, a snapshot, the history) keeps a
  consistent view. The one exception is ``in_place``: the tables a sparse update changes
  by rows in place (ops/row_journal.py), so that a step costs its rows, not the table.
  `snapshot` copies those, the history keeps their rows, and a method reading one runs
  under ``lock``;
* whatever changes values outside a step holds ``lock``, the lock that methods which
  change state run under, so it never lands in the middle of a step.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ...ir.records import VarDesc
from .history import History, Site, set_site


class Scope:
    """Name -> value (arrays on the program's device, reader objects), what each name is,
    the lock that orders everything that changes them, and the history of changes."""

    __slots__ = ("values", "lock", "descs", "history", "in_place", "__weakref__")

    def __init__(self, descs: Mapping[str, VarDesc] | None = None,
                 history: History | None = None) -> None:
        self.values: dict[str, Any] = {}
        self.lock = threading.RLock()
        self.descs: dict[str, VarDesc] = dict(descs or {})
        self.history = history if history is not None else History(self.lock)
        #: the names whose arrays steps change by rows, in place (see the module docstring)
        self.in_place: frozenset[str] = frozenset()

    def __contains__(self, name: object) -> bool:
        return name in self.values

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.values))

    def __len__(self) -> int:
        return len(self.values)

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def snapshot(self) -> dict[str, Any]:
        """A consistent copy of the name -> value mapping (the arrays are shared, and are
        never changed in place; the tables changed by rows in place are copied, under the
        lock, so no step writes rows into them meanwhile)."""
        if not self.in_place:
            return dict(self.values)  # one C-level copy: no step commits half-way through it
        with self.lock:
            return {n: v.copy() if n in self.in_place and hasattr(v, "copy") else v
                    for n, v in self.values.items()}

    def readers(self) -> dict[str, Any]:
        """Name -> reader object, for every reader in the scope."""
        return {n: v for n, v in self.values.items()
                if self.descs.get(n) is not None and self.descs[n].kind == "reader"
                and hasattr(v, "tell")}

    def positions(self, names: Iterable[str] | None = None) -> dict[str, int]:
        """Reader name -> how many batches it returned since its last reset."""
        readers = self.readers()
        if names is not None:
            readers = {n: readers[n] for n in names if n in readers}
        return {n: r.tell() for n, r in readers.items()}

    def set(self, updates: Mapping[str, Any], label: str = "set_var") -> None:
        """Replace values, all at once, between steps: one change in the history."""
        with self.lock:
            if self.history.enabled:
                site, old = set_site(label, updates, map(self.values.get, updates))
                self.values.update(updates)
                self.history.record(site, old, ())
            else:
                self.values.update(updates)

    def replace(self, values: Mapping[str, Any], descs: Mapping[str, VarDesc]) -> None:
        """Make the scope hold exactly ``values``, described by ``descs`` (another
        program's state). Names that stay are replaced before the others go, so a call
        running concurrently (one that changes nothing runs without the lock) never finds
        a name of both programs missing."""
        with self.lock:
            self.values.update(values)
            for name in [n for n in self.values if n not in values]:
                del self.values[name]
            self.descs = dict(descs)

    def restore(self, updates: Mapping[str, Any], removed: Iterable[str]) -> None:
        """Put earlier values back (a rewind): ``updates`` in, ``removed`` out."""
        with self.lock:
            self.values.update(updates)
            for name in removed:
                self.values.pop(name, None)

    def record_reset(self, positions: Mapping[str, int], label: str = "reset_readers"
                     ) -> None:
        """Record that the readers ``positions`` names moved (reset, or skipped batches)
        from those positions."""
        if self.history.enabled and positions:
            self.history.record(Site("reset_readers", label, (), tuple(positions)), (),
                                tuple(positions.values()))

    def __repr__(self) -> str:
        return f"<Scope of {len(self.values)} values>"
