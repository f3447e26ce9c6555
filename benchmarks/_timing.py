"""Timing helpers shared by the benchmarks: medians of repeated blocks, interleaved so
that machine noise hits every contender alike."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def per_call_us(fn: Callable[[], object], calls: int, repeats: int = 7) -> float:
    """Median over ``repeats`` blocks of the mean µs per call within a block."""
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(samples)


def interleaved_us(contenders: dict[str, Callable[[], object]], calls: int,
                   rounds: int = 7, clock: Callable[[], float] = time.perf_counter
                   ) -> dict[str, float]:
    """Median µs per call of each contender, alternating blocks between them; ``clock``
    may be ``time.thread_time`` to count only this thread's CPU time."""
    samples = interleaved_samples(contenders, calls, rounds, clock)
    return {name: statistics.median(s) for name, s in samples.items()}


def interleaved_samples(contenders: dict[str, Callable[[], object]], calls: int,
                        rounds: int = 7, clock: Callable[[], float] = time.perf_counter
                        ) -> dict[str, list[float]]:
    """`interleaved_us`'s blocks: each contender's µs per call in each round."""
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for fn in contenders.values():  # warm up
        for _ in range(max(10, calls // 10)):
            fn()
    for _ in range(rounds):
        for name, fn in contenders.items():
            t0 = clock()
            for _ in range(calls):
                fn()
            samples[name].append((clock() - t0) / calls * 1e6)
    return samples
