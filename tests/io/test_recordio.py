"""The RecordIO format byte for byte, its compressors, and its errors."""
import os
import struct
import zlib

import numpy as np
import pytest

from fluid_interactive.errors import DTypeError, RecordIOError
from fluid_interactive.io import bulk_read, recordio, snappy_stream, tensor_codec
from fluid_interactive.io.reader import BatchReader, FileSource


def chunk(payload: bytes, count: int, compressor: int = 0, crc=None, size=None,
          magic=0x01020304) -> bytes:
    """A chunk built by hand from the notes' table (five little-endian uint32)."""
    crc = zlib.crc32(payload) if crc is None else crc
    size = len(payload) if size is None else size
    return struct.pack("<5I", magic, count, crc, compressor, size) + payload


def records(*bodies: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(b)) + b for b in bodies)


def paddle_tensor(code: int, dims, data: bytes, lod_version=0, lod_levels=0,
                  tensor_version=0) -> bytes:
    """A LoDTensor as Paddle serialised it, spelled out field by field."""
    desc = bytes([0x08, code]) + b"".join(bytes([0x10, d]) for d in dims)  # dims < 128
    return (struct.pack("<IQIi", lod_version, lod_levels, tensor_version, len(desc)) + desc
            + data)


def record(*tensors: bytes) -> bytes:
    return struct.pack("<I", len(tensors)) + b"".join(tensors)


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "data.recordio")


def contents(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return path


def fit_a_line(n, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, 13)).astype(np.float32),
            rng.standard_normal((n, 1)).astype(np.float32))


# ---------------------------------------------------------------- bytes

def test_worked_example_from_the_notes(path):
    assert recordio.write_records(path, [b"abc"]) == 1
    crc = zlib.crc32(bytes.fromhex("03000000616263"))
    expected = (bytes.fromhex("04030201 01000000") + struct.pack("<I", crc)
                + bytes.fromhex("00000000 07000000 03000000 616263"))
    assert contents(path) == expected
    assert list(recordio.read_records(path)) == [b"abc"]


def test_tensor_serialisation_matches_paddle():
    data = tensor_codec.encode_tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert len(data) == 50
    assert data[:26] == bytes.fromhex("00000000 0000000000000000 00000000 06000000 080510021003")
    assert data[26:] == np.arange(6, dtype="<f4").tobytes()
    desc = tensor_codec.encode_tensor_desc(np.dtype("float32"), (-1, 13))
    assert desc == bytes.fromhex("08 05 10 ffffffffffffffffff01 10 0d")
    assert tensor_codec.decode_tensor_desc(desc, 0, len(desc)) == (5, [-1, 13])


def test_fit_a_line_record_layout(path):
    x = np.arange(13, dtype=np.float32)
    y = np.array([7.5], dtype=np.float32)
    recordio.write(path, [(x, y)])
    body = record(paddle_tensor(5, [13], x.tobytes()), paddle_tensor(5, [1], y.tobytes()))
    assert len(body) == 108
    assert contents(path) == chunk(records(body), 1)


@pytest.mark.parametrize("array", [
    np.arange(12, dtype=np.float32).reshape(3, 4), np.arange(5, dtype=np.int64),
    np.array(3.25), np.zeros((2, 0, 3), np.float64), np.array([True, False]),
    np.arange(6, dtype=np.float16), np.array([1 + 2j], np.complex64),
    np.array([1, -2], np.int8), np.array([250], np.uint8), np.array([7], np.int16),
    np.array([1, 2], np.int32), np.array([2 ** 63], np.uint64), np.array([1.5, 2], ">f8"),
    np.arange(12, dtype=np.int32).reshape(3, 4).T,  # not contiguous
])
def test_round_trip_keeps_dtype_shape_and_values(path, array):
    recordio.write(path, [(array, np.float32(1))])
    (got, one), = recordio.read(path)
    assert got.dtype == array.dtype.newbyteorder("=") and got.shape == array.shape
    np.testing.assert_array_equal(got, array)
    assert got.flags.writeable and one.shape == () and one == 1


def test_unsupported_dtypes_are_refused(path):
    for bad in (np.array(["a"]), np.array([1], np.uint16), np.array([None])):
        with pytest.raises(DTypeError):
            recordio.write(path, [(bad,)])
    assert not os.path.exists(path)


@pytest.mark.parametrize("n,per_chunk", [(0, 5), (1, 5), (5, 5), (12, 5), (2500, 1000)])
def test_write_arrays_writes_the_same_bytes_as_write(tmp_path, n, per_chunk):
    x, y = fit_a_line(n)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert recordio.write_arrays(a, (x, y), max_num_records=per_chunk) == n
    assert recordio.write(b, zip(x, y), max_num_records=per_chunk) == n
    assert contents(a) == contents(b)
    counts = [c.num_records for c in recordio.chunk_index(a)]
    assert counts == [per_chunk] * (n // per_chunk) + ([n % per_chunk] if n % per_chunk else [])
    assert recordio.num_records(a) == n


def test_write_arrays_accepts_one_array_and_rejects_mismatched_columns(path):
    assert recordio.write_arrays(path, np.arange(6).reshape(3, 2)) == 3
    assert [s[0].tolist() for s in recordio.read(path)] == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(ValueError, match="number of samples"):
        recordio.write_arrays(path, (np.zeros((3, 1)), np.zeros((4, 1))))


def test_read_chunks_fast_path_gives_strided_columns(path):
    x, y = fit_a_line(2500)
    recordio.write_arrays(path, (x, y))
    chunks = list(recordio.read_chunks(path))
    assert [(c.first_record, c.num_records, c.uniform) for c in chunks] == [
        (0, 1000, True), (1000, 1000, True), (2000, 500, True)]
    cx, cy = chunks[1].columns
    assert cx.shape == (1000, 13) and cy.shape == (1000, 1) and not cx.flags.writeable
    np.testing.assert_array_equal(cx, x[1000:2000])
    np.testing.assert_array_equal(np.concatenate([c.columns[1] for c in chunks]), y)


def test_mixed_layouts_read_as_runs(path):
    samples = [(np.zeros(2),), (np.ones(2),), (np.ones(3, np.int32),), (np.zeros(2),)]
    recordio.write(path, samples)
    (c,) = recordio.read_chunks(path)
    assert [(r.first_record, r.num_records) for r in c.runs] == [(0, 2), (2, 1), (3, 1)]
    with pytest.raises(ValueError, match="mixes record layouts"):
        _ = c.columns
    for got, want in zip(recordio.read(path), samples):
        np.testing.assert_array_equal(got[0], want[0])
        assert got[0].dtype == want[0].dtype


def test_samples_may_be_lists_or_single_arrays(path):
    recordio.write(path, [[np.zeros(1), np.ones(2)], np.arange(3)])
    got = list(recordio.read(path))
    assert [len(s) for s in got] == [2, 1]
    with pytest.raises(TypeError):
        recordio.write(path, [5])


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = str(tmp_path / "d.recordio")
    recordio.write(path, [(np.zeros(1),)])
    before = contents(path)

    def samples():
        yield (np.ones(1),)
        raise RuntimeError("source broke")
    with pytest.raises(RuntimeError):
        recordio.write(path, samples())
    assert contents(path) == before
    assert os.listdir(tmp_path) == ["d.recordio"]


def test_writer_incrementally(path):
    with recordio.Writer(path, max_num_records=2) as w:
        for i in range(3):
            w.append((np.full(2, i, np.int64),))
        w.append_arrays((np.arange(10).reshape(5, 2),))
    assert w.num_records == 8
    assert [c.num_records for c in recordio.chunk_index(path)] == [2, 2, 2, 2]
    got = [s[0].tolist() for s in recordio.read(path)]
    assert got == [[0, 0], [1, 1], [2, 2], [0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]


def test_max_num_records_and_compressor_are_checked(path):
    with pytest.raises(ValueError, match="max_num_records"):
        recordio.write(path, [], max_num_records=0)
    with pytest.raises(ValueError, match="unknown RecordIO compressor"):
        recordio.write(path, [], compressor="lz4")


def test_an_empty_file_holds_no_records(path):
    assert recordio.write(path, []) == 0
    assert os.path.getsize(path) == 0 and list(recordio.read(path)) == []


# ---------------------------------------------------------------- compressors

def test_gzip_writes_a_zlib_stream_and_zlib_is_the_same(tmp_path):
    x, y = fit_a_line(30)
    files = {}
    for name in ("none", "gzip", "zlib", 2):
        files[name] = str(tmp_path / f"{name}.recordio")
        recordio.write_arrays(files[name], (x, y), compressor=name, max_num_records=10)
    gz = contents(files["gzip"])
    assert gz == contents(files["zlib"]) == contents(files[2])
    raw_chunks = recordio.chunk_index(files["none"])
    for info, raw in zip(recordio.chunk_index(files["gzip"]), raw_chunks):
        assert info.compressor == 2
        stored = gz[info.offset + 20:info.end]
        assert stored[:2] == b"\x78\x9c"  # RFC 1950 header, default compression level
        plain = contents(files["none"])[raw.offset + 20:raw.end]
        assert zlib.decompress(stored) == plain
        assert struct.unpack(">I", stored[-4:])[0] == zlib.adler32(plain)
    for got, want in zip(recordio.read(files["gzip"]), zip(x, y)):
        np.testing.assert_array_equal(got[0], want[0])


def test_gzip_framed_chunks_read_too(path):
    payload = records(record(paddle_tensor(5, [2], np.ones(2, np.float32).tobytes())))
    c = zlib.compressobj(wbits=31)  # an RFC 1952 gzip member
    stored = c.compress(payload) + c.flush()
    assert stored[:2] == b"\x1f\x8b"
    write_bytes(path, chunk(stored, 1, compressor=2))
    (got,), = recordio.read(path)
    np.testing.assert_array_equal(got, np.ones(2))


class ZlibAsBlockCodec:
    """Stands in for snappy to exercise the stream framing (which is codec-agnostic)."""
    compress = staticmethod(zlib.compress)
    decompress = staticmethod(zlib.decompress)


def test_crc32c_known_values():
    assert snappy_stream.crc32c(b"123456789") == 0xE3069283
    assert snappy_stream.crc32c(bytes(32)) == 0x8A9136AA
    rng = np.random.default_rng(5)
    for n in (0, 1, 127, 2047, 2048, 2049, 4096 + 77, 1 << 15):  # NumPy lanes vs bytewise
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert snappy_stream.crc32c(data) == snappy_stream._advance(0xFFFFFFFF, data) ^ (
            0xFFFFFFFF)
    crc = snappy_stream.crc32c(b"abc")
    assert snappy_stream.masked_crc32c(b"abc") == (
        ((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_snappy_stream_framing():
    data = bytes(1 << 15) + os.urandom(5000)
    stream = snappy_stream.compress(data, ZlibAsBlockCodec)
    assert stream[:7] == b"snappy\x00"
    flag, length, crc = struct.unpack(">BHI", stream[7:14])
    block = data[:1 << 15]
    assert flag == 1 and crc == snappy_stream.masked_crc32c(block)
    assert zlib.decompress(stream[14:14 + length]) == block
    second = 14 + length
    flag2, length2, _ = struct.unpack(">BHI", stream[second:second + 7])
    assert flag2 == 0 and length2 == len(data) - (1 << 15)  # random bytes: stored raw
    assert stream[second + 7:] == data[1 << 15:]
    assert snappy_stream.decompress(stream, ZlibAsBlockCodec) == data
    bad = bytearray(stream)
    bad[-1] ^= 1
    with pytest.raises(snappy_stream.SnappyStreamError, match="checksum"):
        snappy_stream.decompress(bytes(bad), ZlibAsBlockCodec)


def test_snappy_chunks_with_a_codec(path, monkeypatch):
    monkeypatch.setattr(recordio, "_snappy_module", lambda: ZlibAsBlockCodec)
    x, y = fit_a_line(50)
    recordio.write_arrays(path, (x, y), compressor="snappy", max_num_records=20)
    infos = recordio.chunk_index(path)
    assert [i.compressor for i in infos] == [1, 1, 1]
    assert contents(path)[20:27] == b"snappy\x00"
    got = list(recordio.read(path))
    np.testing.assert_array_equal(np.stack([g[0] for g in got]), x)


def test_snappy_without_python_snappy_is_a_clear_error(path, monkeypatch):
    monkeypatch.setattr(recordio, "_snappy_module", lambda: ZlibAsBlockCodec)
    recordio.write(path, [(np.zeros(1000),)], compressor="snappy")
    monkeypatch.setattr(recordio, "_snappy_module", lambda: None)
    with pytest.raises(ImportError, match="python-snappy"):
        recordio.write(path + "2", [(np.zeros(1),)], compressor="snappy")
    with pytest.raises(RecordIOError, match="python-snappy") as info:
        list(recordio.read(path))
    assert info.value.path == path and info.value.offset == 0


def test_real_snappy_round_trip(path):
    snappy = pytest.importorskip("snappy")
    x, y = fit_a_line(3000)
    x[:, :6] = 0  # compressible
    recordio.write_arrays(path, (x, y), compressor="snappy")
    for info in recordio.chunk_index(path):
        stored = contents(path)[info.offset + 20:info.end]
        flag, length, _ = struct.unpack(">BHI", stored[7:14])
        assert flag == 1 and len(snappy.decompress(stored[14:14 + length])) == 1 << 15
    got = list(recordio.read(path))
    np.testing.assert_array_equal(np.stack([g[0] for g in got]), x)


# ---------------------------------------------------------------- Paddle-written files

def paddle_file(path, n):
    """What Paddle's convert_reader_to_recordio_file wrote for fit_a_line with batch size 1:
    every tensor carries a leading batch dim of 1."""
    x, y = fit_a_line(n, seed=3)
    bodies = [record(paddle_tensor(5, [1, 13], x[i].tobytes()),
                     paddle_tensor(5, [1, 1], y[i].tobytes())) for i in range(n)]
    data = b""
    for start in range(0, n, 4):  # max_num_records=4
        part = bodies[start:start + 4]
        data += chunk(records(*part), len(part))
    write_bytes(path, data)
    return x, y


def test_paddle_files_read_as_stored_and_batch_without_the_leading_one(path):
    x, y = paddle_file(path, 10)
    got = list(recordio.read(path))
    assert got[0][0].shape == (1, 13) and got[0][1].shape == (1, 1)
    np.testing.assert_array_equal(np.concatenate([g[0] for g in got]), x)
    with BatchReader(FileSource(path), 4, [[13], [1]], ["float32", "float32"]) as r:
        batches = list(r)
    assert [b[0].shape for b in batches] == [(4, 13), (4, 13), (2, 13)]
    assert [b[1].shape for b in batches] == [(4, 1), (4, 1), (2, 1)]
    np.testing.assert_array_equal(np.concatenate([b[0] for b in batches]), x)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), y)
    with BatchReader(FileSource(path), 4, [[1, 13], [1, 1]], ["float32", "float32"]) as r:
        assert r.next()[0].shape == (4, 1, 13)  # declared with the 1: kept


# ---------------------------------------------------------------- malformed files

GOOD = record(paddle_tensor(5, [2], np.ones(2, np.float32).tobytes()))


def bad(path, data):
    write_bytes(path, data)
    with pytest.raises(RecordIOError) as info:
        list(recordio.read(path))
    assert path in str(info.value) and info.value.path == path
    assert same_error(outcome(bulk_read.read_columns, path), info.value)
    return info.value


def outcome(reader, path):
    """The records a reader gives (chunks or runs flattened to per-slot columns), or the
    RecordIOError it raises."""
    try:
        runs = [r for c in recordio.read_chunks(path) for r in c.runs] if reader is None \
            else list(reader(path))
    except RecordIOError as exc:
        return exc
    slots = {len(r.columns) for r in runs}
    return [(r.first_record, r.num_records,
             tuple((c.dtype.newbyteorder("="), c.shape, c.tobytes()) for c in r.columns))
            for r in runs], slots


def same_error(a, b) -> bool:
    return (isinstance(a, RecordIOError) and str(a) == str(b) and a.offset == b.offset
            and a.payload_offset == b.payload_offset)


def records_of(result):
    """Per-record bytes of each slot, whatever the runs: runs of read_columns span chunks."""
    runs, _ = result
    out = []
    for _, n, cols in runs:
        for i in range(n):
            out.append(tuple((dt, shape[1:], raw[i * len(raw) // n:(i + 1) * len(raw) // n])
                             for dt, shape, raw in cols))
    return out


def assert_same_outcome(path):
    """read_columns gives exactly the records, or exactly the error, of read_chunks."""
    want, got = outcome(None, path), outcome(bulk_read.read_columns, path)
    if isinstance(want, RecordIOError):
        assert same_error(got, want), (got, want)
    else:
        assert not isinstance(got, RecordIOError), got
        assert records_of(got) == records_of(want)


@pytest.fixture
def small_pieces(monkeypatch):
    """Read files a few KB at a time (chunks cross the ends of pieces), every CRC on the
    helper thread."""
    monkeypatch.setattr(bulk_read, "_FIRST_PIECE", 3000)
    monkeypatch.setattr(bulk_read, "_PIECE", 7000)
    monkeypatch.setattr(bulk_read, "_HELP_BYTES", 0)


def test_crc_skip_combines_like_zlib():
    rng = np.random.default_rng(5)
    for n in [0, 1, 3, 20, 1000, 112000]:
        t0, t1, t2, t3 = bulk_read._crc_skip(n)
        for _ in range(5):
            a, b = rng.bytes(int(rng.integers(0, 300))), rng.bytes(n)
            c = zlib.crc32(a)
            skipped = t0[c & 255] ^ t1[c >> 8 & 255] ^ t2[c >> 16 & 255] ^ t3[c >> 24]
            assert zlib.crc32(a + b) == skipped ^ zlib.crc32(b)


def test_read_columns_gives_fresh_runs_across_chunks(path):
    x, y = fit_a_line(2500)
    recordio.write_arrays(path, (x, y))
    runs = list(bulk_read.read_columns(path))
    assert [(r.first_record, r.num_records) for r in runs] == [(0, 2000), (2000, 500)]
    for r in runs:
        assert all(c.flags.c_contiguous and c.flags.writeable and c.flags.owndata
                   for c in r.columns)
    np.testing.assert_array_equal(np.concatenate([r.columns[0] for r in runs]), x)
    np.testing.assert_array_equal(np.concatenate([r.columns[1] for r in runs]), y)
    recordio.write_arrays(path, (x, y), max_num_records=100)  # CRCs checked together
    assert [(r.first_record, r.num_records) for r in bulk_read.read_columns(path)] == [
        (0, 2500)]


@pytest.mark.parametrize("per_chunk", [1, 3, 10, 64])
def test_read_columns_matches_read_chunks(tmp_path, small_pieces, per_chunk):
    path = str(tmp_path / "many.recordio")
    x, y = fit_a_line(700)
    recordio.write_arrays(path, (x, y), max_num_records=per_chunk)
    assert_same_outcome(path)
    # layouts that change between chunks and inside them, and compressed chunks
    with recordio.Writer(path, max_num_records=per_chunk) as w:
        for i in range(300):
            w.append((x[i],) if i % 97 < 50 else (x[i, :5].astype(np.float64), y[i]))
    assert_same_outcome(path)
    recordio.write_arrays(path, (x, y), compressor="gzip", max_num_records=per_chunk)
    assert_same_outcome(path)


@pytest.mark.parametrize("per_chunk", [4, 1000])
def test_layouts_of_one_length_are_told_apart(tmp_path, small_pieces, per_chunk):
    """float32 and int32 records of one shape differ in one header byte (the dtype code):
    any such byte, in any record of a run, splits the run."""
    path = str(tmp_path / "same-length.recordio")
    x, _ = fit_a_line(60)
    kinds = [np.int32 if i in (1, 17, 18, 40, 59) else np.float32 for i in range(60)]
    recordio.write(path, [(x[i].view(k),) for i, k in enumerate(kinds)],
                   max_num_records=per_chunk)
    assert [s[0].dtype for s in recordio.read(path)] == [np.dtype(k) for k in kinds]
    got = [c.dtype for r in bulk_read.read_columns(path) for c in r.columns
           for _ in range(len(c))]
    assert got == [np.dtype(k) for k in kinds]
    assert_same_outcome(path)


def test_read_columns_matches_read_chunks_on_damaged_files(tmp_path, small_pieces):
    """Random flips, cuts, insertions and deletions: the same records or the same error
    (message and byte offset) as the chunk-by-chunk reader, with runs of many chunks (their
    CRCs checked together) and of few."""
    path = str(tmp_path / "damaged.recordio")
    rng = np.random.default_rng(11)
    x, y = fit_a_line(400)
    for case in range(300):
        n, per_chunk = 200 + case % 200, int(rng.choice([1, 2, 5, 40]))
        recordio.write_arrays(path, (x[:n], y[:n]), max_num_records=per_chunk)
        data = bytearray(contents(path))
        kind = case % 4
        if kind == 0:  # flip up to three bytes
            for _ in range(int(rng.integers(1, 4))):
                data[int(rng.integers(len(data)))] ^= int(rng.integers(1, 256))
        elif kind == 1:
            data = data[:int(rng.integers(len(data)))]
        elif kind == 2:
            at = int(rng.integers(len(data) + 1))
            data[at:at] = rng.bytes(int(rng.integers(1, 40)))
        else:
            at = int(rng.integers(len(data)))
            del data[at:at + int(rng.integers(1, 200))]
        write_bytes(path, bytes(data))
        assert_same_outcome(path)


def test_truncated_header(path):
    err = bad(path, chunk(records(GOOD), 1) + chunk(records(GOOD), 1)[:11])
    assert err.offset == 20 + 4 + len(GOOD) and "truncated chunk header" in str(err)
    assert f"byte {err.offset}" in str(err)


def test_wrong_magic(path):
    err = bad(path, chunk(records(GOOD), 1, magic=0x04030201))
    assert err.offset == 0 and "magic" in str(err)


def test_crc_mismatch(path):
    err = bad(path, chunk(records(GOOD), 1, crc=12345))
    assert err.offset == 8 and "CRC-32 mismatch" in str(err)


def test_unknown_compressor(path):
    err = bad(path, chunk(records(GOOD), 1, compressor=3))
    assert err.offset == 12 and "compressor id 3" in str(err)


def test_stored_size_past_the_end(path):
    err = bad(path, chunk(records(GOOD), 1, size=1000))
    assert err.offset == 16 and "past the end" in str(err)


def test_empty_chunk(path):
    err = bad(path, chunk(b"", 0))
    assert err.offset == 4 and "0 records" in str(err)


def test_record_shorter_than_its_length_prefix(path):
    payload = struct.pack("<I", len(GOOD) + 5) + GOOD
    err = bad(path, chunk(payload, 1))
    assert err.offset == 20 and "longer than" in str(err)


def test_record_count_disagrees_with_the_header(path):
    err = bad(path, chunk(records(GOOD, GOOD), 1))
    assert "follow the chunk's 1 declared records" in str(err)
    assert err.offset == 20 + 4 + len(GOOD)
    err = bad(path, chunk(records(GOOD), 2))
    assert "record 1 of 2" in str(err)


def test_tensor_bytes_disagree_with_the_shape(path):
    short = record(paddle_tensor(5, [3], np.ones(2, np.float32).tobytes()))
    err = bad(path, chunk(records(short), 1))
    assert "needs 12 data bytes, only 8 remain" in str(err)
    data_at = 20 + 4 + 4 + 20 + 4  # prefix, count, tensor header, desc 08 05 10 03
    assert err.offset == data_at
    long = record(paddle_tensor(5, [1], np.ones(2, np.float32).tobytes()))
    err = bad(path, chunk(records(long), 1))
    assert "4 bytes after its 1 tensor(s)" in str(err)


@pytest.mark.parametrize("code,name", [(22, "BF16"), (7, "unknown"), (99, "unknown")])
def test_unsupported_dtype_code(path, code, name):
    body = record(paddle_tensor(code, [2], bytes(4)))
    err = bad(path, chunk(records(body), 1))
    assert f"unsupported dtype code {code} ({name})" in str(err)
    assert err.offset == 20 + 4 + 4 + 20  # the TensorDesc


@pytest.mark.parametrize("field,kwargs,at", [
    ("LoDTensor version 1", {"lod_version": 1}, 0),
    ("1 LoD level", {"lod_levels": 1}, 4),
    ("Tensor version 2", {"tensor_version": 2}, 12),
])
def test_versions_and_lod(path, field, kwargs, at):
    body = record(paddle_tensor(5, [1], bytes(4), **kwargs))
    err = bad(path, chunk(records(body), 1))
    assert field in str(err) and err.offset == 20 + 4 + 4 + at


def test_errors_inside_compressed_chunks_name_the_payload_offset(path):
    short = record(paddle_tensor(5, [3], np.ones(2, np.float32).tobytes()))
    err = bad(path, chunk(records(GOOD), 1) + chunk(zlib.compress(records(short)), 1, 2))
    first_end = 20 + 4 + len(GOOD)
    assert err.offset == first_end and err.payload_offset == 4 + 4 + 20 + 4
    assert f"chunk at byte {first_end} (gzip), byte {err.payload_offset}" in str(err)


def test_corrupt_gzip_payload(path):
    stored = zlib.compress(records(GOOD))
    err = bad(path, chunk(stored[:-3], 1, compressor=2))
    assert "truncated" in str(err)
    err = bad(path, chunk(stored + b"xx", 1, compressor=2))
    assert "extra bytes" in str(err)
    err = bad(path, chunk(records(GOOD), 1, compressor=2))
    assert "does not decompress" in str(err)


def test_bad_snappy_stream(path):
    err = bad(path, chunk(records(GOOD), 1, compressor=1))
    assert "snappy stream magic" in str(err)
