"""The adaptive updates in the compiled tier: their loops (kernels/loops.py), run as plain
Python on a few values, compute exactly what the NumPy updates of ops/optim_adaptive.py
compute, NaN and zero gradients included; and a model
trained with each optimizer has bit-identical losses and parameters with the tier on
(Numba) and off."""
import numpy as np
import pytest
from kernels.test_tier import batches, kernel_cache, mlp, train  # noqa: F401 (fixture)

import fluid
from fluid_interactive.kernels import loops
from fluid_interactive.ops import optim_adaptive as ops

f32 = np.float32
N = 9


def values(rng, kind):
    v = rng.standard_normal(N).astype(f32)
    v[0] = 0.0            # a zero gradient (a dead unit)
    return {"abs": np.abs(v), "big": np.abs(v) + 2, "small": 0.1 * v}.get(kind, v)


# (loop, numpy update(p, g, *states, rate, p_out, *state_outs, *scratches), state kinds,
#  scalars of the loop, the rate, scratches)
UPDATES = {
    "adagrad": (lambda: lambda *a: ops.adagrad_update(np, 1e-6, *a), ["abs"], (1e-6,),
                0.1, 1),
    "decayed_adagrad": (lambda: lambda *a: ops.decayed_adagrad_update(np, 0.9, 1e-6, *a),
                        ["abs"], (0.9, 1 - 0.9, 1e-6), 0.1, 1),
    "rmsprop": (lambda: lambda *a: ops.rmsprop_update(np, 0.9, 1e-6, 0.5, False, *a),
                ["any", "abs", "any"], (0.9, 1 - 0.9, 1e-6, 0.5), 0.01, 1),
    "rmsprop_centered": (lambda: lambda *a: ops.rmsprop_update(np, 0.9, 1e-3, 0.5, True, *a),
                         ["any", "big", "small"], (0.9, 1 - 0.9, 1e-3, 0.5), 0.01, 1),
    "adadelta": (lambda: lambda *a: ops.adadelta_update(np, 0.9, 1e-6, *a), ["abs", "abs"],
                 (0.9, 1 - 0.9, 1e-6), None, 2),
    "adamax": (lambda: lambda *a: ops.adamax_update(np, 0.8, 0.9, 1e-6, *a), ["any", "abs"],
               (0.8, 1 - 0.8, 0.9, 1e-6), 0.05 / (1 - 0.8 ** 3), 1),
    "ftrl": (lambda: lambda *a: ops.ftrl_update(np, 0.1, 0.2, -0.5, *a), ["abs", "any"],
             (0.1, 2 * 0.2), 0.1, 2),
}


def _run_loop(name, p, g, states, scalars, rate):
    outs = [np.empty(N, f32) for _ in states]
    args = [p, g, *states, *map(f32, scalars)] + ([] if rate is None else [f32(rate)])
    p_out = np.empty(N, f32)
    getattr(loops, name)(*args, p_out, *outs)
    return [p_out, *outs]


@pytest.mark.parametrize("name", sorted(UPDATES))
def test_the_loops_uncompiled_compute_the_numpy_updates(name):
    make, kinds, scalars, rate, scratches = UPDATES[name]
    rng = np.random.default_rng(3)
    p, g = rng.standard_normal(N).astype(f32), values(rng, "any")
    states = [values(rng, k) for k in kinds]
    if name == "ftrl":
        states[0][0] = 0.0          # never a gradient here: 0, not 0 / 0
    outs = [np.empty(N, f32) for _ in range(1 + len(states))]
    scratch = [np.empty(N, f32) for _ in range(scratches)]
    lr = None if rate is None else (np.array([rate], f32) if name != "adamax" else rate)
    want = make()(p, g, *states, lr, *outs, *scratch)
    got = _run_loop(name, p, g, states, scalars, rate)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_a_nan_gradient_is_nan_in_both():
    p, states = np.ones(N, f32), [np.ones(N, f32), np.ones(N, f32)]
    g = np.full(N, np.nan, f32)
    for name in ("adamax", "ftrl"):
        make, _, scalars, rate, scratches = UPDATES[name]
        got = _run_loop(name, p, g, states, scalars, rate)
        outs = [np.empty(N, f32) for _ in range(3)]
        lr = rate if name == "adamax" else np.array([rate], f32)
        with np.errstate(invalid="ignore"):
            want = make()(p, g, *states, lr, *outs, *[np.empty(N, f32)] * scratches)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)


OPTIMIZERS = {
    "adagrad": lambda: fluid.optimizer.Adagrad(0.05),
    "decayed_adagrad": lambda: fluid.optimizer.DecayedAdagrad(0.05),
    "rmsprop": lambda: fluid.optimizer.RMSProp(0.01, momentum=0.5),
    "rmsprop_centered": lambda: fluid.optimizer.RMSProp(0.01, centered=True),
    "adadelta": lambda: fluid.optimizer.Adadelta(1.0),
    "adamax": lambda: fluid.optimizer.Adamax(0.01),
    "ftrl": lambda: fluid.optimizer.Ftrl(0.05, l1=0.001, l2=0.001),
}


@pytest.fixture(autouse=True)
def tier_on(monkeypatch):
    monkeypatch.setenv("FLUID_KERNELS", "auto")


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_compiled_updates_are_bit_identical(name, monkeypatch):
    pytest.importorskip("numba")
    cls = mlp(OPTIMIZERS[name])
    ref_losses, ref, ref_tiers = train(cls, False, monkeypatch)
    losses, got, tiers = train(cls, True, monkeypatch)
    assert set(ref_tiers) == {"numpy"} and tiers[-1] == "compiled", tiers
    assert losses == ref_losses
    for k in ref:
        assert np.array_equal(got[k], ref[k]), k
    prog = cls().Compile(seed=3)
    prog.train(*batches(1)[0])
    assert f"loops.py:{name}" in prog.train.source
