"""Property tests: random samples round-trip, and a randomly corrupted file either raises
RecordIOError or reads back exactly what was written, through `recordio.read` and through
`bulk_read.read_columns` (what `BatchReader` reads files with).

RecordIO has no file header or footer, so one corruption cannot be detected by design:
cutting the file exactly at chunk boundaries (truncating at one, or deleting whole
chunks) leaves a valid, shorter file. Then the reader must yield exactly the records of
the chunks that remain, which the oracle below accepts and nothing else.
"""
import os
import tempfile
import warnings
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluid_interactive.errors import RecordIOError
from fluid_interactive.io import recordio

from .recordio_oracle import (
    ZlibAsBlockCodec,
    as_whole_chunks,
    corrupt,
    original_chunks,
    read,
    read_bulk,
    same,
    write,
)

# Hypothesis imports this module (and libcst, which warns DeprecationWarning about
# mypy_extensions) only while reporting a failure; under filterwarnings=error that turns a
# readable failure into a pytest INTERNALERROR. Import it now, with warnings quiet.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    try:
        import hypothesis.extra._patching  # noqa: F401
    except ImportError:
        pass

DTYPES = ["float32", "float64", "int64", "int32", "uint8", "bool", "float16", "int8"]


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory() as d:
        yield d


@st.composite
def datasets(draw):
    """(samples, compressor, max_num_records). Usually one layout for every sample (the
    fast path); sometimes a new layout per sample (the record-by-record path)."""
    seed = draw(st.integers(0, 2 ** 32 - 1))
    n = draw(st.integers(1, 14))
    mixed = draw(st.booleans())
    rng = np.random.default_rng(seed)

    def layout():
        return [(DTYPES[rng.integers(len(DTYPES))],
                 tuple(int(d) for d in rng.integers(0, 4, size=rng.integers(0, 3))))
                for _ in range(rng.integers(1, 3))]

    fixed = layout()
    samples = []
    for _ in range(n):
        spec = layout() if mixed else fixed
        samples.append(tuple(np.asarray(rng.standard_normal(shape) * 100).astype(dt)
                             for dt, shape in spec))
    compressor = draw(st.sampled_from(["none", "none", "gzip", "snappy"]))
    return samples, compressor, draw(st.integers(1, 5))


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(datasets())
def test_random_samples_round_trip(workdir, dataset):
    path = os.path.join(workdir, "rt.recordio")
    write(path, dataset)
    assert same(read(path), dataset[0])
    with mock.patch.object(recordio, "_snappy_module", lambda: ZlibAsBlockCodec):
        chunks = list(recordio.read_chunks(path))
    assert sum(c.num_records for c in chunks) == len(dataset[0])


@st.composite
def corruptions(draw, size):
    kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete"]))
    if kind == "flip":
        flips = draw(st.lists(st.tuples(st.integers(0, size - 1), st.integers(1, 255)),
                              min_size=1, max_size=3))
        return kind, flips
    if kind == "truncate":
        return kind, draw(st.integers(0, size - 1))
    if kind == "insert":
        return kind, (draw(st.integers(0, size)), draw(st.binary(min_size=1, max_size=40)))
    start = draw(st.integers(0, size - 1))
    return kind, (start, draw(st.integers(1, size - start)))


@settings(max_examples=1000, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dataset=datasets(), data=st.data())
def test_corrupted_files_raise_or_read_exactly(workdir, dataset, data):
    path = os.path.join(workdir, "fuzz.recordio")
    write(path, dataset)
    with open(path, "rb") as f:
        original = f.read()
    kind, arg = data.draw(corruptions(len(original)), label="corruption")
    chunks = original_chunks(path, original, dataset[0])
    corrupted = corrupt(original, kind, arg)
    expected = as_whole_chunks(corrupted, chunks)
    with open(path, "wb") as f:
        f.write(corrupted)
    for reader in (read, read_bulk):
        try:
            got = reader(path)
        except RecordIOError as exc:
            assert path in str(exc)
            continue
        assert same(got, dataset[0]) or (expected is not None and same(got, expected)), (
            f"{reader.__name__}: {kind} {arg} read back {len(got)} records that differ from "
            f"those written")
