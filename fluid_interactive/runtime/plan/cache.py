"""The plans a method keeps: one per feed signature, within `plan_cache`'s bounds, and the
lanes that concurrent callers of a method that changes nothing run their plans in."""
from __future__ import annotations

from collections.abc import Callable

from .buffers import PlanMemory
from .family import Family
from .loops import SubPlans
from .record import Plan

#: a plan's key: the shapes of the arrays it was planned for
SignatureKey = tuple

_limits = {"plans": 32, "memory": 256 << 20}


def plan_cache(plans: int | None = None, memory: int | None = None) -> dict[str, int]:
    """How many plans each compiled method keeps (one per distinct set of input shapes),
    and how many bytes of preallocated buffers they may hold together; the plan used
    least recently goes first. Returns the settings (with no argument, only returns
    them). Defaults: 32 plans, 256 MiB per method."""
    for what, value in (("plans", plans), ("memory", memory)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise ValueError(f"plan_cache {what} must be an int >= 1, got {value!r}")
        if value is not None:
            _limits[what] = value
    return dict(_limits)


class PlanCache:
    """Keeps a block's plans within `plan_cache`'s bounds. The generated entry marks a
    plan's key ``used`` on each call (one set insertion); when a new plan would exceed the
    bounds, the oldest plans not used since the last look go first, and used ones get
    another round (a clock, so the hot path never reorders anything). The memory a
    method's plans share (buffers.PlanMemory) is not a plan's: the bytes counted are
    those of plans with buffers of their own, and what the kernels of the others made
    for themselves, weighed once they ran."""

    def __init__(self, plans: dict[SignatureKey, Plan]):
        self.plans = plans
        self.used: set[SignatureKey] = set()
        self.sizes: dict[SignatureKey, int] = {}   # what each plan kept costs
        self.last: SignatureKey | None = None   # the plan added last
        self.nbytes = 0
        self.evicted = 0

    def add(self, key: SignatureKey, plan: Plan) -> None:
        if key in self.plans:
            return
        before = self.last
        last = self.plans.get(before) if before is not None else None
        if before is not None and last is not None and last.weigh is not None:
            weight = last.weigh()   # it ran since: weigh its kernels
            self.nbytes += weight - self.sizes.get(before, 0)
            self.sizes[before] = weight
        self.last = key
        self.used.add(key)
        self.plans[key] = plan
        self.sizes[key] = plan.nbytes
        self.nbytes += plan.nbytes
        while len(self.plans) > 1 and (len(self.plans) > _limits["plans"]
                                       or self.nbytes > _limits["memory"]):
            self._evict_one(keep=key)

    def forget(self, stale: Callable[[Plan], bool]) -> None:
        """Drop the plans ``stale`` names (planned again when next called)."""
        for key in [k for k, plan in self.plans.items() if stale(plan)]:
            self._drop(key)

    def _drop(self, key: SignatureKey) -> None:
        del self.plans[key]
        self.used.discard(key)
        self.nbytes -= self.sizes.pop(key, 0)
        self.evicted += 1

    def _evict_one(self, keep: SignatureKey) -> None:
        for key in list(self.plans):
            if key == keep:
                continue
            if key in self.used:   # a second chance, at the back of the queue
                self.used.discard(key)
                self.plans[key] = self.plans.pop(key)
                continue
            self._drop(key)
            return
        self._evict_one(keep)   # everything had been used: all marks are clear now


class Lane:
    """Plans that run one call at a time, and what they share: the memory of their
    buffers and their sub-blocks' functions. Concurrent callers each hold a lane."""

    def __init__(self, plans: dict[SignatureKey, Plan], cache: PlanCache | None,
                 memory: PlanMemory, subplans: SubPlans):
        self.plans, self.memory, self.subplans = plans, memory, subplans
        self.cache = cache if cache is not None else PlanCache(plans)
        self.used = self.cache.used   # the generated entry marks the plans it runs
        self.families: dict[tuple, Family] = {}   # by family key (family.py)
