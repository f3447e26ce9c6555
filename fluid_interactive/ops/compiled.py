"""How a kernel factory uses a compiled form of itself (the kernel tier,
`fluid_interactive/kernels`), for every op with one (the fused updates, elementwise
chains, pooling, col2im, the recurrent sequences): `compiled_kernel` asks the plan's tier
for it once, when the kernel is prepared, and `run_compiled` runs it at each call where it
can, the factory's NumPy code running otherwise. The source lines of a plan name the
compiled kernels each of its lines may call (runtime/plan/emitter.py reads them from the
tier)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..kernels import Kernel
from ..kernels.build import KernelSource, approximate_allowed
from ..kernels.recurrent import sequence_source
from .spec import KernelContext

#: the dtypes the compiled kernels are built for
FLOATS = ("float32", "float64")


def compiled_kernel(ctx: KernelContext, dtype: str, source: Callable[[], KernelSource],
                    label: str = "", exact: bool = True) -> Kernel | None:
    """The handle on the compiled kernel ``source()`` in the plan's tier, or None where
    the tier does not apply (arrays on a device; a dtype other than float32/64; the
    source is made only where it does). ``label`` names the kernel's code in the
    generated source (default: its module in the cache and its function). ``exact``:
    the kernel gives its NumPy code's values bit for bit, so that whether a call runs it
    never changes a value; one that does not (within float rounding) runs only where
    ``FLUID_KERNELS=fast`` allows it (kernels/build.py, `approximate_allowed`)."""
    if ctx.xp.__name__ != "numpy" or dtype not in FLOATS or \
            not (exact or approximate_allowed()):
        return None
    made = source()
    return ctx.state.tier.request(made, label or f"{made.key}.py:{made.function}")


def run_compiled(kernel: Kernel | None, args: Callable[[], Sequence[Any]]) -> bool:
    """Run ``kernel`` on ``args()`` (which it writes its results into) where it can: True
    when it ran, False when the caller runs its NumPy code instead (no compiled form
    here, the plan runs its NumPy kernels, or the kernel refuses these arguments' types:
    nothing compiles while a step runs). ``args`` is called only when the kernel runs."""
    return kernel is not None and kernel.fn is not None and kernel.call(args())


def sequence_kernel(ctx: KernelContext, dtype: str, function: str, acts: dict[str, str],
                    modes: dict[str, bool]) -> Kernel | None:
    """The handle on a whole sequence's compiled kernel (kernels/recurrent.py) over
    arrays of ``dtype``, or None where the tier does not apply. Its values are the NumPy
    steps' within float rounding (its tanh and its BLAS differ): not exact."""
    return compiled_kernel(ctx, dtype, lambda: sequence_source(function, dtype, acts, modes),
                           exact=False)
