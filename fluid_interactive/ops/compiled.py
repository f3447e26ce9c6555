"""How a kernel factory asks for a compiled form of itself (the kernel tier,
`fluid_interactive/kernels`): `compiled_kernel` is the one way, for every op with one (the
fused updates, elementwise chains, pooling, col2im, the recurrent sequences). The factory
keeps the handle and, at each call, runs it where it can (`Kernel.ran`, `Kernel.run`),
its NumPy code otherwise."""
from __future__ import annotations

from typing import Any

from ..kernels import Kernel, plan_tier
from ..kernels.build import KernelSource
from ..kernels.recurrent import sequence_source
from .spec import KernelContext


def compiled_kernel(ctx: KernelContext, source: KernelSource, dtype: str,
                    owner: Any = None, label: str = "") -> Kernel | None:
    """The handle on ``source`` in the plan's tier, or None where the tier does not apply
    (arrays on a device; a dtype other than float32/64). ``owner`` (the kernel the plan
    calls) gets the ``tier_label`` the generated source shows; ``label`` names the
    kernel's code (default: its module in the cache and its function)."""
    if ctx.xp.__name__ != "numpy" or dtype not in ("float32", "float64"):
        return None
    kernel = plan_tier(ctx.shared).request(source, label or
                                           f"{source.key}.py:{source.function}")
    if owner is not None:
        owner.tier_label = kernel.label
    return kernel


def sequence_kernel(ctx: KernelContext, owner: Any, dtype: str, function: str,
                    acts: dict[str, str], modes: dict[str, bool]) -> Kernel | None:
    """The handle on a whole sequence's compiled kernel (kernels/recurrent.py) for the
    kernel ``owner`` over arrays of ``dtype``, or None where the tier does not apply."""
    if dtype not in ("float32", "float64"):
        return None
    return compiled_kernel(ctx, sequence_source(function, dtype, acts, modes), dtype, owner)
