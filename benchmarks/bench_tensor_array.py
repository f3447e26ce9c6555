"""What filling a tensor array costs as it grows: one training step of a `While` that
writes one small element per iteration into an array (N iterations), stacks it, and takes
the gradient back through every write (forward and backward, SGD on the scale the
elements are made with). Tensor arrays are immutable values whose writes cost O(1)
(`ops/array_value.py`), so the step should cost the same per element at every N:

    python benchmarks/bench_tensor_array.py [--sizes 2000,8000,32000] [--rounds 3]

prints the time of one step at each N, per element, and the ratio of the largest N's
time per element to the smallest's (1.0 is linear; a write that copied the array would
make it grow with N: ~16x from 2,000 to 32,000).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # one BLAS thread: comparable on a shared machine

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "extension")]

import fluid  # noqa: E402

L = fluid.layers


def filled_array(x, steps):
    """A ``while_loop`` of ``steps`` iterations writing x * w (w a parameter, 0.5 at first)
    into a new tensor array at each index; returns the array."""
    w = L.create_parameter([4], "float32", name="w",
                           default_initializer=fluid.initializer.Constant(0.5))

    def write(i, arr):
        L.array_write(L.elementwise_mul(x, w), i, array=arr)
        return [L.increment(i, in_place=False), arr]
    start = [L.fill_constant([1], "int64", 0), L.create_array("float32")]
    return L.while_loop(lambda i, arr: L.less_than(i, steps), write, start)[1]


class FillArray(fluid.Program):
    """``steps`` iterations, each writing x * w into the array; stacked; SGD on w."""

    @fluid.network("x", "steps")
    def train_step(self, x, steps):
        x = L.data(name="x", shape=[4], dtype="float32")
        steps = L.data(name="steps", shape=[1], dtype="int64", append_batch_size=False)
        stacked, _ = L.tensor_array_to_tensor(filled_array(x, steps), axis=0, use_stack=True)
        loss = L.mean(stacked)
        fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)
        return loss, stacked


def step_seconds(n: int, rounds: int) -> float:
    """Median seconds of one training step filling an array of ``n`` elements."""
    prog = FillArray().Compile(seed=0)
    x = np.ones((2, 4), np.float32)
    steps = np.array([n], np.int64)
    prog.train_step(x, steps)   # plan it
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        prog.train_step(x, steps)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> dict[int, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,8000,32000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    seconds = {n: step_seconds(n, args.rounds) for n in sizes}
    for n, s in seconds.items():
        print(f"N={n:>6}: {s:8.3f} s per step, {s / n * 1e6:6.1f} µs per element")
    small, large = sizes[0], sizes[-1]
    ratio = (seconds[large] / large) / (seconds[small] / small)
    print(f"time per element at N={large} over N={small}: {ratio:.2f} (1.0 is linear)")
    return seconds


if __name__ == "__main__":
    main()
