"""Which kernels a plan runs: its NumPy kernels until its compiled ones are ready, then the
compiled ones, switched between two calls.

A kernel factory that has a compiled form asks the plan's `PlanTier` for it
(`request`), keeps the `Kernel` handle, and at each call runs ``handle.fn`` when it is
set and its NumPy code otherwise. The handles are filled only by `PlanTier.poll`, which
the generated code calls first in a call while a build is pending: so a call runs NumPy
kernels or compiled ones, never a mix that changes while it runs.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from concurrent.futures import Future, wait
from typing import Any

from .build import BUILDER, KernelSource, enabled, load, numba_ready

#: The key of a plan's tier in its shared kernel state (`KernelContext.shared`).
TIER_KEY: Hashable = ("kernels", "tier")


class Kernel:
    """A compiled kernel as a plan sees it: ``fn`` is None while the plan runs NumPy."""

    __slots__ = ("source", "fn", "label")

    def __init__(self, source: KernelSource, label: str):
        self.source, self.label = source, label
        self.fn: Callable[..., Any] | None = None

    def ran(self, args: tuple) -> bool:
        """Whether ``fn(*args)`` ran: the plan has switched to it and it took the
        arguments' types (for a kernel that writes its results into ``args``)."""
        fn = self.fn
        if fn is None:
            return False
        try:
            fn(*args)
        except TypeError:
            return False
        return True

    def run(self, args: tuple, numpy: Callable[..., Any], *numpy_args: Any) -> None:
        """``fn(*args)`` once the plan switched to it, else ``numpy(*numpy_args)``; the
        NumPy kernel also runs when ``fn`` refuses the arguments' types (a layout it was
        not built for: nothing compiles while a step runs). For kernels that write their
        results into their arguments, as every compiled kernel does."""
        if not self.ran(args):
            numpy(*numpy_args)


class PlanTier:
    """The compiled kernels of one plan and the state of their build."""

    def __init__(self) -> None:
        self.kernels: list[Kernel] = []
        self.futures: list[Future] = []
        self.pending = False
        self.state = "numpy"
        self.detail = ""
        # polls before the build is asked for: the first call runs alone (a build in the
        # background shares the interpreter, or a core, with it)
        self.deferred = 0
        #: called once the plan has switched to its compiled kernels
        self.on_switch: list[Callable[[], None]] = []
        # the loaded functions, by kernel, and whether the handles hold them (`use`)
        self.loaded: list[Callable[..., Any] | None] = []
        self.using = False

    def request(self, source: KernelSource, label: str) -> Kernel:
        """A handle on the compiled form of a kernel of this plan (``label``: what the
        generated source shows for it)."""
        kernel = Kernel(source, label)
        self.kernels.append(kernel)
        return kernel

    def start(self) -> None:
        """Called once every kernel of the plan is prepared: load the compiled kernels now
        when the disk cache holds them all and Numba is ready (milliseconds: the first
        call runs them), otherwise build or load them in the background while the plan
        runs NumPy, from the end of its first call on."""
        if not self.kernels or not enabled() or self.pending:
            return   # (pending: kernels asked for since join the build, see `_submit`)
        if self.state == "compiled" and self._load_more():
            return
        if numba_ready() and all(k.source.is_cached() for k in self.kernels):
            try:
                self._switch([load(k.source) for k in self.kernels])
            except Exception as e:   # a damaged cache: build again, in the background
                self.detail = f"cache unusable ({type(e).__name__}: {e})"
            else:
                return
        self.pending = True
        self.deferred = 1
        self.state = "loading" if all(k.source.is_cached() for k in self.kernels) \
            else "compiling"

    def _load_more(self) -> bool:
        """After the switch, another instance of the plan (runtime/plan/turns.py) asked for
        kernels: load them from the cache, where the switch put theirs (True), or not."""
        more = self.kernels[len(self.loaded):]
        if not all(k.source.is_cached() for k in more):
            return False
        try:
            fns = [load(k.source) for k in more]
        except Exception:   # a damaged cache: build again, as `start` does
            return False
        for kernel, fn in zip(more, fns):
            kernel.fn = fn if self.using else None
        self.loaded += fns
        return True

    def _submit(self) -> None:
        # kernels requested since (another instance of the plan, turns.py) join the build
        self.futures += [BUILDER.submit(k.source) for k in self.kernels[len(self.futures):]]

    def poll(self) -> None:
        """Between calls: ask for the build after the first call, and switch to the
        compiled kernels once all are built."""
        if self.deferred:
            self.deferred -= 1
            return
        self._submit()
        if not all(f.done() for f in self.futures):
            return
        self.pending = False
        failed = next((f.exception() for f in self.futures if f.exception()), None)
        if failed is not None:
            self.state, self.detail = "numpy", f"build failed: {type(failed).__name__}: {failed}"
            return
        self._switch([f.result() for f in self.futures])

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the build is over (the next call switches); False on timeout."""
        if self.pending:
            self.deferred = 0
            self._submit()
        done, not_done = wait(self.futures, timeout)
        return not not_done

    def _switch(self, fns: list[Callable]) -> None:
        for kernel, fn in zip(self.kernels, fns):
            kernel.fn = fn
        self.loaded = [k.fn for k in self.kernels]
        self.using = True
        self.state = "compiled"
        for listener in self.on_switch:
            listener()

    @property
    def ready(self) -> bool:
        """Whether the compiled kernels are loaded (`use` may choose them)."""
        return self.state == "compiled"

    def use(self, compiled: bool) -> None:
        """Between calls: the compiled kernels (True) or the NumPy ones from the next call
        on (the thread policy measures both and keeps the faster: backend/threads.py)."""
        if compiled == self.using or not self.ready:
            return
        for kernel, fn in zip(self.kernels, self.loaded):
            kernel.fn = fn if compiled else None
        self.using = compiled

    def describe(self) -> str:
        """'numpy', 'compiling' or 'loading' (NumPy runs meanwhile), 'compiled', or
        'compiled, running NumPy' (its NumPy kernels measured faster), with any detail."""
        state = self.state if self.using or not self.ready else \
            "compiled, running NumPy (measured faster)"
        return state + (f" ({self.detail})" if self.detail else "")


def plan_tier(shared: Callable[[Hashable, Callable[[], Any]], Any]) -> PlanTier:
    """The plan's tier, through `KernelContext.shared`."""
    return shared(TIER_KEY, PlanTier)
