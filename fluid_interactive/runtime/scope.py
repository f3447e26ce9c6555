"""The scope: the values of one compiled program's persistable vars and readers.

Every method of a compiled program reads and writes one `Scope`. Generated code works on
``scope.values`` (a plain dict, the fastest thing to index) and commits a step's writes in
one ``dict.update`` at its end; everything else goes through the methods here.

Two rules make concurrent use safe (see docs/api.md, "Concurrency"):

* an array in the scope is never changed in place: a step puts new arrays in, so a reader
  holding the old ones (another thread's call, a snapshot) keeps a consistent view;
* whatever changes values outside a step (``set``, loading) holds ``lock``, the lock that
  methods which change state run under, so it never lands in the middle of a step.
"""
from __future__ import annotations

import threading
from typing import Any, Iterator, Mapping


class Scope:
    """Name -> value (arrays on the program's device, reader objects) and the lock that
    orders everything that changes them."""

    __slots__ = ("values", "lock", "__weakref__")

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.lock = threading.RLock()

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
        never changed in place)."""
        return dict(self.values)  # one C-level copy: no step commits half-way through it

    def set(self, updates: Mapping[str, Any]) -> None:
        """Replace values, all at once, between steps."""
        with self.lock:
            self.values.update(updates)

    def __repr__(self) -> str:
        return f"<Scope of {len(self.values)} values>"
