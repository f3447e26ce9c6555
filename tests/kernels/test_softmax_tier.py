"""The compiled softmax passes (kernels/softmax.py): forward (around NumPy's exp) and
backward over the last axis give the NumPy kernels' bits, on rows of every length class
of the pairwise sum, with NaN, infinite, -0 and constant rows; other axes stay NumPy; and
an attention block trained with the tier, whole or split over threads, gives the bits of
one trained without it."""
import numpy as np
import pytest
from kernels.test_tier import kernel_cache  # noqa: F401  (a kernel cache of the module's own)
from kernels.tier_runs import assert_same_bits, train_both

import fluid
from fluid_interactive.ir.records import OpDesc
from fluid_interactive.kernels import softmax
from fluid_interactive.ops.interpret import run_ops

numba = pytest.importorskip("numba")


def bits(a):
    """The values' bits, every NaN as one."""
    a = np.where(np.isnan(a), np.nan, a).astype(np.asarray(a).dtype)
    return a.view(np.int32 if a.dtype == np.float32 else np.int64)


def scores(rows, n, dtype, rng):
    x = (rng.standard_normal((rows, n)) * 4).astype(dtype)
    x[0] = 1.5
    x[1, -1] = np.nan
    x[2, 0] = np.inf
    x[3, :] = -0.0
    x[4, 0] = 0.0
    x[5, :] = -np.inf
    return x


def numpy_softmax(x, g):
    env = {"x": x, "g": g}
    with np.errstate(all="ignore"):
        run_ops([OpDesc("softmax", {"X": ["x"]}, {"Out": ["y"]}, {"axis": -1})], env)
        run_ops([OpDesc("softmax_grad", {"Out": ["y"], "Out@GRAD": ["g"]},
                        {"X@GRAD": ["dx"]}, {"axis": -1})], env)
    return env["y"], env["dx"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 5, 8, 64, 131, 300])
def test_the_compiled_passes_give_the_numpy_kernels_bits(dtype, n):
    from fluid_interactive.kernels.build import load
    rng = np.random.default_rng(n)
    x, g = scores(23, n, dtype, rng), rng.standard_normal((23, n)).astype(dtype)
    want_y, want_dx = numpy_softmax(x, g)
    e = np.empty_like(x)
    with np.errstate(all="ignore"):
        load(softmax.softmax_source("softmax_shift", dtype))(x, e)
        np.exp(e, out=e)
        load(softmax.softmax_source("softmax_scale", dtype))(e)
    assert np.array_equal(bits(e), bits(want_y))
    dx = np.empty_like(x)
    load(softmax.softmax_source("softmax_grad", dtype))(want_y, g, dx)
    assert np.array_equal(bits(dx), bits(want_dx))


def attention(axis=-1):
    class Attention(fluid.Program):
        @fluid.network("x", "y")
        def train(self, x, y):
            x = fluid.layers.data("x", shape=[24, 32], dtype="float32")
            y = fluid.layers.data("y", shape=[1], dtype="int64")
            q = fluid.layers.fc(x, size=32, num_flatten_dims=2)
            k = fluid.layers.fc(x, size=32, num_flatten_dims=2)
            w = fluid.layers.softmax(fluid.layers.matmul(q, k, transpose_y=True, alpha=0.2),
                                     axis=axis)
            h = fluid.layers.matmul(w, x)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
                fluid.layers.fc(h, size=4), y))
            fluid.optimizer.Adam(learning_rate=1e-2).minimize(loss)
            return loss
    return Attention


@pytest.mark.parametrize("split,axis", [(False, -1), (True, -1), (False, 1)])
def test_training_with_the_compiled_softmax_gives_the_numpy_bits(monkeypatch, split, axis):
    rng = np.random.default_rng(5)
    data = [(rng.standard_normal((64, 24, 32)).astype(np.float32),
             rng.integers(0, 4, (64, 1))) for _ in range(4)]
    ref, got, method = train_both(monkeypatch, attention(axis), data, 1, split)
    assert (".py:softmax_shift" in method.source) is (axis == -1)
    assert (".py:softmax_grad" in method.source) is (axis == -1)
    assert_same_bits(ref, got)
