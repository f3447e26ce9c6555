"""The README's demo runs and learns the true line."""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import fit_a_line  # noqa: E402


def test_fit_a_line_learns_the_true_weights(capsys):
    params = fit_a_line.main(steps=1000)
    w = params["prediction/fc_0.w_0"].ravel()
    b = params["prediction/fc_0.b_0"][0]
    assert np.abs(w - fit_a_line.TRUE_W).max() < 0.05
    assert abs(b - fit_a_line.TRUE_B) < 0.05
    out = capsys.readouterr().out
    assert out.count("loss") == 11 and "learned" in out


def test_digits_mlp_short_run_clearly_learns(capsys):
    import pytest
    pytest.importorskip("sklearn")
    import digits_mlp
    accuracy = digits_mlp.main(epochs=3)
    assert accuracy > 0.85          # chance is 0.10
    assert "epoch  3" in capsys.readouterr().out
