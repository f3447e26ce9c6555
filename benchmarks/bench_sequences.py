"""The LSTM's own figures, in one process, interleaved (blocks of calls alternate between
contenders; medians over blocks):

* plan + first call: compiling W4's program and its first train step (T = 100);
* long sequences: one train step at T = 1000 against ten steps at T = 100 (the same
  number of time steps; the target is within 1.1x), with the adding problem's program
  (W4's model with T left open);
* fluid against the hand-written NumPy BPTT of the peer suite on W4 and W5, same process.

    python benchmarks/bench_sequences.py [--rounds 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT, os.path.join(ROOT, "extension"), os.path.join(ROOT, "examples")]

from adding_problem import AddingProblem  # noqa: E402
from peers import seq_fluid, seq_numpy  # noqa: E402
from peers.seq_workloads import adding_problem  # noqa: E402
from peers.workloads import WORKLOADS, initial_parameters  # noqa: E402


def interleaved_ms(contenders: dict, rounds: int) -> dict[str, list[float]]:
    """ms per call of each contender, one sample per round; rounds alternate them."""
    samples: dict[str, list[float]] = {k: [] for k in contenders}
    for fn, _ in contenders.values():
        fn()
    for _ in range(rounds):
        for name, (fn, calls) in contenders.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - t0) / calls * 1e3)
    return samples


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


def first_call(rounds: int) -> None:
    w = WORKLOADS["W4"]
    totals = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        prog = seq_fluid.program_class(w)().Compile(seed=0)
        x, y = adding_problem(np.random.default_rng(0), w.batch, 100)
        prog.train_step(x, y)
        totals.append((time.perf_counter() - t0) * 1e3)
    print(f"W4 compile + plan + first step (T=100): {spread(totals)} ms "
          f"(median [min-max] over {rounds} fresh programs)")


def long_sequences(rounds: int) -> None:
    """examples/adding_problem.py's program (W4's model, T left open)."""
    w = WORKLOADS["W4"]
    prog = AddingProblem().Compile(seed=0)
    rng = np.random.default_rng(0)
    short, long = adding_problem(rng, w.batch, 100), adding_problem(rng, w.batch, 1000)
    step = prog.train_step
    got = interleaved_ms({"ten steps at T=100": (lambda: [step(*short) for _ in range(10)], 1),
                          "one step at T=1000": (lambda: step(*long), 1)}, rounds)
    ratio = [b / a for a, b in zip(got["ten steps at T=100"], got["one step at T=1000"])]
    for name, values in got.items():
        print(f"{name}: {spread(values)} ms")
    print(f"one step at T=1000 / ten steps at T=100: {spread(ratio)}")


def against_hand_numpy(rounds: int) -> None:
    for name in ("W4", "W5"):
        w = WORKLOADS[name]
        params = initial_parameters(w.model)
        fluid_c, hand_c = seq_fluid.make(w, params), seq_numpy.make(w, params)
        calls = 3 if name == "W4" else 10
        got = interleaved_ms({"fluid": (lambda c=fluid_c: c.call(0), calls),
                              "numpy": (lambda c=hand_c: c.call(0), calls)}, rounds)
        ratio = [a / b for a, b in zip(got["fluid"], got["numpy"])]
        print(f"{w.what}: fluid {spread(got['fluid'])} ms, hand NumPy "
              f"{spread(got['numpy'])} ms, fluid / hand NumPy {spread(ratio)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    first_call(args.rounds)
    long_sequences(args.rounds)
    against_hand_numpy(args.rounds)


if __name__ == "__main__":
    main()
