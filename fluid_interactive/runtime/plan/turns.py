"""Two instances of one plan taking turns, so that a fused optimizer update needs no array
of its own for the gradients.

A fused update (ops/optim_fused.py) keeps two generations of its state and writes the one
the scope does not hold. Its gradients need a third array of the parameters' size, unless
they are computed straight into the parameters' array of the generation about to be
written: nobody holds it (the scope holds the other), and the update reads each gradient
before it writes that parameter. The gradients live in the plan's buffers, fixed when its
kernels are prepared, so each generation gets a plan instance of its own whose gradient
arena is that generation's parameter array (`buffers.lent_arenas`,
`DoubleBuffer.adopt`). A call runs the instance whose generation nobody references; when
both are referenced (history kept, a user, a kept traceback or another thread holding
parameters), it runs a plain instance with an arena of its own, as every plan did
before, made the first time it is needed and kept: the next call may find a generation
free again.

The instances share every other buffer and their kernels' state (they never run at once:
a plan's callers take turns), so the memory saved is the arena's.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...errors import KernelError
from ...ops.flat_state import Generation
from .emitter import GeneratedCode

#: (a plan instance, the generations whose parameters are its gradient arenas); no
#: generations: a plain instance
Instance = tuple[GeneratedCode, list[Generation]]


class Turns:
    """The function a plan's callers call: picks the instance to run for each call."""

    def __init__(self, make: Callable[[bool], Instance], first: Instance):
        self.make = make   # make(lend): an instance with lent arenas, or a plain one
        # (its generated function, the generations it writes over its gradients)
        self.instances = [(first[0].fn, first[1])]
        self.plain: Callable | None = None

    def __call__(self, scope: Any, *feeds: Any) -> Any:
        for fn, gens in self.instances:
            if all(gen.unreferenced() for gen in gens):
                return fn(scope, *feeds)
        if len(self.instances) < 2:
            code, gens = self._made(True)
            self.instances.append((code.fn, gens))
            if all(gen.unreferenced() for gen in gens):   # always, for a new one
                return code.fn(scope, *feeds)
        if self.plain is None:
            self.plain = self._made(False)[0].fn
        return self.plain(scope, *feeds)

    def functions(self) -> list[Callable]:
        """The generated functions made so far (for tools that time their kernels)."""
        return [fn for fn, _ in self.instances] + ([self.plain] if self.plain else [])

    def _made(self, lend: bool) -> Instance:
        try:
            return self.make(lend)
        except MemoryError:
            raise KernelError(
                "out of memory while planning another instance of this plan (its calls take "
                "turns between instances, docs/architecture.md: the lent gradient arena). No "
                "state was changed. Free memory, or call it with smaller batches.") from None
