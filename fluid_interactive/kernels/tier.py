"""Which kernels a plan runs: its NumPy kernels until its compiled ones are ready, then the
compiled ones, switched between two calls.

A kernel factory that has a compiled form asks the plan's `PlanTier` for it
(`request`, through ops/compiled.py), keeps the `Kernel` handle, and at each call runs
``handle.fn`` when it is set and its NumPy code otherwise. The handles are filled only by
`PlanTier.poll`, which the generated code calls first in a call while a build is pending:
so a call runs NumPy kernels or compiled ones, never a mix that changes while it runs.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from typing import Any

from .build import BUILDER, KernelSource, enabled, load, loaded, numba_ready


class Kernel:
    """A compiled kernel as a plan sees it: ``fn`` is None while the plan runs NumPy."""

    __slots__ = ("source", "fn", "label")

    def __init__(self, source: KernelSource, label: str):
        self.source, self.label = source, label
        self.fn: Callable[..., Any] | None = None

    def call(self, args: Sequence[Any]) -> bool:
        """Whether ``fn(*args)`` ran: it took the arguments' types (a layout it was not
        built for raises, and the caller runs its NumPy code: ops/compiled.py's
        `run_compiled`). For kernels that write their results into ``args``, as every
        compiled kernel does; ``fn`` must be set."""
        try:
            self.fn(*args)   # type: ignore[misc]
        except TypeError:
            return False
        return True


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
        if not self.kernels or not enabled() or self.pending or self.ready:
            return
        if numba_ready() and all(loaded(k.source) is not None or k.source.is_cached()
                                 for k in self.kernels):
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

    def _submit(self) -> None:
        self.futures += [BUILDER.submit(k.source) for k in self.kernels[len(self.futures):]]

    def poll(self) -> None:
        """Between calls: ask for the build after the first call, and switch to the
        compiled kernels once all are built."""
        if self.deferred:
            self.deferred -= 1
            return
        try:
            self._submit()
        except OSError as e:   # the cache folder became unusable: NumPy it stays
            self.pending = False
            self.state, self.detail = "numpy", f"cache unusable ({type(e).__name__}: {e})"
            return
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
