"""BatchReader: batches against a NumPy reference, epochs, shuffling, errors from the
background thread, and no leaked threads or file descriptors."""
import gc
import os
import threading
import time

import numpy as np
import pytest

from fluid_interactive.errors import EOFException, ReaderError, RecordIOError
from fluid_interactive.io import bulk_read, recordio
from fluid_interactive.io.reader import ArraySource, BatchReader, Block, FileSource

from ..leaks import open_fds, settles

SHAPES, DTYPES = [[13], [1]], ["float32", "float32"]


def data(n, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, 13)).astype(np.float32),
            np.arange(n, dtype=np.float32).reshape(n, 1))


def reference(arrays, batch_size, drop_last=False):
    n = len(arrays[0])
    stop = n - n % batch_size if drop_last else n
    return [tuple(a[i:i + batch_size] for a in arrays) for i in range(0, stop, batch_size)]


def drain(reader):
    out = []
    while True:
        try:
            out.append(reader.next())
        except EOFException:
            return out


def assert_batches_equal(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert len(g) == len(w)
        for a, b in zip(g, w):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


@pytest.fixture
def file_of(tmp_path):
    def make(arrays, name="data.recordio", **kw):
        path = str(tmp_path / name)
        recordio.write_arrays(path, arrays, **kw)
        return path
    return make


# ---------------------------------------------------------------- batches

@pytest.mark.parametrize("batch_size", [1, 7, 100, 128, 1000, 5000])
@pytest.mark.parametrize("drop_last", [False, True])
def test_file_batches_match_numpy(file_of, batch_size, drop_last):
    arrays = data(2345)
    path = file_of(arrays, max_num_records=100)
    with BatchReader(FileSource(path), batch_size, SHAPES, DTYPES, drop_last=drop_last) as r:
        got = drain(r)
    assert_batches_equal(got, reference(arrays, batch_size, drop_last))
    for batch in got:
        assert all(a.flags.c_contiguous and a.flags.writeable for a in batch)


@pytest.mark.parametrize("prefetch", [0, 2, 64])
@pytest.mark.parametrize("batch_size", [1, 13, 256])
def test_file_batches_match_numpy_across_pieces(file_of, monkeypatch, prefetch, batch_size):
    """Files read a few KB at a time: batches span pieces, runs and chunks."""
    monkeypatch.setattr(bulk_read, "_FIRST_PIECE", 2000)
    monkeypatch.setattr(bulk_read, "_PIECE", 9000)
    arrays = data(1234)
    path = file_of(arrays, max_num_records=37)
    with BatchReader(FileSource(path), batch_size, SHAPES, DTYPES, prefetch=prefetch,
                     epochs=2) as r:
        got = drain(r)
        assert r.state() == {"epoch": 2, "batch": 0, "samples": 2 * 1234}
    assert_batches_equal(got, reference(arrays, batch_size) * 2)
    for batch in got:
        assert all(a.flags.c_contiguous and a.flags.writeable for a in batch)


@pytest.mark.parametrize("prefetch", [0, 1, 4])
def test_array_batches_match_numpy(prefetch):
    arrays = data(1000)
    r = BatchReader(ArraySource(arrays), 64, SHAPES, DTYPES, prefetch=prefetch)
    got = drain(r)
    r.close()
    assert_batches_equal(got, reference(arrays, 64))
    got[0][0][:] = 0  # batches are copies: the source is untouched
    assert arrays[0][0, 0] != 0


def test_several_files_a_glob_and_a_list(tmp_path, file_of):
    parts = [data(50, seed=i) for i in range(3)]
    for i, p in enumerate(parts):
        file_of(p, name=f"part-{i:02d}.recordio", max_num_records=7)
    joined = tuple(np.concatenate([p[k] for p in parts]) for k in range(2))
    with BatchReader(FileSource(str(tmp_path / "part-*.recordio")), 32, SHAPES, DTYPES) as r:
        assert_batches_equal(drain(r), reference(joined, 32))
    names = [str(tmp_path / f"part-{i:02d}.recordio") for i in (2, 0)]
    with BatchReader(FileSource(names), 1000, SHAPES, DTYPES) as r:
        (x, y), = drain(r)
    np.testing.assert_array_equal(x, np.concatenate([parts[2][0], parts[0][0]]))
    assert FileSource(str(tmp_path / "part-*.recordio")).paths == sorted(
        str(tmp_path / f"part-{i:02d}.recordio") for i in range(3))


def test_missing_files_are_reader_errors(tmp_path):
    with BatchReader(FileSource(str(tmp_path / "nothing-*.recordio")), 4, SHAPES, DTYPES) as r:
        with pytest.raises(ReaderError, match="no RecordIO file matches"):
            r.next()
    with BatchReader(FileSource(str(tmp_path / "absent.recordio")), 4, SHAPES, DTYPES) as r:
        with pytest.raises(ReaderError, match="does not exist"):
            r.next()


def test_epochs_and_eof(file_of):
    arrays = data(10)
    r = BatchReader(FileSource(file_of(arrays)), 4, SHAPES, DTYPES, epochs=3)
    got = drain(r)
    assert [len(b[0]) for b in got] == [4, 4, 2] * 3
    assert_batches_equal(got, reference(arrays, 4) * 3)
    for _ in range(3):  # EOF again, without touching the data
        with pytest.raises(EOFException, match="3 epoch"):
            r.next()
    assert r.state() == {"epoch": 3, "batch": 0, "samples": 30}
    r.close()


def test_drop_last_per_epoch_and_endless_epochs():
    arrays = data(10)
    r = BatchReader(ArraySource(arrays), 4, SHAPES, DTYPES, epochs=None, drop_last=True)
    got = [r.next() for _ in range(20)]
    assert all(len(b[0]) == 4 for b in got)
    assert_batches_equal(got, reference(arrays, 4, drop_last=True) * 10)
    assert r.state()["epoch"] == 9
    r.close()


def test_less_than_one_batch_with_drop_last_is_eof_not_a_hang():
    r = BatchReader(ArraySource(data(3)), 4, SHAPES, DTYPES, epochs=None, drop_last=True)
    with pytest.raises(EOFException):
        r.next()
    r.close()


def test_reset_mid_epoch_after_eof_and_after_close(file_of):
    arrays = data(20)
    want = reference(arrays, 8)
    r = BatchReader(FileSource(file_of(arrays)), 8, SHAPES, DTYPES)
    assert_batches_equal([r.next()], want[:1])
    r.reset()
    assert r.state() == {"epoch": 0, "batch": 0, "samples": 0}
    assert_batches_equal(drain(r), want)
    r.reset()
    assert_batches_equal(drain(r), want)
    r.close()
    with pytest.raises(ReaderError, match="closed"):
        r.next()
    r.reset()
    assert_batches_equal(drain(r), want)
    r.close()
    r.close()


def test_iteration_stops_at_eof():
    arrays = data(9)
    with BatchReader(ArraySource(arrays), 4, SHAPES, DTYPES) as r:
        assert_batches_equal(list(r), reference(arrays, 4))


def test_state_counts_batches_within_the_epoch():
    r = BatchReader(ArraySource(data(10)), 4, SHAPES, DTYPES, epochs=2)
    r.next()
    r.next()
    assert r.state() == {"epoch": 0, "batch": 2, "samples": 8}
    r.next()
    r.next()
    assert r.state() == {"epoch": 1, "batch": 1, "samples": 14}
    r.close()


def test_shards_partition_the_samples(file_of):
    arrays = data(23)
    path = file_of(arrays, max_num_records=5)
    labels = []
    for i in range(3):
        with BatchReader(FileSource(path), 100, SHAPES, DTYPES, shard=(i, 3)) as r:
            (x, y), = drain(r)
        np.testing.assert_array_equal(x, arrays[0][i::3])
        assert x.flags.c_contiguous and y.flags.c_contiguous
        labels += y[:, 0].tolist()
    assert sorted(labels) == list(range(23))


# ---------------------------------------------------------------- shuffling

def shuffled_labels(source, seed, epochs=3, buffer=None, batch_size=16, prefetch=4):
    with BatchReader(source, batch_size, SHAPES, DTYPES, shuffle=True, shuffle_buffer=buffer,
                     seed=seed, epochs=epochs, prefetch=prefetch) as r:
        batches = drain(r)
    return [b[1][:, 0].astype(int).tolist() for b in batches]


def epochs_of(batches, n, batch_size):
    per_epoch = -(-n // batch_size)
    flat = [batches[i:i + per_epoch] for i in range(0, len(batches), per_epoch)]
    return [sum(e, []) for e in flat]


def test_shuffle_is_a_permutation_per_epoch_and_deterministic(file_of):
    arrays = data(100)
    path = file_of(arrays, max_num_records=30)
    a = shuffled_labels(FileSource(path), seed=7)
    assert a == shuffled_labels(FileSource(path), seed=7)
    assert a == shuffled_labels(ArraySource(arrays), seed=7, prefetch=0)
    assert a == shuffled_labels(FileSource(path), seed=7, buffer=100)  # buffer >= dataset
    assert a != shuffled_labels(FileSource(path), seed=8)
    epochs = epochs_of(a, 100, 16)
    assert len(epochs) == 3
    assert all(sorted(e) == list(range(100)) for e in epochs)
    assert epochs[0] != epochs[1] != epochs[2] and epochs[0] != list(range(100))


def test_shuffled_batches_keep_samples_together(file_of):
    arrays = data(64)
    with BatchReader(FileSource(file_of(arrays)), 16, SHAPES, DTYPES, shuffle=True,
                     seed=1) as r:
        for x, y in drain(r):
            np.testing.assert_array_equal(x, arrays[0][y[:, 0].astype(int)])


def test_buffered_shuffle_mixes_within_each_buffer(file_of):
    path = file_of(data(100), max_num_records=7)
    labels = sum(shuffled_labels(FileSource(path), seed=3, epochs=1, buffer=25), [])
    for start in range(0, 100, 25):  # fill 25, shuffle, emit, refill
        window = labels[start:start + 25]
        assert sorted(window) == list(range(start, start + 25))
        assert window != list(range(start, start + 25))
    again = sum(shuffled_labels(FileSource(path), seed=3, epochs=1, buffer=25), [])
    assert labels == again


def test_reset_replays_the_shuffled_sequence():
    r = BatchReader(ArraySource(data(50)), 10, SHAPES, DTYPES, shuffle=True, epochs=2)
    first = [b[1].tolist() for b in drain(r)]
    r.reset()
    assert [b[1].tolist() for b in drain(r)] == first
    r.close()


# ---------------------------------------------------------------- validation

def test_wrong_shape_names_file_record_expected_and_got(tmp_path):
    path = str(tmp_path / "bad.recordio")
    good = [(np.zeros(13, np.float32), np.zeros(1, np.float32))] * 5
    recordio.write(path, good + [(np.zeros(12, np.float32), np.zeros(1, np.float32))],
                   max_num_records=3)
    with BatchReader(FileSource(path), 2, SHAPES, DTYPES) as r:
        r.next()
        r.next()
        with pytest.raises(ReaderError) as info:
            r.next()
    msg = str(info.value)
    assert path in msg and "record 5" in msg and "slot 0" in msg
    assert "expected shape [13] dtype float32" in msg and "got shape [12] dtype float32" in msg


def test_wrong_dtype_and_safe_casts(tmp_path):
    path = str(tmp_path / "ints.recordio")
    recordio.write_arrays(path, (np.ones((4, 13), np.int32), np.ones((4, 1), np.float64)))
    with BatchReader(FileSource(path), 4, SHAPES, ["int64", "float32"]) as r:
        x, y = r.next()
    assert x.dtype == np.int64 and y.dtype == np.float32
    with BatchReader(FileSource(path), 4, SHAPES, ["int16", "float32"]) as r:
        with pytest.raises(ReaderError, match="record 0: slot 0: .*got shape \\[13\\] dtype "
                                              "int32, which does not cast safely"):
            r.next()
    with BatchReader(ArraySource(data(4)), 4, SHAPES, ["float32", "int64"]) as r:
        with pytest.raises(ReaderError, match="<arrays>: record 0: slot 1"):
            r.next()


def test_wrong_slot_count(file_of):
    path = file_of((np.zeros((3, 13), np.float32),))
    with BatchReader(FileSource(path), 2, SHAPES, DTYPES) as r:
        with pytest.raises(ReaderError, match="holds 1 tensor\\(s\\); the reader declares 2"):
            r.next()


def test_wildcard_dims():
    arrays = (np.zeros((6, 3, 5), np.float32),)
    with BatchReader(ArraySource(arrays), 4, [[-1, 5]], ["float32"]) as r:
        assert r.next()[0].shape == (4, 3, 5)


def test_bad_arguments():
    src = ArraySource(data(4))
    for kwargs in ({"batch_size": 0}, {"epochs": 0}, {"prefetch": -1}, {"seed": -2},
                   {"shuffle_buffer": 0}, {"shard": (2, 2)}):
        args = {"batch_size": 2, **kwargs}
        with pytest.raises(ReaderError):
            BatchReader(src, shapes=SHAPES, dtypes=DTYPES, **args)
    with pytest.raises(ReaderError, match="2 shapes but 1 dtypes"):
        BatchReader(src, 2, SHAPES, ["float32"])
    with pytest.raises(ReaderError, match="different numbers of samples"):
        ArraySource((np.zeros(3), np.zeros(4)))


# ---------------------------------------------------------------- the thread

class Failing:
    """A source whose data breaks after ``good`` blocks of 10 samples."""

    def __init__(self, good):
        self.good = good

    def resolved(self):
        return self

    def blocks(self):
        x, y = data(10)
        for i in range(self.good):
            yield Block("<failing>", 10 * i, (x, y), False)
        raise RuntimeError("disk on fire")


@pytest.mark.parametrize("prefetch", [0, 2])
def test_an_error_in_the_thread_reaches_next_as_reader_error(prefetch):
    r = BatchReader(Failing(3), 10, SHAPES, DTYPES, prefetch=prefetch)
    for _ in range(3):
        r.next()
    t0 = time.perf_counter()
    with pytest.raises(ReaderError, match="disk on fire") as info:
        r.next()
    assert time.perf_counter() - t0 < 5
    assert isinstance(info.value.__cause__, RuntimeError)
    with pytest.raises(ReaderError, match="disk on fire"):  # stays failed until reset
        r.next()
    r.reset()
    assert len(r.next()[0]) == 10
    r.close()


def test_a_corrupt_file_is_a_reader_error_with_the_recordio_error_chained(file_of):
    path = file_of(data(30), max_num_records=10)
    with open(path, "r+b") as f:
        f.seek(1200 + 20 + 50)  # inside the second chunk's payload
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    with BatchReader(FileSource(path), 10, SHAPES, DTYPES) as r:
        r.next()
        with pytest.raises(ReaderError, match="CRC-32 mismatch") as info:
            r.next()
    assert isinstance(info.value.__cause__, RecordIOError)


def test_the_thread_reads_ahead(file_of, monkeypatch):
    path = file_of(data(1000), max_num_records=10)
    monkeypatch.setattr(bulk_read, "_PIECE", 4 * (20 + 10 * 112))  # pieces of 4 chunks
    r = BatchReader(FileSource(path), 10, SHAPES, DTYPES, prefetch=4)
    r.next()
    pipe = r._pipe
    deadline = time.time() + 5
    ahead = lambda: sum(len(item[2]) for item in list(pipe.queue.queue)  # noqa: E731
                        if item[0] == "items") + r._have - r._pos
    while ahead() < 4 and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    # bounded: the thread stops once `prefetch` batches wait; they come in whole hand-offs
    # (here a piece of the file: 4 batches), and the caller holds the rest of one
    assert 4 <= ahead() <= 4 + 4 and pipe.thread.is_alive()
    t0 = time.perf_counter()
    r.close()
    assert time.perf_counter() - t0 < 2 and not pipe.thread.is_alive()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_no_thread_or_file_leaks(file_of):
    path = file_of(data(500), max_num_records=50)
    gc.collect()
    threads, fds = threading.active_count(), open_fds()
    for i in range(100):  # create, use, close
        r = BatchReader(FileSource(path), 32, SHAPES, DTYPES, shuffle=i % 2 == 0,
                        shuffle_buffer=100, seed=i)
        r.next()
        if i % 3 == 0:
            drain(r)
        r.close()
    # a leak is more threads or descriptors; fewer is something from before that closed
    # meanwhile (a finished child process's pipes)
    assert threading.active_count() <= threads and open_fds() <= fds
    for i in range(100):  # create, use, abandon
        r = BatchReader(FileSource(path), 32, SHAPES, DTYPES, prefetch=1 + i % 3)
        r.next()
        del r
        gc.collect()
    got_threads, got_fds = settles(threads, fds)
    assert got_threads <= threads and got_fds <= fds
    for _ in range(20):  # abandoned inside a reference cycle
        r = BatchReader(FileSource(path), 32, SHAPES, DTYPES)
        r.next()
        r.cycle = r
        del r
    got_threads, got_fds = settles(threads, fds)
    assert got_threads <= threads and got_fds <= fds
