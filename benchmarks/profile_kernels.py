"""Where a fluid step's time goes: every kernel of a workload's generated plan wrapped in a
timer, medians over blocks of steps; what is left of the step time is the framework's own
overhead between kernels. The hand-written NumPy step of the same workload is timed in
the same process, interleaved, for scale.

    python benchmarks/profile_kernels.py W2-sgd [--steps 30] [--blocks 5] [--threads N]
    python benchmarks/profile_kernels.py W6      # the sequence workloads too (W4-W6)

``--threads N`` runs fluid and the hand-written step with N BLAS threads (by default the
thread policy chooses fluid's, and hand NumPy runs with whatever it set last).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT, os.path.join(ROOT, "extension")]

import fluid  # noqa: E402, F401  (before NumPy, as a user's script: docs/architecture.md)

# isort: split
from peers import fluid_impl, numpy_impl, seq_fluid  # noqa: E402
from peers.seq_workloads import SEQ_MODELS, seq_batches  # noqa: E402
from peers.workloads import POOL, WORKLOADS, batches, initial_parameters  # noqa: E402


def timed_plan(prog, method: str, args) -> dict[str, list[float]]:
    """Run the method thrice (to plan it), then wrap its kernels; returns the timer
    table."""
    for _ in range(3):
        getattr(prog, method)(*args)
    plan = next(iter(getattr(prog, method).runner.plans.values()))
    table: dict[str, list[float]] = defaultdict(list)
    ns = plan.code.fn.__globals__
    for name in [k for k in ns if k.startswith("k") and callable(ns[k])]:
        ns[name] = _timed(ns[name], table[name])
    return table


def _timed(kernel, times: list[float]):
    def wrapped(*a):
        t0 = time.perf_counter()
        try:
            return kernel(*a)
        finally:
            times.append(time.perf_counter() - t0)
    return wrapped


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload", choices=[w for w in WORKLOADS
                                         if WORKLOADS[w].kind == "train"])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads is not None:
        from threadpoolctl import threadpool_limits

        import fluid
        fluid.set_threads(args.threads)
        threadpool_limits(args.threads)
    w = WORKLOADS[args.workload]
    params = initial_parameters(w.model)
    if w.model in SEQ_MODELS:   # the sequence workloads (peers/seq_*.py)
        prog, _ = seq_fluid.compiled(w, params)
        xs, ys = seq_batches(w.model, w.batch)
    else:
        prog, _ = fluid_impl.compiled(w, params)
        xs, ys = batches(w.model, w.batch)
    hand = numpy_impl.make(w, params)
    table = timed_plan(prog, "train_step", (xs[0], ys[0]))
    fluid_impl.await_compiled_kernels(prog)   # the tier's kernels, if any: built first
    totals, hand_totals = [], []
    for _ in range(args.blocks):
        for t in table.values():
            t.clear()
        time.sleep(0.3)
        t0 = time.perf_counter()
        for i in range(args.steps):
            prog.train_step(xs[i % POOL], ys[i % POOL])
        totals.append((time.perf_counter() - t0) / args.steps)
        time.sleep(0.3)
        t0 = time.perf_counter()
        for i in range(args.steps):
            hand.call(i)
        hand_totals.append((time.perf_counter() - t0) / args.steps)
    step = statistics.median(totals) * 1e3
    rows = sorted(((sum(t) / args.steps * 1e3, name) for name, t in table.items()),
                  reverse=True)
    print(f"{args.workload}: fluid {step:.3f} ms/step (timers included), hand NumPy "
          f"{statistics.median(hand_totals) * 1e3:.3f} ms/step; last block's kernels:")
    for ms, name in rows:
        print(f"  {ms:8.3f} ms  {100 * ms / step:5.1f}%  {name}")
    print(f"  {step - sum(ms for ms, _ in rows):8.3f} ms  overhead between kernels")


if __name__ == "__main__":
    main()
