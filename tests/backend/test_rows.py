"""Kernels that split their rows over the threads in force (backend/rows.py): the ranges
cover every row once, on aligned boundaries, one range when the work is small; a failure
in any range is raised only once every range is done; and softmax, batched matmul and
layer_norm, forward and backward, and the pointwise ops writing a planned buffer (unary
ops and their gradients, binary elementwise ops with Y cut or broadcast) give the same
bits split as whole."""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import fluid
from fluid_interactive.backend import rows, threads
from tests.ops.harness import analytic_grads, build_op, run_forward


@pytest.fixture
def four_threads(monkeypatch):
    """Four threads in force, and no floor on a range's size: every kernel splits."""
    monkeypatch.setattr(rows, "SPLIT", True)
    monkeypatch.setattr(threads.STATE, "cores", 4)
    monkeypatch.setattr(threads.STATE, "current", 4)
    monkeypatch.setattr(rows, "MIN_CHUNK", 1)


def test_ranges_cover_every_row_once_on_aligned_starts(four_threads):
    for count, align in [(10, 1), (455, 64), (7, 1), (1000, 8)]:
        ranges = rows.chunks(count, count * 100, align)
        assert ranges[0][0] == 0 and ranges[-1][1] == count
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        assert all(lo % align == 0 and lo < hi for lo, hi in ranges)
        assert 1 < len(ranges) <= 4
    assert rows.chunks(455, 455, 64) == [(0, 128), (128, 256), (256, 384), (384, 455)]


def test_one_range_for_small_work_or_one_thread(monkeypatch):
    monkeypatch.setattr(rows, "SPLIT", True)
    monkeypatch.setattr(threads.STATE, "cores", 4)
    monkeypatch.setattr(threads.STATE, "current", 4)
    assert rows.chunks(1000, rows.MIN_CHUNK) == [(0, 1000)]
    assert len(rows.chunks(1000, 4 * rows.MIN_CHUNK)) == 4
    monkeypatch.setattr(threads.STATE, "current", 1)
    assert rows.chunks(1000, 100 * rows.MIN_CHUNK) == [(0, 1000)]
    monkeypatch.setattr(threads.STATE, "current", 4)
    monkeypatch.setattr(rows, "SPLIT", False)   # OpenBLAS's idle threads spin long
    assert rows.chunks(1000, 100 * rows.MIN_CHUNK) == [(0, 1000)]


def test_a_failing_range_is_raised_once_every_range_is_done(four_threads):
    done = []

    def body(lo, hi):
        if lo == 0:
            raise ValueError("row 0 is bad")
        time.sleep(0.05)
        done.append((lo, hi, threading.current_thread().name))

    with pytest.raises(ValueError, match="row 0 is bad"):
        rows.for_rows(body, 8, 8)
    assert len(done) == 3                      # none still writing after the kernel left
    assert all(name.startswith("fluid-rows") for *_, name in done)


def _both_ways(monkeypatch, run):
    """``run()`` split over four ranges, and whole."""
    split = run()
    monkeypatch.setattr(rows, "MIN_CHUNK", 1 << 40)
    whole = run()
    monkeypatch.setattr(rows, "MIN_CHUNK", 1)
    return split, whole


def _same_bits(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes()


def _forward_and_grads(op_type, inputs, attrs, through, rng):
    outs = run_forward(op_type, inputs, attrs)
    op, env = build_op(op_type, inputs, attrs)
    env.update({n: outs[slot][i] for slot, names in op.outputs.items()
                for i, n in enumerate(names)})
    cot = {n: rng.standard_normal(env[n].shape).astype(env[n].dtype)
           if slot in through else np.zeros_like(env[n])
           for slot, names in op.outputs.items() for n in names}
    grads = analytic_grads(op, env, cot, list(inputs))
    flat = [a for slot in sorted(outs) for a in outs[slot]]
    return flat + [g for slot in sorted(grads) for g in grads[slot] if g is not None]


CASES = [
    ("softmax", {"X": (6, 5, 7, 9)}, {"axis": -1}, ["Out"]),
    ("softmax", {"X": (6, 5, 7, 9)}, {"axis": 1}, ["Out"]),
    ("matmul", {"X": (5, 3, 8, 6), "Y": (5, 3, 6, 4)}, {}, ["Out"]),
    ("matmul", {"X": (5, 3, 6, 8), "Y": (5, 3, 4, 6)},
     {"transpose_X": True, "transpose_Y": True, "alpha": 0.5}, ["Out"]),
    ("matmul", {"X": (9, 8, 6), "Y": (9, 4, 6)}, {"transpose_Y": True}, ["Out"]),
    ("layer_norm", {"X": (130, 3, 16), "Scale": (48,), "Bias": (48,)},
     {"begin_norm_axis": 1}, ["Y"]),
    ("layer_norm", {"X": (7, 65, 16)}, {"begin_norm_axis": 2}, ["Y"]),
]


@pytest.mark.parametrize("op_type,shapes,attrs,through", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_split_kernels_give_the_bits_of_whole_ones(op_type, shapes, attrs, through,
                                                   four_threads, monkeypatch):
    rng = np.random.default_rng(5)
    inputs = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    split, whole = _both_ways(monkeypatch, lambda: _forward_and_grads(
        op_type, inputs, attrs, through, np.random.default_rng(9)))
    _same_bits(split, whole)


def attention_block(t=16, d=32, heads=4):
    class Attention(fluid.Program):
        @fluid.network("x", "y")
        def train_step(self, x, y):
            x = fluid.layers.data(name="x", shape=[t, d], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="int64")
            a = fluid.nets.scaled_dot_product_attention(x, x, x, num_heads=heads)
            h = fluid.layers.layer_norm(x + a, begin_norm_axis=2)
            f = fluid.layers.fc(h, size=2 * d, num_flatten_dims=2, act="relu")
            f = fluid.layers.tanh(fluid.layers.elementwise_mul(f, f))
            h = h + fluid.layers.fc(f, size=d, num_flatten_dims=2)
            out = fluid.layers.fc(fluid.layers.sequence_pool(h, "average"), size=3)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(out, y))
            fluid.optimizer.Adam(learning_rate=1e-2).minimize(loss)
            return loss
    return Attention


def test_a_planned_attention_block_trains_to_the_same_bits_split_or_whole(
        four_threads, monkeypatch):
    """Through a plan (its buffers, the kernels' out= paths), several Adam steps."""
    rng = np.random.default_rng(2)
    data = [(rng.standard_normal((8, 16, 32)).astype(np.float32),
             rng.integers(0, 3, (8, 1))) for _ in range(3)]

    cut = []
    chunks = rows.chunks

    def counted(*args, **kwargs):
        ranges = chunks(*args, **kwargs)
        cut.append(len(ranges))
        return ranges
    monkeypatch.setattr(rows, "chunks", counted)

    def train():
        prog = attention_block()().Compile(seed=4)
        losses = [prog.train_step(x, y) for x, y in data]
        return [np.float32(v) for v in losses] + [
            v for _, v in sorted(prog.parameters().items())]
    fluid.set_threads(4)   # the count in force in every call, small plan or not
    try:
        split, whole = _both_ways(monkeypatch, train)
    finally:
        fluid.set_threads(None)
    assert max(cut) == 4 and min(cut) == 1    # it did run split, then whole
    _same_bits([np.asarray(v) for v in split], [np.asarray(v) for v in whole])


def _in_fresh_process(code: str, **env) -> str:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    environ.update(env, PYTHONPATH=os.pathsep.join([root, os.path.join(root, "extension")]))
    out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()[-2:]


SHOW = ("import os\nfrom fluid_interactive.backend import rows\n"
        "print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'), rows.SPLIT)")


def test_fluid_imported_before_numpy_shortens_openblass_idle_spin_and_splits_rows():
    spin, split = _in_fresh_process("import fluid\n" + SHOW)
    assert spin == "18" and split == str(threads.STATE.openblas())


def test_numpy_imported_first_or_a_spin_set_by_the_user_is_left_alone():
    assert _in_fresh_process("import numpy, fluid\n" + SHOW) == ["None", "False"]
    assert _in_fresh_process("import fluid\n" + SHOW,
                             OPENBLAS_THREAD_TIMEOUT="28") == ["28", "False"]
