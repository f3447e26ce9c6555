"""Cost against program size: an MLP of N fc layers of width 32 with Adam, for N = 10, 200
and 800 (the ops a program holds grow linearly with N). For each size: compile (trace
and initialise), the first step (plan, code generation and one run), a steady step, and
transpiling for 2 trainers and 4 parameter servers; and each figure per op. Cost linear
in program size means the per-op figures stay flat as N grows.

    python benchmarks/bench_scale.py [--layers 10,200,800] [--profile N]
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "extension")]

import fluid  # noqa: E402
from fluid_interactive.passes.transpiler import transpile  # noqa: E402

WIDTH, BATCH = 32, 64


def deep_mlp(layers: int) -> type:
    class Deep(fluid.Program):
        @fluid.network("x", "y")
        def train_step(self, x, y):
            h = fluid.layers.data(name="x", shape=[WIDTH], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="int64")
            for _ in range(layers - 1):
                h = fluid.layers.fc(h, size=WIDTH, act="relu")
            logits = fluid.layers.fc(h, size=10)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
            fluid.optimizer.Adam(learning_rate=1e-3).minimize(loss)
            return loss
    return Deep


def measure(layers: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
    y = rng.integers(0, 10, (BATCH, 1)).astype(np.int64)
    t0 = time.perf_counter()
    prog = deep_mlp(layers)().Compile(seed=0)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    prog.train_step(x, y)
    first_s = time.perf_counter() - t0
    steps = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(5):
            prog.train_step(x, y)
        steps.append((time.perf_counter() - t0) / 5)
    t0 = time.perf_counter()
    transpile(prog, trainers=2, pservers=4)
    transpile_s = time.perf_counter() - t0
    ops = sum(len(b.ops) for b in prog.program.blocks)
    return {"layers": layers, "ops": ops, "compile": compile_s, "first": first_s,
            "step": statistics.median(steps), "transpile": transpile_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="10,200,800")
    ap.add_argument("--profile", type=int, help="profile the compile, first step and "
                                                "transpile of this many layers instead")
    args = ap.parse_args()
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(measure, args.profile)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
        return
    rows = [measure(int(n)) for n in args.layers.split(",")]
    print(f"MLP of N fc layers of width {WIDTH}, Adam, batch {BATCH}")
    print("| layers | ops | compile ms | first step ms | step ms | transpile (2 x 4) ms "
          "| µs/op: compile | first step | step | transpile |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        per = [r[k] / r["ops"] * 1e6 for k in ("compile", "first", "step", "transpile")]
        print(f"| {r['layers']} | {r['ops']:,} | {r['compile'] * 1e3:,.0f} | "
              f"{r['first'] * 1e3:,.0f} | {r['step'] * 1e3:,.2f} | "
              f"{r['transpile'] * 1e3:,.0f} | " + " | ".join(f"{p:.1f}" for p in per) + " |")
    first, last = rows[0], rows[-1]
    growth = [(last[k] / last["ops"]) / (first[k] / first["ops"])
              for k in ("compile", "first", "transpile")]
    print(f"per-op growth from {first['layers']} to {last['layers']} layers: compile "
          f"{growth[0]:.2f}x, first step {growth[1]:.2f}x, transpile {growth[2]:.2f}x "
          f"(target <= 1.3x, each <= 100 µs/op)")


if __name__ == "__main__":
    main()
