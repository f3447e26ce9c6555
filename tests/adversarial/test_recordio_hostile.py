"""RecordIO input built to hurt: decompression bombs, dims that overflow, named pipes, and
a fuzz of thousands of mutations in child processes under a memory limit. Every case ends
in a clean `RecordIOError` (or `ReaderError` from a batch reader) or reads exactly the data
written."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import fluid
from fluid_interactive.io import bulk_read, recordio

from .bounded import call_within, finish, release_fifo
from .hostile_recordio import bomb_file, chunk, tensor_record

ROOT = pathlib.Path(__file__).resolve().parents[2]
FUZZ_CASES = 2600          # per child; two children run side by side
FUZZ_MEMORY_MB = 768       # each child's headroom over what it uses after its imports


def _first_batch_program(path):
    """A compiled program whose method ``first`` takes a batch reader's first batch of
    ``path`` (one float32 slot of 3 values)."""
    class Reads(fluid.Program):
        @fluid.network()
        def first(self):
            reader = fluid.batch_reader(file=str(path), batch_size=2, shape=[[3]],
                                        dtype=["float32"])
            return reader.next_item()
    return Reads().Compile(seed=0)


def _child(args, timeout=600):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "extension")]))
    return subprocess.Popen([sys.executable, "-m", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and RLIMIT_AS")
def test_fuzz_of_thousands_of_mutations_under_a_memory_limit():
    procs = [_child(["tests.adversarial.hostile_recordio", str(FUZZ_CASES), str(seed),
                     str(FUZZ_MEMORY_MB)]) for seed in (1, 2)]
    results = [json.loads(finish(p)) for p in procs]
    total = {k: sum(r[k] for r in results) for k in ("cases", "reads", "clean_errors",
                                                     "exact_data")}
    other = [line for r in results for line in r["other"]]
    print(f"RecordIO fuzz: {total['cases']} cases, {total['reads']} reads: "
          f"{total['clean_errors']} clean errors, {total['exact_data']} exact data, "
          f"{len(other)} other")
    assert other == []
    assert total["cases"] >= 5000
    assert total["clean_errors"] + total["exact_data"] == total["reads"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and RLIMIT_AS")
def test_the_default_bound_stops_an_8_gib_bomb_within_its_memory(tmp_path):
    """A file of 8 MB that inflates to 8 GiB fails after at most MAX_CHUNK_PAYLOAD
    (256 MiB) of output, in a process that may not use 1 GiB more than it started with."""
    path = tmp_path / "bomb.recordio"
    bomb_file(str(path), 8 << 30)
    assert path.stat().st_size < 16 << 20
    code = ("import sys; from tests.adversarial.hostile_recordio import limit_memory;"
            "from fluid_interactive.io import recordio; from fluid_interactive.errors import "
            "RecordIOError\nlimit_memory(1024)\ntry:\n    list(recordio.read(sys.argv[1]))\n"
            "except RecordIOError as e:\n    print('refused:', e)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = finish(proc, timeout=120)
    assert "refused:" in out and "inflates beyond" in out and "MAX_CHUNK_PAYLOAD" in out


def test_a_bomb_is_refused_before_the_payload_is_inflated(tmp_path, monkeypatch):
    monkeypatch.setattr(recordio, "MAX_CHUNK_PAYLOAD", 1 << 20)
    path = tmp_path / "bomb.recordio"
    bomb_file(str(path), 64 << 20)
    for read in (lambda p: list(recordio.read(p)), lambda p: list(bulk_read.read_columns(p))):
        with pytest.raises(fluid.RecordIOError, match="inflates beyond 1048576 bytes"):
            read(str(path))


def test_a_batch_reader_over_a_bomb_fails_with_a_reader_error(tmp_path, monkeypatch):
    monkeypatch.setattr(recordio, "MAX_CHUNK_PAYLOAD", 1 << 20)
    path = tmp_path / "bomb.recordio"
    bomb_file(str(path), 64 << 20)

    prog = _first_batch_program(path)
    with pytest.raises(fluid.ReaderError, match="inflates beyond"):
        prog.first()
    prog.close()


@pytest.mark.parametrize("dims", [[0, 2 ** 62, 2 ** 62], [2 ** 40, 0, 2 ** 40],
                                  [0] + [2 ** 20] * 4])
def test_a_zero_dim_beside_huge_dims_is_a_recordio_error(tmp_path, dims):
    path = tmp_path / "dims.recordio"
    path.write_bytes(chunk(tensor_record(dims), 1, 0))
    for read in (lambda p: list(recordio.read(p)), lambda p: list(bulk_read.read_columns(p))):
        with pytest.raises(fluid.RecordIOError, match="more than 2\\*\\*48 elements"):
            read(str(path))


def test_an_empty_tensor_with_modest_dims_still_reads(tmp_path):
    path = tmp_path / "empty.recordio"
    path.write_bytes(chunk(tensor_record([0, 5]), 1, 0))
    (record,) = list(recordio.read(str(path)))
    assert record[0].shape == (0, 5)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")
def test_a_named_pipe_is_refused_by_recordio_and_batch_reader(tmp_path):
    fifo = tmp_path / "data.recordio"
    os.mkfifo(fifo)
    try:
        with pytest.raises(fluid.RecordIOError, match="named pipe"):
            call_within(20, lambda: list(recordio.read(str(fifo))))
        with pytest.raises(fluid.RecordIOError, match="named pipe"):
            call_within(20, lambda: list(bulk_read.read_columns(str(fifo))))
        prog = _first_batch_program(fifo)
        with pytest.raises(fluid.ReaderError, match="named pipe"):
            call_within(20, prog.first)
        prog.close()
    finally:
        release_fifo(fifo)


def test_our_writer_keeps_chunks_far_below_the_bound(tmp_path):
    path = tmp_path / "big.recordio"
    rows = np.zeros((300, 64, 1024), "float32")          # 75 MiB of samples
    recordio.write_arrays(str(path), (rows,), max_num_records=1000)
    sizes = [c.stored_size for c in recordio.chunk_index(str(path))]
    assert len(sizes) >= 2 and max(sizes) <= 64 << 20
    assert max(sizes) < recordio.MAX_CHUNK_PAYLOAD
