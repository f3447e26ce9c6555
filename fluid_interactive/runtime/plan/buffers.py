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

An op whose spec has ``writes_over`` may be lent its gradients' arena as the memory of its
outputs (`over_arenas`, `lent_arenas`; runtime/plan/turns.py).

An op that may return a view of an input (``spec.aliases``) keeps that input alive as
long as its own output, to the end of the block when the output is returned (an input it
reads for its shape alone is never a view's base). Feeds,
constants, persistable and returned vars get no buffer, nor do the results of an op that
runs a sub-block (new arrays of each run) except the arrays it stacks the runs' results
into (``SubBlockRule.stacked``).
"""
from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import count
from math import prod
from typing import Any

from ...ops.spec import BufferSlot, TensorType


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


def over_arenas(steps: list, live_out: Iterable[str]) -> list[tuple[Any, BufferSlot]]:
    """(step, arena) for each op that may write its outputs over the arena holding the
    vars of its ``writes_over`` input slot: the planner laid all of them, and only them,
    out in that one arena, and nothing reads them (nor a view of them) after that op,
    nor returns them (``live_out``)."""
    last = last_uses(steps, live_out)
    slot_of: dict[str, BufferSlot] = {}
    for step in steps:
        for slot in step.spec.outputs:
            for name, buf in zip(step.op.outputs.get(slot.name, ()),
                                 step.buffers.get(slot.name) or ()):
                if buf is not None:
                    slot_of[name] = buf
    found = []
    for i, step in enumerate(steps):
        if not step.spec.writes_over:
            continue
        names = step.op.inputs.get(step.spec.writes_over[1], [])
        if any(last.get(n) != i for n in names):
            continue
        bufs = [b for b in map(slot_of.get, names) if isinstance(b, ArenaSlot)]
        if not bufs or len(bufs) != len(names):
            continue
        arena = bufs[0].arena
        if all(b.arena is arena for b in bufs) and \
                sum(prod(b.shape) for b in bufs) == prod(arena.shape):
            found.append((step, arena))
    return found


@contextmanager
def lent_arenas(steps: list, flats: dict[int, Any]) -> Iterator[None]:
    """Within: every planned buffer that is a view of an arena in ``flats`` (by the
    arena's id) is a view of the flat array given for it, so that kernels prepared
    meanwhile (a plan instance) write there; afterwards each step has its own buffers
    back. The buffers lent stay with whatever kept them (they are new objects)."""
    lent: dict[int, BufferSlot] = {}
    for key, flat in flats.items():
        arena = BufferSlot(flat.shape, str(flat.dtype), None)
        arena.array = flat
        lent[key] = arena
    copies: dict[int, ArenaSlot] = {}

    def lend(buf: Any) -> Any:
        if not isinstance(buf, ArenaSlot) or id(buf.arena) not in lent:
            return buf
        if id(buf) not in copies:
            copies[id(buf)] = ArenaSlot(lent[id(buf.arena)], buf.offset, buf.shape, buf.dtype)
        return copies[id(buf)]

    saved = [(step, step.buffers) for step in steps]
    for step in steps:
        step.buffers = {slot: [lend(b) for b in bufs] for slot, bufs in step.buffers.items()}
    try:
        yield
    finally:
        for step, buffers in saved:
            step.buffers = buffers


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


def _arenas(steps: list, types: dict[str, TensorType], xp: Any,
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
            arena = BufferSlot((sum(prod(types[n].shape) for n in names),), dtype, xp)
            offset = 0
            for n in names:
                fixed[n] = ArenaSlot(arena, offset, types[n].shape, dtype)
                offset += prod(types[n].shape)
    return fixed


class _Planner:
    def __init__(self, steps: list, types: dict[str, TensorType], xp: Any,
                 no_buffer: set[str]):
        self.types, self.xp, self.no_buffer = types, xp, no_buffer
        self.last = last_uses(steps, no_buffer)
        self.fixed = _arenas(steps, types, xp, no_buffer)
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
                        d < 0 for d in self.types[name].shape):   # sized when it runs
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
                    buf = pool.pop() if pool else BufferSlot(t.shape, t.dtype, self.xp)
                self.buffer_of[name] = buf
                self.owner[id(buf)] = name
                heapq.heappush(self.expiry, (self.last.get(name, i), next(self.order), key,
                                             buf, name))
                bufs.append(buf)
            if bufs:
                step.buffers[slot.name] = bufs


def assign_buffers(steps: list, types: dict[str, TensorType], xp: Any,
                   no_buffer: set[str]) -> None:
    """Fill each step's ``buffers`` (output slot -> one buffer or None per var)."""
    planner = _Planner(steps, types, xp, no_buffer)
    for i, step in enumerate(steps):
        planner.release_expired(i)
        planner.assign(step, i)
