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
  against a known one;
* ``while-batches``: a training step with a ``While`` (an RNN cell stepped 8 times) at
  1,000 batch sizes 1..1000, shuffled, once;
* ``lstm-1000``: the LSTM train step at 1,000 lengths T = 1..1000, shuffled, once;
* ``lstm-repeat``: the LSTM train step at the same 100 lengths (20..119), three passes.

    python benchmarks/bench_memory.py [--scenarios w2-infer,lstm-lengths] [--passes 2]
    python benchmarks/bench_memory.py --scenarios while-batches,lstm-1000,lstm-repeat

(the last three run the passes their description says, whatever ``--passes``).

Targets (docs/benchmarks.md): RSS growth < 100 MB over the 600 batch sizes, and in each
of the last three scenarios; a new batch size of LeNet's inference <= 1.2x a known size;
a new length of the LSTM step <= 1.1x.
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

SCENARIOS = ("w2-infer", "lenet-infer", "lstm-lengths", "while-batches", "lstm-1000",
             "lstm-repeat")
#: scenarios whose passes are fixed: (sizes, passes)
FIXED = {"while-batches": (range(1, 1001), 1), "lstm-1000": (range(1, 1001), 1),
         "lstm-repeat": (range(20, 120), 3)}


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


def while_program(hidden: int = 64, features: int = 16, steps: int = 8) -> type:
    """A training step whose RNN cell runs in a ``While`` of ``steps`` iterations (the
    same input each step), then a mean loss (SGD)."""
    import fluid

    class Net(fluid.Program):
        @fluid.network("x")
        def train_step(self, x):
            x = fluid.layers.data(name="x", shape=[features], dtype="float32")
            h = fluid.layers.fc(input=x, size=hidden, act="tanh")
            i = fluid.layers.fill_constant(shape=[1], dtype="int64", value=0)
            n = fluid.layers.fill_constant(shape=[1], dtype="int64", value=steps)
            cond = fluid.layers.less_than(i, n)
            loop = fluid.layers.While(cond)
            with loop.block():
                w = fluid.layers.create_parameter([hidden, hidden], "float32", name="w")
                u = fluid.layers.fc(input=x, size=hidden, name="u")
                fluid.layers.assign(fluid.layers.tanh(fluid.layers.matmul(h, w) + u),
                                    output=h)
                fluid.layers.increment(i, in_place=True)
                fluid.layers.less_than(i, n, cond=cond)
            loss = fluid.layers.mean(h)
            fluid.optimizer.SGD(learning_rate=1e-3).minimize(loss)
            return loss
    return Net


def _first_call_ratio(call, known, new_ones, method) -> dict:
    """The first call at each new shape against the same shape once known (the fastest
    of the three calls after it: the thread policy times its options on some of them),
    so that the ratio is the cost of the new shape alone: the median of the ratios.
    The known shape's compiled kernels are loaded first: a fresh process's first plan
    runs NumPy kernels until they are (seconds), and every later plan loads them at once."""
    call(known)
    call(known)
    for code in list(method.runner.plans.values()):
        tier = method.runner.plan_tier(code)
        if tier is not None and tier.pending:
            tier.wait(600)
    call(known)
    call(known)
    pairs = []
    for x in new_ones:
        first = _timed(call, x)
        pairs.append((min(_timed(call, x) for _ in range(3)), first))
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
    if scenario in FIXED:
        sizes, passes = list(FIXED[scenario][0]), FIXED[scenario][1]
    if scenario.startswith("lstm"):
        step = lstm_program()().Compile(seed=0).train_step
        sizes = sizes if scenario in FIXED else list(range(20, 121))
        y = rng.random((32, 1), dtype=np.float32)
        x = rng.random((32, max(sizes), 2), dtype=np.float32)

        def call(t):
            return step(np.ascontiguousarray(x[:, :t]), y)
    elif scenario == "while-batches":
        step = while_program()().Compile(seed=0).train_step
        big = rng.standard_normal((max(sizes), 16)).astype(np.float32)

        def call(b):
            return step(big[:b])
    else:
        infer, shape = _infer_program("W2" if scenario == "w2-infer" else "W3")
        sizes = list(range(1, 601 if scenario == "w2-infer" else 201))
        big = rng.standard_normal((max(sizes), *shape)).astype(np.float32)

        def call(b):
            return infer(big[:b])
    order = list(rng.permutation(sizes))
    report: dict = {"scenario": scenario, "shapes": len(sizes)}
    probe = order[:12]   # the first call at new shapes, against a known one
    method = step if scenario.startswith("lstm") or scenario == "while-batches" else infer
    report["first_call"] = _first_call_ratio(call, probe[0], probe[1:], method)
    # what planning those sizes took, as the method reports it (the median of its plans)
    report["planning_ms"] = max(p.planning_ms for p in method.plans)
    report["rss_start_mb"] = rss_mb()
    trace = []
    for _ in range(passes):
        for size in order:
            call(size)
        trace.append(rss_mb())
    report["rss_after_pass_mb"] = trace
    report["rss_growth_mb"] = trace[-1] - report["rss_start_mb"]
    runner = step.runner if scenario in FIXED else None
    if runner is not None:   # what the plan cache counts, beside what the system sees
        report["counted_mb"] = (runner.cache.nbytes + runner.memory.nbytes) / 2**20
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
    print(f"load average before: {_load()}\n")
    print("| scenario | shapes | RSS after the first calls (MB) | RSS after each pass (MB) "
          "| growth (MB) | counted by the plan cache (MB) "
          "| first call at a new shape ÷ the same shape known (ms) "
          "| planning a new shape (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    results = {}
    for scenario in args.scenarios.split(","):
        r = results[scenario] = _run(scenario, args.passes)
        f = r["first_call"]
        passes = " / ".join(f"{m:.0f}" for m in r["rss_after_pass_mb"])
        counted = f"{r['counted_mb']:.0f}" if "counted_mb" in r else "-"
        print(f"| {scenario} | {r['shapes']} | {r['rss_start_mb']:.0f} | {passes} | "
              f"{r['rss_growth_mb']:.0f} | {counted} | {f['ratio']:.2f} ({f['first_ms']:.2f} "
              f"÷ {f['known_ms']:.2f}) | {r['planning_ms']:.2f} |", flush=True)
    print(f"\nload average after: {_load()}\n")
    for line in targets(results):
        print(line)


#: (scenario, what, the measure, the bound): docs/benchmarks.md, "Many shapes"
TARGETS = (
    ("lenet-infer", "LeNet infer at a new batch size <= 1.2x a known size", "ratio", 1.2),
    ("lstm-lengths", "LSTM step at a new T (20..120) <= 1.1x a known T", "ratio", 1.1),
    ("w2-infer", "infer at 600 batch sizes: RSS growth < 100 MB", "growth", 100.0),
)


def targets(results: dict) -> list[str]:
    """One line per target whose scenario ran: PASS or FAIL with the figure."""
    lines = []
    for scenario, what, measure, bound in TARGETS:
        r = results.get(scenario)
        if r is None:
            continue
        value = r["first_call"]["ratio"] if measure == "ratio" else r["rss_growth_mb"]
        ok = value <= bound if measure == "ratio" else value < bound
        shown = f"{value:.2f}x" if measure == "ratio" else f"{value:.0f} MB"
        lines.append(f"target: {what}: {'PASS' if ok else 'FAIL'} ({shown})")
    return lines


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:   # pragma: no cover (no load average on this system)
        return "unknown"


if __name__ == "__main__":
    main()
