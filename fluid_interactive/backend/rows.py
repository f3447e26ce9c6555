"""NumPy kernels whose rows are independent, run on the threads in force.

A plan's large call runs with every core (threads.py), but only BLAS used them: a softmax,
a layer norm, or a batch of small matrix products (an attention's heads, each below the
size at which OpenBLAS threads a GEMM) ran on one core while the other waited. Such a
kernel computes each leading row from that row alone, so it can cut its rows into one
chunk per thread, run the first chunk itself and the others in a small pool (NumPy lets
go of the interpreter lock inside its loops), and wait for all. It does so only where
OpenBLAS's idle threads sleep soon after a call (`SPLIT`, util/blas_wait.py).

The values do not change: each row goes through the same NumPy calls, on a slice instead
of the whole array, so the chunking (and the thread count) never reaches the last bits.
`align` keeps chunk boundaries on multiples of a row count, for a kernel whose BLAS call
groups rows (a matrix-vector product takes them four at a time). A chunk is never
smaller than `MIN_CHUNK`: below it, handing it to a thread costs more than it saves.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from .threads import STATE


def _short_spin() -> bool:
    """Whether OpenBLAS's idle threads sleep soon after a call (util/blas_wait.py): a
    thread spinning for a tenth of a second after each product would share the core a
    range runs on, and splitting would gain nothing."""
    value = os.environ.get("OPENBLAS_THREAD_TIMEOUT", "")
    return value.isdigit() and int(value) <= 20


#: Whether kernels split their rows at all: with OpenBLAS, whose idle threads sleep soon.
SPLIT = _short_spin() and STATE.openblas()
#: The work a range must hold at least, in elements of one pass over memory (a kernel
#: says how many its rows are worth): handing a range to a thread and waiting for it take
#: some 100 µs on the 2-core machine, about what NumPy takes for 128K float32 values
#: through a few passes. (Measured break-even, whole against split in two: softmax over
#: 64K values, a batch of small matmuls of 128K results, relu's gradient over 512K.)
MIN_CHUNK = 1 << 17

_POOL: list[tuple[int, ThreadPoolExecutor]] = []   # (the process that made it, the pool)
_POOL_LOCK = threading.Lock()


def chunks(rows: int, work: int, align: int = 1) -> list[tuple[int, int]]:
    """``[0, rows)`` cut into one range per thread in force, each at least `MIN_CHUNK` of
    the ``work`` elements, their starts on multiples of ``align``: one range when the
    work is small or one thread runs."""
    threads = min(STATE.current or 1, STATE.cores) if SPLIT else 1
    count = min(threads, rows // max(align, 1), work // MIN_CHUNK)
    if count <= 1:
        return [(0, rows)]
    step = -(-rows // count)
    step = -(-step // align) * align
    bounds = list(range(0, rows, step)) + [rows]
    return list(zip(bounds, bounds[1:]))


def for_rows(body: Callable[[int, int], Any], rows: int, work: int, align: int = 1) -> None:
    """Run ``body(start, stop)`` over ``[0, rows)`` in the ranges of `chunks`: the first
    here, the others in the pool, and return once every range is done (also when one
    fails or the call is interrupted: no range writes on after the kernel returned).
    The first failure is raised."""
    ranges = chunks(rows, work, align)
    if len(ranges) == 1:
        body(0, rows)
        return
    pool = _pool()
    futures: list[Future] = [pool.submit(body, lo, hi) for lo, hi in ranges[1:]]
    try:
        body(*ranges[0])
    finally:
        wait(futures)
    for f in futures:
        f.result()


def _pool() -> ThreadPoolExecutor:
    """The pool of this process (a child forked from it, a Ray worker, makes its own: the
    parent's threads do not exist there)."""
    pid = os.getpid()
    with _POOL_LOCK:
        if not _POOL or _POOL[-1][0] != pid:
            workers = max(STATE.cores - 1, 1)
            _POOL[:] = [(pid, ThreadPoolExecutor(workers, thread_name_prefix="fluid-rows"))]
        return _POOL[-1][1]


def pointwise_fits(xp: Any, out: Any, shapes: Iterable[tuple[int, ...]]) -> bool:
    """Whether a pointwise kernel can run through `pointwise`: it writes a planned host
    buffer ``out`` (not a 0-d one) whose shape each of ``shapes`` (its full-size inputs) has."""
    return xp.__name__ == "numpy" and out is not None and out.ndim > 0 and all(
        tuple(s) == tuple(out.shape) for s in shapes)


def pointwise(fn: Callable[..., Any], out: Any) -> Callable[..., Any]:
    """A kernel calling ``fn(*arrays, o)`` over ranges of ``out``'s rows (``out``: the
    planned buffer it writes; ``o`` its rows in the range), for an ``fn`` that computes each
    element from the same element of its arrays alone. An array of ``out``'s rank and
    leading dim is cut into the same ranges; any other (one broadcast over the rows, or
    None) is passed whole. Returns ``out``."""
    rows = out.shape[0]

    def call(*arrays: Any) -> Any:
        cut = [a is not None and a.ndim == out.ndim and a.shape[0] == rows for a in arrays]

        def body(lo: int, hi: int) -> None:
            o = out[lo:hi]
            got = fn(*(a[lo:hi] if c else a for a, c in zip(arrays, cut)), o)
            if got is not o:   # an fn that made its result elsewhere
                o[...] = got
        for_rows(body, rows, out.size // 2)   # one cheap pass, as relu's gradient
        return out
    return call
