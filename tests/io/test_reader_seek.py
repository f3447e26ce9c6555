"""BatchReader.tell / seek: a reader goes back to any batch it returned since its last
reset and hands out the same batches again (what rewinding a program relies on)."""
import numpy as np
import pytest

from fluid_interactive.errors import EOFException, ReaderError
from fluid_interactive.io import bulk_read, recordio
from fluid_interactive.io.reader import ArraySource, BatchReader, FileSource

SHAPES, DTYPES = [[3], [1]], ["float32", "float32"]


def arrays(n):
    x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
    return x, np.arange(n, dtype=np.float32).reshape(n, 1)


def labels(batch):
    return batch[1][:, 0].tolist()


@pytest.fixture(params=["memory", "file", "file-small-pieces"])
def make(request, tmp_path, monkeypatch):
    """Readers over 50 samples, from memory or from a file (read in many small pieces, so
    going back leaves the batches the reader still holds)."""
    def reader(**kw):
        if request.param == "memory":
            return BatchReader(ArraySource(arrays(50)), 4, SHAPES, DTYPES, prefetch=0, **kw)
        path = str(tmp_path / "data.recordio")
        recordio.write_arrays(path, arrays(50), max_num_records=5)
        if request.param == "file-small-pieces":
            monkeypatch.setattr(bulk_read, "_FIRST_PIECE", 200)
            monkeypatch.setattr(bulk_read, "_PIECE", 300)
        return BatchReader(FileSource(path), 4, SHAPES, DTYPES, **kw)
    return reader


def test_seek_back_returns_the_same_batches(make):
    r = make(epochs=2, shuffle=True, seed=3)
    first = [labels(r.next()) for _ in range(20)]
    assert r.tell() == 20
    for position in (17, 3, 0, 12):
        r.seek(position)
        assert r.tell() == position
        assert [labels(r.next()) for _ in range(20 - position)] == first[position:]
    r.close()


def test_seek_after_end_of_data_and_after_close(make):
    r = make()
    batches = [labels(b) for b in iter(r)]          # 13 batches, the last of 2 samples
    assert len(batches) == 13 and r.tell() == 13
    with pytest.raises(EOFException):
        r.next()
    r.seek(11)
    assert [labels(r.next()), labels(r.next())] == batches[11:]
    with pytest.raises(EOFException):
        r.next()
    r.close()
    r.seek(5)                                       # a closed reader reads again
    assert labels(r.next()) == batches[5]
    r.close()


def test_seek_forward_and_to_where_it_is(make):
    r = make(epochs=None)
    r.seek(30)                                      # into the third epoch
    assert r.tell() == 30 and labels(r.next()) == [16.0, 17.0, 18.0, 19.0]
    r.seek(31)
    assert r.tell() == 31
    r.close()


def test_unread_and_tell_agree():
    r = BatchReader(ArraySource(arrays(10)), 4, SHAPES, DTYPES, prefetch=0)
    r.next()
    r.next()
    r.unread()
    assert r.tell() == 1
    assert labels(r.next()) == [4.0, 5.0, 6.0, 7.0]


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_seek_takes_a_count(bad):
    r = BatchReader(ArraySource(arrays(10)), 4, SHAPES, DTYPES, prefetch=0)
    with pytest.raises(ReaderError, match="batch count"):
        r.seek(bad)


def test_skip_drops_a_batch_that_a_failing_step_gave_back(make):
    """A step that fails gives its batch back (unread); one that fails on every reading of
    that batch would read it for ever: skip() drops it and the next batch follows."""
    r = make()
    r.next()
    bad = labels(r.next())
    for _ in range(3):              # the step fails, gives the batch back, reads it again
        r.unread()
        assert labels(r.next()) == bad
    r.unread()
    r.skip()
    assert r.tell() == 2
    assert labels(r.next()) == [8.0, 9.0, 10.0, 11.0]
    r.skip(2)
    assert labels(r.next()) == [20.0, 21.0, 22.0, 23.0]
    r.seek(1)                       # skipped batches count as read: seek replays them
    assert labels(r.next()) == bad
    with pytest.raises(EOFException):
        r.skip(100)
    with pytest.raises(ReaderError, match="batch count"):
        r.skip(-1)
