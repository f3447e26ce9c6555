"""A file that fits the cache budget is decoded once: later epochs (and passes after a
reset) come from memory, with the same batches; files that change are read again; data
over the budget is never kept; a caller writing into a batch never changes the cache."""
import os

import numpy as np
import pytest

from fluid_interactive.errors import ReaderError
from fluid_interactive.io import recordio
from fluid_interactive.io import sources as sources_module
from fluid_interactive.io.reader import BatchReader, FileSource

from .test_reader import DTYPES, SHAPES, assert_batches_equal, data, drain, reference


@pytest.fixture
def reads(monkeypatch):
    """How many passes over a file were decoded."""
    count = [0]
    real = sources_module.read_columns

    def counting(path, *a, **k):
        count[0] += 1
        return real(path, *a, **k)
    monkeypatch.setattr(sources_module, "read_columns", counting)   # FileSource reads
    return count


def _file(tmp_path, arrays, name="d.recordio"):
    path = str(tmp_path / name)
    recordio.write_arrays(path, arrays, max_num_records=50)
    return path


@pytest.mark.parametrize("prefetch", [0, 8])
def test_later_epochs_come_from_memory(tmp_path, reads, prefetch):
    arrays = data(1000)
    path = _file(tmp_path, arrays)
    with BatchReader(FileSource(path), 64, SHAPES, DTYPES, epochs=3, prefetch=prefetch) as r:
        got = drain(r)
    assert_batches_equal(got, reference(arrays, 64) * 3)
    assert reads[0] == 1


def test_reset_keeps_the_cache_until_the_file_changes(tmp_path, reads):
    arrays = data(500)
    path = _file(tmp_path, arrays)
    r = BatchReader(FileSource(path), 100, SHAPES, DTYPES, epochs=1, prefetch=0)
    drain(r)
    r.reset()
    assert_batches_equal(drain(r), reference(arrays, 100))
    assert reads[0] == 1
    new = data(300, seed=5)
    recordio.write_arrays(path, new)
    os.utime(path, ns=(1, 1))          # a different modification time, whatever the clock
    r.reset()
    assert_batches_equal(drain(r), reference(new, 100))
    assert reads[0] == 2
    r.close()


def test_data_over_the_budget_is_read_every_epoch(tmp_path, reads):
    arrays = data(1000)
    path = _file(tmp_path, arrays)
    with BatchReader(FileSource(path), 64, SHAPES, DTYPES, epochs=3, prefetch=0,
                     cache_bytes=10_000) as r:
        assert_batches_equal(drain(r), reference(arrays, 64) * 3)
    assert reads[0] == 3
    with BatchReader(FileSource(path), 64, SHAPES, DTYPES, epochs=2, prefetch=0,
                     cache_bytes=0) as r:
        drain(r)
    assert reads[0] == 5


@pytest.mark.parametrize("prefetch", [0, 4])
def test_writing_into_a_batch_leaves_later_epochs_alone(tmp_path, prefetch):
    arrays = data(200)
    path = _file(tmp_path, arrays)
    with BatchReader(FileSource(path), 50, SHAPES, DTYPES, epochs=3,
                     prefetch=prefetch) as r:
        got = []
        for batch in r:
            got.append(tuple(a.copy() for a in batch))
            assert all(a.flags.writeable and a.flags.c_contiguous for a in batch)
            batch[0][...] = -1
    assert_batches_equal(got, reference(arrays, 50) * 3)


def test_take_hands_out_read_only_views_of_the_cache(tmp_path):
    arrays = data(200)
    path = _file(tmp_path, arrays)
    with BatchReader(FileSource(path), 50, SHAPES, DTYPES, epochs=2, prefetch=0) as r:
        views = [r.take() for _ in range(8)]
    for batch in views:
        with pytest.raises(ValueError, match="read-only"):
            batch[0][...] = -1
    # the second epoch's batches are the very memory of the first's: nothing was copied
    assert all(np.shares_memory(a, b) for i in range(4) for a, b in zip(views[i],
                                                                         views[i + 4]))
    assert_batches_equal(views, reference(arrays, 50) * 2)


def test_shuffled_epochs_are_the_same_with_and_without_the_cache(tmp_path):
    arrays = data(700)
    path = _file(tmp_path, arrays)

    def run(budget):
        with BatchReader(FileSource(path), 32, SHAPES, DTYPES, epochs=3, shuffle=True,
                         shuffle_buffer=200, seed=7, prefetch=0, cache_bytes=budget) as r:
            return drain(r)
    assert_batches_equal(run(None), run(0))


def test_bad_budget_is_a_clear_error(tmp_path):
    path = _file(tmp_path, data(10))
    with pytest.raises(ReaderError, match="cache_bytes"):
        BatchReader(FileSource(path), 4, SHAPES, DTYPES, cache_bytes=-1)


def test_training_over_cached_epochs_equals_decoding_every_epoch(tmp_path, monkeypatch, reads):
    """A compiled method takes the cache's read-only views (no copy): its kernels read
    them and never write into them, and three epochs train exactly as with no cache."""
    import fluid
    from fluid_interactive.io import cache

    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 13)).astype(np.float32)
    y = (x.sum(axis=1, keepdims=True) * 0.5).astype(np.float32)
    path = str(tmp_path / "fit.recordio")
    recordio.write_arrays(path, (x, y))

    class Fit(fluid.Program):
        @fluid.network()
        def train_step(self):
            reader = fluid.batch_reader(file=path, batch_size=64, shape=[[13], [1]],
                                        dtype=["float32", "float32"], epochs=3)
            xb, yb = reader.next_item()
            pred = fluid.layers.fc(input=xb, size=1, act="relu")
            cost = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=yb))
            fluid.optimizer.SGD(learning_rate=0.01).minimize(cost)
            return cost

    def losses():
        prog = Fit().Compile(seed=0)
        out = []
        while True:
            try:
                out.append(prog.train_step())
            except fluid.EOFException:
                return out, prog.parameters()

    cached, cached_params = losses()
    assert reads[0] == 1            # decoded once, two epochs from memory
    monkeypatch.setattr(cache, "DEFAULT_BUDGET", 0)
    decoded, decoded_params = losses()
    assert reads[0] == 1 + 3
    assert len(cached) == 15 and cached == decoded
    assert all(np.array_equal(cached_params[k], decoded_params[k]) for k in cached_params)
