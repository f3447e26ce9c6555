"""benchmarks/bench_control_flow.py stays honest: its hand-written NumPy LSTM computes the
loss and the Adam step of the compiled StaticRNN it is timed against, and the script runs."""
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (os.path.join(ROOT, "benchmarks"), os.path.join(ROOT, "examples")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from adding_problem_static_rnn import Adding, adding_batch  # noqa: E402
from numpy_lstm import NumpyLSTM  # noqa: E402


def test_the_numpy_lstm_trains_as_the_compiled_one(rng):
    prog = Adding(hidden=6).Compile(seed=0)
    reference = NumpyLSTM(prog.parameters())
    for _ in range(3):
        x, y = adding_batch(rng, 8, 7)
        np.testing.assert_allclose(reference.train_step(x, y), prog.train_step(x, y),
                                   rtol=1e-5)
    for name, value in prog.parameters().items():
        np.testing.assert_allclose(reference.p[name], value, rtol=2e-4, atol=2e-6,
                                   err_msg=name)


def test_the_benchmark_runs():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks",
                                                       "bench_control_flow.py"),
                          "--steps-t", "5", "--rounds", "1"],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    assert "ratio T=200 / T=20" in out and "NumPy by hand" in out
