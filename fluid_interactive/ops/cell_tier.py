"""The compiled forms of the recurrent cells' steps in the kernel tier
(`kernels/cells.py`): float32/64 on the host. A step's op keeps the handle and runs its
compiled step once the plan switched to it, its NumPy step otherwise (ops/lstm.py)."""
from __future__ import annotations

from typing import Any

from ..kernels import Kernel, plan_tier
from ..kernels.build import KernelSource
from .spec import KernelContext


def compiled_step(ctx: KernelContext, owner: Any, dtype: str,
                  source: KernelSource) -> Kernel | None:
    """The handle on ``source`` (one step of a cell) for the kernel ``owner``, or None
    where the tier does not apply; ``owner`` tells the generated source its label."""
    if ctx.xp.__name__ != "numpy" or dtype not in ("float32", "float64"):
        return None
    kernel = plan_tier(ctx.shared).request(source, f"{source.key}.py:{source.function}")
    owner.tier_label = kernel.label
    return kernel
