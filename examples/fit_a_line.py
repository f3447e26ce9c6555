"""fit_a_line: the proposal's example, trained on synthetic data with known true weights.

    ./dev demo        (or: python examples/fit_a_line.py)

Prints the loss every 100 steps, then the learned weights beside the true ones.
"""
from __future__ import annotations

import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "extension")]  # run from a checkout without installing

import fluid  # noqa: E402

FEATURES = 13
TRUE_W = np.linspace(-1.0, 1.0, FEATURES).astype(np.float32).reshape(FEATURES, 1)
TRUE_B = 0.5


class FitALine(fluid.Program):
    batch_size = 128
    learning_rate = 0.01

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name="x", shape=[FEATURES], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        with fluid.var_scope("prediction"):          # same names in every method => shared
            y_predict = fluid.layers.fc(input=x, size=1, act=None)
        cost = fluid.layers.square_error_cost(input=y_predict, label=y)
        avg_cost = fluid.layers.mean(cost, name="avg_cost")
        fluid.optimizer.SGD(learning_rate=self.learning_rate).minimize(avg_cost)
        return avg_cost

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[FEATURES], dtype="float32")
        with fluid.var_scope("prediction"):
            return fluid.layers.fc(input=x, size=1, act=None)


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, FEATURES)).astype(np.float32)
    noise = 0.1 * rng.standard_normal((n, 1)).astype(np.float32)
    return x, x @ TRUE_W + TRUE_B + noise


def main(steps: int = 1000) -> dict[str, np.ndarray]:
    model = FitALine(batch_size=256)
    x, y = make_data(model.batch_size * 40)
    fit_a_line = model.Compile(seed=0)
    batches = len(x) // model.batch_size
    for step in range(steps):
        i = step % batches * model.batch_size
        avg_cost = fit_a_line.train_step(x[i:i + model.batch_size], y[i:i + model.batch_size])
        if step % 100 == 0 or step == steps - 1:
            print(f"step {step:4d}  loss {avg_cost:.5f}")
    params = fit_a_line.parameters()
    learned_w = params["prediction/fc_0.w_0"].ravel()
    print("\n  learned     true")
    for got, want in zip(learned_w, TRUE_W.ravel()):
        print(f"  {got:+.4f}   {want:+.4f}")
    print(f"  bias {params['prediction/fc_0.b_0'][0]:+.4f}   {TRUE_B:+.4f}")
    sample = [3, 4, 6, 3, 5, 7, 8, 6, 5, 4, 1, 5, 8]
    y_hat = fit_a_line.infer(sample)
    print(f"\ninfer({sample}) = {y_hat[0, 0]:.4f}  (true line: "
          f"{float(np.asarray(sample) @ TRUE_W.ravel() + TRUE_B):.4f})")
    return params


if __name__ == "__main__":
    main()
