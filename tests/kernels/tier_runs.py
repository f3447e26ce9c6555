"""Training a program with the compiled tier and without it, on the same data, for the
tests that compare the two bit for bit, whole or with its rows split over threads; and one
op and its gradient op run with their compiled kernels switched on."""
import numpy as np
from ops.harness import analytic_grads, build_op

import fluid
from fluid_interactive.backend import rows, threads
from fluid_interactive.kernels.build import load
from fluid_interactive.ops import interpret
from fluid_interactive.ops.interpret import run_ops
from fluid_interactive.ops.plan_state import PlanState


def train_both(monkeypatch, cls, data, seed, split: bool):
    """((losses, parameters) with FLUID_KERNELS=numpy, the same with the tier once its
    kernels are built, the method trained with the tier). ``split``: three threads for
    every plan (BLAS too, so both runs sum their products alike) and no floor on a
    range's size, so that every kernel that splits its rows does (checked)."""
    def run(mode):
        monkeypatch.setenv("FLUID_KERNELS", mode)
        prog = cls().Compile(seed=seed)
        losses = []
        for i, (x, y) in enumerate(data):
            losses.append(prog.train(x, y))
            if i == 0 and mode == "auto":
                assert prog.train.runner.plan_tier().wait(300)
        return losses, prog.parameters(), prog.train
    if split:
        monkeypatch.setattr(rows, "SPLIT", True)
        monkeypatch.setattr(threads.STATE, "cores", 3)
        monkeypatch.setattr(rows, "MIN_CHUNK", 1)
        fluid.set_threads(3)
    ranges = []
    monkeypatch.setattr(rows, "chunks", lambda *a, f=rows.chunks: ranges.append(f(*a)) or
                        ranges[-1])
    try:
        ref_losses, ref, _ = run("numpy")
        losses, got, method = run("auto")
    finally:
        fluid.set_threads(None)
    assert max(map(len, ranges)) == (3 if split else 1)
    assert method.tier == "compiled"
    return (ref_losses, ref), (losses, got), method


def assert_same_bits(ref, got):
    assert got[0] == ref[0]
    for k in ref[1]:
        assert np.array_equal(got[1][k], ref[1][k]), k


def _counted(fn, ran: list, name: str):
    def counted(*args):
        out = fn(*args)    # a TypeError (arguments of other types) passes through
        ran.append(name)
        return out
    return counted


def switched_on(monkeypatch, ran: list):
    """Every kernel the interpreter prepares runs its compiled forms (loaded at once);
    ``ran`` lists the compiled functions that ran."""
    real = interpret.prepare_kernel

    def prepare(op, type_of, xp, **kw):
        state = PlanState()
        fn = real(op, type_of, xp, state=state, **kw)
        for kernel in state.tier.kernels:
            kernel.fn = _counted(load(kernel.source), ran, kernel.source.function)
        return fn
    monkeypatch.setattr(interpret, "prepare_kernel", prepare)


def lstm_inputs(rng, dtype, b=4, t=5, h=8, peep=True, lengths=(5, 2, 0, 3)):
    out = {"Input": rng.standard_normal((b, t, 4 * h)),
           "Weight": 0.5 * rng.standard_normal((h, 4 * h)),
           "Bias": 0.5 * rng.standard_normal((1, (7 if peep else 4) * h)),
           "H0": rng.standard_normal((b, h)), "C0": rng.standard_normal((b, h))}
    out = {k: v.astype(dtype) for k, v in out.items()}
    if lengths is not None:
        out["Lengths"] = np.array(lengths, np.int64)
    return out


def gru_inputs(rng, dtype, b=4, t=5, h=8, lengths=(5, 2, 0, 3), bias=True):
    out = {"Input": rng.standard_normal((b, t, 3 * h)),
           "Weight": 0.5 * rng.standard_normal((h, 3 * h)),
           "H0": rng.standard_normal((b, h))}
    if bias:
        out["Bias"] = 0.5 * rng.standard_normal((1, 3 * h))
    out = {k: v.astype(dtype) for k, v in out.items()}
    if lengths is not None:
        out["Lengths"] = np.array(lengths, np.int64)
    return out


def forward_and_grads(op_type, inputs, attrs, through, seed=0):
    """(outputs, gradients of every float input) of one op and its gradient op."""
    op, env = build_op(op_type, inputs, attrs)
    run_ops([op], env)
    rng = np.random.default_rng(seed)
    cot = {n: (rng.standard_normal(np.shape(env[n])).astype(env[n].dtype) if slot in through
               else np.zeros_like(env[n]))
           for slot, names in op.outputs.items() for n in names}
    wrt = [s for s in inputs if s != "Lengths"]
    grads = analytic_grads(op, env, cot, wrt)
    outs = {slot: env[names[0]] for slot, names in op.outputs.items()}
    return outs, {s: grads[s][0] for s in wrt}
