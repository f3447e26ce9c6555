"""The compiled max pooling of the kernel tier (kernels/pool.py) for batch-innermost
images: forward and gradient bit-identical to the NumPy kernels, ties (the first maximum
in row-major order takes the gradient), signed zeros, NaN and -inf included, with gaps
between windows and non-square ones; and a LeNet trained with the tier on and off gives
the same bits."""
import os

import numpy as np
import pytest

import fluid
from fluid_interactive.ir.records import OpDesc
from fluid_interactive.kernels import TIER_KEY
from fluid_interactive.ops import prepare_kernel
from fluid_interactive.ops.spec import TensorType

numba = pytest.importorskip("numba")


@pytest.fixture(scope="module", autouse=True)
def kernel_cache(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("kernels"))
    old = {k: os.environ.get(k) for k in ("FLUID_KERNEL_CACHE", "FLUID_KERNELS")}
    os.environ["FLUID_KERNEL_CACHE"], os.environ["FLUID_KERNELS"] = path, "auto"
    yield path
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _kernels(x_shape, out_shape, attrs, dtype, compiled: bool):
    """(pool, pool_grad) for CHWN arrays, with the tier's kernels built and switched to."""
    attrs = {"pooling_type": "max", "data_format": "CHWN", **attrs}
    fwd = OpDesc("pool2d", {"X": ["x"]}, {"Out": ["y"]}, attrs)
    grad = OpDesc("pool2d_grad", {"X": ["x"], "Out": ["y"], "Out@GRAD": ["g"]},
                  {"X@GRAD": ["dx"]}, attrs)
    types = {n: TensorType(s, dtype) for n, s in (("x", x_shape), ("dx", x_shape),
                                                  ("y", out_shape), ("g", out_shape))}
    state: dict = {}
    kernels = [prepare_kernel(op, types.__getitem__, np, plan_state=state) for op in (fwd, grad)]
    tier = state.get(TIER_KEY)
    if compiled:
        assert tier is not None and len(tier.kernels) == 2
        tier.start()
        assert tier.wait(300)
        tier.poll()
        assert tier.describe() == "compiled"
    return kernels


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))


CASES = [
    ((3, 8, 8, 5), (3, 4, 4, 5), {"ksize": [2, 2], "strides": [2, 2]}),
    ((2, 9, 8, 4), (2, 3, 3, 4), {"ksize": [2, 2], "strides": [3, 3]}),    # gaps
    ((2, 7, 9, 3), (2, 2, 4, 3), {"ksize": [3, 2], "strides": [3, 2]}),    # non-square
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("x_shape,out_shape,attrs", CASES)
def test_compiled_max_pool_is_bit_identical(rng, dtype, x_shape, out_shape, attrs):
    x = rng.standard_normal(x_shape).astype(dtype)
    x = np.maximum(x, 0)                        # relu's zeros: whole windows tie
    x.flat[::7] = -0.0                           # signed zeros tie with +0
    x.flat[3::11] = np.nan
    x.flat[5::13] = -np.inf
    g = rng.standard_normal(out_shape).astype(dtype)
    g.flat[::5] = -0.0
    g.flat[1::9] = np.nan
    numpy_pool, numpy_grad = _kernels(x_shape, out_shape, attrs, dtype, False)
    fast_pool, fast_grad = _kernels(x_shape, out_shape, attrs, dtype, True)
    want_y = numpy_pool(x).copy()
    got_y = fast_pool(x)
    _same_bits(got_y, want_y)
    want_dx = numpy_grad(x, want_y, g).copy()
    _same_bits(fast_grad(x, got_y, g), want_dx)
    # an argument of another layout (a strided view) runs the NumPy kernel
    _same_bits(fast_pool(np.asfortranarray(x)), want_y)


def test_lenet_trains_bit_identically_with_the_compiled_pools(rng, monkeypatch):
    class LeNet(fluid.Program):
        @fluid.network("x", "y")
        def train(self, x, y):
            x = fluid.layers.data(name="x", shape=[1, 12, 12], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="int64")
            h = fluid.layers.conv2d(x, num_filters=4, filter_size=3, act="relu")
            h = fluid.layers.pool2d(h, pool_size=2, pool_stride=2)
            h = fluid.layers.simple_img_conv_pool(h, num_filters=6, filter_size=2,
                                                  pool_size=2, pool_stride=2, act="relu")
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
                fluid.layers.fc(h, size=3), y))
            fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
            return loss
    fluid.set_threads(1)
    data = [(rng.standard_normal((16, 1, 12, 12)).astype(np.float32),
             rng.integers(0, 3, (16, 1))) for _ in range(5)]
    runs = []
    try:
        for tier in ("numpy", "auto"):
            monkeypatch.setenv("FLUID_KERNELS", tier)
            prog = LeNet().Compile(seed=2)
            losses = [prog.train(*data[0])]
            plan_tier = prog.train.runner.plan_tier()
            if tier == "auto":
                assert plan_tier is not None and plan_tier.wait(300)
            losses += [prog.train(x, y) for x, y in data[1:]]
            runs.append((losses, prog.parameters(), prog.train.tier, prog.train.source))
    finally:
        fluid.set_threads(None)
    (plain, plain_params, plain_tier, _), (fast, fast_params, fast_tier, source) = runs
    assert plain_tier == "numpy" and fast_tier == "compiled"
    assert source.count(":max_pool") == 4   # two pools, two gradients: compiled
    assert fast == plain
    for k, v in plain_params.items():
        _same_bits(fast_params[k], v)
