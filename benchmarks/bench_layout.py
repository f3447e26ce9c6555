"""The layout plan pass (passes/layout.py): the peer suite's LeNet workloads with the pass
and without it (every other plan pass on), and the hand-written NumPy step, in one
process, timed in interleaved blocks with the same BLAS thread count for all (the
thread policy would otherwise set the count that hand NumPy runs with too).

    python benchmarks/bench_layout.py [--workloads W3,W3-scp,W3-infer] [--threads 1,2]
                                      [--rounds 7] [--kernels]

Prints a table per thread count: µs per call (median of interleaved blocks) and the
ratios; and the largest difference between the two programs' parameters after the
timed steps, which both took from the same start on the same batches. ``--kernels``
first times LeNet's convolutions and pools alone, forward and gradient, with one BLAS
thread: in NCHW, in CHWN with NumPy kernels and in CHWN with the compiled tier's.
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


LENET_OPS = (   # name, op, NCHW shapes by var, attrs
    ("conv1", "conv2d", {"x": (64, 1, 28, 28), "k": (20, 1, 5, 5), "y": (64, 20, 24, 24)}, {}),
    ("conv2", "conv2d", {"x": (64, 20, 12, 12), "k": (50, 20, 5, 5), "y": (64, 50, 8, 8)}, {}),
    ("pool1", "pool2d", {"x": (64, 20, 24, 24), "y": (64, 20, 12, 12)},
     {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2]}),
    ("pool2", "pool2d", {"x": (64, 50, 8, 8), "y": (64, 50, 4, 4)},
     {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2]}),
)


def _op_pair(op: str, layout: str, shapes: dict, attrs: dict, compiled: bool):
    """(forward, gradient, their arguments) of one op in one plan's state."""
    from fluid_interactive.ir.records import OpDesc
    from fluid_interactive.ops import prepare_kernel
    from fluid_interactive.ops.layouts import to_layout
    from fluid_interactive.ops.plan_state import PlanState
    from fluid_interactive.ops.spec import TensorType
    attrs = {**attrs, "data_format": layout}
    image = {n: to_layout(s, layout) if n != "k" else s for n, s in shapes.items()}
    image.update({"dx": image["x"], "g": image["y"], "dk": image.get("k", (1,))})
    if op == "conv2d":
        fwd = OpDesc(op, {"Input": ["x"], "Filter": ["k"]}, {"Output": ["y"]}, attrs)
        grad = OpDesc("conv2d_grad", {"Input": ["x"], "Filter": ["k"], "Output@GRAD": ["g"]},
                      {"Input@GRAD": ["dx"], "Filter@GRAD": ["dk"]}, attrs)
    else:
        fwd = OpDesc(op, {"X": ["x"]}, {"Out": ["y"]}, attrs)
        grad = OpDesc("pool2d_grad", {"X": ["x"], "Out": ["y"], "Out@GRAD": ["g"]},
                      {"X@GRAD": ["dx"]}, attrs)
    types = {n: TensorType(s, "float32") for n, s in image.items()}
    state = PlanState()
    kernels = [prepare_kernel(o, types.__getitem__, np, state=state) for o in (fwd, grad)]
    tier = state.tier
    if compiled and tier.kernels:
        tier.start()
        tier.wait(600)
        tier.poll()
    rng = np.random.default_rng(0)
    args = {n: rng.standard_normal(s).astype(np.float32) for n, s in image.items()}
    return kernels, args


def kernel_times(rounds: int) -> None:
    print("\n## LeNet's convolutions and pools alone, one thread: µs, median of "
          "interleaved blocks\n")
    print("| op | NCHW | CHWN, NumPy | CHWN, compiled tier | CHWN, compiled ÷ NCHW |")
    print("|---|---|---|---|---|")
    with threadpool_limits(1):
        for name, op, shapes, attrs in LENET_OPS:
            variants = {"NCHW": ("NCHW", False), "CHWN": ("CHWN", False),
                        "compiled": ("CHWN", True)}
            calls = {}
            for key, (layout, compiled) in variants.items():
                os.environ["FLUID_KERNELS"] = "auto" if compiled else "numpy"
                (fwd, grad), a = _op_pair(op, layout, shapes, attrs, compiled)
                ins = (a["x"], a["k"]) if op == "conv2d" else (a["x"],)
                out = fwd(*ins)
                g_ins = (*ins, a["g"]) if op == "conv2d" else (a["x"], out, a["g"])
                calls[key] = (lambda f=fwd, i=ins: f(*i), lambda f=fwd, g=grad, i=ins,
                              gi=g_ins: (f(*i), g(*gi)))
            os.environ.pop("FLUID_KERNELS", None)
            for part, index in (("forward", 0), ("forward + gradient", 1)):
                us = interleaved_us({k: c[index] for k, c in calls.items()}, 20, rounds)
                print(f"| {name} {part} | {us['NCHW']:,.0f} | {us['CHWN']:,.0f} | "
                      f"{us['compiled']:,.0f} | {us['compiled'] / us['NCHW']:.2f} |",
                      flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="W3,W3-scp,W3-infer")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--kernels", action="store_true")
    args = ap.parse_args()
    if args.kernels:
        kernel_times(args.rounds)
    names = args.workloads.split(",")
    for threads in [int(t) for t in args.threads.split(",")]:
        compare(names, threads, args.rounds)


if __name__ == "__main__":
    main()
