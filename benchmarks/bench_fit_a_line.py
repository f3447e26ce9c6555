"""One fit_a_line training step (fc 13->1, batch 256, SGD, loss fetched as a float) in
fluid_interactive and in hand-written NumPy, in the same process.

Prints both times and the ratio, the compile time, one-sample inference, and the
per-op overhead on a chain of 100 small elementwise ops. Run:

    python benchmarks/bench_fit_a_line.py
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "extension")]

from _timing import interleaved_us, per_call_us  # noqa: E402

import fluid  # noqa: E402

BATCH, FEATURES, LR = 256, 13, 0.001


class FitALine(fluid.Program):
    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name="x", shape=[FEATURES], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        with fluid.var_scope("prediction"):
            y_predict = fluid.layers.fc(input=x, size=1, act=None)
        cost = fluid.layers.square_error_cost(input=y_predict, label=y)
        avg_cost = fluid.layers.mean(cost, name="avg_cost")
        fluid.optimizer.SGD(learning_rate=LR).minimize(avg_cost)
        return avg_cost

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[FEATURES], dtype="float32")
        with fluid.var_scope("prediction"):
            return fluid.layers.fc(input=x, size=1, act=None)


class HandWritten:
    """The same step written by hand: preallocated buffers, in-place NumPy calls."""

    def __init__(self, w: np.ndarray, b: np.ndarray):
        self.w, self.b = w.copy(), b.copy()
        self.pred = np.empty((BATCH, 1), np.float32)
        self.flat = self.pred.reshape(-1)
        self.dw = np.empty_like(self.w)
        self.scale = np.float32(2.0 / BATCH)
        self.lr = np.float32(LR)

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        pred = self.pred
        np.matmul(x, self.w, out=pred)
        np.add(pred, self.b, out=pred)
        np.subtract(pred, y, out=pred)
        loss = float(np.dot(self.flat, self.flat)) / BATCH
        np.multiply(pred, self.scale, out=pred)
        np.matmul(x.T, pred, out=self.dw)
        self.dw *= self.lr
        self.w -= self.dw
        self.b -= self.lr * pred.sum()
        return loss


class Chain(fluid.Program):
    """100 small elementwise ops (alternating add and multiply with another var): the
    engine's per-op cost over NumPy's own."""

    @fluid.network("x", "y")
    def chain(self, x, y):
        h = fluid.layers.data(name="x", shape=[4], dtype="float32")
        y = fluid.layers.data(name="y", shape=[4], dtype="float32")
        for i in range(100):
            h = h * y if i % 2 else h + y
        return h


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, FEATURES)).astype(np.float32)
    y = rng.standard_normal((BATCH, 1)).astype(np.float32)

    t0 = time.perf_counter()
    prog = FitALine().Compile(seed=0)
    compile_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    prog.train_step(x, y)
    first_ms = (time.perf_counter() - t0) * 1e3

    p = prog.parameters()
    hand = HandWritten(p["prediction/fc_0.w_0"], p["prediction/fc_0.b_0"])
    times = interleaved_us({"fluid": lambda: prog.train_step(x, y),
                            "numpy": lambda: hand.step(x, y)}, calls=2000)
    ratio = times["fluid"] / times["numpy"]

    sample = x[0].tolist()
    infer_us = per_call_us(lambda: prog.infer(sample), calls=2000)
    w, b = hand.w, hand.b
    x1 = np.asarray(sample, np.float32)[None]
    infer_np_us = per_call_us(lambda: x1 @ w + b, calls=2000)

    chain = Chain().Compile()
    xs, ys = np.ones((8, 4), np.float32), np.ones((8, 4), np.float32)
    chain.chain(xs, ys)
    buf = np.empty_like(xs)

    def numpy_chain():
        h = np.add(xs, ys, out=buf)
        for i in range(1, 100):
            h = np.multiply(h, ys, out=buf) if i % 2 else np.add(h, ys, out=buf)
        return h.copy()
    chain_us = per_call_us(lambda: chain.chain(xs, ys), calls=500)
    np_chain = per_call_us(numpy_chain, calls=500)

    print(f"fit_a_line train step (batch {BATCH}, SGD, loss as float)")
    print(f"  fluid_interactive : {times['fluid']:7.1f} us/step")
    print(f"  hand-written NumPy: {times['numpy']:7.1f} us/step")
    print(f"  ratio             : {ratio:7.2f}x   (target <= 1.5x)")
    print(f"compile (trace + startup): {compile_ms:.1f} ms; first step (plan + run): "
          f"{first_ms:.1f} ms   (target <= 50 ms)")
    print(f"infer one sample from a list: {infer_us:.1f} us "
          f"(NumPy x @ w + b: {infer_np_us:.1f} us)")
    print(f"chain of 100 elementwise ops: {chain_us:.1f} us/call = {chain_us / 100:.2f} us/op "
          f"(the same 100 NumPy calls by hand: {np_chain / 100:.2f} us/op; overhead "
          f"{(chain_us - np_chain) / 100:.2f} us/op)")


if __name__ == "__main__":
    main()
