"""The compiled kernels of the tier for batch-innermost images: max pooling
(kernels/pool.py), forward and gradient, and col2im (kernels/col2im.py) in conv2d's
gradient and conv2d_transpose, bit-identical to the NumPy kernels: pooling with ties (the
first maximum in row-major order takes the gradient), signed zeros, NaN and -inf, gaps
between windows and non-square ones; col2im with padding, strides, dilation and groups.
A LeNet trained with the tier on and off gives the same bits."""
import os

import numpy as np
import pytest

import fluid
from fluid_interactive.ir.records import OpDesc
from fluid_interactive.ops import prepare_kernel
from fluid_interactive.ops.plan_state import PlanState
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


def _prepared(ops, shapes, dtype, compiled: bool) -> list:
    """The kernels of ``ops`` (vars typed by ``shapes``) in one plan's state, with the
    tier's kernels built and switched to when ``compiled``."""
    types = {n: TensorType(s, dtype) for n, s in shapes.items()}
    state = PlanState()
    kernels = [prepare_kernel(op, types.__getitem__, np, state=state) for op in ops]
    tier = state.tier
    if compiled:
        assert tier.kernels
        tier.start()
        assert tier.wait(300)
        tier.poll()
        assert tier.describe() == "compiled"
    return kernels


def _kernels(x_shape, out_shape, attrs, dtype, compiled: bool):
    """(pool, pool_grad) for CHWN arrays."""
    attrs = {"pooling_type": "max", "data_format": "CHWN", **attrs}
    fwd = OpDesc("pool2d", {"X": ["x"]}, {"Out": ["y"]}, attrs)
    grad = OpDesc("pool2d_grad", {"X": ["x"], "Out": ["y"], "Out@GRAD": ["g"]},
                  {"X@GRAD": ["dx"]}, attrs)
    return _prepared((fwd, grad), {"x": x_shape, "dx": x_shape, "y": out_shape,
                                   "g": out_shape}, dtype, compiled)


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
    _same_bits(fast_grad(x, got_y, g), want_dx)   # from the forward's first maxima
    _same_bits(fast_grad(x.copy(), got_y, g), want_dx)   # another X: found again
    # an argument of another layout (a strided view) runs the NumPy kernel, and the
    # first maxima it did not record are not read
    _same_bits(fast_pool(np.asfortranarray(x)), want_y)
    _same_bits(fast_grad(x, got_y, g), want_dx)


CONV_CASES = [   # x [C, H, W, N], filter, attrs, out [O, OH, OW, N]
    ((3, 8, 8, 4), (5, 3, 3, 3), {}, (5, 6, 6, 4)),
    ((2, 7, 6, 3), (4, 2, 3, 2), {"paddings": [1, 2], "strides": [2, 1]}, (4, 4, 9, 3)),
    ((4, 9, 9, 2), (6, 2, 3, 3), {"groups": 2, "dilations": [2, 2], "paddings": [1, 1]},
     (6, 7, 7, 2)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("x_shape,f_shape,attrs,out_shape", CONV_CASES)
def test_compiled_col2im_is_bit_identical(rng, dtype, x_shape, f_shape, attrs, out_shape):
    attrs = {"data_format": "CHWN", **attrs}
    grad = OpDesc("conv2d_grad", {"Input": ["x"], "Filter": ["f"], "Output@GRAD": ["g"]},
                  {"Input@GRAD": ["dx"], "Filter@GRAD": ["df"]}, attrs)
    # the transposed relation: conv2d_transpose's output is conv2d's input
    t_filter = (f_shape[1] * attrs.get("groups", 1), f_shape[0] // attrs.get("groups", 1),
                *f_shape[2:])
    trans = OpDesc("conv2d_transpose", {"Input": ["g"], "Filter": ["t"]}, {"Output": ["y"]},
                   attrs)
    shapes = {"x": x_shape, "dx": x_shape, "f": f_shape, "df": f_shape, "g": out_shape,
              "t": t_filter, "y": x_shape}
    x, f, g, t = (rng.standard_normal(shapes[n]).astype(dtype) for n in "xfgt")
    g.flat[::7] = -0.0
    results = []
    for compiled in (False, True):
        k_grad, k_trans = _prepared((grad, trans), shapes, dtype, compiled)
        dx, df = (a.copy() for a in k_grad(x, f, g))
        results.append((dx, df, k_trans(g, t).copy()))
    for want, got in zip(*results):
        _same_bits(got, want)


def test_lenet_trains_bit_identically_with_the_compiled_pools(rng, monkeypatch):
    class LeNet(fluid.Program):
        @fluid.network("x", "y")
        def train(self, x, y):
            x = fluid.layers.data(name="x", shape=[1, 12, 12], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="int64")
            h = fluid.layers.conv2d(x, num_filters=4, filter_size=3, act="relu")
            h = fluid.layers.pool2d(h, pool_size=2, pool_stride=2)
            h = fluid.nets.simple_img_conv_pool(h, num_filters=6, filter_size=2,
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
    # two pools, two gradients: compiled (each line names the forms its kernel may run)
    assert sum(":max_pool" in line for line in source.splitlines()) == 4
    assert source.count(":col2im") == 1     # the second conv's input gradient
    assert fast == plain
    for k, v in plain_params.items():
        _same_bits(fast_params[k], v)
