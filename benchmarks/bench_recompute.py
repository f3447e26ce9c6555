"""`RecomputeOptimizer` against the same optimizer alone: peak memory and step time of one
training step, and the parameters (bit for bit the same after the steps).

* a deep MLP: x [2048, 256], 12 fc layers of 256 with relu, fc -> 1, square error, Adam;
  checkpoints: every second layer's output;
* a W6-sized Transformer encoder block (benchmarks/peers/seq_workloads.py: x [32, 64,
  128], 4 heads, ffn 512, Adam); checkpoints: the block's input, the attention's output
  and the two layer norms' outputs.

Peak memory: the most NumPy held at once (tracemalloc) while compiling the program and
running 3 steps (parameters, Adam's state and the plan's buffers), and the plan's
buffers alone (what recomputation shrinks: the most its temporaries hold at once). Step
time: median of interleaved blocks, both programs in one process.

    python benchmarks/bench_recompute.py [--rounds 7] [--steps 10]
"""
from __future__ import annotations

import argparse
import os
import sys
import tracemalloc

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "extension")]

from _timing import interleaved_us  # noqa: E402
from peers import seq_fluid  # noqa: E402
from peers.fluid_impl import await_compiled_kernels  # noqa: E402
from peers.seq_workloads import ENCODER_SHAPE, seq_batches  # noqa: E402
from peers.workloads import WORKLOADS  # noqa: E402

import fluid  # noqa: E402

MLP_BATCH, MLP_WIDTH, MLP_DEPTH = 2048, 256, 12


def _minimize(loss, keep: list, recompute: bool) -> None:
    opt = fluid.optimizer.Adam(learning_rate=1e-3)
    if recompute:
        opt = fluid.optimizer.RecomputeOptimizer(opt)
        opt._set_checkpoints(keep)
    opt.minimize(loss)


def deep_mlp(recompute: bool, depth: int = MLP_DEPTH, width: int = MLP_WIDTH) -> type:
    """``depth`` fc layers of ``width`` with relu, every second one's output a checkpoint
    (tests/frontend/test_optimizers2.py trains a small one)."""
    class DeepMLP(fluid.Program):
        @fluid.network("x", "y")
        def train_step(self, x, y):
            x = fluid.layers.data(name="x", shape=[width])
            y = fluid.layers.data(name="y", shape=[1])
            h, keep = x, []
            for i in range(depth):
                h = fluid.layers.fc(input=h, size=width, act="relu")
                if i % 2 == 1:
                    keep.append(h)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(
                fluid.layers.fc(input=h, size=1), y))
            _minimize(loss, keep, recompute)
            return loss
    return DeepMLP


def encoder_block(recompute: bool) -> type:
    _, t, d, _, _, _ = ENCODER_SHAPE
    w = WORKLOADS["W6"]

    class Encoder(fluid.Program):
        @fluid.network("x", "y")
        def train_step(self, x, y):
            x = fluid.layers.data(name="x", shape=[t, d], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="int64")
            keep = [x]
            out = seq_fluid.encoder_model(x, w, keep)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(out, y))
            _minimize(loss, keep, recompute)
            return loss
    return Encoder


def _mlp_data() -> tuple[list, list]:
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((MLP_BATCH, MLP_WIDTH)).astype(np.float32) for _ in range(2)]
    ys = [rng.standard_normal((MLP_BATCH, 1)).astype(np.float32) for _ in range(2)]
    return xs, ys


MODELS = {"deep MLP (12 x fc 256, batch 2048)": (deep_mlp, _mlp_data),
          "W6 encoder block (32 x 64 x 128)": (encoder_block,
                                               lambda: seq_batches("W6", ENCODER_SHAPE[0]))}


def _program(make: type):
    prog = make().Compile(seed=0)
    return prog


def _peak_mb(make: type, data: tuple[list, list]) -> tuple[float, float]:
    """(peak MB NumPy allocated compiling the program and running 3 steps, MB of the
    step's plan buffers)."""
    tracemalloc.start()
    try:
        prog = _program(make)
        for i in range(3):
            prog.train_step(data[0][i % len(data[0])], data[1][i % len(data[1])])
        peak = tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
    return peak, prog.train_step.runner.memory.nbytes / 1e6


def _same_parameters(model, data, steps: int) -> bool:
    """Whether both programs reach the same parameters bit for bit. One thread for both:
    a GEMM on two threads sums in another order, and the thread policy chooses per plan;
    the compiled kernels awaited first, so that both switch at the same step."""
    threads = fluid.get_threads()
    fluid.set_threads(1)
    try:
        progs = [_program(model(r)) for r in (False, True)]
        for prog in progs:
            prog.train_step(data[0][0], data[1][0])
            await_compiled_kernels(prog)
        for i in range(steps):
            x, y = data[0][i % len(data[0])], data[1][i % len(data[1])]
            losses = [p.train_step(x, y) for p in progs]
            if losses[0] != losses[1]:
                return False
        a, b = (p.parameters() for p in progs)
        return all(np.array_equal(a[k], b[k]) for k in a)
    finally:
        fluid.set_threads(threads)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    print("| model | peak MB plain | with Recompute | plan buffers MB plain | with Recompute "
          "| step ms plain | with Recompute | ratio | parameters |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, (model, data_of) in MODELS.items():
        data = data_of()
        mb = {r: _peak_mb(model(r), data) for r in (False, True)}
        progs = {r: _program(model(r)) for r in (False, True)}
        for prog in progs.values():
            prog.train_step(data[0][0], data[1][0])
            await_compiled_kernels(prog)
        x, y = data[0][0], data[1][0]
        us = interleaved_us({r: (lambda p=p, x=x, y=y: p.train_step(x, y))
                             for r, p in progs.items()}, args.steps, args.rounds)
        same = _same_parameters(model, data, args.steps)
        print(f"| {label} | {mb[False][0]:.1f} | {mb[True][0]:.1f} | {mb[False][1]:.1f} | "
              f"{mb[True][1]:.1f} | {us[False] / 1e3:.1f} | {us[True] / 1e3:.1f} | "
              f"{us[True] / us[False]:.2f} | {'bit-identical' if same else 'DIFFER'} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
