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

A plan may also lend a generation its parameters' flat array (`DoubleBuffer.adopt`): the
same memory is the plan's gradient arena, so the step computes its gradients into the
generation it is about to write, and the update writes each new parameter over its own
gradient, element by element, once it has read it (`DoubleBuffer.over`). That saves one
array of the parameters' size; the runner takes care that the generation is unreferenced
before the step starts writing gradients into it (runtime/plan/turns.py).
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


def state_key(first_grad: str) -> tuple[str, str]:
    """The key of a fused update's `DoubleBuffer` in its plan's shared kernel state (the
    plan instances of one block share it), by the name of its first gradient var."""
    return ("flat state", first_grad)


def lend_key(first_grad: str) -> tuple[str, str]:
    """The key under which a plan tells a fused update (in its shared kernel state) that
    it will lend it its gradients' arena (`DoubleBuffer.adopt`): the update then asks for
    the compiled loops that write the parameters over the gradients."""
    return ("lent arena", first_grad)


class Generation:
    """One flat array per kind of state and its per-parameter views; ``every`` holds all
    the views in order (kind by kind), as the fused op returns them. ``first``: the
    parameters' flat array, lent by the plan (an adopted generation), else allocated."""

    __slots__ = ("flats", "views", "every", "_objects", "_baseline")

    def __init__(self, xp: Any, layouts: Sequence[Shapes], dtypes: Sequence[str],
                 first: Any = None):
        made = list(zip(layouts, dtypes))[0 if first is None else 1:]
        self.flats = ([] if first is None else [first]) + [
            xp.empty(sum(prod(s) for s in shapes), dtype) for shapes, dtype in made]
        self.views = [_views(flat, shapes) for flat, shapes in zip(self.flats, layouts)]
        self.every = tuple(v for views in self.views for v in views)
        self._objects = self.flats + list(self.every)
        # An adopted generation counts its references the first time it is asked, before
        # it is first written: nothing else can hold any of its arrays before that.
        self._baseline = self._counts() if first is None else None

    def _counts(self) -> list[int]:
        return list(map(sys.getrefcount, self._objects))

    def unreferenced(self) -> bool:
        """Nothing outside holds a view of this generation (nor a view derived from one)."""
        if self._baseline is None:
            self._baseline = self._counts()
            return True
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
        #: generations over the plan's gradient arenas (`adopt`), never forgotten
        self.adopted: list[Generation] = []
        #: whether the update may write its parameters over its gradients (the kernel
        #: says so when it can do it without more memory, see optim_fused.py)
        self.writes_over = False

    def holding(self, arrays: Sequence[Any]) -> Generation | None:
        """The generation whose views are ``arrays`` (the last step's outputs, read back
        from the scope), or None (values set from outside, or a first step). The most
        recently used generation is asked first."""
        for gen in reversed(self.generations):
            if gen.holds(arrays):
                return gen
        return next((gen for gen in self.adopted if gen.holds(arrays)), None)

    def adopt(self, flat: Any) -> Generation:
        """A generation whose parameters' flat array shares the memory of ``flat`` (a
        plan's gradient arena on the host, one array of the parameters' size and dtype).

        It is another array object over that memory, one that views of ``flat`` do not
        reference (NumPy makes a view's base the array owning the memory, and this one
        owns none: its base is a memoryview). So the views the plan's kernels make of
        their gradients, and keep, are not counted as references to the generation:
        its counts see only its own views and what is derived from them."""
        total = sum(prod(s) for s in self.layouts[0])
        if flat.ndim != 1 or flat.size != total or str(flat.dtype) != self.dtypes[0]:
            raise ValueError(f"a gradient arena of {flat.size} {flat.dtype} cannot hold "
                             f"{total} {self.dtypes[0]} parameters")
        own = self.xp.frombuffer(memoryview(flat), flat.dtype)
        gen = Generation(self.xp, self.layouts, self.dtypes, first=own)
        self.adopted.append(gen)
        return gen

    def forget(self, gen: Generation) -> None:
        """Let an adopted generation go (its plan instance was not made after all); it is
        freed with its last user."""
        self.adopted = [g for g in self.adopted if g is not gen]

    def over(self, grads: Any) -> Generation | None:
        """The adopted generation whose parameters' memory is that of ``grads`` (the flat
        gradients of this call), or None. Writing it forgets the generations `acquire`
        made (a step of a plan without the arena made them), so that they are freed."""
        at = address(grads)
        gen = next((g for g in self.adopted if address(g.flats[0]) == at
                    and g.flats[0].size == grads.size), None)
        if gen is not None and self.generations:
            self.generations.clear()
        return gen

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
    come back (a plan's buffers are stable); not the flat array itself, which may be an
    adopted generation's, whose references are counted: it is taken from the arrays again
    at each call (the whole base array, or a view of it made then)."""

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
