"""Training a program with the compiled tier and without it, on the same data, for the
tests that compare the two bit for bit, whole or with its rows split over threads."""
import numpy as np

import fluid
from fluid_interactive.backend import rows, threads


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
