"""What a RecordIO file may read back as: helpers shared by the fuzz tests (tests/io and
tests/adversarial). A damaged file must raise `RecordIOError` or read back exactly the
records written, or exactly those of the whole original chunks that remain (RecordIO has
no file header or footer, so cutting at chunk boundaries leaves a valid shorter file)."""
import zlib
from unittest import mock

import numpy as np

from fluid_interactive.io import bulk_read, recordio


class ZlibAsBlockCodec:
    """Stands in for snappy's block codec, so snappystream framing is fuzzed too."""
    compress = staticmethod(zlib.compress)
    decompress = staticmethod(zlib.decompress)


def write(path, dataset):
    samples, compressor, per_chunk = dataset
    with mock.patch.object(recordio, "_snappy_module", lambda: ZlibAsBlockCodec):
        recordio.write(path, samples, compressor=compressor, max_num_records=per_chunk)


def read(path):
    with mock.patch.object(recordio, "_snappy_module", lambda: ZlibAsBlockCodec):
        return list(recordio.read(path))


def read_bulk(path):
    with mock.patch.object(recordio, "_snappy_module", lambda: ZlibAsBlockCodec):
        return [tuple(c[i] for c in run.columns) for run in bulk_read.read_columns(path)
                for i in range(run.num_records)]


def same(got, want) -> bool:
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if len(g) != len(w):
            return False
        for a, b in zip(g, w):
            if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
                return False
    return True


def corrupt(data: bytes, kind, arg) -> bytes:
    if kind == "flip":
        out = bytearray(data)
        for pos, xor in arg:
            out[pos] ^= xor
        return bytes(out)
    if kind == "truncate":
        return data[:arg]
    if kind == "insert":
        pos, extra = arg
        return data[:pos] + extra + data[pos:]
    start, length = arg
    return data[:start] + data[start + length:]


def original_chunks(path, original, samples):
    """(bytes, records) of every chunk of the file as written."""
    index = recordio.chunk_index(path)
    starts = [0] + [c.end for c in index[:-1]]
    firsts = np.cumsum([0] + [c.num_records for c in index])
    return [(original[a:c.end], samples[firsts[k]:firsts[k + 1]])
            for k, (a, c) in enumerate(zip(starts, index))]


def as_whole_chunks(corrupted, chunks):
    """The records of ``corrupted`` when it is a sequence of whole original chunks (a cut
    that removed whole chunks, possibly across identical ones), else None: RecordIO has no
    file header or footer, so such a file is indistinguishable from one written shorter."""
    records, pos = [], 0
    while pos < len(corrupted):
        match = next(((b, r) for b, r in chunks if corrupted.startswith(b, pos)), None)
        if match is None:
            return None
        records += match[1]
        pos += len(match[0])
    return records


