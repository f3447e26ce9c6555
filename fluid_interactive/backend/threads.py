"""How many threads BLAS uses, chosen per plan by the size of its work.

On a machine with few cores, BLAS threads that wait for a core (another process is busy
there, or the work is too small to split) cost far more than they give: a small MLP step
ran 3-12x slower with OpenBLAS's default of one thread per core than with one thread
(docs/benchmarks.md, "Threads"). So each plan is classed once, when it is built, by the
number of elements its step touches:

* below `SMALL_WORK` it runs with one thread, always;
* above, with every core (as NumPy's own BLAS does), always.

The count is never chosen by timing unless asked: a GEMM's last bits depend on the
thread count (OpenBLAS splits the work, and its sums, differently), so a count measured
faster on a busy machine and slower on a quiet one would make two runs of one seeded
training differ. ``set_threads("measure")`` asks for it: `AdaptiveThreads` then runs a
large plan with one thread and with every core in turn for a few calls, keeps the
faster, and measures again after `RECHECK_CALLS` calls (twice as long each time the
answer stays the same), so a machine that becomes busy (or idle) is noticed within
seconds to minutes; and again two calls after the plan switches to its compiled kernels
(kernels/tier.py), whose costs differ from the NumPy kernels' and whose build, in a child
process, shared the machine with the first measurement.

Once a plan's compiled kernels are loaded, its measurements also time its calls with the
compiled kernels against its NumPy kernels, and it keeps whichever ran faster on this
machine (a small plan measures that alone, on one thread): the tier never makes a plan
slower than the NumPy kernels would. That choice leaves the values alone: the kernels the
tier runs by default give NumPy's values bit for bit (kernels/__init__.py).

The count is changed through threadpoolctl (which knows every BLAS NumPy may be built
with). The count in force between calls is the small plans' count: it is set when the first
small plan is built, and a large plan that ran with another count puts it back when its
call ends, so a small plan's call costs nothing for the policy; a program whose plans are
all small switches once. `set_threads(n)` fixes the count for
every plan; ``set_threads(None)`` returns to the policy by size. The ``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS`` variables, when set, cap the count.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

try:   # a dependency; without it (a trimmed install) the BLAS default is left alone
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover
    ThreadpoolController = None

#: Elements a plan's step touches (every var of the plan, counted once) below which it
#: always runs on one thread: its GEMMs are done before a second thread wakes up. Above it
#: the plan measures. (It was 1 << 20, from an MLP step that ran as fast on one thread as
#: on two on the idle 2-core machine; but W2's inference at batch 128, 0.9M elements,
#: ran 1.7x hand NumPy's time on one thread where OpenBLAS's own kernels use two well.)
SMALL_WORK = 1 << 16
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
        self.measure = False     # large plans time one thread against every core
        self.small = 1           # the count of a small plan (the override, when set)
        self.current: int | None = None   # unknown until the first switch
        self._libs: list[Any] | None = None
        self._serial_libs: list[Any] | None = None
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
                os.path.join(home, "numpy"))]
            scipy_home = os.path.join(home, "scipy")
            # SciPy's BLAS stays on one thread (`_serial`); any other is left alone
            self._libs = own or [lib for lib in libs if not os.path.abspath(
                lib.filepath).startswith(scipy_home)]
        return self._libs

    def rescan(self) -> None:
        """Look for the BLAS libraries again (one was loaded since: SciPy's, when the
        first compiled kernel that calls BLAS loads) and give them the count in force."""
        with self.lock:
            self._libs = self._serial_libs = None
            for lib in self._serial():
                lib.set_num_threads(1)
            if self.current is not None:
                for lib in self._controllers():
                    lib.set_num_threads(self.current)

    def _serial(self) -> list[Any]:
        if self._serial_libs is None:
            self._serial_libs = self._find_serial()
        return self._serial_libs

    def _find_serial(self) -> list[Any]:
        """The BLAS that only the compiled recurrent kernels call (SciPy's, through Numba):
        always one thread, whatever the count in force. Their products are one step's
        ([B, H] @ [H, 4H]: some 10^6 flops) inside a loop over time, and a second thread
        waking up for each costs more than it saves: W4 with the compiled sequences took
        77 ms a step with two threads there, 30 ms with one. A fixed count, not a
        measured one, so the values never depend on timing."""
        if ThreadpoolController is None or "scipy" not in sys.modules:
            return []   # no SciPy, so none of its BLAS: a scan costs a first call 2 ms
        home = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
        scipy_home = os.path.join(home, "scipy")
        return [lib for lib in ThreadpoolController().select(user_api="blas").lib_controllers
                if os.path.abspath(lib.filepath).startswith(scipy_home)]

    def openblas(self) -> bool:
        """Whether the BLAS the policy sets is OpenBLAS (whose idle threads' spin
        util/blas_wait.py shortens)."""
        libs = self._controllers()
        return bool(libs) and all(lib.internal_api == "openblas" for lib in libs)

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
        for lib in self._serial():   # again: OpenBLAS may reset it when its threads start
            lib.set_num_threads(1)
        self.current = n
        self.switches += 1


STATE = ThreadState()
STATE._controllers()   # finding the libraries takes 1-15 ms: at import, not in a first call


def set_threads(n: int | str | None) -> None:
    """Use ``n`` threads for every plan from its next call on (BLAS, and the compiled
    kernels where they split work), or, with None, let each plan's size choose (the
    default: one thread for small steps, every core for large ones), or, with
    ``"measure"``, run each large plan with whichever of one thread and every core
    measured faster lately: faster on a busy machine, but its values may then differ in
    their last bits from one run to the next (a GEMM sums in another order on another
    thread count)."""
    if n == "measure":
        STATE.override, STATE.measure, STATE.small = None, True, 1
    elif n is None or (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
        STATE.override, STATE.measure, STATE.small = n, False, 1 if n is None else n
    else:
        raise ValueError(f"set_threads: n must be a positive int, None or 'measure', "
                         f"got {n!r}")
    STATE.use(STATE.small)   # now (or, if a large call is in flight, when it ends)


def get_threads() -> int | str | None:
    """The count `set_threads` fixed, ``"measure"``, or None when the count follows each
    plan's size."""
    return "measure" if STATE.measure else STATE.override


def is_small(work: int) -> bool:
    """Whether a plan whose step touches ``work`` elements always runs on one thread."""
    return work < SMALL_WORK or STATE.cores == 1


class Tier(Protocol):
    """What the policy needs of a plan's compiled kernels (kernels/tier.py's PlanTier):
    whether they are loaded or being built, which kernels its calls run, and who hears of
    the switch to them."""

    @property
    def ready(self) -> bool: ...

    @property
    def pending(self) -> bool: ...

    @property
    def on_switch(self) -> list[Callable[[], None]]: ...

    def use(self, compiled: bool) -> None: ...


def plan_call(fn: Callable[..., Any], work: int, tier: Tier | None) -> Callable[..., Any]:
    """What a call of a plan runs, given its generated function ``fn``, the elements its
    step touches and its compiled kernels (None: none to measure): ``fn`` itself for a
    small plan without them, else an `AdaptiveThreads` around it (a small plan measures
    its kernels alone, on one thread)."""
    small = is_small(work)
    if small:   # the count between calls (a large plan's call puts it back)
        STATE.use(STATE.small)
        if tier is None:
            return fn
    adaptive = AdaptiveThreads(fn, tier, (1,) if small else None)
    if tier is not None and tier.pending:   # measured again once they are loaded
        tier.on_switch.append(adaptive.kernels_changed)
    return adaptive


#: (thread count, compiled kernels or not; None: the plan has none)
Option = tuple[int, "bool | None"]


class AdaptiveThreads:
    """A plan's entry: it runs the plan with its thread count, and the kernels that
    measured faster lately.

    ``counts``: the thread counts to choose from (a small plan: one thread); by default,
    those of a large plan: every core, or, with ``set_threads("measure")``, one thread
    and every core. No count changes while another thread has a large plan's call in
    flight (that call keeps the count it started with; this one runs with it, untimed).
    Measuring counts, it starts on one thread (never slower than one thread before it
    has measured). Every `RECHECK_CALLS` calls it times `PROBE_CALLS` calls with each
    option, interleaved: each count, and, once the plan's compiled kernels are loaded
    (``tier``), each with the compiled kernels and with the NumPy ones; it keeps the
    fastest (by the median call). A call on every core that takes `GIVE_UP` times the
    one-thread call before it ends the measurement at once (a busy core: no need to lose
    more calls to it). While the measurements agree they come less and less often (up to
    every `RECHECK_MAX` calls). The plan itself is called unchanged; only the count in
    force, and which kernels its handles hold, change before it.
    """

    __slots__ = ("fn", "counts", "tier", "option", "countdown", "probe", "totals",
                 "interval", "changed", "single")

    def __init__(self, fn: Callable[..., Any], tier: Tier | None = None,
                 counts: tuple[int, ...] | None = None):
        self.fn = fn
        self.tier = tier
        self.counts = counts
        self.option: Option = (1, None)
        self.interval = RECHECK_CALLS
        self.countdown = 2          # skip the first call (it fills buffers), then measure
        self.probe: list[Option] = []  # the options still to time in this measurement
        self.totals: dict[Option, list[float]] = {}
        self.changed = False
        # one count (a small plan measuring its kernels alone): no count to switch, so
        # no lock and no count of calls in flight
        self.single = counts == (1,)

    @property
    def choice(self) -> int:
        """The thread count chosen."""
        return self.option[0]

    @property
    def compiled(self) -> bool | None:
        """Whether the compiled kernels measured faster (None: not measured yet)."""
        return self.option[1]

    def kernels_changed(self) -> None:
        """The plan now runs other kernels (its compiled ones): what was measured no longer
        holds, so measure again soon, from the call after next. A measurement taken while
        the compiled kernels were being built also shared the machine with their build."""
        self.changed = True

    def __call__(self, *args: Any) -> Any:
        if self.single:
            return self._run(self._wanted(), args)
        with STATE.lock:
            alone = STATE.inflight == 0
            option = self._wanted() if alone else (STATE.current or 1, None)
            if alone and option[0] != STATE.current:
                STATE._set(option[0])
            STATE.inflight += 1
        try:
            return self._run(option, args) if alone else self.fn(*args)
        finally:
            with STATE.lock:
                STATE.inflight -= 1
                if not STATE.inflight and STATE.current != STATE.small:
                    STATE._set(STATE.small)   # between calls, small plans' count

    def _run(self, option: Option, args: tuple) -> Any:
        if option[1] is not None and self.tier is not None:
            self.tier.use(option[1])
        if self.probe and option == self.probe[-1]:
            return self._timed(*args)
        return self.fn(*args)

    def _counts(self) -> list[int]:
        """The counts to choose from now, largest first."""
        counts = self.counts or ((1, STATE.cores) if STATE.measure else (STATE.cores,))
        return sorted({STATE.cores if n > 1 else 1 for n in counts}, reverse=True)

    def _options(self) -> list[Option]:
        tiers: list[bool | None] = [True, False] if self.tier is not None and \
            self.tier.ready else [None]
        return [(n, c) for c in tiers for n in self._counts()]

    def _wanted(self) -> Option:
        """The option for this call: the override, the next to time, or the choice."""
        if STATE.override is not None:
            return (STATE.override, self.option[1])
        if self.changed and not self.probe:
            self.changed = False
            self.countdown, self.interval = min(self.countdown, 2), RECHECK_CALLS
        if not self.probe:
            self.countdown -= 1
            if self.countdown <= 0:
                options = self._options()
                if len(options) > 1:   # popped from the end: one thread first
                    self.probe = options * PROBE_CALLS
                    self.totals = {}
                else:                  # nothing to choose between
                    self.countdown = self.interval
        if self.probe:
            return self.probe[-1]
        if self.counts is None and not STATE.measure:   # a large plan: every core
            return (STATE.cores, self.option[1])
        return self.option

    def _timed(self, *args: Any) -> Any:
        """One call of the measurement (its option already in force), timed; the last one
        concludes it."""
        option = self.probe.pop()
        t0 = time.perf_counter()
        result = self.fn(*args)
        took = self.totals.setdefault(option, [])
        took.append(time.perf_counter() - t0)
        one = self.totals.get((1, option[1]))
        if option[0] != 1 and one and took[-1] > GIVE_UP * one[-1]:
            # a busy core: one thread, by far; the kernels still to compare as they are
            self.probe = [o for o in self.probe if o[0] == 1]
            for o in list(self.totals):
                if o[0] != 1:
                    self.totals[o] = [float("inf")]
        if not self.probe:   # the median of each option's calls: one slow call is noise
            option = min(self.totals, key=lambda k: sorted(self.totals[k])[
                len(self.totals[k]) // 2])
            # a confirmed choice is measured less often; a change, soon again
            self.interval = min(2 * self.interval, RECHECK_MAX) \
                if option == self.option else RECHECK_CALLS
            self.option = option
            self.countdown = self.interval
        return result
