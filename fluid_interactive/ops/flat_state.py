"""Per-parameter state kept as views of flat arrays, for fused optimizer updates.

A fused update runs a few vectorised calls over one flat array per kind of state
(parameters, moments, ...) instead of a few calls per parameter. Its outputs are views of
flat arrays it owns. The runtime's state contract (a step's new values go into arrays
nobody else references; an array the scope holds never changes) is kept by
double-buffering: each `Generation` is one set of flat arrays with their views, and a
step writes into a generation only when no reference to it exists outside this module
(`Generation.unreferenced`, by reference counts against those taken when it was made).
The scope holds the previous step's views, so their generation is never written again
while the scope, a snapshot or a user holds any of them.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from math import prod
from operator import is_
from typing import Any

Shapes = Sequence[tuple[int, ...]]


def address(array: Any) -> int:
    """The address of an array's first element (NumPy, CuPy).

    Not through NumPy's ``__array_interface__``: the dict it builds has a key
    (``'typestr'``) that CPython interns when the dict is made and drops from its table of
    interned strings when the dict dies, so a step that read it changed that table, and
    CPython rebuilds the table (0.4-2 MB allocated anew) every few thousand steps, at a
    step that depends on all the process did before."""
    ptr = getattr(getattr(array, "data", None), "ptr", None)
    return ptr if ptr is not None else array.ctypes.data


def _views(flat: Any, shapes: Shapes) -> list[Any]:
    out, offset = [], 0
    for shape in shapes:
        n = prod(shape)
        out.append(flat[offset:offset + n].reshape(shape))
        offset += n
    return out


class Generation:
    """One flat array per kind of state and its per-parameter views; ``every`` holds all
    the views in order (kind by kind), as the fused op returns them."""

    __slots__ = ("flats", "views", "every", "_objects", "_baseline")

    def __init__(self, xp: Any, layouts: Sequence[Shapes], dtypes: Sequence[str]):
        self.flats = [xp.empty(sum(prod(s) for s in shapes), dtype)
                      for shapes, dtype in zip(layouts, dtypes)]
        self.views = [_views(flat, shapes) for flat, shapes in zip(self.flats, layouts)]
        self.every = tuple(v for views in self.views for v in views)
        self._objects = self.flats + list(self.every)
        self._baseline = self._counts()

    def _counts(self) -> list[int]:
        return list(map(sys.getrefcount, self._objects))

    def unreferenced(self) -> bool:
        """Nothing outside holds a view of this generation (nor a view derived from one)."""
        return self._counts() == self._baseline

    def holds(self, arrays: Sequence[Any]) -> bool:
        """``arrays`` (every kind's, in order) are exactly this generation's views."""
        return len(arrays) == len(self.every) and all(map(is_, arrays, self.every))


class DoubleBuffer:
    """The generations of one fused update; at most ``keep`` are remembered (a generation
    somebody still holds after that is simply forgotten, and freed with its last user)."""

    def __init__(self, xp: Any, layouts: Sequence[Shapes], dtypes: Sequence[str],
                 keep: int = 2):
        self.xp, self.layouts, self.dtypes, self.keep = xp, layouts, dtypes, keep
        self.generations: list[Generation] = []

    def holding(self, arrays: Sequence[Any]) -> Generation | None:
        """The generation whose views are ``arrays`` (the last step's outputs, read back
        from the scope), or None (values set from outside, or a first step). The most
        recently used generation is asked first."""
        return next((gen for gen in reversed(self.generations) if gen.holds(arrays)), None)

    def acquire(self, busy: Generation | None) -> Generation:
        """A generation nobody references, other than ``busy`` (the inputs' own).
        The oldest such one: with two in turn, a step never waits on allocation."""
        for gen in self.generations:
            if gen is not busy and gen.unreferenced():
                self.generations.remove(gen)
                self.generations.append(gen)   # most recently used last
                return gen
        gen = Generation(self.xp, self.layouts, self.dtypes)
        self.generations.append(gen)
        while len(self.generations) > self.keep:
            old = next(g for g in self.generations if g is not busy)
            self.generations.remove(old)
        return gen


class FlatInput:
    """One flat array standing for several input arrays of one kind: their own memory when
    they are consecutive views of one flat array (the planner lays gradients out so), else
    a copy gathered into a scratch array. The verdict is kept while the same array objects
    come back (a plan's buffers are stable); the flat array is taken from the arrays
    again at each call (the whole base array, or a view of it made then)."""

    def __init__(self, xp: Any, shapes: Shapes, dtype: str):
        self.xp = xp
        self.total = sum(prod(s) for s in shapes)
        self.dtype = dtype
        self._seen: list[Any] = []
        self._span: tuple[int, bool] | None = None   # (offset in the base, the whole base)
        self._scratch: Any | None = None
        self._scratch_views: list[Any] = []
        self._shapes = shapes

    def __call__(self, arrays: Sequence[Any]) -> Any:
        if not (len(arrays) == len(self._seen) and all(map(is_, arrays, self._seen))):
            self._seen = list(arrays)
            self._span = self._in_place(arrays)
        span = self._span
        if span is not None:
            base = arrays[0].base
            return base if span[1] else base[span[0]:span[0] + self.total]
        if self._scratch is None:
            self._scratch = self.xp.empty(self.total, self.dtype)
            self._scratch_views = _views(self._scratch, self._shapes)
        for view, a in zip(self._scratch_views, arrays):
            self.xp.copyto(view, a)
        return self._scratch

    def _in_place(self, arrays: Sequence[Any]) -> tuple[int, bool] | None:
        base = getattr(arrays[0], "base", None)
        if base is None or base.ndim != 1 or str(base.dtype) != self.dtype:
            return None
        start = address(arrays[0])
        at = start
        for a in arrays:
            if address(a) != at or not a.flags.c_contiguous or \
                    getattr(a, "base", None) is None or address(a.base) != address(base):
                return None
            at += a.nbytes
        offset = (start - address(base)) // base.itemsize
        if offset < 0 or offset + self.total > base.size:
            return None
        return offset, offset == 0 and self.total == base.size
