"""What watching values costs: one training step of a three-layer MLP with Adam (64 -> 128
-> 64 -> 10, batch 64) unwatched, after watch() and unwatch(), watching one activation,
watching the whole var_scope (every activation and gradient), and watching everything.
All contenders are separate programs with the same seed, timed interleaved in one process,
so machine noise hits them alike; the ratios are what to read. Besides wall time it reports
CPU time per step (this process's, all threads), which other programs on a busy machine
disturb much less. Run:

    python benchmarks/bench_watch.py
"""
from __future__ import annotations

import os
import statistics
import sys
import time

# One BLAS thread: on a shared machine, BLAS threads spinning for a busy core make CPU
# time swing by 10x; single-threaded, the per-step costs compare cleanly.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT, os.path.join(ROOT, "extension")]

from _timing import interleaved_us  # noqa: E402

from tests.render.models import MLP3  # noqa: E402

BATCH = 64


def interleaved_cpu_us(contenders, calls: int, rounds: int) -> dict:
    """Median CPU µs per call of each contender, alternating blocks between them."""
    samples = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            t0 = time.process_time()
            for _ in range(calls):
                fn()
            samples[name].append((time.process_time() - t0) / calls * 1e6)
    return {name: statistics.median(s) for name, s in samples.items()}


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 64)).astype("float32")
    y = rng.integers(0, 10, (BATCH, 1)).astype("int64")
    progs = {name: MLP3().Compile(seed=0) for name in
             ("unwatched", "watched, then unwatched", "one activation",
              "var_scope 'mlp' (22 vars)", "everything ('*')")}
    progs["watched, then unwatched"].watch("mlp")
    progs["watched, then unwatched"].unwatch()
    progs["one activation"].watch("mlp/fc_1.tmp_2")
    kept = progs["var_scope 'mlp' (22 vars)"].watch("mlp")["train_step"]
    progs["everything ('*')"].watch("*")
    steps = {name: (lambda p=p: p.train_step(x, y)) for name, p in progs.items()}
    times = interleaved_us(steps, calls=100, rounds=25)
    cpu = interleaved_cpu_us(steps, calls=100, rounds=25)
    nbytes = sum(progs["var_scope 'mlp' (22 vars)"].watched[n].nbytes for n in kept)
    print(f"MLP3 train_step, batch {BATCH}, medians of 25 interleaved rounds of 100 steps")
    print(f"  {'':28s} {'wall us/step':>14s} {'ratio':>6s} {'CPU us/step':>12s} {'ratio':>6s}")
    for name in times:
        print(f"  {name:28s} {times[name]:14.1f} {times[name] / times['unwatched']:6.2f} "
              f"{cpu[name]:12.1f} {cpu[name] / cpu['unwatched']:6.2f}")
    print(f"  the var_scope keeps {len(kept)} arrays, {nbytes / 1024:.0f} KiB per call")


if __name__ == "__main__":
    main()
