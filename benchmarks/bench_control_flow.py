"""What loops cost: planning a method with a StaticRNN at a short and a long sequence, and
one training step of the adding problem's LSTM (examples/adding_problem_static_rnn.py: T=100, batch
64, hidden 32, Adam) against the same LSTM written by hand in NumPy (numpy_lstm.py) and,
when installed, a PyTorch LSTMCell loop. Contenders are timed interleaved in one process,
so machine noise hits them alike; the ratios are what to read. Run:

    python benchmarks/bench_control_flow.py [--steps-t 100] [--rounds 5]

Planning: the step is one traced block, planned into one function per input signature; a
plan for T=200 takes the function T=20 planned (the step's shapes did not change), and its
source is the same text. The figures printed are the median of ``--rounds`` fresh programs.
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
sys.path[:0] = [HERE, ROOT, os.path.join(ROOT, "extension"), os.path.join(ROOT, "examples")]

from _timing import interleaved_us  # noqa: E402
from adding_problem_static_rnn import Adding, adding_batch  # noqa: E402
from numpy_lstm import NumpyLSTM  # noqa: E402


def plan_times(rounds: int) -> dict[str, float]:
    """Median ms to plan train_step: a fresh program at T=20, a fresh one at T=200, and
    T=200 on a program that planned T=20 already; and the source lengths."""
    rng = np.random.default_rng(0)
    samples: dict[str, list[float]] = {"T=20": [], "T=200": [], "T=200 after T=20": []}
    lengths = {}
    for _ in range(rounds):
        for label, lengths_run in (("T=20", [20]), ("T=200", [200]),
                                   ("T=200 after T=20", [20, 200])):
            runner = Adding().Compile(seed=0).train_step.runner
            for steps in lengths_run:
                x, y = adding_batch(rng, 64, steps)
                t0 = time.perf_counter()
                code = runner.plan([x, y])
                elapsed = time.perf_counter() - t0
            samples[label].append(elapsed * 1e3)
            lengths[label] = len(code.code.source)
    return {**{k: statistics.median(v) for k, v in samples.items()},
            **{f"source chars ({k})": float(v) for k, v in lengths.items()}}


def _torch_step(params: dict[str, np.ndarray]):
    """The same LSTM in PyTorch eager mode (an LSTMCell-style loop), or None."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    opt = torch.optim.Adam(p.values(), lr=0.01, eps=1e-8)

    def step(x: np.ndarray, y: np.ndarray) -> float:
        xs, target = torch.from_numpy(x), torch.from_numpy(y)
        hidden = p["lstm/fc_0.w_1"].shape[0]
        h = torch.zeros(x.shape[1], hidden)
        c = torch.zeros_like(h)
        for x_t in xs:
            i, f, o, g = (x_t @ p["lstm/fc_0.w_0"] + h @ p["lstm/fc_0.w_1"]
                          + p["lstm/fc_0.b_0"]).chunk(4, dim=1)
            c = torch.sigmoid(f + 1.0) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        loss = ((h @ p["lstm/fc_1.w_0"] + p["lstm/fc_1.b_0"] - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def step_times(steps: int, rounds: int) -> dict[str, float]:
    """Median ms per training step of each contender on the same batch."""
    prog = Adding().Compile(seed=0)
    params = prog.parameters()
    x, y = adding_batch(np.random.default_rng(1), 64, steps)
    reference = NumpyLSTM(params)
    contenders = {"fluid (StaticRNN)": lambda: prog.train_step(x, y),
                  "NumPy by hand": lambda: reference.train_step(x, y)}
    torch_step = _torch_step(params)
    if torch_step is not None:
        contenders["PyTorch eager"] = lambda: torch_step(x, y)
    return {k: v / 1e3 for k, v in interleaved_us(contenders, calls=3, rounds=rounds).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps-t", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    plans = plan_times(args.rounds)
    print("planning train_step (ms, median of fresh programs):")
    for label, value in plans.items():
        print(f"  {label:32s} {value:9.1f}")
    print(f"  ratio T=200 / T=20: {plans['T=200'] / plans['T=20']:.2f}   "
          f"new T after the first: {plans['T=200 after T=20'] / plans['T=20']:.2f}")
    times = step_times(args.steps_t, args.rounds)
    base = times["NumPy by hand"]
    print(f"one training step at T={args.steps_t}, batch 64, hidden 32 (ms):")
    for label, ms in times.items():
        print(f"  {label:20s} {ms:8.2f}   x{ms / base:.2f} of NumPy by hand")


if __name__ == "__main__":
    main()
