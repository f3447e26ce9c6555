"""examples/adding_problem_static_rnn.py: an LSTM cell written by hand in a StaticRNN
learns the adding problem. The CI run is short (T=10, 300 steps); the example's own T=100
run is the figure in docs/control_flow.md."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import adding_problem_static_rnn as adding_problem  # noqa: E402


def test_an_lstm_in_a_static_rnn_learns_the_adding_problem(capsys):
    mse = adding_problem.main(seq_len=10, steps=300, hidden=16, report=100)
    assert mse < adding_problem.NO_MEMORY_MSE / 5   # far below what no memory can do
    assert capsys.readouterr().out.count("test mse") == 3


def test_batches_hold_two_marked_values(rng):
    x, y = adding_problem.adding_batch(rng, 8, 12)
    assert x.shape == (12, 8, 2) and y.shape == (8, 1)
    assert (x[:, :, 1].sum(axis=0) == 2).all()
    assert abs((x[:, :, 0] * x[:, :, 1]).sum(axis=0) - y[:, 0]).max() < 1e-5
