"""Arrays a kernel needs during one call only (a recurrent gradient's per-step factors),
taken from blocks that every plan of a method's family shares.

A plan is made for each size a method is called at (runtime/plan/family.py), and a kernel
prepared for sequences of length T needs T-sized working arrays. Kept by each kernel, they
cost every kept size's worth: a 1,000-length LSTM's gradient holds some 60 MB, and the plan
cache keeps up to 32 sizes. Taken from a `Scratch` at call time instead, they cost the
largest size's once. The plans of a family run one call at a time (a lane holds its own
families), so one block per (op, array) is never in use twice at once; a kernel drops its
views when its call ends, so a block outgrown by a longer call is freed.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from typing import Any

__all__ = ["Scratch", "ScratchArrays"]


class Scratch:
    """Grow-only byte blocks by key; `take` views one as an array of the asked shape."""

    __slots__ = ("_blocks",)

    def __init__(self) -> None:
        self._blocks: dict[Hashable, Any] = {}

    def take(self, xp: Any, key: Hashable, shape: tuple[int, ...], dtype: Any) -> Any:
        """An uninitialised array of ``shape`` and ``dtype``, valid until the next `take`
        of ``key``."""
        dtype = xp.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        block = self._blocks.get(key)
        if block is None or block.nbytes < nbytes or not isinstance(block, xp.ndarray):
            block = self._blocks[key] = xp.empty(max(nbytes, 1), xp.uint8)
        return block[:nbytes].view(dtype).reshape(shape)

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self._blocks.values())

    def blocks(self) -> list[Any]:
        """The blocks held now (what a view a kernel kept after its call may be of)."""
        return list(self._blocks.values())


class ScratchArrays:
    """The per-call arrays of one kernel, by attribute name: `bind` sets them on the kernel
    for a call, `unbind` drops them (so a kernel keeps no view of a block)."""

    __slots__ = ("scratch", "key", "xp", "dtype", "shapes")

    def __init__(self, scratch: Scratch, key: Hashable, xp: Any, dtype: Any,
                 shapes: Mapping[str, tuple[int, ...]]):
        self.scratch, self.key, self.xp, self.dtype = scratch, key, xp, dtype
        self.shapes = dict(shapes)

    def bind(self, kernel: Any) -> None:
        for name, shape in self.shapes.items():
            setattr(kernel, name, self.scratch.take(self.xp, (self.key, name), shape,
                                                    self.dtype))

    def unbind(self, kernel: Any) -> None:
        for name in self.shapes:
            setattr(kernel, name, None)

    def run(self, kernel: Any, body: Callable[[tuple], Any], args: tuple) -> Any:
        """``body(args)`` with the arrays bound on ``kernel`` for its duration."""
        self.bind(kernel)
        try:
            return body(args)
        finally:
            self.unbind(kernel)
