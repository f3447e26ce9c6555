"""`SelectedRows`: some rows of a tall tensor, the value of a rows-only gradient.

An embedding looked up with ``is_sparse=True`` gets, as its table's gradient, the ids the
batch looked up (``rows``, int64 ``[N]``), the gradient of each lookup (``values``,
``[N, D...]``) and the table's number of rows (``height``). The dense tensor it stands for
is ``height`` rows of zeros with ``values[i]`` added into row ``rows[i]``: an id looked up
twice appears twice, and its two rows add up (`merged` adds them once, for the updates
that are not linear in the gradient).

It lives in ``util`` because every layer shows or moves it: kernels make it, the runtime
hands it to watchers, the notebook extension and the renderer print it. Its arrays are
NumPy or CuPy, like the values around it; nothing here chooses a device.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

__all__ = ["SelectedRows", "array_module_of", "merge_rows"]


def array_module_of(array: Any) -> ModuleType:
    """The module an array belongs to: ``numpy``, or ``cupy`` for a CuPy array (found
    without importing CuPy where it is not already loaded)."""
    top = type(array).__module__.split(".")[0]
    return sys.modules.get(top, np) if top == "cupy" else np


def merge_rows(xp: Any, rows: Any, values: Any) -> tuple[Any, Any]:
    """(unique rows sorted, the values of each summed). A row's values add up one after
    another in the order the batch looked them up, into zeros, exactly as a dense
    gradient's scatter-add adds them: the merged rows equal the dense gradient's rows
    bit for bit."""
    n = int(rows.shape[0])
    if n == 0:
        return rows, values
    order = xp.argsort(rows, kind="stable")
    ordered = rows[order]
    starts = xp.empty(n, dtype=bool)
    starts[0] = True
    xp.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    unique = ordered[starts]
    if int(unique.shape[0]) == n:   # no duplicates: the values, reordered
        return ordered, values[order]
    return unique, _segment_sums(xp, values[order], starts)


def _segment_sums(xp: Any, ordered: Any, starts: Any) -> Any:
    """The sum of each run of ``ordered`` (runs begin where ``starts`` is True), added one
    after another from the run's first element: the k-th elements of all runs are added
    in one vectorised step, so it takes as many steps as the longest run (a scatter-add
    element by element, ``add.at``, costs more for the few repeats a batch has)."""
    n = int(ordered.shape[0])
    run = xp.cumsum(starts) - 1                       # the run of each element
    first = xp.flatnonzero(starts)
    depth = xp.arange(n) - first[run]                  # its place within its run
    total = ordered[first].copy()
    longest = int(depth.max()) + 1
    if longest > 64:   # a very frequent id: fewer steps by scattering
        total[...] = 0
        xp.add.at(total, run, ordered)
        return total
    for k in range(1, longest):
        at = xp.flatnonzero(depth == k)
        total[run[at]] += ordered[at]
    return total


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class SelectedRows:
    """Rows of a ``[height, D...]`` tensor: ``values[i]`` is (a part of) row ``rows[i]``;
    rows not listed are zero; a row listed twice is the sum of its parts."""

    rows: Any      # int64 [N]
    values: Any    # [N, D...]
    height: int

    def __post_init__(self) -> None:
        if getattr(self.rows, "ndim", None) != 1:
            raise ValueError(f"SelectedRows: rows must be a 1-D int array, got "
                             f"{type(self.rows).__name__} of shape "
                             f"{getattr(self.rows, 'shape', None)}")
        if getattr(self.values, "ndim", 0) < 1 or self.values.shape[0] != self.rows.shape[0]:
            raise ValueError(f"SelectedRows: values must have one row per id: "
                             f"{self.rows.shape[0]} rows, values of shape "
                             f"{getattr(self.values, 'shape', None)}")
        if isinstance(self.height, bool) or not isinstance(self.height, (int, np.integer)) \
                or self.height < 0:
            raise ValueError(f"SelectedRows: height must be an int >= 0, got "
                             f"{self.height!r}")
        object.__setattr__(self, "height", int(self.height))

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the dense tensor it stands for: ``(height, D...)``."""
        return (self.height,) + tuple(self.values.shape[1:])

    @property
    def dtype(self) -> Any:
        return self.values.dtype

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes) + int(self.values.nbytes)

    def to_dense(self, xp: Any = None) -> Any:
        """The dense tensor: zeros, with each row's values added in (``xp``: the array
        module, found from the values when not given)."""
        xp = xp or array_module_of(self.values)
        out = xp.zeros(self.shape, self.values.dtype)
        rows, values = merge_rows(xp, self.rows, self.values)
        out[rows] = values
        return out

    def merged(self, xp: Any = None) -> SelectedRows:
        """The same tensor with each row listed once, rows sorted (duplicates summed)."""
        xp = xp or array_module_of(self.values)
        rows, values = merge_rows(xp, self.rows, self.values)
        return SelectedRows(rows, values, self.height)

    def copy(self) -> SelectedRows:
        """The same rows in arrays of its own."""
        return SelectedRows(self.rows.copy(), self.values.copy(), self.height)

    def get(self) -> SelectedRows:
        """The same rows with NumPy arrays (as a CuPy array's ``get`` gives a NumPy one)."""
        def host(a: Any) -> Any:
            return a.get() if hasattr(a, "get") else a
        return SelectedRows(host(self.rows), host(self.values), self.height)

    def __repr__(self) -> str:
        dims = ", ".join(str(d) for d in self.values.shape)
        shown = _preview(self.rows)
        return (f"SelectedRows(height={self.height}, rows={shown}, "
                f"values={self.values.dtype}[{dims}])")


def _preview(rows: Any, limit: int = 8) -> str:
    """The first few ids, as a list (host copies of a few numbers only)."""
    n = int(rows.shape[0])
    head = rows[:limit]
    head = head.get() if hasattr(head, "get") else head
    text = ", ".join(str(int(r)) for r in head)
    return f"[{text}{', ...' if n > limit else ''}] ({n} rows)"
