"""What the kernels of one plan share: the tier of its compiled kernels, values one kernel
makes for another of the same plan (a convolution's geometry and columns, which its
gradient op reads back instead of computing them again), and values every size's plan of a
method shares (a fused update's generations of the parameters).

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
    key that names the ops sharing it (the vars they read); `shared_by_sizes`: the same
    for values that depend on no size, kept in ``every_size``, which a method's planner
    makes the plan's family's (runtime/plan/family.py)."""

    __slots__ = ("tier", "journal", "scratch", "every_size", "_values")

    def __init__(self) -> None:
        self.tier = PlanTier()
        self.journal: RowJournal | None = None
        # Per-call working arrays (ops/scratch.py); a method's planner hands every plan of
        # a family the family's own, so they cost the largest size's once.
        self.scratch = Scratch()
        # Values every plan of a family shares (the plans of one method for each batch
        # size or length run one call at a time): its planner hands each the family's own.
        self.every_size: dict[tuple[type, Hashable], Any] = {}
        self._values: dict[tuple[type, Hashable], Any] = {}

    def shared(self, kind: type[T], key: Hashable, make: Callable[[], T] | None = None) -> T:
        """The ``kind`` value kept under ``key``, made by ``make()`` (default: ``kind()``)
        on the first request."""
        return _kept(self._values, kind, key, make)

    def shared_by_sizes(self, kind: type[T], key: Hashable,
                        make: Callable[[], T] | None = None) -> T:
        """As `shared`, for a value the plans of every size share: one that depends on no
        size (a fused update's generations of the parameters), of which each size's plan
        would otherwise keep its own."""
        return _kept(self.every_size, kind, key, make)

    def values(self) -> Iterator[Any]:
        """The tier, then every shared value (for what weighs a plan's memory)."""
        yield self.tier
        yield from self._values.values()


def _kept(store: dict[tuple[type, Hashable], Any], kind: type[T], key: Hashable,
          make: Callable[[], T] | None) -> T:
    slot = (kind, key)
    value = store.get(slot)
    if value is None:
        value = store[slot] = (make or kind)()
        if not isinstance(value, kind):
            raise TypeError(f"shared state under {key!r} is a {type(value).__name__}, "
                            f"not the {kind.__name__} asked for")
    return value
