"""What keeping a history for `rewind` costs per training step: the same program with
history off and on, interleaved in one process, for fit_a_line (SGD, 2 small arrays
written per step) and an MLP 784-256-256-10 with Adam (parameters and both moments,
3.1 MiB written per step); and what `rewind(10)` takes. Run:

    python benchmarks/bench_history.py
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "extension")]

from collections.abc import Callable  # noqa: E402

from _timing import interleaved_us  # noqa: E402
from bench_fit_a_line import BATCH, FEATURES, FitALine  # noqa: E402

import fluid  # noqa: E402


class MLP(fluid.Program):
    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name="x", shape=[784], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        h = fluid.layers.fc(input=x, size=256, act="relu")
        h = fluid.layers.fc(input=h, size=256, act="relu")
        logits = fluid.layers.fc(input=h, size=10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.Adam(learning_rate=1e-3).minimize(loss)
        return loss


def _faults_per_call(fn: Callable[[], object], calls: int) -> float:
    """Minor page faults per call: whether keeping old arrays makes every step touch fresh
    memory (it does not, once the history is full and recycles what it forgets)."""
    import resource
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def compare(name: str, cls: type, args: tuple, calls: int, rounds: int) -> None:
    off, on = cls().Compile(seed=0), cls().Compile(seed=0)
    on.keep_history()
    times = interleaved_us({"off": lambda: off.train_step(*args),
                            "on": lambda: on.train_step(*args)}, calls=calls, rounds=rounds,
                           clock=time.thread_time)
    per_step = on.history.changes()[0].nbytes
    faults = {k: _faults_per_call(lambda p=p: p.train_step(*args), 50)
              for k, p in (("off", off), ("on", on))}
    print(f"{name}: history off {times['off']:8.1f} us/step, on {times['on']:8.1f} us/step "
          f"(+{times['on'] - times['off']:.1f} us, {times['on'] / times['off']:.3f}x); "
          f"{per_step / 1024:.1f} KiB counted per step; page faults per step off "
          f"{faults['off']:.1f}, on {faults['on']:.1f}")
    samples = []
    for _ in range(7):
        for _ in range(10):
            on.train_step(*args)
        t0 = time.thread_time()
        on.rewind(10)
        samples.append((time.thread_time() - t0) * 1e6)
    print(f"{name}: rewind(10) {sorted(samples)[3]:.0f} us")


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, FEATURES)).astype(np.float32)
    y = rng.standard_normal((BATCH, 1)).astype(np.float32)
    compare("fit_a_line (batch 256, SGD)", FitALine, (x, y), calls=2000, rounds=15)
    xm = rng.standard_normal((64, 784)).astype(np.float32)
    ym = rng.integers(0, 10, (64, 1)).astype(np.int64)
    compare("MLP 784-256-256-10 (batch 64, Adam)", MLP, (xm, ym), calls=20, rounds=61)


if __name__ == "__main__":
    main()
