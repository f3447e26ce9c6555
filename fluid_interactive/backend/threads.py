"""How many threads BLAS uses, chosen per plan by the size of its work.

On a machine with few cores, BLAS threads that wait for a core (another process is busy
there, or the work is too small to split) cost far more than they give: a small MLP step
ran 3-12x slower with OpenBLAS's default of one thread per core than with one thread
(docs/benchmarks.md, "Threads"). So each plan is classed once, when it is built, by the
number of elements its step touches:

* below `SMALL_WORK` it runs with one thread, always;
* above, `AdaptiveThreads` runs it with one thread and with every core in turn for a
  few calls, keeps the faster, and measures again after `RECHECK_CALLS` calls (twice as
  long each time the answer stays the same), so a machine that becomes busy (or idle) is
  noticed within seconds to minutes; and again two calls after the plan switches to its
  compiled kernels (kernels/tier.py), whose costs differ from the NumPy kernels' and whose
  build, in a child process, shared the machine with the first measurement.

The count is changed through threadpoolctl (which knows every BLAS NumPy may be built
with). The count in force between calls is the small plans' count: it is set when the first
small plan is built, and a large plan that ran with another count puts it back when its
call ends, so a small plan's call costs nothing for the policy; a program whose plans are
all small switches once. `set_threads(n)` fixes the count for
every plan; ``set_threads(None)`` returns to the policy. The ``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS`` variables, when set, cap the count.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

try:   # a dependency; without it (a trimmed install) the BLAS default is left alone
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover
    ThreadpoolController = None

#: Elements a plan's step touches (every var of the plan, counted once) below which it
#: always runs on one thread. Measured with benchmarks/bench_threads.py: an MLP step of
#: this size ran as fast or faster with one thread than with two on the idle 2-core machine.
SMALL_WORK = 1 << 20
#: Calls between two measurements of an adaptive plan (doubled each time a measurement
#: confirms the count in force, up to `RECHECK_MAX`), and calls timed per measurement.
RECHECK_CALLS = 400
RECHECK_MAX = 12800
PROBE_CALLS = 3
#: A call on every core this many times the one-thread call ends a measurement at once: a
#: busy core makes it 3-12x (docs/benchmarks.md, "Threads"), while single calls 1.5-2x
#: slower are ordinary noise on a shared 2-core machine (at 1.5x one such call locked a W2
#: SGD plan on one thread, 1.5x slower, for 400-12,800 calls). Below it, the median of the
#: measurement's calls decides.
GIVE_UP = 3.0

_ENV_CAPS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _cores() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover (not Linux)
        n = os.cpu_count() or 1
    for var in _ENV_CAPS:
        value = os.environ.get(var, "")
        if value.isdigit() and int(value) > 0:
            n = min(n, int(value))
    return max(n, 1)


class ThreadState:
    """The count in force and the counts plans ask for. Between calls the count is
    ``small``: a small plan asks for it when it is built (`use`), and a large plan's entry
    puts it back after a call that ran with another count."""

    def __init__(self) -> None:
        self.cores = _cores()
        self.override: int | None = None
        self.small = 1           # the count of a small plan (the override, when set)
        self.current: int | None = None   # unknown until the first switch
        self._libs: list[Any] | None = None
        self.switches = 0
        # Calls of large plans running now: BLAS's count must not change under a call
        # that another thread has in flight, so no switch happens while one runs.
        self.inflight = 0
        self.lock = threading.Lock()

    def _controllers(self) -> list[Any]:
        """NumPy's BLAS and SciPy's (which the compiled tier's kernels call, through
        Numba): the libraries loaded from their own folders when there are any (a
        wheel's bundled OpenBLAS), else every BLAS loaded (a system NumPy); so a BLAS
        that another framework brought along is left alone."""
        if self._libs is None:
            libs = [] if ThreadpoolController is None else \
                ThreadpoolController().select(user_api="blas").lib_controllers
            home = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
            own = [lib for lib in libs if os.path.abspath(lib.filepath).startswith(
                (os.path.join(home, "numpy"), os.path.join(home, "scipy")))]
            self._libs = own or libs
        return self._libs

    def rescan(self) -> None:
        """Look for the BLAS libraries again (one was loaded since: SciPy's, when the
        first compiled kernel that calls BLAS loads) and give them the count in force."""
        with self.lock:
            self._libs = None
            if self.current is not None:
                for lib in self._controllers():
                    lib.set_num_threads(self.current)

    def blas_threads(self) -> list[int]:
        """The thread count of each BLAS library the policy sets (NumPy's)."""
        return [lib.get_num_threads() for lib in self._controllers()]

    def use(self, n: int) -> None:
        """Run BLAS with ``n`` threads from now on (unless a large plan's call is in
        flight in another thread: then the count stays, and is asked for again next call)."""
        if n == self.current:
            return
        with self.lock:
            if self.inflight:
                return
            self._set(n)

    def _set(self, n: int) -> None:
        for lib in self._controllers():
            lib.set_num_threads(n)
        self.current = n
        self.switches += 1


STATE = ThreadState()
STATE._controllers()   # finding the libraries takes 1-15 ms: at import, not in a first call


def set_threads(n: int | None) -> None:
    """Use ``n`` threads for every plan from its next call on (BLAS, and the compiled
    kernels where they split work), or, with None, let each plan's size choose (the
    default: one thread for small steps, the faster of one and all cores for large ones).
    """
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"set_threads: n must be a positive int or None, got {n!r}")
    STATE.override = n
    STATE.small = 1 if n is None else n
    STATE.use(STATE.small)   # now (or, if a large call is in flight, when it ends)


def get_threads() -> int | None:
    """The count `set_threads` fixed, or None when the policy chooses per plan."""
    return STATE.override


def is_small(work: int) -> bool:
    """Whether a plan whose step touches ``work`` elements always runs on one thread."""
    return work < SMALL_WORK or STATE.cores == 1


class AdaptiveThreads:
    """A large plan's entry: it runs the plan with the count that measured faster lately.

    No count changes while another thread has a large plan's call in flight (that call
    keeps the count it started with; this one runs with it, untimed). It starts on one
    thread (never slower than one thread before it has measured). Every
    `RECHECK_CALLS` calls it times `PROBE_CALLS` calls with one thread and as many with
    every core, interleaved, and keeps the faster (by the median call); a call on every
    core that takes `GIVE_UP` times the one-thread call before it ends the measurement at
    once (a busy core: no need to lose more calls to it). While the measurements agree
    they come less and less often (up to every `RECHECK_MAX` calls). The plan itself is
    called unchanged; only the count in force before it changes.
    """

    __slots__ = ("fn", "choice", "countdown", "probe", "totals", "interval", "changed")

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        self.choice = 1
        self.interval = RECHECK_CALLS
        self.countdown = 2          # skip the first call (it fills buffers), then measure
        self.probe: list[int] = []  # the counts still to time in this measurement
        self.totals: dict[int, list[float]] = {}
        self.changed = False

    def kernels_changed(self) -> None:
        """The plan now runs other kernels (its compiled ones): what was measured no longer
        holds, so measure again soon, from the call after next. A measurement taken while
        the compiled kernels were being built also shared the machine with their build."""
        self.changed = True

    def __call__(self, *args: Any) -> Any:
        with STATE.lock:
            alone = STATE.inflight == 0
            wanted = self._wanted() if alone else STATE.current
            if alone and wanted is not None and wanted != STATE.current:
                STATE._set(wanted)
            STATE.inflight += 1
        try:
            if alone and self.probe and wanted == self.probe[-1]:
                return self._timed(*args)
            return self.fn(*args)
        finally:
            with STATE.lock:
                STATE.inflight -= 1
                if not STATE.inflight and STATE.current != STATE.small:
                    STATE._set(STATE.small)   # between calls, small plans' count

    def _wanted(self) -> int:
        """The count for this call: the override, the next count to time, or the choice."""
        if STATE.override is not None:
            return STATE.override
        if self.changed and not self.probe:
            self.changed = False
            self.countdown, self.interval = min(self.countdown, 2), RECHECK_CALLS
        if not self.probe:
            self.countdown -= 1
            if self.countdown <= 0:
                self.probe = [STATE.cores, 1] * PROBE_CALLS   # popped from the end: 1 first
                self.totals = {}
        return self.probe[-1] if self.probe else self.choice

    def _timed(self, *args: Any) -> Any:
        """One call of the measurement (its count already in force), timed; the last one
        concludes it."""
        n = self.probe.pop()
        t0 = time.perf_counter()
        result = self.fn(*args)
        took = self.totals.setdefault(n, [])
        took.append(time.perf_counter() - t0)
        if n != 1 and took[-1] > GIVE_UP * self.totals[1][-1]:
            self.probe = []
            self.totals = {1: [0.0]}   # one thread, by far
        if not self.probe:   # the median of each count's calls: one slow call is noise
            choice = min(self.totals, key=lambda k: sorted(self.totals[k])[
                len(self.totals[k]) // 2])
            # a confirmed count is measured less often; a change, soon again
            self.interval = min(2 * self.interval, RECHECK_MAX) \
                if choice == self.choice else RECHECK_CALLS
            self.choice = choice
            self.countdown = self.interval
        return result
