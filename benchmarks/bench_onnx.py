"""ONNX export and import of the digits CNN (examples/digits_cnn.py), and onnxruntime
against ``compiled.infer`` on batches of 1 and 64, timed in one interleaved run.

    python benchmarks/bench_onnx.py        (needs the `onnx` and `examples` extras)

onnxruntime runs on one thread, as the compiled program does (NumPy's BLAS may use more).
Figures and their reading are in docs/export.md.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "extension"), os.path.join(ROOT, "examples"),
                os.path.dirname(os.path.abspath(__file__))]

import numpy as np  # noqa: E402
import onnxruntime  # noqa: E402
from _timing import interleaved_us  # noqa: E402
from digits_cnn import DigitsCNN  # noqa: E402
from digits_data import load_split, write_recordio  # noqa: E402

import fluid  # noqa: E402


def _median_ms(fn, repeats: int = 7) -> float:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        train_file, test_file = write_recordio(tmp)
        cnn = DigitsCNN(train_file=train_file, test_file=test_file, epochs=1).Compile(seed=0)
        for _ in range(5):
            cnn.train()
        path = os.path.join(tmp, "cnn.onnx")
        export_ms = _median_ms(lambda: fluid.export_onnx(cnn, path))
        import_ms = _median_ms(lambda: fluid.import_onnx(path))
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(path, options,
                                               providers=["CPUExecutionProvider"])
        x = load_split()[2]
        print(f"digits CNN: export {export_ms:.1f} ms, import (parse + trace + compile) "
              f"{import_ms:.1f} ms (medians of 7)")
        for batch, calls in ((1, 300), (64, 40)):
            image = np.ascontiguousarray(x[:batch])
            times = interleaved_us({
                "compiled.infer": lambda image=image: cnn.infer(image),
                "onnxruntime": lambda image=image: session.run(None, {"image": image}),
            }, calls)
            ratio = times["compiled.infer"] / times["onnxruntime"]
            print(f"batch {batch:3d}: compiled.infer {times['compiled.infer']:8.1f} us, "
                  f"onnxruntime {times['onnxruntime']:8.1f} us, ratio {ratio:.2f}")
        cnn.close()


if __name__ == "__main__":
    main()
