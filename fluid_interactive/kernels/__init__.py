"""The compiled kernel tier: loops compiled by Numba (an optional extra, ``pip install
.[fast]``) for what NumPy can only do as several passes over memory: an optimizer's
update, a chain of elementwise ops, the elementwise part of a recurrent cell's step.
Without Numba, or with ``FLUID_KERNELS=numpy``, every kernel runs NumPy as before.

Compiling never delays a call: a plan starts on its NumPy kernels while its compiled ones
are built in a background thread (`build.py`) and cached on disk; the plan switches
between two calls (`tier.py`). A process that finds them in the cache loads them when the
plan is built, and runs them from its first call, once Numba is ready: imported in an
interactive session, the package starts loading a cached kernel in a background thread
(`build.preload`), which is over before a notebook's first call; a plan built before
that (a script) loads its kernels in the background too.
Each compiled kernel gives the values of its NumPy kernel: bit-identical where the
operations are the same, in the same order (the updates, the arithmetic and `relu`
members of a chain, pooling, col2im), and within float rounding where NumPy and LLVM
evaluate a function differently (`exp`, `tanh` in a chain) or BLAS sums in another order
(the recurrent sequences). Only the bit-identical ones run by default, so that whether a
call runs compiled kernels or NumPy ones never changes a value; ``FLUID_KERNELS=fast``
lets the others run too (`build.approximate_allowed`, ops/compiled.py).
"""
from .build import enabled, interactive, preload
from .tier import Kernel, PlanTier

if interactive():
    preload()

__all__ = ["enabled", "Kernel", "PlanTier"]
