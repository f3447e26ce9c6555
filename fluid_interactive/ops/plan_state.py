"""What the kernels of one plan share: the tier of its compiled kernels, and values one
kernel makes for another of the same plan (a convolution's geometry and columns, which its
gradient op reads back instead of computing them again; a fused update's generations).

A kernel factory reaches it through `KernelContext` (``ctx.tier``, ``ctx.shared``); the
planner makes one per plan and keeps it in the plan's record (runtime/plan/record.py).
Outside a plan (the reference interpreter) each kernel gets a state of its own.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Any, TypeVar

from ..kernels import PlanTier
from .row_journal import RowJournal
from .scratch import Scratch

T = TypeVar("T")


class PlanState:
    """``tier``: the plan's compiled kernels; ``journal``: where updates by rows note what
    they overwrite (ops/row_journal.py; None outside a method's plan: such an update then
    makes a new array); `shared`: the values its kernels share, each under its type and a
    key that names the ops sharing it (the vars they read)."""

    __slots__ = ("tier", "journal", "scratch", "_values")

    def __init__(self) -> None:
        self.tier = PlanTier()
        self.journal: RowJournal | None = None
        # Per-call working arrays (ops/scratch.py); a method's planner hands every plan of
        # a family the family's own, so they cost the largest size's once.
        self.scratch = Scratch()
        self._values: dict[tuple[type, Hashable], Any] = {}

    def shared(self, kind: type[T], key: Hashable, make: Callable[[], T] | None = None) -> T:
        """The ``kind`` value kept under ``key``, made by ``make()`` (default: ``kind()``)
        on the first request."""
        slot = (kind, key)
        value = self._values.get(slot)
        if value is None:
            value = self._values[slot] = (make or kind)()
            if not isinstance(value, kind):
                raise TypeError(f"shared state under {key!r} is a {type(value).__name__}, "
                                f"not the {kind.__name__} asked for")
        return value

    def values(self) -> Iterator[Any]:
        """The tier, then every shared value (for what weighs a plan's memory)."""
        yield self.tier
        yield from self._values.values()
