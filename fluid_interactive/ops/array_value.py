"""The value of a tensor array: an immutable list of tensors whose writes cost O(1).

A `TensorArray` never changes: `write` returns a new value, and every value made before
keeps reading what it read (the values a loop keeps for its gradient, the arrays a rewind
restores). Values derived from one another share one store of elements, each element
tagged with the version that wrote it; a value sees the elements of its own version and
older, below its own length:

* a value that no one derived from yet writes into the shared store under the next
  version: O(1) per element, whether it appends (a loop filling an array), overwrites or
  clears an element (a gradient replayed newest first), or adds into one (a gradient
  summed over a loop's iterations);
* a second value derived from the same one copies the elements it sees into a store of
  its own (O(length)), which `copied_elements` counts: values branching off one another
  are rare (a value read after a later write), a loop never does it;
* `prefix(n)` is O(1): the same store, a shorter length (a gradient array dropping the
  element a forward write appended).

An element that was never written (a gap left by a write past the end, or any element of
a gradient array no gradient reached) is None: a forward read of it is an error, a
gradient treats it as zero. A gradient array is sparse: its store holds only the elements
that were written, and `items` walks those alone.

An element overwritten in the shared store stays there while any value of the store
lives (the older values may still read it): a loop that overwrites one index N times
holds N elements until the array is dropped, at the latest when the call returns.
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from typing import Any

_version_of = itemgetter(0)


class _Store:
    """The elements shared by the values derived from one another, by index: a list of
    (version, element) in the order the versions wrote them."""
    __slots__ = ("cells", "lent", "extent")

    def __init__(self) -> None:
        self.cells: dict[int, list[tuple[int, Any]]] = {}
        # version -> the token of the one value that writes the next version here
        # (dict.setdefault is atomic: two threads deriving from one value never both win)
        self.lent: dict[int, object] = {}
        self.extent = 0   # 1 + the largest index any version wrote


class TensorArray:
    """An immutable list of tensors (None: an element never written). See the module
    docstring."""
    __slots__ = ("_store", "_version", "_length")

    #: elements copied because a value was derived from one that had lent its store
    #: already: a test counts them to catch writes that copy whole arrays
    copied_elements = 0

    def __init__(self, store: _Store | None = None, version: int = 0, length: int = 0):
        self._store = store if store is not None else _Store()
        self._version, self._length = version, length

    @classmethod
    def of(cls, elements: Iterable[Any]) -> TensorArray:
        """A new array holding ``elements`` in order."""
        store = _Store()
        n = 0
        for n, x in enumerate(elements, 1):
            store.cells[n - 1] = [(0, x)]
        store.extent = n
        return cls(store, 0, n)

    # --- reading --------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, k: int) -> Any:
        """Element ``k`` (0 <= k < len), or None where none was written."""
        if not 0 <= k < self._length:
            raise IndexError(f"index {k} is out of range for an array of length "
                             f"{self._length}")
        cell = self._store.cells.get(k)
        if cell is None:
            return None
        version, x = cell[-1]
        if version <= self._version:
            return x
        j = bisect_right(cell, self._version, key=_version_of)
        return cell[j - 1][1] if j else None

    def __iter__(self) -> Iterator[Any]:
        return (self[k] for k in range(self._length))

    def items(self) -> Iterator[tuple[int, Any]]:
        """(index, element) of the elements written (not None), in no particular order:
        a sparse array's few, without walking its length."""
        cells = self._store.cells
        keys: Iterable[int] = (cells if len(cells) < self._length else range(self._length))
        for k in list(keys):
            if k < self._length and (x := self[k]) is not None:
                yield k, x

    def copy(self) -> TensorArray:
        """The value itself: it never changes (a plan copies what leaves a function)."""
        return self

    def __repr__(self) -> str:
        return f"TensorArray(length={self._length}, written={sum(1 for _ in self.items())})"

    # --- deriving new values ----------------------------------------------------------------

    def write(self, k: int, x: Any) -> TensorArray:
        """A value with element ``k`` set to ``x`` (None clears it); ``k`` past the end
        grows the array, leaving None in the gap."""
        return self.update({k: x})

    def prefix(self, n: int) -> TensorArray:
        """The first ``n`` elements (n <= len): O(1)."""
        return TensorArray(self._store, self._version, min(n, self._length))

    def update(self, changes: dict[int, Any]) -> TensorArray:
        """A value with the elements of ``changes`` (index -> element) set."""
        store, version = self._derive()
        length = self._length
        top = max(changes, default=-1) + 1
        # a shorter value of a shared store: what longer ones wrote past its end is hidden
        for j in range(length, min(top, store.extent)):
            if j in store.cells and j not in changes:
                store.cells[j].append((version, None))
        for k, x in changes.items():
            store.cells.setdefault(k, []).append((version, x))
        store.extent = max(store.extent, top)
        return TensorArray(store, version, max(length, top))

    def add(self, other: TensorArray, plus: Callable[[Any, Any], Any]) -> TensorArray:
        """The element-wise sum (None is zero; the shorter is padded) with ``plus(a, b)``
        adding two elements: O(elements written in the sparser of the two)."""
        base, part = (self, other) if len(self._store.cells) >= len(other._store.cells) \
            else (other, self)
        changes = {}
        for k, x in part.items():
            y = base[k] if k < base._length else None
            changes[k] = x if y is None else plus(y, x)
        if len(part) > len(base) and len(part) - 1 not in changes:
            changes[len(part) - 1] = None   # keep the longer length
        return base.update(changes) if changes else base

    def _derive(self) -> tuple[_Store, int]:
        """The store and version a new value writes into: this value's store when no
        value was derived from it yet (and it is not empty: an empty array, perhaps a
        constant of a plan, starts a store of its own), else a copy."""
        store = self._store
        if self._length:
            token = object()
            if store.lent.setdefault(self._version, token) is token:
                return store, self._version + 1
        copy = _Store()
        for k, x in self.items():
            copy.cells[k] = [(0, x)]
            copy.extent = max(copy.extent, k + 1)
        TensorArray.copied_elements += len(copy.cells)
        copy.lent[0] = True
        return copy, 1
