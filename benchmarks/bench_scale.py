"""Cost against program size: an MLP of N fc layers of width 32 with Adam, for N = 10, 200
and 800 (the ops a program holds grow linearly with N). For each size: compile (trace
and initialise), the first step (plan, code generation and one run), a steady step (with
NumPy kernels, and with the compiled kernel tier once its kernels are built),
transpiling for 2 trainers and 4 parameter servers, and recompiling the live program from
a redefined class (what a notebook does when a class's cell runs again); and each figure
per op. Cost linear
in program size means the per-op figures stay flat as N grows.

    python benchmarks/bench_scale.py [--layers 10,200,800] [--rounds R] [--profile N]

``--rounds R`` measures every size R times, the sizes interleaved (10, 200, 800, 10, ...),
and reports each figure's median: on a shared machine a single run moves the per-op
growths by more than their targets' margins.
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

from numpy_lenet import SoftmaxCrossEntropy  # noqa: E402
from peers.numpy_impl import Flat  # noqa: E402

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


class DeepNumpy:
    """The same network and Adam step written by hand in NumPy: preallocated activations,
    gradients written with ``out=``, parameters, gradients and moments as views of flat
    buffers so that the update is one set of calls for the whole model. The reference for
    how a step's cost grows with depth."""

    def __init__(self, layers: int, rng: np.random.Generator):
        shapes = [(WIDTH, WIDTH), (WIDTH,)] * (layers - 1) + [(WIDTH, 10), (10,)]
        sizes = [int(np.prod(s)) for s in shapes]
        values = np.split(rng.standard_normal(sum(sizes)).astype(np.float32) * 0.1,
                          np.cumsum(sizes)[:-1])
        names = [f"p{i}" for i in range(len(shapes))]
        self.flat = Flat({k: v.reshape(s) for k, v, s in zip(names, values, shapes)}, names,
                         moments=True)
        views = [(self.flat.views[k], self.flat.grads[k]) for k in names]
        self.layers = [(views[2 * i], views[2 * i + 1]) for i in range(layers)]
        self.acts = [np.empty((BATCH, WIDTH), np.float32) for _ in range(layers - 1)]
        self.dh = np.empty((BATCH, WIDTH), np.float32)
        self.dprev = np.empty((BATCH, WIDTH), np.float32)
        self.logits, self.dlogits = (np.empty((BATCH, 10), np.float32) for _ in range(2))
        self.xent = SoftmaxCrossEntropy(BATCH)

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        h = x
        for ((w, _), (b, _)), out in zip(self.layers[:-1], self.acts):
            np.matmul(h, w, out=out)
            out += b
            np.maximum(out, 0, out=out)
            h = out
        (w, gw), (b, gb) = self.layers[-1]
        z = np.matmul(h, w, out=self.logits)
        z += b
        e = self.dlogits
        loss = self.xent(z, y[:, 0], e)
        e /= BATCH
        np.matmul(h.T, e, out=gw)
        np.sum(e, axis=0, out=gb)
        d = e
        for i in range(len(self.layers) - 2, -1, -1):
            (w_next, _), _ = self.layers[i + 1]
            dh = np.matmul(d, w_next.T, out=self.dh if d is not self.dh else self.dprev)
            dh *= self.acts[i] > 0
            (_, gw), (_, gb) = self.layers[i]
            np.matmul(self.acts[i - 1].T if i else x.T, dh, out=gw)
            np.sum(dh, axis=0, out=gb)
            d = dh
        self.flat.adam(1e-3)
        return loss


def _median_step_s(step, x, y) -> float:
    step(x, y)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(5):
            step(x, y)
        times.append((time.perf_counter() - t0) / 5)
    return statistics.median(times)


def tier_step_s(layers: int, x: np.ndarray, y: np.ndarray) -> float:
    """The step with the compiled kernel tier (its kernels built first), or nan without
    it."""
    from fluid_interactive import kernels
    os.environ["FLUID_KERNELS"] = "auto"
    try:
        if not kernels.enabled():
            return float("nan")
        prog = deep_mlp(layers)().Compile(seed=0)
        prog.train_step(x, y)
        tier = prog.train_step.runner.plan_tier()
        if tier is not None:
            tier.wait(600)
        prog.train_step(x, y)   # switches
        return _median_step_s(prog.train_step, x, y)
    finally:
        os.environ["FLUID_KERNELS"] = "numpy"


def measure(layers: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
    y = rng.integers(0, 10, (BATCH, 1)).astype(np.int64)
    os.environ["FLUID_KERNELS"] = "numpy"   # compile, plan and step: NumPy kernels
    t0 = time.perf_counter()
    prog = deep_mlp(layers)().Compile(seed=0)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    prog.train_step(x, y)
    first_s = time.perf_counter() - t0
    step_s = _median_step_s(prog.train_step, x, y)
    numpy_s = _median_step_s(DeepNumpy(layers, rng).step, x, y)
    t0 = time.perf_counter()
    transpile(prog, trainers=2, pservers=4)
    transpile_s = time.perf_counter() - t0
    ops = sum(len(b.ops) for b in prog.program.blocks)
    redefined = deep_mlp(layers)
    t0 = time.perf_counter()
    prog.recompile(redefined)
    recompile_s = time.perf_counter() - t0
    return {"layers": layers, "ops": ops, "compile": compile_s, "first": first_s,
            "step": step_s, "numpy": numpy_s, "transpile": transpile_s,
            "recompile": recompile_s, "tier": tier_step_s(layers, x, y)}


def median_row(rows: list[dict[str, float]]) -> dict[str, float]:
    """The median of each figure over rounds of one size (its layers and ops as they are)."""
    out = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    out["layers"], out["ops"] = rows[0]["layers"], rows[0]["ops"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="10,200,800")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure every size this many times, interleaved; report medians")
    ap.add_argument("--profile", type=int, help="profile the compile, first step and "
                                                "transpile of this many layers instead")
    args = ap.parse_args()
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(measure, args.profile)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
        return
    sizes = [int(n) for n in args.layers.split(",")]
    runs = [[measure(n) for n in sizes] for _ in range(args.rounds)]
    rows = [median_row([run[i] for run in runs]) for i in range(len(sizes))]
    if args.rounds > 1:
        print(f"medians of {args.rounds} rounds, the sizes interleaved")
    print(f"MLP of N fc layers of width {WIDTH}, Adam, batch {BATCH}")
    print("| layers | ops | compile ms | first step ms | step ms | step ms, compiled tier "
          "| hand NumPy step ms | transpile (2 x 4) ms | µs/op: compile | first step | step "
          "| transpile |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        per = [r[k] / r["ops"] * 1e6 for k in ("compile", "first", "step", "transpile")]
        print(f"| {r['layers']} | {r['ops']:,} | {r['compile'] * 1e3:,.0f} | "
              f"{r['first'] * 1e3:,.0f} | {r['step'] * 1e3:,.2f} | {r['tier'] * 1e3:,.2f} | "
              f"{r['numpy'] * 1e3:,.2f} | {r['transpile'] * 1e3:,.0f} | "
              + " | ".join(f"{p:.1f}" for p in per) + " |")
    first, last = rows[0], rows[-1]
    growth = [(last[k] / last["ops"]) / (first[k] / first["ops"])
              for k in ("compile", "first", "transpile")]
    print(f"per-op growth from {first['layers']} to {last['layers']} layers: compile "
          f"{growth[0]:.2f}x, first step {growth[1]:.2f}x, transpile {growth[2]:.2f}x "
          f"(target <= 1.3x, each <= 100 µs/op)")
    print("recompile / compile: " + ", ".join(
        f"{r['recompile'] / r['compile']:.2f}x at {r['layers']} layers" for r in rows)
        + " (target <= 1.5x)")
    step_growth = (last["step"] / last["layers"]) / (first["step"] / first["layers"])
    numpy_growth = (last["numpy"] / last["layers"]) / (first["numpy"] / first["layers"])
    print(f"step time per layer from {first['layers']} to {last['layers']} layers: fluid "
          f"{step_growth:.2f}x, hand NumPy {numpy_growth:.2f}x (target: fluid's growth no "
          f"more than NumPy's); fluid / NumPy step: {first['step'] / first['numpy']:.2f}x "
          f"at {first['layers']}, {last['step'] / last['numpy']:.2f}x at {last['layers']}; "
          f"with the compiled tier {first['tier'] / first['numpy']:.2f}x and "
          f"{last['tier'] / last['numpy']:.2f}x")


if __name__ == "__main__":
    main()
