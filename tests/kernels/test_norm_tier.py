"""The compiled layer norm (kernels/norm.py): NumPy's pairwise row sums reproduced, both
directions bit-identical to the NumPy kernels of ops/norm.py (with and without Scale and
Bias, for each subset of gradients, on rows of every length class the pairwise sum
treats apart, with NaN, infinite, zero-variance and -0 rows), and a model with layer norms
trained with the tier (whole, or split over threads) gives the bits of one trained without
it."""
import numpy as np
import pytest
from kernels.test_tier import kernel_cache  # noqa: F401  (a kernel cache of the module's own)
from kernels.tier_runs import assert_same_bits, train_both

import fluid
from fluid_interactive.ir.records import OpDesc
from fluid_interactive.kernels import norm, sums
from fluid_interactive.ops.interpret import run_ops

numba = pytest.importorskip("numba")

#: rows of fewer than 8 values, one block, a block and a rest, several blocks (recursion)
WIDTHS = (5, 8, 128, 131, 300, 1000)


def bits(a):
    """The values' bits, every NaN as one (which NaN an addition of two keeps depends on
    its operands' order in the machine instruction, which neither side fixes)."""
    a = np.where(np.isnan(a), np.nan, a).astype(np.asarray(a).dtype)
    return a.view(np.int32 if a.dtype == np.float32 else np.int64)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pairwise_adds_as_numpys_sum_along_a_row(dtype):
    rng = np.random.default_rng(0)
    for n in [*range(1, 140), 255, 256, 257, 1000, 4099]:
        a = (rng.standard_normal((1, n)) * 10 ** rng.uniform(-3, 3, n)).astype(dtype)
        frames, lefts = np.empty((sums.DEPTH, 3), np.int64), np.empty(sums.DEPTH, dtype)
        got = np.dtype(dtype).type(0) + sums.pairwise(a[0], 0, n, frames, lefts)
        assert np.array_equal(bits(np.asarray(got, dtype)), bits(a.sum(axis=1)[0])), n


def rows(m, d, dtype, rng):
    x = (rng.standard_normal((m, d)) * 3 + 1).astype(dtype)
    x[0] = 2.5                      # zero variance
    x[1, 0] = np.nan
    if m > 3:
        x[2, 1] = np.inf
        x[3] = -0.0
    return x


def numpy_layer_norm(x, scale, bias, dy, wants):
    """Y, Mean, Variance and the wanted gradients from the ops' NumPy kernels."""
    env = {"x": x, "dy": dy}
    ins = {"X": ["x"]}
    for slot, v in (("Scale", scale), ("Bias", bias)):
        if v is not None:
            env[slot] = v
            ins[slot] = [slot]
    attrs = {"begin_norm_axis": 1, "epsilon": 1e-5}
    grad_ins = {"X": ["x"], "Mean": ["m"], "Variance": ["v"], "Y@GRAD": ["dy"]}
    if scale is not None:
        grad_ins["Scale"] = ["Scale"]
    outs = {s + "@GRAD": [s + "@GRAD"] for s in wants}
    with np.errstate(all="ignore"):   # the NaN and infinite rows
        run_ops([OpDesc("layer_norm", ins, {"Y": ["y"], "Mean": ["m"], "Variance": ["v"]},
                        attrs)], env)
        run_ops([OpDesc("layer_norm_grad", grad_ins, outs, attrs)], env)
    return env


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("d", WIDTHS)
@pytest.mark.parametrize("affine", ["both", "scale", "none"])
def test_the_compiled_layer_norm_gives_the_numpy_kernels_bits(dtype, d, affine):
    from fluid_interactive.kernels.build import load
    rng = np.random.default_rng(d)
    m = 37
    x, dy = rows(m, d, dtype, rng), rng.standard_normal((m, d)).astype(dtype)
    scale = rng.standard_normal(d).astype(dtype) if affine != "none" else None
    bias = rng.standard_normal(d).astype(dtype) if affine == "both" else None
    wants = ["X"] + (["Scale"] if scale is not None else []) + \
        (["Bias"] if bias is not None else [])
    want = numpy_layer_norm(x, scale, bias, dy, wants)
    empty = np.empty(0, dtype)
    eps = np.dtype(dtype).type(1e-5)
    y, mean, var = np.empty_like(x), np.empty(m, dtype), np.empty(m, dtype)
    flags = int(scale is not None) | 2 * int(bias is not None)
    load(norm.norm_source("layer_norm", dtype))(
        x, empty if scale is None else scale, empty if bias is None else bias, eps, flags,
        y, mean, var)
    for got, name in ((y, "y"), (mean, "m"), (var, "v")):
        assert np.array_equal(bits(got), bits(want[name])), name
    dx, ds, db = np.empty_like(x), np.empty(d, dtype), np.empty(d, dtype)
    flags = int(scale is not None) | 4 | 8 * int(scale is not None) | 16 * int(bias is not None)
    load(norm.norm_source("layer_norm_grad", dtype))(
        x, empty if scale is None else scale, mean, var, dy, eps, flags, dx, ds, db)
    assert np.array_equal(bits(dx), bits(want["X@GRAD"]))
    if scale is not None:
        assert np.array_equal(bits(ds), bits(want["Scale@GRAD"]))
    if bias is not None:
        assert np.array_equal(bits(db), bits(want["Bias@GRAD"]))


def test_the_gradient_kernel_writes_only_the_gradients_asked_for():
    from fluid_interactive.kernels.build import load
    rng = np.random.default_rng(1)
    x, dy = rng.standard_normal((9, 12)).astype(np.float32), \
        rng.standard_normal((9, 12)).astype(np.float32)
    scale = rng.standard_normal(12).astype(np.float32)
    want = numpy_layer_norm(x, scale, None, dy, ["Scale"])
    dx, ds = np.full_like(x, 7.0), np.empty(12, np.float32)
    load(norm.norm_source("layer_norm_grad", "float32"))(
        x, scale, want["m"], want["v"], dy, np.float32(1e-5), 1 | 8, dx, ds,
        np.empty(0, np.float32))
    assert (dx == 7.0).all()
    assert np.array_equal(bits(ds), bits(want["Scale@GRAD"]))


def encoder(steps_seed=0):
    class Block(fluid.Program):
        @fluid.network("x", "y")
        def train(self, x, y):
            x = fluid.layers.data("x", shape=[16, 48], dtype="float32")
            y = fluid.layers.data("y", shape=[1], dtype="int64")
            h = fluid.layers.layer_norm(x, begin_norm_axis=2)
            h = fluid.layers.fc(h, size=48, num_flatten_dims=2, act="relu")
            h = fluid.layers.layer_norm(fluid.layers.elementwise_add(h, x),
                                        begin_norm_axis=2, scale=False)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
                fluid.layers.fc(h, size=5), y))
            fluid.optimizer.Adam(learning_rate=1e-2).minimize(loss)
            return loss
    return Block


@pytest.mark.parametrize("split", [False, True])
def test_training_with_the_compiled_layer_norm_gives_the_numpy_bits(monkeypatch, split):
    """Split: both runs on three threads, each kernel on each thread's rows
    (backend/rows.py)."""
    rng = np.random.default_rng(4)
    data = [(rng.standard_normal((96, 16, 48)).astype(np.float32),
             rng.integers(0, 5, (96, 1))) for _ in range(5)]
    ref, got, method = train_both(monkeypatch, encoder(), data, 2, split)
    assert "norm_" in method.source and ".py:layer_norm_grad" in method.source
    assert_same_bits(ref, got)
