"""The thread policy's threshold: MLP training steps (Adam) of growing size with BLAS on one
thread and on every core, interleaved in one process, with the policy's own choice by
size (`fluid_interactive/backend/threads.py`) and with ``set_threads("measure")`` (the
faster of one thread and every core, by timing); ``--busy`` runs it all beside a process
that burns one core. Each row gives the plan's work (elements a step touches, the measure
the policy classes plans by) and µs per step.

    python benchmarks/bench_threads.py [--busy] [--rounds 7] [--sizes 2,3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "extension")]

from _busy import busy_core  # noqa: E402

import fluid  # noqa: E402
from fluid_interactive.backend import threads  # noqa: E402

# (input, hidden, batch): the digits MLP first, W2 among them
SIZES = [(64, 128, 64), (256, 256, 64), (784, 256, 64), (784, 512, 64), (784, 512, 128),
         (1024, 1024, 128), (2048, 2048, 256)]


def mlp(inputs: int, hidden: int) -> type:
    class MLP(fluid.Program):
        @fluid.network("x", "y")
        def train_step(self, x, y):
            h = fluid.layers.data(name="x", shape=[inputs], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="int64")
            h = fluid.layers.fc(h, size=hidden, act="relu")
            h = fluid.layers.fc(h, size=hidden, act="relu")
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
                fluid.layers.fc(h, size=10), y))
            fluid.optimizer.Adam(learning_rate=1e-3).minimize(loss)
            return loss
    return MLP


def settled_us(contenders: dict, calls: int, rounds: int) -> dict[str, float]:
    """Median µs per call of each contender over interleaved blocks, each block after a
    0.3 s pause and one untimed call: BLAS threads that spin on after a block on every
    core would otherwise steal the next block's core."""
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            time.sleep(0.3)
            fn()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - t0) / calls * 1e6)
    return {name: statistics.median(s) for name, s in samples.items()}


def row(inputs: int, hidden: int, batch: int, rounds: int) -> str:
    prog = mlp(inputs, hidden)().Compile(seed=0)
    rng = np.random.default_rng(0)
    x = rng.random((batch, inputs), dtype=np.float32)
    y = rng.integers(0, 10, (batch, 1))
    prog.train_step(x, y)
    work = next(iter(prog.train_step.runner.plans.values())).work

    def with_threads(n: int | str | None):
        def step():
            threads.set_threads(n)
            prog.train_step(x, y)
        return step

    step_s = 2e-6 * work   # about 2 ns per element: blocks of ~0.2 s
    calls = max(10, min(2000, int(0.2 / step_s)))
    us = settled_us({"1": with_threads(1), "all": with_threads(threads.STATE.cores),
                     "policy": with_threads(None), "measure": with_threads("measure")},
                    calls, rounds)
    threads.set_threads(None)
    chosen = "1 (small)" if threads.is_small(work) else "every core"
    return (f"| {inputs}-{hidden}-{hidden}-10 b{batch} | {work:,} | {us['1']:,.0f} | "
            f"{us['all']:,.0f} | {us['all'] / us['1']:.2f} | {us['policy']:,.0f} | "
            f"{us['policy'] / us['1']:.2f} | {chosen} | {us['measure'] / us['1']:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", action="store_true", help="beside a process burning one core")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--sizes", default=",".join(map(str, range(len(SIZES)))),
                    help="which rows of SIZES, by index")
    args = ap.parse_args()
    print(f"## Threads: µs per Adam step, {threads.STATE.cores} cores, "
          f"{'one core busy' if args.busy else 'no load added'}, threshold "
          f"{threads.SMALL_WORK:,} elements\n")
    print("| MLP | work (elements) | 1 thread | all cores | all ÷ 1 | policy | policy ÷ 1 "
          "| policy class | measure ÷ 1 |")
    print("|---|---|---|---|---|---|---|---|---|")
    with busy_core(args.busy):
        for inputs, hidden, batch in (SIZES[int(i)] for i in args.sizes.split(",")):
            print(row(inputs, hidden, batch, args.rounds), flush=True)


if __name__ == "__main__":
    main()
