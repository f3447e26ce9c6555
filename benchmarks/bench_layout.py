"""The layout plan pass (passes/layout.py): the peer suite's LeNet workloads with the pass
and without it (every other plan pass on), and the hand-written NumPy step, in one
process, timed in interleaved blocks with the same BLAS thread count for all (the
thread policy would otherwise set the count that hand NumPy runs with too).

    python benchmarks/bench_layout.py [--workloads W3,W3-scp,W3-infer] [--threads 1,2]
                                      [--rounds 7]

Prints a table per thread count: µs per call (median of interleaved blocks) and the
ratios; and the largest difference between the two programs' parameters after the
timed steps, which both took from the same start on the same batches.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "extension")]

from _timing import interleaved_us  # noqa: E402
from peers import fluid_impl, numpy_impl  # noqa: E402
from peers.workloads import POOL, WORKLOADS, batches, infer_inputs, initial_parameters  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import fluid  # noqa: E402
from fluid_interactive.passes.pipeline import PLAN_PASSES  # noqa: E402

WITHOUT = ",".join(name for name in PLAN_PASSES if name != "choose_layouts")


def _program(name: str, layout: bool):
    """A compiled program of the workload with or without the pass, planned and with its
    compiled kernels (if any) loaded; returns (program, call)."""
    if layout:
        os.environ.pop("FLUID_PLAN_PASSES", None)
    else:
        os.environ["FLUID_PLAN_PASSES"] = WITHOUT
    w = WORKLOADS[name]
    prog, _ = fluid_impl.compiled(w, initial_parameters(w.model))
    os.environ.pop("FLUID_PLAN_PASSES", None)
    state = {"i": 0}
    if w.kind == "train":
        xs, ys = batches(w.model, w.batch)

        def call():
            k = state["i"] % POOL
            state["i"] += 1
            return prog.train_step(xs[k], ys[k])
    else:
        inputs = infer_inputs(w)

        def call():
            k = state["i"] % POOL
            state["i"] += 1
            return prog.infer(inputs[k])
    call()
    fluid_impl.await_compiled_kernels(prog)
    call()
    return prog, call


def _hand(name: str):
    w = WORKLOADS[name]
    contender = numpy_impl.make(w, initial_parameters(w.model))
    state = {"i": 0}

    def call():
        state["i"] += 1
        return contender.call(state["i"])
    return call


def _differences(a, b) -> float:
    pa, pb = a.parameters(), b.parameters()
    return max(float(np.abs(pa[k] - pb[k]).max()) for k in pa)


def compare(names: list[str], threads: int, rounds: int) -> None:
    print(f"\n## {threads} thread(s): µs per call, median of interleaved blocks\n")
    print("| workload | with the pass | without | hand NumPy | with ÷ without | "
          "with ÷ hand NumPy | max parameter difference |")
    print("|---|---|---|---|---|---|---|")
    fluid.set_threads(threads)
    with threadpool_limits(threads):
        for name in names:
            (a, with_pass), (b, without) = _program(name, True), _program(name, False)
            hand = _hand(name)
            w = WORKLOADS[name]
            calls = max(5, w.steps // 2)
            us = interleaved_us({"with": with_pass, "without": without, "hand": hand},
                                calls, rounds)
            diff = _differences(a, b) if w.kind == "train" else 0.0
            print(f"| {name} | {us['with']:,.0f} | {us['without']:,.0f} | {us['hand']:,.0f} "
                  f"| {us['with'] / us['without']:.2f} | {us['with'] / us['hand']:.2f} | "
                  f"{diff:.1e} |", flush=True)
    fluid.set_threads(None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="W3,W3-scp,W3-infer")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    names = args.workloads.split(",")
    for threads in [int(t) for t in args.threads.split(",")]:
        compare(names, threads, args.rounds)


if __name__ == "__main__":
    main()
