"""Training at a size that changes every step, against the same steps grouped by size.

A method keeps a plan per size (runtime/plan/family.py); what every size's plan shares
decides what a change of size costs once each size is planned. The same steps run in
their order (the size changes every step) and sorted by size (it changes once per
size), in interleaved blocks in one process:

* ``deep-mlp``: a 25-layer MLP trained with Adam at batch 32 and 31 in turn (a fused
  update over 50 parameters);
* ``lstm-lengths``: W4's LSTM step (bench_memory.py) at a length drawn from 20..120
  each step, every length planned beforehand.

Usage: python benchmarks/bench_sizes.py [--blocks 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def deep_mlp():
    """(a step at a size, the method, the sizes of the steps in order)."""
    import fluid
    layers = fluid.layers

    class Deep(fluid.Program):
        @fluid.network("x", "y")
        def train_step(self, x, y):
            h = layers.data(name="x", shape=[64], dtype="float32")
            y = layers.data(name="y", shape=[1], dtype="float32")
            for _ in range(24):
                h = layers.fc(input=h, size=64, act="tanh")
            loss = layers.mean(layers.square_error_cost(layers.fc(input=h, size=1), y))
            fluid.optimizer.Adam(learning_rate=1e-3).minimize(loss)
            return loss

    prog = Deep().Compile(seed=0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 64)).astype(np.float32)
    y = rng.standard_normal((64, 1)).astype(np.float32)
    return (lambda n: prog.train_step(x[:n], y[:n])), prog.train_step, [32, 31] * 10


def lstm_lengths():
    from bench_memory import lstm_program

    import fluid
    fluid.plan_cache(plans=128)   # every length kept: the cost of a change, not of planning
    step = lstm_program()().Compile(seed=0).train_step
    rng = np.random.default_rng(0)
    y = rng.random((32, 1), dtype=np.float32)
    xs = {t: rng.random((32, t, 2), dtype=np.float32) for t in range(20, 121)}
    lengths = [int(t) for t in rng.integers(20, 121, size=20)]
    return (lambda t: step(xs[t], y)), step, lengths


SCENARIOS = {"deep-mlp": deep_mlp, "lstm-lengths": lstm_lengths}


def _ready(call, method, sizes) -> None:
    """Every size planned, its compiled kernels loaded and its thread policy settled."""
    for size in sorted(set(sizes)):
        call(size)
    for plan in list(method.runner.plans.values()):
        tier = method.runner.plan_tier(plan)
        if tier is not None and tier.pending:
            tier.wait(600)
    for _ in range(12):
        for size in sorted(set(sizes)):
            call(size)


def _block(call, sizes) -> float:
    """Seconds per step over steps at ``sizes``, in that order."""
    t0 = time.perf_counter()
    for size in sizes:
        call(size)
    return (time.perf_counter() - t0) / len(sizes)


def measure(name: str, blocks: int) -> tuple[float, float]:
    """(seconds per step in order, grouped by size): medians of interleaved blocks."""
    call, method, sizes = SCENARIOS[name]()
    _ready(call, method, sizes)
    changing, grouped = [], []
    for _ in range(blocks):
        changing.append(_block(call, sizes))
        grouped.append(_block(call, sorted(sizes)))
    return statistics.median(changing), statistics.median(grouped)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blocks", type=int, default=7)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = ap.parse_args()
    print("# Steps whose size changes every step against the same steps grouped by size "
          "(µs per step)\n")
    print("| scenario | size changing every step | grouped by size | ratio |")
    print("|---|---|---|---|")
    for name in args.scenarios.split(","):
        changing, grouped = measure(name, args.blocks)
        print(f"| {name} | {changing * 1e6:,.1f} | {grouped * 1e6:,.1f} | "
              f"{changing / grouped:.2f} |", flush=True)


if __name__ == "__main__":
    main()
