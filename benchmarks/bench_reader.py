"""Reading fit_a_line samples (13 float32 features + 1 float32 label) from RecordIO.

Writes 2 million samples (1000 records per chunk, no compression), then times one full
pass of each reading path, best of a few runs, and prints samples/s and MB/s of file
bytes against a raw ``np.fromfile`` of the same file (the ceiling: bytes into memory,
no parsing). ``--compressed`` adds the same data gzip-compressed and, when python-snappy
imports, snappy-compressed. Run:

    python benchmarks/bench_reader.py [--samples N] [--repeats R] [--compressed]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE)]

from fluid_interactive.errors import EOFException  # noqa: E402
from fluid_interactive.io import recordio  # noqa: E402
from fluid_interactive.io.reader import BatchReader, FileSource  # noqa: E402

SHAPES, DTYPES = [[13], [1]], ["float32", "float32"]


def best_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def chunk_columns(path: str) -> int:
    n = 0
    for chunk in recordio.read_chunks(path):
        x, y = chunk.columns
        n += len(x)
    return n


def batches(path: str, batch_size: int, prefetch: int) -> int:
    n = 0
    with BatchReader(FileSource(path), batch_size, SHAPES, DTYPES, prefetch=prefetch) as r:
        try:
            while True:
                n += len(r.next()[0])
        except EOFException:
            return n


def record_by_record(path: str, limit: int) -> int:
    n = 0
    for _ in recordio.read(path):
        n += 1
        if n == limit:
            break
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=2_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--compressed", action="store_true")
    args = ap.parse_args()
    n = args.samples
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 13)).astype(np.float32)
    y = rng.standard_normal((n, 1)).astype(np.float32)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "fit_a_line.recordio")
        t0 = time.perf_counter()
        recordio.write_arrays(path, (x, y))
        write_s = time.perf_counter() - t0
        size = os.path.getsize(path)
        print(f"{n:,} samples, {size / 1e6:.1f} MB ({size / n:.0f} bytes/sample), "
              f"write_arrays {n / write_s / 1e6:.2f} M samples/s; best of {args.repeats}")
        rows = [
            ("np.fromfile (raw bytes, no parsing)",
             lambda: np.fromfile(path, dtype=np.uint8), n),
            ("recordio.read_chunks (columns per chunk)", lambda: chunk_columns(path), n),
            ("BatchReader batch 128, prefetch thread", lambda: batches(path, 128, 4), n),
            ("BatchReader batch 1024, prefetch thread", lambda: batches(path, 1024, 4), n),
            ("BatchReader batch 128, no thread", lambda: batches(path, 128, 0), n),
        ]
        limit = min(n, 100_000)
        rows.append((f"recordio.read (one tuple per record, {limit:,})",
                     lambda: record_by_record(path, limit), limit))
        compressors = ["gzip"] + (["snappy"] if recordio._snappy_module() else [])
        for name in compressors if args.compressed else []:
            packed = os.path.join(tmp, f"fit_a_line.{name}.recordio")
            recordio.write_arrays(packed, (x, y), compressor=name)
            mb = os.path.getsize(packed) / 1e6
            rows.append((f"BatchReader batch 128, {name} ({mb:.0f} MB)",
                         lambda p=packed: batches(p, 128, 4), n))
        assert chunk_columns(path) == n and batches(path, 128, 4) == n
        raw = None
        print(f"{'path':<48} {'M samples/s':>12} {'MB/s':>8} {'vs raw':>8}")
        for name, fn, count in rows:
            secs = best_seconds(fn, args.repeats)
            mb_s = size * count / n / secs / 1e6
            raw = raw or mb_s
            print(f"{name:<48} {count / secs / 1e6:>12.2f} {mb_s:>8.0f} {mb_s / raw:>8.2f}")


if __name__ == "__main__":
    main()
