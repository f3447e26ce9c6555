"""Updates by rows, in place, and the journal that undoes them.

A sparse update (a rows-only gradient, ops/sparse_update.py) changes a few rows of a
table that may hold millions. Making a new table each step, as the other updates make new
arrays, would cost the whole table; so within a method's plan such an update writes its
rows into the table itself, after noting in the plan's `RowJournal` what those rows held.
The journal is what keeps the rules of the live program (runtime/live/scope.py) true:

* a step that fails after the update wrote puts the rows back (`RowJournal.rollback`), so
  the scope is as it was;
* the history of changes keeps, for such a step, the rows it overwrote (`RowJournal.take`)
  instead of a reference to the whole table, and a rewind writes them back (`RowUndo`).

The runtime gives each plan's shared kernel state (`PlanState.journal`) the method's
journal; a kernel prepared anywhere else (the reference interpreter, a startup block)
finds none there and makes a new array, as every other update does.

An op says which of its outputs it may write by rows with `OpSpec.row_writes` (see
`rows_written`), so the runtime knows which tables its steps change in place.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..ir.records import OpDesc


class RowUndo(NamedTuple):
    """Rows ``rows`` of ``array`` held ``values`` before a step wrote them."""
    array: Any
    rows: Any
    values: Any

    def apply(self) -> None:
        """Write the rows back."""
        self.array[self.rows] = self.values

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes) + int(self.values.nbytes)


class RowJournal:
    """The rows one call of a plan overwrote in place, oldest first."""

    __slots__ = ("records",)

    def __init__(self) -> None:
        self.records: list[RowUndo] = []

    def clear(self) -> None:
        """Start a call: forget the previous call's rows (a new list: the history may
        hold the old one)."""
        self.records = []

    def note(self, array: Any, rows: Any) -> None:
        """Before rows ``rows`` (unique) of ``array`` are written: keep what they hold."""
        self.records.append(RowUndo(array, rows, array[rows]))

    def rollback(self) -> None:
        """The call failed: write back every row it overwrote, newest first."""
        records, self.records = self.records, []
        for undo in reversed(records):
            undo.apply()

    def take(self) -> tuple[RowUndo, ...]:
        """The call committed: its rows, for the history (the journal starts afresh)."""
        records, self.records = self.records, []
        return tuple(records)


#: ``row_writes(attrs, kinds)``: given an op's attrs and the kind of the first var of each
#: input slot, the (output slot, input slot) pairs whose var the kernel writes by rows in
#: place ((): none, the kernel makes new arrays).
RowWrites = Callable[[Mapping[str, Any], Mapping[str, str]], tuple[tuple[str, str], ...]]


def rows_written(op: OpDesc, row_writes: RowWrites | None, attrs: Mapping[str, Any],
                 kind_of: Callable[[str], str]) -> list[str]:
    """The vars ``op`` writes by rows in place (the input vars of its pairs)."""
    if row_writes is None:
        return []
    kinds = {slot: kind_of(names[0]) for slot, names in op.inputs.items() if names}
    return [n for _, slot in row_writes(attrs, kinds) for n in op.inputs.get(slot, ())[:1]]
