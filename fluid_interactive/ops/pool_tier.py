"""pool2d's compiled forms in the kernel tier (`kernels/pool.py`), for batch-innermost max
pooling of disjoint, unpadded windows, float32/64, on the host.

The forward and its gradient op over the same X share `FirstMaxima` (through
`KernelContext.shared`): once a gradient op asked for it, the compiled forward records
the index of each window's first maximum, kept with the X it came from (`KeptFrom`), and
the compiled gradient reads that index instead of X and Out when it receives that very
X; otherwise (the NumPy kernels ran, or another array came) it finds the maxima again.
"""
from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import Any

from ..kernels.pool import pool_source
from .compiled import compiled_kernel, run_compiled
from .layouts import CHWN
from .spec import KeptFrom, KernelContext


class FirstMaxima:
    """The uint8 index of each window's first maximum, shared by a pooling and its
    gradient op; ``wanted`` once a gradient op in the plan reads it."""

    def __init__(self) -> None:
        self.wanted = False
        self.kept = KeptFrom()
        self.index: Any | None = None


def _applies(geo: Any) -> bool:
    return (geo.layout == CHWN and geo.type == "max" and not geo.is_global
            and not geo.padded and not geo.overlap and prod(geo.k) < 255)


def _shared(ctx: KernelContext, geo: Any) -> FirstMaxima:
    key = (ctx.input_name("X"), (geo.n, geo.c) + geo.sizes, repr(sorted(ctx.attrs.items())))
    return ctx.shared(FirstMaxima, key)


def _handle(ctx: KernelContext, geo: Any, function: str) -> Any:
    return compiled_kernel(ctx, geo.dtype, lambda: pool_source(function, geo.k, geo.s,
                                                               geo.dtype))


def compiled_pool(ctx: KernelContext, geo: Any, numpy_fn: Callable,
                  output: Callable[[], Any]) -> Callable:
    """``numpy_fn`` (the forward), or a kernel that runs its compiled form once the plan
    switched to it, writing into ``output()`` (and the index, when wanted)."""
    plain = _handle(ctx, geo, "max_pool") if _applies(geo) else None
    if plain is None:
        return numpy_fn
    first = _shared(ctx, geo)
    indexed = _handle(ctx, geo, "max_pool_first")

    def pool(a: Any) -> Any:
        dst = output()
        if first.wanted:
            if first.index is None:
                first.index = ctx.xp.empty(geo.out_shape, "uint8")
            if run_compiled(indexed, lambda: (a, dst, first.index)):
                first.kept.keep(a, first.index)
                return dst
        first.kept.forget()
        return dst if run_compiled(plain, lambda: (a, dst)) else numpy_fn(a)
    return pool


def compiled_pool_grad(ctx: KernelContext, geo: Any, numpy_fn: Callable,
                       output: Callable[[], Any]) -> Callable:
    """``numpy_fn`` (the max gradient), or a kernel that runs a compiled form once the
    plan switched to it: from the forward's index of first maxima when it was taken from
    this very X, else from X and Out."""
    indexed = _handle(ctx, geo, "max_pool_grad_first") if _applies(geo) else None
    if indexed is None:
        return numpy_fn
    first = _shared(ctx, geo)
    first.wanted = True
    again = _handle(ctx, geo, "max_pool_grad")

    def grad(a: Any, y: Any, g: Any) -> Any:
        dst = output()
        index = first.kept.get(a)
        if index is not None and run_compiled(indexed, lambda: (index, g, dst)):
            return dst
        return dst if run_compiled(again, lambda: (a, y, g, dst)) else numpy_fn(a, y, g)
    return grad
