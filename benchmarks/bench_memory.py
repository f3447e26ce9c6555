"""What serving many shapes costs a process: resident memory (RSS, what the system sees,
not only the bytes NumPy counts) and the first call at a new shape.

Each scenario runs in a fresh process of its own and reports the process's RSS after
the first call and after every shape, and the first call at a new shape against calls
at a known one:

* ``w2-infer``: W2 (MLP 784-512-512-10) inference at 600 batch sizes 1..600, shuffled,
  then a second pass over the same sizes (repeated passes must not grow);
* ``lenet-infer``: W3 (LeNet) inference at batch sizes 1..200, shuffled, then again;
  and its first call at a new batch size against a known size;
* ``lstm-lengths``: an LSTM train step (W4's model with the time dim unknown until it
  runs) at lengths 20..120, shuffled, then again; and its first call at a new length
  against a known one.

    python benchmarks/bench_memory.py [--scenarios w2-infer,lstm-lengths] [--passes 2]

Targets (docs/benchmarks.md): RSS growth < 100 MB over the 600 batch sizes; a new batch
size of LeNet's inference <= 1.2x a known size; a new length of the LSTM step <= 1.1x.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT, os.path.join(ROOT, "extension")]

SCENARIOS = ("w2-infer", "lenet-infer", "lstm-lengths")


def rss_mb() -> float:
    """This process's resident memory (Linux: /proc; elsewhere the peak, via resource)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:   # pragma: no cover (not Linux)
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _infer_program(model: str):
    from peers import fluid_impl
    from peers.workloads import WORKLOADS, initial_parameters
    w = WORKLOADS["W2-infer" if model == "W2" else "W3-infer"]
    prog, _ = fluid_impl.compiled(w, initial_parameters(w.model))
    shape = (784,) if model == "W2" else (1, 28, 28)
    return prog.infer, shape


def lstm_program(hidden: int = 64, features: int = 2, optimizer=None) -> type:
    """W4's model with the batch and time dims unknown until it runs: fc to 4H, an LSTM
    (no peepholes), its last step, fc to 1, square error (Adam by default)."""
    import fluid

    class Net(fluid.Program):
        @fluid.network("x", "y")
        def train_step(self, x, y):
            x = fluid.layers.data(name="x", shape=[-1, -1, features], dtype="float32",
                                  append_batch_size=False)
            y = fluid.layers.data(name="y", shape=[1], dtype="float32")
            proj = fluid.layers.fc(input=x, size=4 * hidden, num_flatten_dims=2)
            h, _ = fluid.layers.dynamic_lstm(input=proj, size=4 * hidden, use_peepholes=False)
            out = fluid.layers.fc(input=fluid.layers.sequence_last_step(h), size=1)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(out, y))
            (optimizer or fluid.optimizer.Adam(learning_rate=1e-3)).minimize(loss)
            return loss
    return Net


def _first_call_ratio(call, known, new_ones) -> dict:
    """The first call at each new shape against a call at a known one just before it
    (pairs, so that the machine's load moves both alike): the median of the ratios."""
    call(known)
    call(known)
    pairs = [(_timed(call, known), _timed(call, x)) for x in new_ones]
    ratios = sorted(first / before for before, first in pairs)
    return {"known_ms": statistics.median(p[0] for p in pairs),
            "first_ms": statistics.median(p[1] for p in pairs),
            "ratio": ratios[len(ratios) // 2]}


def _timed(call, args) -> float:
    t0 = time.perf_counter()
    call(args)
    return (time.perf_counter() - t0) * 1e3


def worker(scenario: str, passes: int) -> dict:
    import numpy as np
    rng = np.random.default_rng(0)
    if scenario == "lstm-lengths":
        step = lstm_program()().Compile(seed=0).train_step
        sizes = list(range(20, 121))
        data = {t: (rng.random((32, t, 2), dtype=np.float32),
                    rng.random((32, 1), dtype=np.float32)) for t in sizes}

        def call(t):
            return step(*data[t])
    else:
        infer, shape = _infer_program("W2" if scenario == "w2-infer" else "W3")
        sizes = list(range(1, 601 if scenario == "w2-infer" else 201))
        big = rng.standard_normal((max(sizes), *shape)).astype(np.float32)

        def call(b):
            return infer(big[:b])
    order = list(rng.permutation(sizes))
    report: dict = {"scenario": scenario, "shapes": len(sizes)}
    probe = order[:12]   # the first call at new shapes, against a known one
    report["first_call"] = _first_call_ratio(call, probe[0], probe[1:])
    report["rss_start_mb"] = rss_mb()
    trace = []
    for _ in range(passes):
        for size in order:
            call(size)
        trace.append(rss_mb())
    report["rss_after_pass_mb"] = trace
    report["rss_growth_mb"] = trace[-1] - report["rss_start_mb"]
    return report


def _run(scenario: str, passes: int) -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", scenario,
                          "--passes", str(passes)], capture_output=True, text=True,
                         timeout=3600, env=os.environ.copy())
    if out.returncode != 0:
        raise RuntimeError(f"{scenario} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.passes)))
        return
    print("# Serving many shapes: resident memory and the first call at a new shape\n")
    print("| scenario | shapes | RSS after the first calls (MB) | RSS after each pass (MB) "
          "| growth (MB) | first call at a new shape ÷ a known one (ms) |")
    print("|---|---|---|---|---|---|")
    for scenario in args.scenarios.split(","):
        r = _run(scenario, args.passes)
        f = r["first_call"]
        passes = " / ".join(f"{m:.0f}" for m in r["rss_after_pass_mb"])
        print(f"| {scenario} | {r['shapes']} | {r['rss_start_mb']:.0f} | {passes} | "
              f"{r['rss_growth_mb']:.0f} | {f['ratio']:.2f} ({f['first_ms']:.2f} ÷ "
              f"{f['known_ms']:.2f}) |", flush=True)


if __name__ == "__main__":
    main()
