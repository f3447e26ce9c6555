"""The sequence examples run and learn: the adding problem (shorter sequences and fewer
steps than the example's T = 100 and 4,000 steps) beats the no-memory baseline by far, and
the LSTM reading digits row by row clearly learns in a few epochs."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import adding_problem  # noqa: E402


def test_adding_problem_short_run_remembers(capsys):
    mse = adding_problem.main(steps=800, seq_len=20, report_every=400)
    assert mse < 0.3 * adding_problem.NO_MEMORY_MSE
    assert "final test MSE" in capsys.readouterr().out


def test_digits_read_row_by_row_clearly_learn(capsys):
    pytest.importorskip("sklearn")
    import sequence_classification
    accuracy = sequence_classification.main(epochs=3)
    assert accuracy > 0.8          # chance is 0.10
    assert "SVC(gamma=0.001) on the same split" in capsys.readouterr().out
