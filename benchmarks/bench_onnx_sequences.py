"""ONNX export of a DynamicRNN and of a While that fills a tensor array, and onnxruntime
against ``compiled.infer`` on them, timed in one interleaved run.

    python benchmarks/bench_onnx_sequences.py        (needs the `onnx` extra)

The DynamicRNN is a gru_unit cell at the shapes of the peer suite's W5 (B = 32, T = 29,
D = 12, H = 64, lengths from T/2 to T); the While runs 20 steps of tanh(h W + x) on
[32, 64] rows, appending each to an array that is stacked after the loop. onnxruntime runs
on one thread; so does NumPy's BLAS here (fluid.set_threads(1)). Figures and their
reading are in docs/export.md.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.dirname(os.path.abspath(__file__))]

import numpy as np  # noqa: E402
import onnxruntime  # noqa: E402
from _timing import interleaved_us  # noqa: E402

import fluid  # noqa: E402

L = fluid.layers
B, T, D, H, STEPS = 32, 29, 12, 64, 20


class GruCell(fluid.Program):
    @fluid.network("x", "lengths")
    def infer(self, x, lengths):
        x = L.data("x", shape=[-1, -1, D], append_batch_size=False)
        lengths = L.data("lengths", shape=[-1], dtype="int64", append_batch_size=False)
        proj = L.fc(input=x, size=3 * H, num_flatten_dims=2)
        drnn = L.DynamicRNN()
        with drnn.block():
            x_t = drnn.step_input(proj, lengths=lengths)
            h = drnn.memory(shape=[H])
            new_h, _, _ = L.gru_unit(x_t, h, size=3 * H)
            drnn.update_memory(h, new_h)
            drnn.output(new_h)
        return drnn()


class Filled(fluid.Program):
    @fluid.network("x", "n")
    def infer(self, x, n):
        x = L.data("x", shape=[H])
        n = L.data("n", shape=[1], dtype="int64", append_batch_size=False)
        w = L.create_parameter([H, H], "float32", name="w")
        h = L.scale(x, 1.0)
        states = L.create_array("float32")
        i = L.fill_constant([1], "int64", 0)
        cond = L.less_than(i, n)
        loop = L.While(cond)
        with loop.block():
            L.assign(L.tanh(L.matmul(h, w) + x), output=h)
            L.array_write(h, i, array=states)
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=cond)
        return L.tensor_array_to_tensor(states, axis=0, use_stack=True)[0]


def _export_ms(prog) -> float:
    samples = []
    for _ in range(7):
        t0 = time.perf_counter()
        fluid.export_onnx(prog, None)
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def _session(prog):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    model = fluid.export_onnx(prog, None).SerializeToString()
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _compare(name: str, prog, feeds: dict, calls: int) -> None:
    session = _session(prog)
    args = list(feeds.values())
    got, want = session.run(None, feeds)[0], prog.infer(*args)
    gap = float(np.abs(got - want).max())
    times = interleaved_us({"compiled.infer": lambda: prog.infer(*args),
                            "onnxruntime": lambda: session.run(None, feeds)}, calls)
    ratio = times["compiled.infer"] / times["onnxruntime"]
    print(f"{name}: export {_export_ms(prog):.1f} ms (median of 7); compiled.infer "
          f"{times['compiled.infer']:.0f} us, onnxruntime {times['onnxruntime']:.0f} us, "
          f"ratio {ratio:.2f}; largest difference {gap:.1e}")


def main() -> None:
    fluid.set_threads(1)
    rng = np.random.default_rng(0)
    gru = GruCell().Compile(seed=0)
    x = rng.standard_normal((B, T, D)).astype(np.float32)
    lengths = rng.integers(T // 2, T + 1, B).astype(np.int64)
    _compare(f"DynamicRNN gru_unit B={B} T={T} D={D} H={H}", gru,
             {"x": x, "lengths": lengths}, 20)
    filled = Filled().Compile(seed=0)
    filled.set_var("w", (rng.standard_normal((H, H)) / np.sqrt(H)).astype(np.float32))
    rows = rng.standard_normal((B, H)).astype(np.float32)
    _compare(f"While filling an array, {STEPS} steps of [{B}, {H}]", filled,
             {"x": rows, "n": np.array([STEPS])}, 50)
    gru.close()
    filled.close()


if __name__ == "__main__":
    main()
