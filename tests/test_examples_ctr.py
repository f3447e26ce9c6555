"""examples/ctr.py at a small size: sync on 2 trainers x 2 servers equals 1 x 1, async
learns too, and the AUCs are printed beside the Bayes AUC."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import ctr  # noqa: E402


def test_ctr_learns_and_sync_equals_one_server(capsys):
    results = ctr.compare(samples=6000, test_n=3000, epochs=1, batch=200)
    assert 0.85 < results["bayes"] < 0.95
    assert abs(results["sync"] - results["local"]) < 1e-4
    for mode in ("local", "sync", "async"):
        assert 0.7 < results[mode] <= results["bayes"] + 0.01, (mode, results)
    out = capsys.readouterr().out
    assert "Bayes AUC" in out and out.count("AUC") == 4


def test_the_auc_counts_ties_as_halves():
    assert ctr.auc([0, 1, 0, 1], [0.1, 0.9, 0.5, 0.5]) == 0.875
    assert ctr.auc([1, 0], [0.2, 0.8]) == 0.0
