"""The compiled kernel tier (fluid_interactive/kernels) against NumPy kernels alone.

1. Step time of the peer suite's training workloads, with and without the tier, two
   programs in one process timed in interleaved blocks (the tier's kernels built first).
2. The update alone: Adam over W2's 669,706 float32 parameters as NumPy's 12 ufunc calls
   and as the compiled loop, interleaved.
3. The LSTM op and its gradient op alone at W4's and W5's shapes, with their NumPy steps
   and with the compiled cell sequences (kernels/recurrent.py), interleaved; and the LSTM
   and GRU ops with the exact passes (kernels/rnn_passes.py) and without.
4. What the tier costs a fresh process: compile + first call with the tier off, with a
   cold cache (the kernels build in the background: how long until the plan switches),
   and with a warm cache, both as a script (compile at once: the kernels load in the
   background) and as a notebook would (the package, imported in IPython, preloads a
   cached kernel, and the first call comes after that is over).

W4 and W5 (the LSTM) run the compiled cell sequences (kernels/recurrent.py), W6 the chains.

    python benchmarks/bench_tier.py [--workloads W1,W2-adam] [--rounds 7]
        [--sections steps,update,cells,passes,fresh]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "extension")]

from _timing import interleaved_samples, interleaved_us  # noqa: E402
from peers import fluid_impl, seq_fluid  # noqa: E402
from peers.seq_workloads import SEQ_MODELS, seq_batches  # noqa: E402
from peers.workloads import WORKLOADS, batches, initial_parameters  # noqa: E402

TRAIN = ["W1", "W2-sgd", "W2-adam", "W3", "W3-scp", "W4", "W5", "W6"]
KERNELS = ["auto"]   # --kernels


def _program(name: str, tier: bool):
    # read when a plan is built; KERNELS[0]: "auto" (bit-identical kernels) or "fast"
    os.environ["FLUID_KERNELS"] = KERNELS[0] if tier else "numpy"
    w = WORKLOADS[name]
    if w.model in SEQ_MODELS:   # the LSTM (compiled cells) and the encoder block
        prog, _ = seq_fluid.compiled(w, initial_parameters(w.model))
        xs, ys = seq_batches(w.model, w.batch)
    else:
        prog, _ = fluid_impl.compiled(w, initial_parameters(w.model))
        xs, ys = batches(w.model, w.batch)
    prog.train_step(xs[0], ys[0])
    fluid_impl.await_compiled_kernels(prog)
    prog.train_step(xs[1], ys[1])   # switches
    return prog, xs, ys


def _stepper(prog, xs: list, ys: list):
    state = {"i": 0}

    def step():
        k = state["i"] % len(xs)
        state["i"] += 1
        prog.train_step(xs[k], ys[k])
    return step


def step_times(names: list[str], rounds: int) -> None:
    print("## Step time with and without the tier (µs, median of interleaved blocks; the "
          "spread: their lowest and highest; 'cells NumPy': the tier with the recurrent "
          "cells' steps left to NumPy)\n")
    print("| workload | NumPy kernels | spread | compiled tier | spread | tier ÷ NumPy | "
          "cells NumPy | spread | tier ÷ cells NumPy | tier |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        (a, xs, ys), (b, _, _) = _program(name, False), _program(name, True)
        contenders = {"numpy": _stepper(a, xs, ys), "tier": _stepper(b, xs, ys)}
        c = _program(name, True)[0]
        if _cells_to_numpy(c):
            contenders["cells"] = _stepper(c, xs, ys)
        s = interleaved_samples(contenders, WORKLOADS[name].steps, rounds)
        us = {k: statistics.median(v) for k, v in s.items()}
        cells = (f"{us['cells']:,.1f} | {_spread(s['cells'])} | "
                 f"{us['tier'] / us['cells']:.2f}" if "cells" in us else "– | – | –")
        print(f"| {name} | {us['numpy']:,.1f} | {_spread(s['numpy'])} | {us['tier']:,.1f} | "
              f"{_spread(s['tier'])} | {us['tier'] / us['numpy']:.2f} | {cells} | "
              f"{b.train_step.runner.tier} |", flush=True)


def _cells_to_numpy(prog) -> int:
    """Point the compiled cell sequences (kernels/recurrent.py) of ``prog``'s plans back at NumPy
    (after the switch, which happens once); how many there were."""
    n = 0
    for code in list(prog.train_step.runner.plans.values()):
        tier = prog.train_step.runner.plan_tier(code)
        for i, kernel in enumerate(tier.kernels if tier is not None else ()):
            if kernel.source.stem in ("lstm", "gru"):   # and what the policy swaps back
                kernel.fn = tier.loaded[i] = None
                n += 1
    return n


def passes_alone(models: list[str], rounds: int) -> None:
    """The LSTM and GRU ops and their gradient ops alone, with the exact compiled passes
    (kernels/rnn_passes.py, what a plan runs by default) against their NumPy stand-ins."""
    print("\n## The recurrent ops alone with their exact passes (µs per call, median of "
          "interleaved blocks; CPU time of this thread)\n")
    print("| shape | op | NumPy | compiled passes | passes ÷ NumPy |")
    print("|---|---|---|---|---|")
    variants = (("lstm", False, ""), ("lstm", True, " (peepholes)"), ("gru", False, ""),
                ("gru", True, " (linear_before_reset)"))
    for model in models:
        for cell, variant, label in variants:
            _ops_alone(model, (cell + label, f"{cell}_grad"),
                       _cell_kernels(model, False, cell, "auto", variant),
                       _cell_kernels(model, True, cell, "auto", variant), rounds)


def _ops_alone(model: str, names: tuple[str, str], slow_ops: list, fast_ops: list,
               rounds: int) -> None:
    """A table row per op: its kernel in ``slow_ops`` and in ``fast_ops``, interleaved, on
    one thread (as a plan of this size runs: backend/threads.py)."""
    from fluid_interactive.backend.threads import set_threads
    set_threads(1)
    for (slow, args), (fast, _), name in zip(slow_ops, fast_ops, names):
        us = interleaved_us({"numpy": partial(slow, *args), "fast": partial(fast, *args)},
                            20, rounds, clock=time.thread_time)
        print(f"| {model} | {name} | {us['numpy']:,.0f} | {us['fast']:,.0f} | "
              f"{us['fast'] / us['numpy']:.2f} |", flush=True)
    set_threads(None)


def _spread(samples: list[float]) -> str:
    return f"{min(samples):,.0f}–{max(samples):,.0f}"


def update_alone(rounds: int) -> None:
    from fluid_interactive.kernels.build import load
    from fluid_interactive.kernels.optim import update_source
    from fluid_interactive.ops.optim import adam_update
    n, f = 669_706, np.float32
    rng = np.random.default_rng(0)
    p, g, m1 = (rng.standard_normal(n).astype(f) for _ in range(3))
    m2 = np.abs(rng.standard_normal(n).astype(f))
    outs = [np.empty(n, f) for _ in range(3)]
    adam = load(update_source("adam", "float32"))
    consts = (f(0.9), f(0.1), f(0.999), f(0.001), f(1e-8), f(1e-3))
    us = interleaved_us({
        "numpy": lambda: adam_update(np, 0.9, 0.999, 1e-8, p, g, m1, m2, 1e-3, *outs, outs[0]),
        "compiled": lambda: adam(p, g, m1, m2, *consts, *outs)}, 50, rounds)
    print(f"\n## Adam's update alone, {n:,} float32 parameters (µs)\n")
    print(f"NumPy (12 ufunc calls): {us['numpy']:,.0f}; compiled loop: {us['compiled']:,.0f} "
          f"(ratio {us['compiled'] / us['numpy']:.2f})\n")


def _cell_kernels(model: str, compiled: bool, cell: str = "lstm", kernels: str = "fast",
                  variant: bool = False) -> list:
    """(kernel, args) of the ``cell`` op ("lstm", with peepholes when ``variant``, or
    "gru", with linear_before_reset when ``variant``) of ``model``'s shape and of its
    gradient op, with their compiled kernels switched on or not: with ``kernels`` "fast"
    the whole sequences (kernels/recurrent.py), with "auto" the exact passes
    (kernels/rnn_passes.py)."""
    from peers.seq_workloads import LSTM_SHAPES

    from fluid_interactive.ir.records import OpDesc
    from fluid_interactive.kernels.build import load
    from fluid_interactive.ops import flat_inputs, get_spec, prepare_kernel
    from fluid_interactive.ops.interpret import run_ops
    from fluid_interactive.ops.plan_state import PlanState
    from fluid_interactive.ops.spec import TensorType
    b, t, _, h, _ = LSTM_SHAPES[model]
    g = 4 if cell == "lstm" else 3
    peep = cell == "lstm" and variant
    rng = np.random.default_rng(0)
    env = {"x": rng.standard_normal((b, t, g * h)).astype(np.float32),
           "w": (0.1 * rng.standard_normal((h, g * h))).astype(np.float32),
           "b": (0.1 * rng.standard_normal((1, (7 if peep else g) * h))).astype(np.float32),
           "dh": rng.standard_normal((b, t, h)).astype(np.float32)}
    kept = ("BatchGate", "BatchCellPreAct" if cell == "lstm" else "BatchResetHiddenPrev",
            "BatchHidden")
    state = {slot: [f"s{i}"] for i, slot in enumerate(kept)}
    attrs = {"use_peepholes": variant} if cell == "lstm" else \
        {"linear_before_reset": variant}
    outs = {"Hidden": ["h"], **({"Cell": ["c"]} if cell == "lstm" else {}), **state}
    forward = OpDesc(cell, {"Input": ["x"], "Weight": ["w"], "Bias": ["b"]}, outs, attrs)
    backward = OpDesc(f"{cell}_grad", {"Weight": ["w"], "Hidden@GRAD": ["dh"], **state,
                                       **({"Bias": ["b"]} if cell == "lstm" else {})},
                      {"Input@GRAD": ["dx"], "Weight@GRAD": ["dw"], "Bias@GRAD": ["db"]},
                      attrs)
    run_ops([forward, backward], env)   # every var typed
    out = []
    for op in (forward, backward):
        state = PlanState()
        os.environ["FLUID_KERNELS"] = kernels
        kernel = prepare_kernel(op, lambda n: TensorType(env[n].shape, str(env[n].dtype)),
                                np, state=state)
        for k in state.tier.kernels if compiled else ():
            k.fn = load(k.source)
        out.append((kernel, [env[n] for n in flat_inputs(get_spec(op.type), op)]))
    return out


def cells_alone(models: list[str], rounds: int) -> None:
    """The LSTM op and its gradient op alone, NumPy steps against compiled ones."""
    print("\n## The LSTM op and its gradient op alone (µs per call, median of interleaved "
          "blocks; CPU time of this thread, which other processes' load does not add to)\n")
    print("| shape | op | NumPy steps | compiled steps | compiled ÷ NumPy |")
    print("|---|---|---|---|---|")
    for model in models:
        _ops_alone(model, ("lstm", "lstm_grad"), _cell_kernels(model, False),
                   _cell_kernels(model, True), rounds)


_WORKER = """
import json, os, sys, time
t0 = time.perf_counter()
sys.path[:0] = {paths!r}
import fluid_interactive.kernels.build as build
if {notebook!r}:   # in IPython the package preloads; a notebook's first call comes later
    build.preload()
    deadline = time.monotonic() + 60
    while build.preload_running() and time.monotonic() < deadline:
        time.sleep(0.005)
t_import = time.perf_counter()
from peers import fluid_impl, seq_fluid
from peers.seq_workloads import SEQ_MODELS, seq_batches
from peers.workloads import WORKLOADS, batches, initial_parameters
w = WORKLOADS[{name!r}]
seq = w.model in SEQ_MODELS
xs, ys = (seq_batches if seq else batches)(w.model, w.batch)
t1 = time.perf_counter()
prog, _ = (seq_fluid if seq else fluid_impl).compiled(w, initial_parameters(w.model))
prog.train_step(xs[0], ys[0])
t2 = time.perf_counter()
first_tier = prog.train_step.runner.tier
i = 1
while prog.train_step.runner.tier in ("compiling", "loading") and time.perf_counter() - t2 < 600:
    prog.train_step(xs[i % len(xs)], ys[i % len(ys)])
    i += 1
print("RESULT " + json.dumps({{"compile_first_ms": (t2 - t1) * 1e3, "first_tier": first_tier,
      "switch_s": time.perf_counter() - t2, "calls_before_switch": i - 1,
      "tier": prog.train_step.runner.tier}}))
"""


def fresh_process(name: str, tier: bool, cache: str, notebook: bool = False) -> dict:
    paths = [HERE, os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "extension")]
    env = dict(os.environ, FLUID_KERNELS=KERNELS[0] if tier else "numpy",
               FLUID_KERNEL_CACHE=cache)
    code = _WORKER.format(paths=paths, notebook=notebook, name=name)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=900)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"{name}: the worker failed\n{proc.stderr[-3000:]}")


def first_calls(names: list[str], rounds: int) -> None:
    print("## A fresh process: compile + first call (ms, median of "
          f"{rounds} processes), and when the plan switches to compiled kernels\n")
    print("| workload | tier off | cold cache | cold: switch after | warm cache, script "
          "| warm: first call runs | warm cache, notebook | notebook: first call runs |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        off, cold, warm, nb = [], [], [], []
        for _ in range(rounds):
            with tempfile.TemporaryDirectory() as cache:
                off.append(fresh_process(name, False, cache))
                cold.append(fresh_process(name, True, cache))
                warm.append(fresh_process(name, True, cache))
                nb.append(fresh_process(name, True, cache, notebook=True))

        def ms(rs):
            return f"{statistics.median(r['compile_first_ms'] for r in rs):.1f}"
        switch = statistics.median(r["switch_s"] for r in cold)
        calls = statistics.median(r["calls_before_switch"] for r in cold)
        print(f"| {name} | {ms(off)} | {ms(cold)} | {switch:.1f} s ({calls:.0f} calls) | "
              f"{ms(warm)} | {warm[-1]['first_tier']} | {ms(nb)} | {nb[-1]['first_tier']} |",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default=",".join(TRAIN))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--processes", type=int, default=3, help="fresh processes per figure")
    ap.add_argument("--sections", default="steps,update,cells,passes,fresh",
                    help="which of: steps (step times), update (Adam alone), cells (the "
                         "LSTM ops alone, whole compiled sequences), passes (the LSTM and "
                         "GRU ops alone, exact compiled passes), fresh (a fresh process)")
    ap.add_argument("--kernels", default="auto", choices=("auto", "fast"),
                    help="the tier's kernels: auto (NumPy's values bit for bit) or fast "
                         "(also those within float rounding: the LSTM sequences, exp and "
                         "tanh in chains)")
    args = ap.parse_args()
    KERNELS[0] = args.kernels
    sections = args.sections.split(",")
    from fluid_interactive import kernels
    if not kernels.enabled():
        print("The compiled tier is not installed (pip install -e .[fast]): nothing to "
              "compare.")
        return
    names = args.workloads.split(",")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["FLUID_KERNEL_CACHE"] = cache
        t0 = time.perf_counter()
        if "steps" in sections:
            step_times(names, args.rounds)
        if "update" in sections:
            update_alone(args.rounds)
        if "cells" in sections:
            cells_alone([n for n in names if n in ("W4", "W5")], args.rounds)
        if "passes" in sections:
            passes_alone([n for n in names if n in ("W4", "W5")], args.rounds)
        print(f"(the section above built its kernels in {time.perf_counter() - t0:.0f} s)\n")
    if "fresh" in sections:
        first_calls(names, args.processes)


if __name__ == "__main__":
    main()
