"""The peer suite: W1-W3 (train and infer) in fluid_interactive, hand-written NumPy, and
PyTorch eager and JAX jit when they import (the optional ``bench`` extra).

Each framework runs in its own process, with the same data and the same initial
parameters (benchmarks/peers/workloads.py). First one process per framework checks that
the losses agree at fixed steps (and inference outputs match); only then are the timings
taken, in rounds: each round starts one fresh process per framework, in an order rotated
from round to round, and each process times every workload. A ratio is fluid's time over
a peer's time in the same round; the table gives its median [min-max] over the rounds.

    python benchmarks/bench_peers.py                    # every workload, 5 rounds
    python benchmarks/bench_peers.py --rounds 3 --workloads W1,W2-adam
    python benchmarks/bench_peers.py --frameworks fluid,numpy
    python benchmarks/bench_peers.py --device gpu --frameworks fluid,torch   # CuPy vs CUDA
    python benchmarks/bench_peers.py --busy     # beside a process burning one core
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT, os.path.join(ROOT, "extension")]
if "--worker" in sys.argv and sys.argv[sys.argv.index("--worker") + 1].startswith("fluid"):
    # A fluid worker imports fluid first, as the docs ask (docs/architecture.md, "Rows
    # split over threads"): the OpenBLAS NumPy loads then lets its idle threads sleep
    # soon (util/blas_wait.py).
    import fluid  # noqa: F401

import numpy as np  # noqa: E402
from _busy import busy_core  # noqa: E402
from peers.workloads import (  # noqa: E402 (after the path set-up above)
    CHECK_AT,
    CHECK_STEPS,
    POOL,
    WORKLOADS,
    Workload,
    initial_parameters,
)

FRAMEWORKS = {"fluid": ("peers.fluid_impl", "fluid"),
              "fluid-numpy": ("peers.fluid_impl", "fluid"),   # FLUID_KERNELS=numpy
              "fluid-fast": ("peers.fluid_impl", "fluid"),    # FLUID_KERNELS=fast
              "numpy": ("peers.numpy_impl", "numpy"),
              "torch": ("peers.torch_impl", "torch"), "jax": ("peers.jax_impl", "jax")}
LABELS = {"fluid": "fluid_interactive", "fluid-numpy": "fluid, NumPy kernels only",
          "fluid-fast": "fluid, kernels within float rounding too (FLUID_KERNELS=fast)",
          "numpy": "hand NumPy", "torch": "PyTorch eager",
          "jax": "JAX jit"}
SETTLE_S = 0.3   # idle BLAS / OpenMP threads of the previous workload spin for a while
MEMORY_WORKLOADS = ("W2-sgd", "W2-adam", "W2-rmsprop", "W3", "W3-scp")
THREADS = [0]    # --threads: 0 keeps every framework's default
# Variables that pin OpenBLAS's kernels (some machines set them for old OpenBLAS builds);
# the suite runs with whatever the environment has and prints them.
BLAS_PINS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
LOSS_RTOL, LOSS_ATOL = 2e-3, 1e-5
# Adam divides by the root of tiny second moments, so float32 rounding (GEMMs summing in
# another order with another thread count) moves its losses by ~0.3% within 30 steps; and
# torch.optim.Adam adds epsilon after the bias correction (fluid, JAX and NumPy here:
# before it, as Paddle does), which moves them by up to ~3%.
FLUIDS = ("fluid", "fluid-numpy", "fluid-fast")
LOOSER = {("torch", "W2-adam"): 5e-2, ("jax", "W2-adam"): 1e-2}
LOOSER.update({(f, "W2-adam"): 1e-2 for f in FLUIDS})
# RMSProp divides by the root of the mean square as Adam does: the same ~0.3%.
LOOSER.update({(f, "W2-rmsprop"): 1e-2 for f in ("torch", "jax", *FLUIDS)})


def applies(framework: str, w: Workload) -> bool:
    """W3-scp is fluid's second way to write W3; the GEMM floor is NumPy's."""
    if w.kind == "floor":
        return framework == "numpy"
    return framework.startswith("fluid") or w.name != "W3-scp"


# --- the worker: one framework, in its own process --------------------------------------------

def _module(framework: str):
    return importlib.import_module(FRAMEWORKS[framework][0])


def _check(framework: str, names: list[str], device: str) -> dict:
    impl, out = _module(framework), {}
    for name in names:
        w = WORKLOADS[name]
        c = impl.make(w, initial_parameters(w.model), device)
        if w.kind == "train":
            losses = [float(c.call(i)) for i in range(CHECK_STEPS)]
            out[name] = [losses[i] for i in CHECK_AT]
        elif w.kind == "infer":
            out[name] = np.asarray(c.call(0), np.float64).ravel()[:64].tolist()
    return out


def _time(framework: str, names: list[str], blocks: int, device: str) -> dict:
    impl, out = _module(framework), {}
    for name in names:
        w = WORKLOADS[name]
        c = impl.make(w, initial_parameters(w.model), device)
        t0 = time.perf_counter()
        c.call(0)
        first_ms = (time.perf_counter() - t0) * 1e3
        for i in range(1, w.warmup):
            c.call(i)
        if c.settle is not None:   # the compiled kernels, built meanwhile
            c.settle()
        samples = []
        for _ in range(blocks):
            time.sleep(SETTLE_S)
            c.call(0)
            t0 = time.perf_counter()
            for i in range(w.steps):
                c.call(i)
            samples.append((time.perf_counter() - t0) / w.steps * 1e6)
        out[name] = {"us": statistics.median(samples), "compile_ms": c.compile_ms,
                     "first_ms": first_ms}
    return out


def _memory(framework: str, names: list[str]) -> dict:
    """Peak bytes NumPy allocated (tracemalloc) from building the model through 5 steps."""
    impl, out = _module(framework), {}
    for name in names:
        w = WORKLOADS[name]
        params = initial_parameters(w.model)
        warm = impl.make(w, params)   # once untraced: libraries a first use imports
        warm.call(0)
        if warm.settle is not None:
            warm.settle()
        warm.call(1)
        del warm
        tracemalloc.start()
        c = impl.make(w, params)
        for i in range(5):
            c.call(i)
        out[name] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        del c
    return out


def worker(args: argparse.Namespace) -> None:
    cpus = os.environ.get("FLUID_BENCH_CPUS")
    if cpus:   # JAX's thread pool heeds no setting but the CPUs it may run on
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    names = args.workloads.split(",")
    device = "cpu" if args.worker == "numpy" else args.device
    if args.mode == "check":
        result = _check(args.worker, names, device)
    elif args.mode == "time":
        result = _time(args.worker, names, args.blocks, device)
    else:
        result = _memory(args.worker, names)
    print("RESULT " + json.dumps(result))


# --- the driver -----------------------------------------------------------------------------

def run_worker(framework: str, mode: str, names: list[str], blocks: int = 3,
               device: str = "cpu", base_env: dict[str, str] | None = None) -> dict:
    """One worker process; its environment is ``base_env`` (this process's by default)
    with the suite's settings for the framework and thread count."""
    names = [n for n in names if applies(framework, WORKLOADS[n])]
    if not names:
        return {}
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", framework, "--mode", mode,
           "--workloads", ",".join(names), "--blocks", str(blocks), "--device", device]
    env = dict(os.environ if base_env is None else base_env)
    if framework in ("fluid-numpy", "fluid-fast"):
        env["FLUID_KERNELS"] = framework.split("-")[1]
    if THREADS[0]:   # every thread pool of every framework, and one CPU
        env.update({k: str(THREADS[0]) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                 "MKL_NUM_THREADS")})
        env["FLUID_BENCH_CPUS"] = ",".join(str(c) for c in range(THREADS[0]))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise SystemExit(f"{framework} {mode} failed (exit {proc.returncode}):\n"
                     f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def available(framework: str) -> bool:
    package = FRAMEWORKS[framework][1]
    return package in ("fluid", "numpy") or importlib.util.find_spec(package) is not None


def check_agreement(frameworks: list[str], names: list[str], device: str) -> None:
    """Losses at fixed steps (and inference outputs) must agree with hand NumPy's."""
    got = {f: run_worker(f, "check", names, device=device) for f in frameworks}
    print(f"## Same data, same initial parameters: loss at steps {list(CHECK_AT)}\n")
    print("| workload | " + " | ".join(LABELS[f] for f in frameworks) + " |")
    print("|---|" + "---|" * len(frameworks))
    bad = []
    for name in names:
        ref = got["numpy"].get(_reference(name))
        if ref is None:
            continue
        cells = []
        for f in frameworks:
            v = got[f].get(name)
            if v is None:
                cells.append("")
                continue
            ok = np.allclose(v, ref, rtol=LOOSER.get((f, name), LOSS_RTOL), atol=LOSS_ATOL)
            if not ok:
                bad.append(f"{f} {name}: {np.round(v[:6], 5)} vs numpy {np.round(ref[:6], 5)}")
            shown = " ".join(f"{x:.5f}" for x in v) if WORKLOADS[name].kind == "train" \
                else f"max abs diff {np.max(np.abs(np.subtract(v, ref))):.1e}"
            cells.append(shown + ("" if ok else " **MISMATCH**"))
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    if bad:
        raise SystemExit("results disagree; no timings taken:\n  " + "\n  ".join(bad))


def _reference(name: str) -> str:
    """The workload the peers run for ``name`` (fluid's second W3 is W3 to them)."""
    return "W3" if name == "W3-scp" else name


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    versions = [f"Python {platform.python_version()}", f"NumPy {np.__version__}"]
    for f in ("torch", "jax"):
        if available(f):
            try:
                versions.append(importlib.import_module(FRAMEWORKS[f][0]).version())
            except Exception as e:  # an installed but broken peer shows up in the table
                versions.append(f"{f}: {type(e).__name__}")
    try:
        from threadpoolctl import threadpool_info
        versions += [f"{d['internal_api']} {d.get('version')} ({d.get('architecture')} "
                     f"kernels)" for d in threadpool_info() if d.get("user_api") == "blas"]
    except ImportError:
        pass
    pins = [f"{k}={os.environ[k]}" for k in BLAS_PINS if k in os.environ]
    versions.append(", ".join(pins) if pins else "OpenBLAS's own choice of kernels")
    return f"{os.cpu_count()} CPUs ({cpu}); " + ", ".join(versions)


def report(frameworks: list[str], names: list[str], rounds: int, blocks: int,
           device: str) -> None:
    times: dict[str, dict[str, list[dict]]] = {f: {} for f in frameworks}
    for r in range(rounds):
        order = frameworks[r % len(frameworks):] + frameworks[:r % len(frameworks)]
        for f in order:
            for name, v in run_worker(f, "time", names, blocks, device).items():
                times[f].setdefault(name, []).append(v)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
    peers = [f for f in ("numpy", "jax", "torch") if f in frameworks]
    for variant in (f for f in FLUIDS if f in frameworks):
        print(f"## Step time: {LABELS[variant]} / peer, median [min-max] over {rounds} "
              f"rounds\n")
        print(f"| workload | {variant} µs (median) | "
              + " | ".join(f"÷ {LABELS[p]}" for p in peers) + " |")
        print("|---|---|" + "---|" * len(peers))
        mine_all = times.get(variant, {})
        for name in names:
            if name not in mine_all:
                continue
            mine = [v["us"] for v in mine_all[name]]
            cells = []
            for p in peers:
                theirs = [v["us"] for v in times[p].get(_reference(name), [])]
                cells.append(spread([a / b for a, b in zip(mine, theirs)]) if theirs else "")
            print(f"| {WORKLOADS[name].what} | {statistics.median(mine):,.1f} | "
                  + " | ".join(cells) + " |")
        print()
    print_targets(times, names)
    fluid = times.get("fluid", {})
    floor = times.get("numpy", {}).get("W2-gemm")
    if floor and "W2-sgd" in fluid:
        ratios = [a["us"] / b["us"] for a, b in zip(fluid["W2-sgd"], floor)]
        print(f"\nW2 SGD ÷ its GEMM floor (the 8 GEMMs alone, NumPy, "
              f"{statistics.median([b['us'] for b in floor]):,.0f} µs): {spread(ratios)}")
    print("\n## Absolute medians, µs per call\n")
    print("| workload | " + " | ".join(LABELS[f] for f in frameworks) + " |")
    print("|---|" + "---|" * len(frameworks))
    for name in names:
        cells = [f"{statistics.median([v['us'] for v in times[f][name]]):,.1f}"
                 if name in times[f] else "" for f in frameworks]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for variant in (f for f in FLUIDS if f in frameworks):
        print(f"\n## {LABELS[variant]}: compile and first call, ms (median over rounds)\n")
        print("| workload | compile | first call (plan + run) | compile + first |")
        print("|---|---|---|---|")
        for name in names:
            if name in times[variant]:
                c = statistics.median(v["compile_ms"] for v in times[variant][name])
                f1 = statistics.median(v["first_ms"] for v in times[variant][name])
                print(f"| {name} | {c:.1f} | {f1:.1f} | {c + f1:.1f} |")


#: The suite's speed targets: (workload, fluid variant, peer, the most fluid's time may be
#: as a multiple of the peer's). The sequence models against PyTorch eager and JAX jit;
#: inference against hand NumPy; and the compiled tier never slower than NumPy kernels.
TARGETS = ([(w, "fluid", "torch", 1.0) for w in ("W4", "W5", "W6")]
           + [(w, "fluid", "jax", 0.8) for w in ("W4", "W5", "W6")]
           + [("W2-infer", "fluid", "numpy", 1.1)])
TIER_LIMIT = 1.0   # fluid (tier on) ÷ fluid-numpy (tier off), every workload


def verdict(ratios: list[float], limit: float) -> str:
    """PASS when the median ratio is within ``limit``; NOISE when the median is not but
    the best round is (the rounds' spread straddles the limit); FAIL otherwise."""
    if statistics.median(ratios) <= limit:
        return "PASS"
    return "NOISE" if min(ratios) <= limit else "FAIL"


def print_targets(times: dict[str, dict[str, list[dict]]], names: list[str]) -> None:
    """A line per target whose workload and frameworks this run measured: the ratio's
    median [min-max] over the rounds and PASS / NOISE / FAIL."""
    # each target for fluid as it runs by default, and with FLUID_KERNELS=fast when measured
    rows = [(w, variant, peer, limit) for w, mine, peer, limit in TARGETS
            for variant in (mine, "fluid-fast")]
    rows += [(w, "fluid", "fluid-numpy", TIER_LIMIT) for w in names]
    lines = []
    for w, mine, peer, limit in rows:
        a = times.get(mine, {}).get(w)
        b = times.get(peer, {}).get(_reference(w) if peer in ("numpy", "jax", "torch") else w)
        if w not in names or not a or not b:
            continue
        ratios = [x["us"] / y["us"] for x, y in zip(a, b)]
        lines.append(f"| {w} | {LABELS[mine]} ÷ {LABELS[peer]} | <= {limit} | "
                     f"{spread(ratios)} | {verdict(ratios, limit)} |")
    if lines:
        print("## Targets (median [min-max] of the rounds' ratios)\n")
        print("| workload | ratio | target | measured | verdict |\n|---|---|---|---|---|")
        print("\n".join(lines) + "\n")


def memory_report(frameworks: list[str], names: list[str]) -> None:
    names = [n for n in names if n in MEMORY_WORKLOADS]
    variants = [f for f in FLUIDS if f in frameworks]
    if not names or not variants or "numpy" not in frameworks:
        return
    npy = run_worker("numpy", "memory", names)
    mine = {v: run_worker(v, "memory", names) for v in variants}
    print("\n## Peak memory NumPy allocated (model + 5 steps, tracemalloc), MB\n")
    print("| workload | hand NumPy | " + " | ".join(f"{v} | ratio" for v in variants) + " |")
    print("|---|---|" + "---|---|" * len(variants))
    for name in names:
        base = npy[_reference(name)]
        cells = [f"{mine[v][name] / 1e6:.1f} | {mine[v][name] / base:.2f}" for v in variants]
        print(f"| {name} | {base / 1e6:.1f} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--blocks", type=int, default=3, help="timed blocks per process")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--frameworks", default="fluid,fluid-numpy,numpy,torch,jax",
                    help="fluid-numpy: fluid with the compiled kernel tier off; "
                         "fluid-fast: with its kernels within float rounding too")
    ap.add_argument("--device", default="cpu", choices=("cpu", "gpu"),
                    help="gpu: fluid on CuPy, PyTorch on CUDA (hand NumPy stays the "
                         "reference on the CPU)")
    ap.add_argument("--threads", type=int, default=0,
                    help="limit every framework to this many threads and CPUs (default: "
                         "their own defaults)")
    ap.add_argument("--busy", action="store_true",
                    help="time beside a process burning one core (a busy machine)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="time", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    THREADS[0] = args.threads
    names = args.workloads.split(",")
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise SystemExit(f"unknown workload(s) {unknown}; known: {', '.join(WORKLOADS)}")
    wanted = args.frameworks.split(",")
    frameworks = [f for f in wanted if available(f)]
    missing = [f for f in wanted if f not in frameworks]
    if "numpy" not in frameworks:
        frameworks.append("numpy")   # the reference every check compares with
    threads = f"{args.threads} thread(s) each" if args.threads else "default threads"
    threads += "; one core kept busy by another process" if args.busy else ""
    print(f"# Peer suite ({args.device})\n\nMachine: {machine()}; {POOL} batches cycled; "
          f"{threads}.")
    if missing:
        print(f"Not installed (no column): {', '.join(missing)} "
              f"(`pip install -e .[bench]`).")
    print()
    check_agreement(frameworks, names, args.device)
    with busy_core(args.busy):
        report(frameworks, names, args.rounds, args.blocks, args.device)
    if args.device == "cpu":
        memory_report(frameworks, names)


if __name__ == "__main__":
    main()
