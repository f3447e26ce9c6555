"""Planning the buffers of a block's temporaries, so that a step allocates nothing.

Each temporary gets a preallocated buffer (a `BufferSlot`, allocated on first use), and a
buffer is reused by a later temporary of the same shape and dtype once every reader of
its previous owner has run. Two refinements:

* **in place**: an op whose spec lists ``(output, input)`` in ``inplace`` writes that
  output into the input's own buffer when this op is the input's last reader, reads it
  through that slot only, and the two have one shape and dtype (``relu`` of a matmul's
  result, the gradient of an activation into the incoming gradient), which saves memory
  and keeps data in cache;
* **contiguous**: the vars an op reads through a slot its spec lists in ``contiguous``
  (a fused optimizer's gradients) get consecutive views of one flat array, so the op
  reads them as one array without gathering them.

An op that may return a view of an input (``spec.aliases``) keeps that input alive as
long as its own output, to the end of the block when the output is returned (an input it
reads for its shape alone is never a view's base). Feeds,
constants, persistable and returned vars get no buffer, nor do rows-only values (a
`SelectedRows` holds arrays of its own), nor do the results of an op that
runs a sub-block (new arrays of each run) except the arrays it stacks the runs' results
into (``SubBlockRule.stacked``).

**One memory for every plan of a method** (`PlanMemory`): the plans of one method never
run at once (its callers take turns), and a buffer holds nothing from one call to the
next (several vars share it within a call already). So the k-th buffer of a dtype that
a plan's planner hands out is a view of the method's k-th block of that dtype, whatever
the batch size or sequence length the plan is for; a block grows (by half at least) when
a plan needs more, and the plans that hold views of the block it replaced are planned
again when next called (`PlanMemory.replaced`). The buffers of every shape a method is
called with then take the memory of its largest call, not one plan's worth per shape,
and freed buffers of every size no longer fragment the heap.
"""
from __future__ import annotations

import heapq
from collections.abc import Iterable
from itertools import count
from math import prod
from typing import Any

from ...ir.records import SELECTED_ROWS
from ...ops.spec import BufferSlot, TensorType


class PlanMemory:
    """The blocks the plans of one method take their buffers from (see the module
    docstring). Blocks are flat arrays, keyed by (dtype, index)."""

    #: a block that must grow grows by this factor at least, so that calls of growing
    #: sizes replace each block a logarithmic number of times
    GROWTH = 1.5

    def __init__(self, xp: Any):
        self.xp = xp
        self.blocks: dict[tuple[str, int], Any] = {}
        self._replaced: set[tuple[str, int]] = set()

    def take(self, key: tuple[str, int], size: int) -> Any:
        """The flat block ``key``, holding at least ``size`` elements."""
        block = self.blocks.get(key)
        if block is None or block.size < size:
            if block is not None:
                self._replaced.add(key)
                size = max(size, int(block.size * self.GROWTH))
            block = self.blocks[key] = self.xp.empty(size, key[0])
        return block

    def checkpoint(self) -> tuple[dict[tuple[str, int], Any], set[tuple[str, int]]]:
        """What `restore` puts back: the blocks and the keys replaced, as they are now."""
        return dict(self.blocks), set(self._replaced)

    def restore(self, saved: tuple[dict[tuple[str, int], Any], set[tuple[str, int]]]
                ) -> None:
        """Put back the blocks of a `checkpoint`: a plan that failed part way through its
        planning leaves the blocks it grew unused (the kept plans view the ones before)."""
        blocks, replaced = saved
        self.blocks, self._replaced = dict(blocks), set(replaced)

    def replaced(self) -> set[tuple[str, int]]:
        """The keys of the blocks replaced by larger ones since the last look."""
        keys, self._replaced = self._replaced, set()
        return keys

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self.blocks.values())


class MemorySlot(BufferSlot):
    """A planned buffer that is a view of a block of the method's `PlanMemory`."""

    __slots__ = ("memory", "key")

    def __init__(self, memory: PlanMemory, key: tuple[str, int], shape: tuple[int, ...],
                 dtype: str):
        super().__init__(shape, dtype, memory.xp)
        self.memory, self.key = memory, key

    def materialize(self) -> Any:
        if self.array is None:
            size = prod(self.shape)
            self.array = self.memory.take(self.key, size)[:size].reshape(self.shape)
        return self.array


class Slots:
    """Makes the buffers of one plan: views of the method's `PlanMemory` (the k-th of a
    dtype is a view of its k-th block), or arrays of its own without one (a sub-block's
    function, a plan instance that runs beside others)."""

    def __init__(self, xp: Any, memory: PlanMemory | None = None):
        self.xp, self.memory = xp, memory
        self.counts: dict[str, int] = {}
        self.made: list[BufferSlot] = []

    def __call__(self, shape: tuple[int, ...], dtype: str) -> BufferSlot:
        if self.memory is None:
            slot = BufferSlot(shape, dtype, self.xp)
        else:
            k = self.counts[dtype] = self.counts.get(dtype, -1) + 1
            slot = MemorySlot(self.memory, (dtype, k), shape, dtype)
        self.made.append(slot)
        return slot

    def keys(self) -> set[tuple[str, int]]:
        """The blocks of the memory this plan's buffers are views of."""
        return {s.key for s in self.made if isinstance(s, MemorySlot)}


class ArenaSlot(BufferSlot):
    """A buffer that is a view of one flat array shared by several vars (an arena)."""

    __slots__ = ("arena", "offset")

    def __init__(self, arena: BufferSlot, offset: int, shape: tuple[int, ...], dtype: str):
        super().__init__(shape, dtype, arena.xp)
        self.arena, self.offset = arena, offset

    def materialize(self) -> Any:
        if self.array is None:
            flat = self.arena.materialize()
            self.array = flat[self.offset:self.offset + prod(self.shape)].reshape(self.shape)
        return self.array


def last_uses(steps: list, live_out: Iterable[str] = ()) -> dict[str, int]:
    """var -> index of the last step that reads it (or writes it, if nothing reads it);
    vars in ``live_out`` (returned or committed when the block ends) live past the last
    step, and so does what they are views of."""
    last: dict[str, int] = {}
    for i, step in enumerate(steps):
        for n in step.outputs:
            last.setdefault(n, i)
        for n in step.inputs:
            last[n] = i
    last.update((n, len(steps)) for n in live_out if n in last)
    for i in range(len(steps) - 1, -1, -1):
        step = steps[i]
        if step.spec.aliases:
            keep = max(last.get(n, i) for n in step.outputs)
            for n in _viewable_inputs(step):
                last[n] = max(last.get(n, i), keep)
    return last


def _viewable_inputs(step: Any) -> list[str]:
    """The inputs an aliasing op's outputs may be views of: not those it reads for their
    shape alone (``shape_only``: their values are never read, so never returned)."""
    shape_only = {n for s in step.spec.shape_only for n in step.op.inputs.get(s, ())}
    return [n for n in step.inputs if n not in shape_only]


def _arenas(steps: list, types: dict[str, TensorType], slots: Slots,
            no_buffer: set[str]) -> dict[str, ArenaSlot]:
    produced = {n for step in steps for n in step.outputs}
    fixed: dict[str, ArenaSlot] = {}
    for step in steps:
        for slot in step.spec.contiguous:
            names = step.op.inputs.get(slot, [])
            dtypes = {types[n].dtype for n in names}
            if not names or len(dtypes) != 1 or len(set(names)) != len(names) or any(
                    n in no_buffer or n not in produced or n in fixed for n in names):
                continue
            dtype = dtypes.pop()
            arena = slots((sum(prod(types[n].shape) for n in names),), dtype)
            offset = 0
            for n in names:
                fixed[n] = ArenaSlot(arena, offset, types[n].shape, dtype)
                offset += prod(types[n].shape)
    return fixed


class _Planner:
    def __init__(self, steps: list, types: dict[str, TensorType], slots: Slots,
                 no_buffer: set[str]):
        self.types, self.slots, self.no_buffer = types, slots, no_buffer
        self.last = last_uses(steps, no_buffer)
        self.fixed = _arenas(steps, types, slots, no_buffer)
        self.free: dict[tuple, list[BufferSlot]] = {}
        # (last step reading the owner, order of assignment, key, buffer, owner): a heap,
        # so a step frees what expired in time logarithmic in the live buffers
        self.expiry: list[tuple[int, int, tuple, BufferSlot, str]] = []
        self.order = count()
        self.buffer_of: dict[str, BufferSlot] = {}
        self.owner: dict[int, str] = {}     # id(buffer) -> the var that holds it now

    def release_expired(self, i: int) -> None:
        while self.expiry and self.expiry[0][0] < i:
            _, _, key, buf, name = heapq.heappop(self.expiry)
            if self.owner.get(id(buf)) == name:   # not handed on in place meanwhile
                del self.owner[id(buf)]
                self.free.setdefault(key, []).append(buf)

    def _in_place(self, step, i: int, out_slot: str, name: str, taken: set) -> Any | None:
        t = self.types[name]
        for o_slot, in_slot in step.spec.inplace:
            if o_slot != out_slot:
                continue
            for source in step.op.inputs.get(in_slot, ())[:1]:
                buf = self.buffer_of.get(source)
                # the op must read the input once: a kernel of several steps (a chain) may
                # read another use of it after its first step wrote the output
                if (buf is not None and self.last.get(source) == i and source not in taken
                        and step.inputs.count(source) == 1
                        and self.owner.get(id(buf)) == source
                        and not isinstance(buf, ArenaSlot) and self.types[source] == t):
                    taken.add(source)
                    return buf
        return None

    def assign(self, step, i: int) -> None:
        taken: set[str] = set()
        rule = step.spec.sub_block
        for slot in step.spec.outputs:
            bufs: list[BufferSlot | None] = []
            # what a sub-block gives back is a new array per run; only the arrays an op
            # stacks the runs' results into are planned
            unplanned = rule is not None and slot.name not in rule.stacked
            for name in step.op.outputs.get(slot.name, ()):
                if name in self.no_buffer or unplanned or any(
                        d < 0 for d in self.types[name].shape) or \
                        self.types[name].kind == SELECTED_ROWS:   # sized when it runs
                    bufs.append(None)
                    continue
                if name in self.fixed:
                    bufs.append(self.fixed[name])
                    continue
                t = self.types[name]
                key = (t.shape, t.dtype)
                buf = self._in_place(step, i, slot.name, name, taken)
                if buf is None:
                    pool = self.free.get(key)
                    buf = pool.pop() if pool else self.slots(t.shape, t.dtype)
                self.buffer_of[name] = buf
                self.owner[id(buf)] = name
                heapq.heappush(self.expiry, (self.last.get(name, i), next(self.order), key,
                                             buf, name))
                bufs.append(buf)
            if bufs:
                step.buffers[slot.name] = bufs


def assign_buffers(steps: list, types: dict[str, TensorType], xp: Any,
                   no_buffer: set[str], memory: PlanMemory | None = None) -> Slots:
    """Fill each step's ``buffers`` (output slot -> one buffer or None per var), views of
    ``memory`` when given; returns what made them."""
    slots = Slots(xp, memory)
    planner = _Planner(steps, types, slots, no_buffer)
    for i, step in enumerate(steps):
        planner.release_expired(i)
        planner.assign(step, i)
    return slots
