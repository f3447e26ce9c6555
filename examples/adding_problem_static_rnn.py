"""The adding problem, learnt by an LSTM cell written by hand in a `fluid.layers.StaticRNN`.

    python examples/adding_problem_static_rnn.py            # T=100, 3000 steps (a few minutes)
    python examples/adding_problem_static_rnn.py --seq-len 20 --steps 400

Each sample is a sequence of T steps with two channels: a random value in [0, 1], and a
marker that is 1 at exactly two steps and 0 elsewhere. The target is the sum of the two
marked values (Le, Jaitly & Hinton 2015, after Hochreiter & Schmidhuber 1997). A model
with no memory can only predict the mean, 1, whose mean squared error is the variance of a
sum of two uniform values, 1/6 ≈ 0.167; learning to remember the marked values takes it
far below that.

The sequences are time-major ``[T, batch, 2]`` and the data var declares its time dim as -1,
so T may change from call to call; the step is one traced block run by a loop, so a plan
for a new T costs no more than the first.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "extension")]  # run from a checkout without installing

import fluid  # noqa: E402

NO_MEMORY_MSE = 1 / 6


def adding_batch(rng: np.random.Generator, batch: int, seq_len: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``x`` [T, batch, 2] (values, markers) and ``y`` [batch, 1] (the marked sum)."""
    values = rng.uniform(0, 1, (seq_len, batch))
    marks = np.zeros((seq_len, batch))
    first = rng.integers(0, seq_len // 2, batch)
    second = rng.integers(seq_len // 2, seq_len, batch)
    marks[first, np.arange(batch)] = marks[second, np.arange(batch)] = 1.0
    x = np.stack([values, marks], axis=-1).astype(np.float32)
    y = (values * marks).sum(axis=0)[:, None].astype(np.float32)
    return x, y


class Adding(fluid.Program):
    hidden = 32
    learning_rate = 0.01

    def lstm(self, x):
        """The last hidden state of an LSTM run over ``x`` [T, batch, 2]."""
        hidden = self.hidden
        rnn = fluid.layers.StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(x)
            h_prev = rnn.memory(shape=[-1, hidden], batch_ref=x_t)
            c_prev = rnn.memory(shape=[-1, hidden], batch_ref=x_t)
            gates = fluid.layers.fc(input=[x_t, h_prev], size=4 * hidden)
            i, f, o, g = fluid.layers.split(gates, 4, dim=1)
            # a forget gate biased to remember (+1) carries the first marked value far
            forget = fluid.layers.sigmoid(f + 1.0)
            c = forget * c_prev + fluid.layers.sigmoid(i) * fluid.layers.tanh(g)
            h = fluid.layers.sigmoid(o) * fluid.layers.tanh(c)
            rnn.update_memory(h_prev, h)
            rnn.update_memory(c_prev, c)
            rnn.step_output(h)
        return rnn()[-1]

    def predict(self):
        x = fluid.layers.data(name="x", shape=[-1, -1, 2], dtype="float32",
                              append_batch_size=False)
        with fluid.var_scope("lstm"):
            return fluid.layers.fc(input=self.lstm(x), size=1)

    @fluid.network("x", "y")
    def train_step(self, x, y):
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(self.predict(), y))
        fluid.optimizer.Adam(learning_rate=self.learning_rate).minimize(loss)
        return loss

    @fluid.network("x", "y")
    def test_mse(self, x, y):
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        return fluid.layers.mean(fluid.layers.square_error_cost(self.predict(), y))


def main(seq_len: int = 100, steps: int = 3000, batch: int = 64, hidden: int = 32,
         seed: int = 0, report: int = 250) -> float:
    """Train, print the test MSE every ``report`` steps, and return the final one."""
    prog = Adding(hidden=hidden).Compile(seed=seed)
    rng = np.random.default_rng(seed)
    x_test, y_test = adding_batch(np.random.default_rng(seed + 1), 1000, seq_len)
    start = time.perf_counter()
    for step in range(1, steps + 1):
        prog.train_step(*adding_batch(rng, batch, seq_len))
        if step % report == 0 or step == steps:
            mse = prog.test_mse(x_test, y_test)
            print(f"step {step:5d}  test mse {mse:.4f}  (no memory: {NO_MEMORY_MSE:.3f})  "
                  f"{time.perf_counter() - start:6.1f} s", flush=True)
    return mse


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, default=100)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(args.seq_len, args.steps, hidden=args.hidden, seed=args.seed)
