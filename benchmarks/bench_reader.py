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
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "extension"),
                os.path.join(os.path.dirname(HERE), "examples")]

from fluid_interactive.errors import EOFException  # noqa: E402
from fluid_interactive.io import recordio  # noqa: E402
from fluid_interactive.io.reader import BatchReader, FileSource  # noqa: E402

SHAPES, DTYPES = [[13], [1]], ["float32", "float32"]


def steady_interleaved_us(reader_step, memory_step, calls: int, rounds: int = 7,
                          settle: int = 0, idle_s: float = 0.2) -> dict[str, float]:
    """Median us per call of each step, alternating blocks (as `_timing.interleaved_us`),
    with the reading thread kept out of the other block's way both ways: each timed block
    of ``reader_step`` follows ``settle`` untimed calls of it, which use up what the thread
    read ahead meanwhile (whole pieces of the file, past ``prefetch`` batches: at most about
    1,750 fit_a_line batches, which would otherwise come free), and each memory block
    follows a pause of ``idle_s`` in which the thread finishes reading ahead (else it would
    compete for the GIL with the memory block). Timed blocks then measure the reader in
    its steady state, as in a training loop that only trains."""
    samples: dict[str, list[float]] = {"reader": [], "memory": []}
    for fn in (reader_step, memory_step):  # warm up
        for _ in range(max(10, calls // 10)):
            fn()
    for _ in range(rounds):
        for _ in range(settle):
            reader_step()
        for name, fn in (("reader", reader_step), ("memory", memory_step)):
            if name == "memory":
                time.sleep(idle_s)
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - t0) / calls * 1e6)
    return {name: statistics.median(s) for name, s in samples.items()}


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
            ("BatchReader batch 128, prefetch=0", lambda: batches(path, 128, 0), n),
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
        training_through_reader(path, x, y, cached=True)
        training_through_reader(path, x, y, cached=False)
        mlp_through_reader(tmp)


def training_through_reader(path: str, x: np.ndarray, y: np.ndarray, steps: int = 3000,
                            batch: int = 256, cached: bool = True) -> None:
    """fit_a_line steps/s reading its batches in the program vs fed the same batches from
    memory (pre-sliced arrays), alternating blocks of steps (see `steady_interleaved_us`).
    ``cached``: the file fits the reader's cache (io/cache.py), and a first epoch runs
    untimed, so the timed epochs come from memory; otherwise the cache is turned off and
    every epoch decodes the file."""
    from fit_a_line import FitALine

    import fluid
    from fluid_interactive.io import cache
    budget = cache.DEFAULT_BUDGET
    cache.DEFAULT_BUDGET = budget if cached else 0

    class Fed(fluid.Program):
        @fluid.network("x", "y")
        def train_step(self, x, y):
            x = fluid.layers.data(name="x", shape=[13], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="float32")
            with fluid.var_scope("prediction"):
                y_predict = fluid.layers.fc(input=x, size=1, act=None)
            avg_cost = fluid.layers.mean(fluid.layers.square_error_cost(y_predict, y))
            fluid.optimizer.SGD(learning_rate=0.001).minimize(avg_cost)
            return avg_cost

    reading = FitALine(DEFAULT_READER_FILE_PATH=path, batch_size=batch, epochs=None
                       ).Compile(seed=0)
    fed = Fed().Compile(seed=0)
    n = len(x) // batch
    for _ in range(n + 1 if cached else 0):   # the first epoch decodes (and fills the cache)
        reading.train_step()
    cache.DEFAULT_BUDGET = budget
    xs = [x[i * batch:(i + 1) * batch] for i in range(n)]
    ys = [y[i * batch:(i + 1) * batch] for i in range(n)]
    k = [0]

    def fed_step():
        i = k[0] = (k[0] + 1) % n
        return fed.train_step(xs[i], ys[i])

    us = steady_interleaved_us(reading.train_step, fed_step, calls=steps, settle=2000)
    reading.close()
    how = "later epochs, from the cache" if cached else "every epoch decoded (no cache)"
    print(f"\nfit_a_line training, batch {batch}, {how}: through the reader "
          f"{1e6 / us['reader']:,.0f} steps/s ({us['reader']:.1f} us/step), fed from memory "
          f"{1e6 / us['memory']:,.0f} steps/s ({us['memory']:.1f} us/step); reader/memory "
          f"time {us['reader'] / us['memory']:.2f}x   (target <= 1.10x)")


def mlp_through_reader(tmp: str, steps: int = 60, batch: int = 128) -> None:
    """The same comparison for an MLP 784-512-512-10 (softmax cross-entropy, SGD), whose
    step takes milliseconds."""
    import fluid
    rng = np.random.default_rng(1)
    n = batch * 80
    x = rng.standard_normal((n, 784)).astype(np.float32)
    y = rng.integers(0, 10, (n, 1)).astype(np.int64)
    path = os.path.join(tmp, "mlp.recordio")
    recordio.write_arrays(path, (x, y))

    def net(image, label):
        h = fluid.layers.fc(input=image, size=512, act="relu")
        h = fluid.layers.fc(input=h, size=512, act="relu")
        logits = fluid.layers.fc(input=h, size=10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)
        return loss

    class Reading(fluid.Program):
        @fluid.network()
        def train(self):
            reader = fluid.batch_reader(file=path, batch_size=batch, shape=[[784], [1]],
                                        dtype=["float32", "int64"], epochs=None)
            return net(*reader.next_item())

    class Fed(fluid.Program):
        @fluid.network("image", "label")
        def train(self, image, label):
            image = fluid.layers.data(name="image", shape=[784], dtype="float32")
            label = fluid.layers.data(name="label", shape=[1], dtype="int64")
            return net(image, label)

    reading, fed = Reading().Compile(seed=0), Fed().Compile(seed=0)
    xs = [x[i * batch:(i + 1) * batch] for i in range(n // batch)]
    ys = [y[i * batch:(i + 1) * batch] for i in range(n // batch)]
    k = [0]

    def fed_step():
        i = k[0] = (k[0] + 1) % len(xs)
        return fed.train(xs[i], ys[i])

    us = steady_interleaved_us(reading.train, fed_step, calls=steps, rounds=5, settle=150)
    reading.close()
    print(f"MLP 784-512-512-10 training, batch {batch}: through the reader "
          f"{us['reader'] / 1e3:.2f} ms/step, fed from memory {us['memory'] / 1e3:.2f} "
          f"ms/step; reader/memory time {us['reader'] / us['memory']:.2f}x")


if __name__ == "__main__":
    main()
