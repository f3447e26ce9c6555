"""fit_a_line: the proposal's example, end to end, on synthetic data with known weights.

    ./dev demo        (or: python examples/fit_a_line.py)
    fluid run examples/fit_a_line.py --distributed main=train_step --trainers 2 --pservers 2

Writes the data to a RecordIO file, trains `train_step` (which reads the file itself, in the
program), prints the loss every 100 steps and the learned weights beside the true ones, and
predicts one house with `infer`, which shares the trained parameters.
"""
from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "extension")]  # run from a checkout without installing

import fluid  # noqa: E402

FEATURES = 13
TRUE_W = np.linspace(-1.0, 1.0, FEATURES).astype(np.float32)
TRUE_B = 0.5


class FitALine(fluid.Program):
    DEFAULT_READER_FILE_PATH = './data.recordio'
    batch_size = 128
    epochs = 1
    learning_rate = 0.001

    @fluid.network()
    def train_step(self):
        reader = fluid.batch_reader(file=self.DEFAULT_READER_FILE_PATH,
                                    batch_size=self.batch_size,
                                    shape=[[13], [1]], dtype=['float32', 'float32'],
                                    format='recordio', epochs=self.epochs)
        x, y = reader.next_item()
        with fluid.var_scope('prediction'):          # same names in every method => shared
            y_predict = fluid.layers.fc(input=x, size=1, act=None)
        cost = fluid.layers.square_error_cost(input=y_predict, label=y)
        avg_cost = fluid.layers.mean(cost, name='avg_cost')
        fluid.optimizer.SGD(learning_rate=self.learning_rate).minimize(avg_cost)
        return avg_cost

    @fluid.network("x")                               # argument x feeds the data var 'x'
    def infer(self, x):
        x = fluid.layers.data(name='x', shape=[13], dtype='float32')
        with fluid.var_scope('prediction'):
            return fluid.layers.fc(input=x, size=1, act=None)


def write_data(path: str, samples: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, FEATURES)).astype(np.float32)
    y = (x @ TRUE_W + TRUE_B + 0.1 * rng.standard_normal(samples)).astype(np.float32)
    fluid.recordio.write_arrays(path, (x, y.reshape(-1, 1)))


def main(steps: int = 1000) -> dict[str, np.ndarray]:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.recordio")
        write_data(path, samples=64_000)               # 250 batches of 256
        fit_a_line = FitALine(DEFAULT_READER_FILE_PATH=path, batch_size=256, epochs=None,
                              learning_rate=0.01).Compile(seed=0)
        for step in range(steps):
            avg_cost = fit_a_line.train_step()         # a float: mean has no batch dim
            if step % 100 == 0 or step == steps - 1:
                print(f"step {step:4d}  loss {avg_cost:.5f}")
        house = [3, 4, 6, 3, 5, 7, 8, 6, 5, 4, 1, 5, 8]
        y = fit_a_line.infer(house)                    # a batch dim is added: shape (1, 1)
        fit_a_line.close()                             # stop the reader's thread now
    params = fit_a_line.parameters()
    learned = params["prediction/fc_0.w_0"].ravel()
    print("\n  learned     true")
    for got, want in zip(learned, TRUE_W):
        print(f"  {got:+.4f}   {want:+.4f}")
    print(f"  bias {params['prediction/fc_0.b_0'][0]:+.4f}   {TRUE_B:+.4f}")
    print(f"\ninfer({house}) = {y[0, 0]:.4f}  (true line: "
          f"{float(np.dot(house, TRUE_W) + TRUE_B):.4f})")
    return params


if __name__ == "__main__":
    main()
