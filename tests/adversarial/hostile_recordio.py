"""Hostile RecordIO bytes: decompression bombs and tensors whose dims overflow, and a
seeded fuzz of a few thousand mutations of real files. Used by test_recordio_hostile.py,
which runs the fuzz in a child process under a memory limit (``python -m
tests.adversarial.hostile_recordio CASES SEED MEMORY_MB`` from the project's root prints the
counts as JSON)."""
import json
import os
import struct
import sys
import tempfile
import zlib

import numpy as np

from fluid_interactive.errors import RecordIOError
from fluid_interactive.io import recordio, tensor_codec

HEADER = struct.Struct("<5I")
_SEGMENT = 1 << 24
BOMB_BYTES = 8 << 30   # what the fuzz's bombs inflate to: far beyond its memory limit


def chunk(stored: bytes, count: int, compressor: int) -> bytes:
    """A chunk with a correct header and CRC around ``stored`` bytes."""
    return HEADER.pack(recordio.MAGIC, count, zlib.crc32(stored), compressor,
                       len(stored)) + stored


def deflate_bomb(inflated: int) -> bytes:
    """A zlib stream of about 1 KB per MB that inflates to ``inflated`` zero bytes, built
    from one compressed segment repeated (a full flush makes segments independent)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    segment = c.compress(bytes(_SEGMENT)) + c.flush(zlib.Z_FULL_FLUSH)
    count = max(1, inflated // _SEGMENT)
    # The trailing checksum is never reached: a reader must give up long before.
    return b"\x78\xda" + segment * count + c.flush() + struct.pack(">I", 0)


def bomb_file(path: str, inflated: int, records: int = 1) -> None:
    with open(path, "wb") as f:
        f.write(chunk(deflate_bomb(inflated), records, 2))


def tensor_record(dims, dtype=np.float32, data=b"") -> bytes:
    """A record of one tensor whose header claims ``dims`` (data as given)."""
    body = struct.pack("<I", 1) + tensor_codec.tensor_header(np.dtype(dtype), tuple(dims)) + data
    return struct.pack("<I", len(body)) + body


# ------------------------------------------------------------------ the fuzz

def _dataset(rng):
    shape = tuple(int(d) for d in rng.integers(1, 4, size=rng.integers(0, 3)))
    n = int(rng.integers(1, 12))
    samples = [(rng.standard_normal(shape).astype("float32"),
                np.asarray(rng.integers(0, 10), dtype="int64")) for _ in range(n)]
    return samples, ["none", "gzip", "gzip", "snappy"][rng.integers(4)], int(rng.integers(1, 5))


def _mutation(rng, data: bytes, bomb: bytes):
    """(kind, mutated bytes)."""
    kind = ["flip", "truncate", "insert", "delete", "header", "dims", "bomb"][
        rng.integers(7)]
    n = len(data)
    if kind == "flip":
        out = bytearray(data)
        for pos in rng.integers(0, n, size=rng.integers(1, 4)):
            out[pos] ^= int(rng.integers(1, 256))
        return kind, bytes(out)
    if kind == "truncate":
        return kind, data[:rng.integers(0, n)]
    if kind == "insert":
        pos = int(rng.integers(0, n + 1))
        return kind, data[:pos] + rng.bytes(int(rng.integers(1, 40))) + data[pos:]
    if kind == "delete":
        start = int(rng.integers(0, n))
        return kind, data[:start] + data[start + int(rng.integers(1, n - start + 1)):]
    if kind == "header":   # one header field of the first chunk, CRC kept
        field = int(rng.integers(5))
        value = int(rng.choice([0, 1, 2, 3, 255, 2 ** 31, 2 ** 32 - 1]))
        return kind, data[:field * 4] + struct.pack("<I", value) + data[field * 4 + 4:]
    if kind == "dims":     # a well-formed chunk whose tensor claims huge or zero dims
        dims = [int(rng.choice([0, 1, 3, 2 ** 31, 2 ** 62])) for _ in range(rng.integers(1, 4))]
        payload = tensor_record(dims)
        if rng.integers(2):
            return kind, chunk(zlib.compress(payload), 1, 2)
        return kind, chunk(payload, 1, 0)
    pos = [0, len(data)][rng.integers(2)]   # a bomb chunk before or after real chunks
    return kind, data[:pos] + chunk(bomb, int(rng.integers(1, 5)), 2) + data[pos:]


def _only_empty_tensor(got) -> bool:
    """A 'dims' file read back: one record holding one empty float32 tensor."""
    return (len(got) == 1 and len(got[0]) == 1 and got[0][0].size == 0
            and got[0][0].dtype == np.float32)


def fuzz(cases: int, seed: int) -> dict:
    """Counts of each outcome; ``other`` lists anything that was neither a clean
    `RecordIOError` nor exactly the data written."""
    from tests.io import recordio_oracle as oracle
    rng = np.random.default_rng(seed)
    bomb = deflate_bomb(BOMB_BYTES)
    counts = {"cases": 0, "reads": 0, "clean_errors": 0, "exact_data": 0, "other": []}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.recordio")
        for case in range(cases):
            dataset = _dataset(rng)
            oracle.write(path, dataset)
            with open(path, "rb") as f:
                original = f.read()
            chunks = oracle.original_chunks(path, original, dataset[0])
            kind, mutated = _mutation(rng, original, bomb)
            expected = oracle.as_whole_chunks(mutated, chunks)
            with open(path, "wb") as f:
                f.write(mutated)
            counts["cases"] += 1
            for read in (oracle.read, oracle.read_bulk):
                counts["reads"] += 1
                try:
                    got = read(path)
                except RecordIOError:
                    counts["clean_errors"] += 1
                    continue
                except Exception as e:
                    counts["other"].append(f"case {case} {kind} {read.__name__}: "
                                           f"{type(e).__name__}: {e}")
                    continue
                if oracle.same(got, dataset[0]) or (
                        expected is not None and oracle.same(got, expected)) or (
                        kind == "dims" and _only_empty_tensor(got)):
                    counts["exact_data"] += 1
                else:
                    counts["other"].append(f"case {case} {kind} {read.__name__}: wrong data")
    return counts


def limit_memory(extra_mb: int) -> None:
    """Cap this process's address space at what it uses now plus ``extra_mb``: a reader
    that inflated a bomb would fail with MemoryError (counted as a failure) instead of
    taking the machine's memory."""
    import resource
    with open("/proc/self/status") as f:
        used_kb = next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
    limit = (used_kb << 10) + (extra_mb << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main(argv: list[str]) -> None:
    """``CASES SEED MEMORY_MB [MAX_CHUNK_PAYLOAD]``: the fuzz, under a memory limit."""
    cases, seed, memory_mb = int(argv[0]), int(argv[1]), int(argv[2])
    recordio.MAX_CHUNK_PAYLOAD = int(argv[3]) if len(argv) > 3 else 4 << 20
    from tests.io import recordio_oracle  # noqa: F401  (imported before the limit)
    limit_memory(memory_mb)
    print(json.dumps(fuzz(cases, seed)))


if __name__ == "__main__":
    main(sys.argv[1:])
