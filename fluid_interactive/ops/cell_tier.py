"""The compiled forms of the recurrent cells' steps in the kernel tier
(`kernels/cells.py`): float32/64 on the host. A cell's op keeps the handles and runs its
compiled steps once the plan switched to them, its NumPy step otherwise (ops/lstm.py,
ops/gru.py)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..kernels import Kernel, plan_tier
from ..kernels.build import KernelSource
from .spec import KernelContext


def compiled_steps(ctx: KernelContext, owner: Any, dtype: str,
                   sources: Sequence[KernelSource]) -> list[Kernel] | None:
    """The handles on ``sources`` (the compiled parts of one step) for the kernel
    ``owner``, or None where the tier does not apply; ``owner`` tells the generated source
    a label."""
    if ctx.xp.__name__ != "numpy" or dtype not in ("float32", "float64"):
        return None
    tier = plan_tier(ctx.shared)
    kernels = [tier.request(s, f"{s.key}.py:{s.function}") for s in sources]
    owner.tier_label = kernels[0].label
    return kernels


def call(kernel: Kernel, *args: Any) -> None:
    """A compiled part of a step whose first part ran: the plan switched, and the
    arguments are of the types it was built for."""
    fn = kernel.fn
    assert fn is not None, "a step's parts switch together"
    fn(*args)
