"""Paddle Fluid's RecordIO format: chunks of length-prefixed records, each record one
sample as serialized tensors.

A file is a plain sequence of chunks (there is no file header). A chunk is a 20-byte
header of five little-endian uint32 ::

    magic 0x01020304 | num_records | CRC-32 of the stored payload | compressor | stored size

then the stored payload: the records, each ``uint32 length`` + bytes, compressed as a
whole by the chunk's compressor (0 none, 1 snappy, 2 gzip; see `COMPRESSORS`). A record
holds one sample: ``uint32 tensor count`` + LoDTensor serialisations (`tensor_codec`).

Writing: `write` (any iterable of samples), `write_arrays` (columns with a leading sample
dim), `Writer` (incremental), `write_records` (raw record bytes). Reading: `read`
(samples), `read_chunks` (whole chunks as NumPy views), `read_records` (raw bytes),
`chunk_index` (headers only); `bulk_read.read_columns` gives runs of many chunks as fresh
NumPy columns (the fastest, what `BatchReader` uses). Every malformed byte raises
`RecordIOError` naming the file and the byte offset. See docs/recordio.md.
"""
from __future__ import annotations

import functools
import os
import stat
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple

import numpy as np

from ..errors import RecordIOError
from . import snappy_stream
from .tensor_codec import (
    RecordLayout,
    TensorFormatError,
    encode_record,
    little_endian,
    parse_record,
    tensor_header,
)

__all__ = ["write", "write_arrays", "write_records", "Writer", "read", "read_chunks",
           "read_records", "chunk_index", "num_records", "Chunk", "Run", "ChunkInfo",
           "COMPRESSORS", "MAGIC", "MAX_CHUNK_PAYLOAD"]

MAGIC = 0x01020304
HEADER = struct.Struct("<5I")
_U32 = struct.Struct("<I")
_U32_MAX = 0xFFFFFFFF

#: compressor ids as Paddle numbered them; 'zlib' is an alias of 'gzip' (same bytes).
COMPRESSORS = {"none": 0, "snappy": 1, "gzip": 2}
_ALIASES = {"zlib": "gzip", "nocompress": "none", "no_compress": "none"}
_NAMES = {v: k for k, v in COMPRESSORS.items()}
_ZLIB_LEVEL = 6
_ZLIB_OR_GZIP = 32 + 15  # wbits for zlib.decompressobj: accept an RFC 1950 or 1952 header
_DEFLATE_MAX_RATIO = 1032  # deflate's largest possible expansion of stored bytes

#: The largest decompressed payload one chunk may have (bytes). The format declares no
#: decompressed size, so this bounds the memory a hostile file can make a reader take
#: (about twice this while inflating); `Writer` keeps its chunks at a quarter of it.
#: Raise it to read files with larger compressed chunks.
MAX_CHUNK_PAYLOAD = 256 << 20
_CHUNK_BYTES = 64 << 20  # `Writer` starts a new chunk before its payload passes this


def _compressor_id(compressor: Any) -> int:
    if compressor is None:
        return 0
    if isinstance(compressor, (int, np.integer)) and int(compressor) in _NAMES:
        return int(compressor)
    if isinstance(compressor, str):
        name = compressor.lower()
        name = _ALIASES.get(name, name)
        if name in COMPRESSORS:
            return COMPRESSORS[name]
    raise ValueError(f"unknown RecordIO compressor {compressor!r}; use one of "
                     f"{sorted(COMPRESSORS) + sorted(_ALIASES)} or an id {sorted(_NAMES)}")


def open_regular(path: str, buffering: int = -1) -> BinaryIO:
    """``path`` opened for reading, refusing anything but a regular file: a named pipe
    would block the reader for ever waiting for a writer, a device could stream without
    end. The open itself never blocks."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a named pipe" if stat.S_ISFIFO(mode) else (
                "a directory" if stat.S_ISDIR(mode) else "not a regular file")
            raise RecordIOError(f"{path} is {kind}; RecordIO is read from regular files only")
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def _snappy_module():
    """The optional python-snappy module, or None when it does not import."""
    try:
        import snappy
    except ImportError:
        return None
    return snappy


_SNAPPY_HINT = "install the optional python-snappy package (pip install python-snappy)"


def _compress(payload: bytes, compressor_id: int) -> bytes:
    if compressor_id == 0:
        return payload
    if compressor_id == 2:
        return zlib.compress(payload, _ZLIB_LEVEL)
    codec = _snappy_module()
    if codec is None:
        raise ImportError(f"writing snappy-compressed RecordIO needs python-snappy: "
                          f"{_SNAPPY_HINT}, or use compressor='gzip' or 'none'")
    return snappy_stream.compress(payload, codec)


# ================================================================ writing

class Writer:
    """Writes records into chunks of at most ``max_num_records``, as Paddle's writer did.

    The file appears under ``path`` only when the writer closes without an error (it is
    written beside it and renamed), so a failed conversion never leaves a truncated file.
    Use as a context manager, or call `close`.
    """

    def __init__(self, path: str | os.PathLike, compressor: Any = "none",
                 max_num_records: int = 1000):
        if not isinstance(max_num_records, (int, np.integer)) or max_num_records < 1:
            raise ValueError(f"max_num_records must be a positive int, got {max_num_records!r}")
        self.path = os.fspath(path)
        self.compressor = _compressor_id(compressor)
        if self.compressor == 1 and _snappy_module() is None:
            raise ImportError(f"compressor='snappy' needs python-snappy: {_SNAPPY_HINT}")
        self.max_num_records = int(max_num_records)
        self.num_records = 0
        self._tmp = f"{self.path}.tmp-{os.getpid()}-{id(self):x}"
        self._file: BinaryIO | None = open(self._tmp, "wb")  # noqa: SIM115 (closed by close())
        self._pending: list[bytes] = []
        self._pending_bytes = 0

    def append_record(self, record: bytes) -> None:
        """Append one record's raw bytes."""
        if len(record) > _U32_MAX - 4:
            raise ValueError(f"a RecordIO record holds at most 4 GiB, got {len(record)} bytes")
        if self._pending_bytes + 4 + len(record) > _CHUNK_BYTES:
            self._flush()
        self._pending += [_U32.pack(len(record)), record]
        self._pending_bytes += 4 + len(record)
        if len(self._pending) // 2 >= self.max_num_records:
            self._flush()

    def append(self, sample: Any) -> None:
        """Append one sample: a tuple (or list) of arrays, or a single array."""
        self.append_record(encode_record(_sample_tuple(sample)))

    def append_arrays(self, arrays: Any) -> int:
        """Append every sample of columns sharing a leading sample dim (vectorised: whole
        chunks are assembled with NumPy). Returns the number of samples."""
        columns = _columns(arrays)
        n = len(columns[0])
        i = 0
        if self._pending and n:  # top up the open chunk record by record
            while i < n and self._pending:
                self.append(tuple(c[i] for c in columns))
                i += 1
        table = _RowTable(columns)
        per_chunk = max(1, min(self.max_num_records, _CHUNK_BYTES // table.row_bytes))
        for start in range(i, n, per_chunk):
            stop = min(n, start + per_chunk)
            if stop - start < self.max_num_records:  # a tail: leave the chunk open
                for j in range(start, stop):
                    self.append(tuple(c[j] for c in columns))
            else:
                self._emit(table.payload(start, stop), stop - start)
        return n

    def _flush(self) -> None:
        if self._pending:
            count = len(self._pending) // 2
            payload = b"".join(self._pending)
            self._pending, self._pending_bytes = [], 0
            self._emit(payload, count)

    def _emit(self, payload, count: int) -> None:
        assert self._file is not None, "writer is closed"
        stored = _compress(bytes(payload) if self.compressor else payload, self.compressor)
        if len(stored) > _U32_MAX:
            raise ValueError("a compressed RecordIO chunk exceeds 4 GiB; lower max_num_records")
        self._file.write(HEADER.pack(MAGIC, count, zlib.crc32(stored), self.compressor,
                                     len(stored)))
        self._file.write(stored)
        self.num_records += count

    def close(self) -> None:
        """Flush the last chunk and move the file into place. Idempotent."""
        if self._file is None:
            return
        try:
            self._flush()
            self._file.close()
        except BaseException:
            self.abort()
            raise
        self._file = None
        os.replace(self._tmp, self.path)

    def abort(self) -> None:
        """Discard everything written; ``path`` is left as it was."""
        if self._file is not None:
            self._file.close()
            self._file = None
            try:
                os.remove(self._tmp)
            except FileNotFoundError:
                pass

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        try:
            self.abort()
        except Exception:
            pass


def _sample_tuple(sample: Any) -> tuple[np.ndarray, ...]:
    if isinstance(sample, np.ndarray):
        return (sample,)
    if not isinstance(sample, (tuple, list)):
        raise TypeError(f"a sample is a tuple of arrays (one per slot), got "
                        f"{type(sample).__name__}")
    if not sample:
        raise ValueError("a sample needs at least one array")
    return tuple(np.asarray(a) for a in sample)


def _columns(arrays: Any) -> tuple[np.ndarray, ...]:
    columns = (np.asarray(arrays),) if isinstance(arrays, np.ndarray) else tuple(
        np.asarray(a) for a in arrays)
    if not columns:
        raise ValueError("write_arrays needs at least one array")
    for c in columns:
        if c.ndim == 0:
            raise ValueError("each array needs a leading sample dimension; got a scalar")
    lengths = {len(c) for c in columns}
    if len(lengths) != 1:
        raise ValueError(f"arrays disagree on the number of samples (leading dim): "
                         f"{[c.shape for c in columns]}")
    return columns


class _RowTable:
    """Builds chunk payloads for samples that share one layout: an (n, row_bytes) uint8
    table whose header columns are a broadcast template and whose data columns are the
    arrays' bytes. Produces exactly the bytes `encode_record` would, per record."""

    def __init__(self, columns: tuple[np.ndarray, ...]):
        self.columns = [np.ascontiguousarray(c, dtype=little_endian(c.dtype)) for c in columns]
        parts, self.slots = [_U32.pack(len(columns))], []
        offset = 4 + 4  # length prefix + tensor count
        for c in self.columns:
            head = tensor_header(c.dtype, c.shape[1:])
            parts.append(head)
            offset += len(head)
            nbytes = c.dtype.itemsize * int(np.prod(c.shape[1:], dtype=np.int64))
            self.slots.append((offset, nbytes))
            parts.append(b"\0" * nbytes)
            offset += nbytes
        record = b"".join(parts)
        self.row_bytes = 4 + len(record)
        self.template = np.frombuffer(_U32.pack(len(record)) + record, dtype=np.uint8)

    def payload(self, start: int, stop: int) -> memoryview:
        rows = np.empty((stop - start, self.row_bytes), dtype=np.uint8)
        rows[:] = self.template
        for (offset, nbytes), c in zip(self.slots, self.columns):
            if nbytes:
                rows[:, offset:offset + nbytes] = c[start:stop].reshape(stop - start, -1).view(
                    np.uint8)
        return rows.data.cast("B")


def write_records(path: str | os.PathLike, records: Iterable[bytes], compressor: Any = "none",
                  max_num_records: int = 1000) -> int:
    """Write raw record bytes; returns the number of records."""
    with Writer(path, compressor, max_num_records) as w:
        for record in records:
            w.append_record(bytes(record))
    return w.num_records


def write(path: str | os.PathLike, samples: Iterable[Any], compressor: Any = "none",
          max_num_records: int = 1000) -> int:
    """Write one record per sample (a tuple of arrays: one per slot) and return how many.

    ``compressor``: 'none' (0), 'snappy' (1, needs python-snappy) or 'gzip' (2; 'zlib' is
    the same). Chunks hold ``max_num_records`` records; the last may hold fewer.
    """
    with Writer(path, compressor, max_num_records) as w:
        for sample in samples:
            w.append(sample)
    return w.num_records


def write_arrays(path: str | os.PathLike, arrays: Any, compressor: Any = "none",
                 max_num_records: int = 1000) -> int:
    """Write ``(X, Y, ...)`` (arrays sharing a leading sample dim; a single array is one
    slot) as one record per sample: record i holds ``(X[i], Y[i], ...)``. Same bytes as
    `write` over those samples, assembled chunk by chunk with NumPy."""
    with Writer(path, compressor, max_num_records) as w:
        w.append_arrays(arrays)
    return w.num_records


# ================================================================ reading

class ChunkInfo(NamedTuple):
    offset: int          # byte offset of the chunk header in the file
    num_records: int
    checksum: int
    compressor: int
    stored_size: int

    @property
    def end(self) -> int:
        return self.offset + HEADER.size + self.stored_size


class Run(NamedTuple):
    """Consecutive records of one chunk that share a layout, as columns: one array per
    tensor, shaped ``(num_records, *tensor shape)``."""
    first_record: int
    num_records: int
    columns: tuple[np.ndarray, ...]


@dataclass(frozen=True, eq=False)
class Chunk:
    """One decoded chunk. ``runs`` cover its records in order; when every record shares
    one layout (the usual case) there is a single run and `columns` gives it. Column
    arrays are read-only, strided views over the chunk's payload: copy what you keep."""
    path: str
    offset: int
    first_record: int
    num_records: int
    compressor: int
    runs: tuple[Run, ...]

    @property
    def uniform(self) -> bool:
        return len(self.runs) == 1

    @property
    def columns(self) -> tuple[np.ndarray, ...]:
        if not self.uniform:
            raise ValueError(f"{self.path}: chunk at byte {self.offset} mixes record layouts "
                             f"({len(self.runs)} runs); iterate chunk.runs")
        return self.runs[0].columns


class _Where:
    """Error context inside one chunk: turns payload offsets into file offsets."""

    def __init__(self, path: str, chunk: ChunkInfo):
        self.path, self.chunk = path, chunk

    def error(self, payload_offset: int, message: str) -> RecordIOError:
        chunk = self.chunk
        if chunk.compressor == 0:
            offset = chunk.offset + HEADER.size + payload_offset
            text = f"{self.path}: byte {offset}: {message} (chunk at byte {chunk.offset})"
        else:
            offset = chunk.offset
            text = (f"{self.path}: chunk at byte {chunk.offset} ({_NAMES[chunk.compressor]}), "
                    f"byte {payload_offset} of its decompressed payload: {message}")
        return _error(text, self.path, offset, payload_offset)


def _error(text: str, path: str, offset: int, payload_offset: int | None = None
           ) -> RecordIOError:
    err = RecordIOError(text)
    err.path, err.offset, err.payload_offset = path, offset, payload_offset  # type: ignore
    return err


def _read_header(f: BinaryIO, path: str, offset: int, size: int) -> ChunkInfo:
    _check_room(path, offset, size)
    return _parse_header(f.read(HEADER.size), path, offset, size)


def _check_room(path: str, offset: int, size: int) -> None:
    if size - offset < HEADER.size:
        raise _error(f"{path}: byte {offset}: truncated chunk header ({size - offset} of "
                     f"{HEADER.size} bytes before end of file)", path, offset)


def _parse_header(raw, path: str, offset: int, size: int) -> ChunkInfo:
    """The chunk header in the first 20 bytes of ``raw``, read from byte ``offset`` of a
    file of ``size`` bytes; every field checked (but the CRC, which needs the payload)."""
    magic, count, checksum, compressor, stored = HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise _error(f"{path}: byte {offset}: bad chunk magic 0x{magic:08x} (expected "
                     f"0x{MAGIC:08x}); not a RecordIO file, or corrupt", path, offset)
    if compressor not in _NAMES:
        raise _error(f"{path}: byte {offset + 12}: unknown compressor id {compressor} "
                     f"(known: {_NAMES})", path, offset + 12)
    if count == 0:
        raise _error(f"{path}: byte {offset + 4}: chunk declares 0 records (writers never "
                     "emit empty chunks)", path, offset + 4)
    left = size - offset - HEADER.size
    if stored > left:
        raise _error(f"{path}: byte {offset + 16}: chunk stored size {stored} runs past the "
                     f"end of the file ({left} bytes left)", path, offset + 16)
    return ChunkInfo(offset, count, checksum, compressor, stored)


def _chunks(f: BinaryIO, path: str) -> Iterator[tuple[ChunkInfo, bytes]]:
    """(header, decompressed payload) of each chunk, CRC and compression checked."""
    size = os.fstat(f.fileno()).st_size
    offset = 0
    f.seek(0)
    while offset < size:
        info = _read_header(f, path, offset, size)
        yield info, _payload(f.read(info.stored_size), info, path)
        offset = info.end


def _payload(stored: bytes, info: ChunkInfo, path: str) -> bytes:
    """The decompressed payload of the chunk ``info`` from its stored bytes."""
    offset = info.offset
    if len(stored) != info.stored_size:  # the file shrank under us
        raise _error(f"{path}: byte {offset + HEADER.size}: chunk payload truncated",
                     path, offset + HEADER.size)
    if zlib.crc32(stored) != info.checksum:
        raise _error(f"{path}: byte {offset + 8}: CRC-32 mismatch for the chunk at byte "
                     f"{offset} (stored 0x{info.checksum:08x}, computed "
                     f"0x{zlib.crc32(stored):08x})", path, offset + 8)
    return _decompress(stored, info, path)


def _inflate_limit(info: ChunkInfo) -> int:
    """The most bytes a chunk's compressed payload may inflate to: what deflate can
    reach from its stored size at all (1032:1), and never more than
    `MAX_CHUNK_PAYLOAD`."""
    return min(MAX_CHUNK_PAYLOAD, info.stored_size * _DEFLATE_MAX_RATIO + 64)


def _decompress(stored: bytes, info: ChunkInfo, path: str) -> bytes:
    if info.compressor == 0:
        return stored
    where = f"{path}: chunk at byte {info.offset}"
    if info.compressor == 2:
        limit = _inflate_limit(info)
        d = zlib.decompressobj(_ZLIB_OR_GZIP)
        try:
            payload = d.decompress(stored, limit + 1)  # never more than limit + 1 bytes
        except zlib.error as exc:
            raise _error(f"{where}: gzip/zlib payload does not decompress: {exc}",
                         path, info.offset) from exc
        if len(payload) > limit:
            raise _error(f"{where}: gzip/zlib payload inflates beyond {limit} bytes "
                         f"(a decompression bomb, or a chunk larger than "
                         f"recordio.MAX_CHUNK_PAYLOAD allows: raise it to read such files)",
                         path, info.offset)
        if not d.eof or d.unused_data:
            raise _error(f"{where}: gzip/zlib payload is "
                         f"{'truncated' if not d.eof else 'followed by extra bytes'}",
                         path, info.offset)
        return payload
    try:
        return snappy_stream.decompress(stored, _snappy_module(), _inflate_limit(info))
    except snappy_stream.CodecUnavailable as exc:
        raise _error(f"{where} is snappy-compressed; reading it needs python-snappy: "
                     f"{_SNAPPY_HINT}", path, info.offset) from exc
    except snappy_stream.SnappyStreamError as exc:
        raise _error(f"{where}: byte {exc.offset} of the snappy stream: {exc}",
                     path, info.offset) from exc


def chunk_index(path: str | os.PathLike) -> list[ChunkInfo]:
    """The header of every chunk, found by seeking header to header (payloads are not
    read, so CRCs are not checked)."""
    path = os.fspath(path)
    out = []
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        offset = 0
        while offset < size:
            info = _read_header(f, path, offset, size)
            out.append(info)
            offset = info.end
            f.seek(offset)
    return out


def _record_spans(payload: bytes, count: int, where: _Where) -> Iterator[tuple[int, int]]:
    pos = 0
    for i in range(count):
        if len(payload) - pos < 4:
            raise where.error(pos, f"record {i} of {count}: length prefix past the end of "
                                   f"the chunk payload")
        (length,) = _U32.unpack_from(payload, pos)
        if length > len(payload) - pos - 4:
            raise where.error(pos, f"record {i} of {count}: length {length} is longer than "
                                   f"the {len(payload) - pos - 4} bytes left in the chunk")
        yield pos + 4, pos + 4 + length
        pos += 4 + length
    if pos != len(payload):
        raise where.error(pos, f"{len(payload) - pos} bytes follow the chunk's {count} "
                               f"declared records")


def _parse(payload: bytes, where: _Where, start: int, end: int) -> RecordLayout:
    try:
        return parse_record(payload, start, end)
    except TensorFormatError as exc:
        raise where.error(exc.offset, str(exc)) from None


def _columns_of(payload: bytes, first_row: int, rows: int, layout: RecordLayout
                ) -> tuple[np.ndarray, ...]:
    """Strided views of ``rows`` consecutive records of ``layout``, starting at byte
    ``first_row`` (a record's length prefix)."""
    stride = 4 + layout.length
    table = np.frombuffer(payload, dtype=np.uint8, count=rows * stride, offset=first_row)
    table = table.reshape(rows, stride)
    out = []
    for spec in layout.tensors:
        start = 4 + spec.data_offset
        cells = table[:, start:start + spec.nbytes]
        if spec.nbytes:
            col = cells.view(spec.dtype)
        else:
            col = np.empty((rows, 0), dtype=spec.dtype)
        out.append(col.reshape((rows,) + spec.shape))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _header_spans(layout: RecordLayout) -> tuple[tuple[int, int], ...]:
    """The byte ranges of a row (length prefix + record) that are not tensor data: equal
    in every row of one layout, since parsing a record reads only them."""
    spans, cut = [], 0
    for spec in layout.tensors:
        start = 4 + spec.data_offset
        if start > cut:
            spans.append((cut, start))
        cut = start + spec.nbytes
    if 4 + layout.length > cut:
        spans.append((cut, 4 + layout.length))
    return tuple(spans)


def _words(rows: np.ndarray) -> np.ndarray | None:
    """``rows`` (blocks x records x row bytes) as aligned uint32 words, when they allow."""
    if rows.shape[2] % 4 or rows.strides[0] % 4 or rows.strides[1] % 4:
        return None
    words = rows.view(np.uint32)
    return words if words.flags.aligned else None


def _matching(rows: np.ndarray, layout: RecordLayout) -> np.ndarray:
    """For each block of ``rows`` (blocks x records x row bytes): whether every row's
    non-data bytes equal those of the first row of the first block. Whole uint32 words
    are compared where the rows allow (a quarter of the elements), single bytes at the
    ragged ends of a span."""
    ok = np.ones(len(rows), dtype=bool)
    words = _words(rows)
    for a, b in _header_spans(layout):
        lo, hi = -(-a // 4), b // 4
        parts = [(rows, a, b)] if words is None or lo >= hi else [
            (rows, a, 4 * lo), (words, lo, hi), (rows, 4 * hi, b)]
        for part, start, stop in parts:
            if start < stop:
                # Records innermost (order C of the transposed view): NumPy then runs long
                # inner loops, not one short loop of a few words per record.
                cells = part[:, :, start:stop].transpose(0, 2, 1)
                same = np.equal(cells, part[0, 0, start:stop, None], order="C")
                if not same.all():  # rare: find which blocks differ
                    ok &= same.all(axis=(1, 2))
    return ok


def _uniform(payload: bytes, count: int, layout: RecordLayout) -> bool:
    """Whether every record of the chunk has the first record's length and header bytes
    (then all share its layout: parsing reads only those bytes)."""
    stride = 4 + layout.length
    if len(payload) != count * stride:
        return False
    if count == 1:
        return True
    table = np.frombuffer(payload, dtype=np.uint8).reshape(1, count, stride)
    return bool(_matching(table, layout)[0])


def _native_copies(columns: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Fresh, writable copies of a run's columns (views over a payload, stored
    little-endian) in native byte order."""
    return tuple(np.array(c, dtype=c.dtype.newbyteorder("=")) for c in columns)


def _copy_columns(rows: np.ndarray, layout: RecordLayout) -> tuple[np.ndarray, ...]:
    """Fresh C-contiguous columns in native byte order of every row of ``rows`` (blocks x
    records x row bytes): one copy per tensor, straight from the rows."""
    blocks, count = rows.shape[:2]
    out = []
    for spec in layout.tensors:
        col = np.empty((blocks * count,) + spec.shape, dtype=spec.dtype.newbyteorder("="))
        if spec.nbytes:
            start = 4 + spec.data_offset
            cells = rows[:, :, start:start + spec.nbytes].view(spec.dtype)
            col.reshape(blocks, count, -1)[...] = cells
        out.append(col)
    return tuple(out)


def _runs(payload: bytes, info: ChunkInfo, where: _Where, first_record: int
          ) -> tuple[Run, ...]:
    if len(payload) < 4:
        raise where.error(0, f"chunk payload of {len(payload)} bytes holds no record")
    (length,) = _U32.unpack_from(payload, 0)
    if length <= len(payload) - 4:
        first = _parse(payload, where, 4, 4 + length)
        if _uniform(payload, info.num_records, first):  # the fast path
            return (Run(first_record, info.num_records,
                        _columns_of(payload, 0, info.num_records, first)),)
    runs: list[Run] = []
    current: RecordLayout | None = None
    run_start = run_row = 0
    for i, (start, end) in enumerate(_record_spans(payload, info.num_records, where)):
        layout = _parse(payload, where, start, end)
        if layout != current:
            if current is not None:
                runs.append(Run(first_record + run_start, i - run_start,
                                _columns_of(payload, run_row, i - run_start, current)))
            current, run_start, run_row = layout, i, start - 4
    assert current is not None
    rows = info.num_records - run_start
    runs.append(Run(first_record + run_start, rows,
                    _columns_of(payload, run_row, rows, current)))
    return tuple(runs)


def read_chunks(path: str | os.PathLike) -> Iterator[Chunk]:
    """Each chunk of the file, decoded to NumPy columns. A chunk whose records share one
    layout is parsed as a whole (one strided table, no per-record Python work)."""
    path = os.fspath(path)
    with open_regular(path) as f:
        first = 0
        for info, payload in _chunks(f, path):
            runs = _runs(payload, info, _Where(path, info), first)
            yield Chunk(path, info.offset, first, info.num_records, info.compressor, runs)
            first += info.num_records


def read(path: str | os.PathLike) -> Iterator[tuple[np.ndarray, ...]]:
    """Each record as a tuple of arrays, exactly as written (dtype and shape; a Paddle
    file's leading batch dim of 1 is kept; `BatchReader` strips it)."""
    for chunk in read_chunks(path):
        for run in chunk.runs:
            columns = _native_copies(run.columns)
            for i in range(run.num_records):
                yield tuple(c[i, ...] for c in columns)


def read_records(path: str | os.PathLike) -> Iterator[bytes]:
    """Each record's raw bytes (chunk framing, CRC and compression checked)."""
    path = os.fspath(path)
    with open_regular(path) as f:
        for info, payload in _chunks(f, path):
            for start, end in _record_spans(payload, info.num_records, _Where(path, info)):
                yield payload[start:end]


def num_records(paths: Sequence[str | os.PathLike] | str | os.PathLike) -> int:
    """Total records in one or several files, from the chunk headers alone."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return sum(c.num_records for p in paths for c in chunk_index(p))
