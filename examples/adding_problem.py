"""The adding problem (Hochreiter & Schmidhuber, 1997): an LSTM learns to add two numbers
it saw far apart in a sequence of length T = 100.

Each sequence has two channels: a value in [0, 1) at every step, and a marker that is 1 at
exactly two steps (one in each half). The target is the sum of the two marked values.
Predicting 1 whatever the input (no memory) scores the mean squared error 1/6 ~ 0.167; a
model that remembers the marked values drives it towards 0.

    python examples/adding_problem.py [--steps 4000] [--seq-len 100]

Prints the test MSE every few hundred steps and a final figure beside the baseline.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "extension")]

import fluid  # noqa: E402

NO_MEMORY_MSE = 1 / 6    # E[(u1 + u2 - 1)^2] for u1, u2 uniform on [0, 1)


def adding_data(rng: np.random.Generator, n: int, seq_len: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """x [n, seq_len, 2] float32 and y [n, 1]: the sum of the two marked values."""
    x = np.zeros((n, seq_len, 2), np.float32)
    x[..., 0] = rng.random((n, seq_len))
    rows = np.arange(n)
    first = rng.integers(0, seq_len // 2, n)
    second = rng.integers(seq_len // 2, seq_len, n)
    x[rows, first, 1] = x[rows, second, 1] = 1.0
    y = x[rows, first, 0] + x[rows, second, 0]
    return x, y.reshape(n, 1)


class AddingProblem(fluid.Program):
    hidden = 64
    learning_rate = 0.002

    def predict_sum(self, x):
        with fluid.var_scope("lstm"):
            proj = fluid.layers.fc(input=x, size=4 * self.hidden, num_flatten_dims=2)
            hidden, _ = fluid.layers.dynamic_lstm(input=proj, size=4 * self.hidden,
                                                  use_peepholes=False)
            last = fluid.layers.sequence_last_step(hidden)
            return fluid.layers.fc(input=last, size=1)

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name="x", shape=[-1, -1, 2], dtype="float32",
                              append_batch_size=False)
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(self.predict_sum(x), y))
        fluid.optimizer.Adam(learning_rate=self.learning_rate).minimize(loss)
        return loss

    @fluid.network("x")
    def predict(self, x):
        x = fluid.layers.data(name="x", shape=[-1, -1, 2], dtype="float32",
                              append_batch_size=False)
        return self.predict_sum(x)


def main(steps: int = 4000, seq_len: int = 100, batch_size: int = 64, seed: int = 0,
         report_every: int = 250) -> float:
    """Train for ``steps`` batches; print and return the final test MSE."""
    rng = np.random.default_rng(seed)
    x_test, y_test = adding_data(np.random.default_rng(seed + 1), 1000, seq_len)
    prog = AddingProblem().Compile(seed=seed)
    start, mse = time.perf_counter(), float("nan")
    for step in range(1, steps + 1):
        prog.train_step(*adding_data(rng, batch_size, seq_len))
        if step % report_every == 0 or step == steps:
            mse = float(np.mean((prog.predict(x_test) - y_test) ** 2))
            print(f"step {step:5d}  test MSE {mse:.4f}  "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
    print(f"final test MSE {mse:.4f} at T={seq_len} after {steps} steps "
          f"(no-memory baseline {NO_MEMORY_MSE:.4f})")
    return mse


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--seq-len", type=int, default=100)
    args = ap.parse_args()
    main(args.steps, args.seq_len)
