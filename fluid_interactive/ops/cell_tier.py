"""The compiled forms of the recurrent cells in the kernel tier: a whole sequence forward
or back in one call (`kernels/recurrent.py`), float32/64 on the host. A cell's op keeps
the handle and runs the compiled sequence once the plan switched to it, its NumPy steps
otherwise (ops/lstm.py, ops/gru.py)."""
from __future__ import annotations

from typing import Any

from ..kernels import Kernel, plan_tier
from ..kernels.recurrent import sequence_source
from .spec import KernelContext


def sequence_kernel(ctx: KernelContext, owner: Any, dtype: str, function: str,
                    acts: dict[str, str], modes: dict[str, bool]) -> Kernel | None:
    """The handle on a whole sequence's compiled kernel (kernels/recurrent.py) for the
    kernel ``owner`` over arrays of ``dtype``, or None where the tier does not apply."""
    if ctx.xp.__name__ != "numpy" or dtype not in ("float32", "float64"):
        return None
    source = sequence_source(function, dtype, acts, modes)
    kernel = plan_tier(ctx.shared).request(source, f"{source.key}.py:{function}")
    owner.tier_label = kernel.label
    return kernel
