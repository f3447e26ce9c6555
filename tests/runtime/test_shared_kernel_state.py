"""Kernels of one plan share state through `KernelContext.shared`: a conv2d gradient op
reads the columns its forward op built in the same call instead of rebuilding them, a max
pool2d gradient op the window positions its forward op split apart, and the results stay
those of the reference interpreter, call after call."""
import numpy as np
import pytest

import fluid
from fluid_interactive.ops.im2col import ConvGeometry
from fluid_interactive.ops.interpret import run_ops
from fluid_interactive.ops.pool import _SplitWindows


class TwoConvs(fluid.Program):
    @fluid.network("x")
    def train(self, x):
        x = fluid.layers.data(name="x", shape=[2, 9, 9], dtype="float32")
        h = fluid.layers.conv2d(x, num_filters=3, filter_size=3, act="tanh")
        h = fluid.layers.conv2d(h, num_filters=4, filter_size=3, padding=1)   # input grad too
        h = fluid.layers.pool2d(h, pool_size=2, pool_stride=2)   # 7x7: a last row unpooled
        loss = fluid.layers.mean(h * h)
        fluid.optimizer.SGD(learning_rate=0.05).minimize(loss)
        return loss

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[2, 9, 9], dtype="float32")
        return fluid.layers.pool2d(x, pool_size=3, pool_stride=3)


@pytest.fixture
def im2col_calls(monkeypatch):
    calls = []
    real = ConvGeometry.im2col

    def counting(self, x):
        calls.append(self)
        return real(self, x)
    monkeypatch.setattr(ConvGeometry, "im2col", counting)
    return calls


def test_each_convolution_builds_its_columns_once_per_step(rng, im2col_calls):
    prog = TwoConvs().Compile(seed=0)
    prog.train(rng.standard_normal((4, 2, 9, 9)).astype(np.float32))   # plans, then runs
    im2col_calls.clear()
    for _ in range(3):
        prog.train(rng.standard_normal((4, 2, 9, 9)).astype(np.float32))
    assert len(im2col_calls) == 2 * 3   # two convs, three steps; the gradients rebuild none


def test_reused_columns_give_the_reference_results_on_fresh_data(rng):
    prog, ref = TwoConvs().Compile(seed=1), TwoConvs().Compile(seed=1)
    x = rng.standard_normal((4, 2, 9, 9)).astype(np.float32)
    for step in range(4):
        if step != 2:   # step 2 feeds the same array object again, changed in place
            x = rng.standard_normal((4, 2, 9, 9)).astype(np.float32)
        else:
            x *= -0.5
        _like_the_interpreter(prog.train(x), ref, x)
    _same_parameters(prog, ref)


def _like_the_interpreter(loss, ref, x) -> None:
    """A step's ``loss`` against the reference interpreter's run of ``ref``'s block (whose
    parameters then take that run's values)."""
    block = ref.program.block("train")
    env = {k: ref.get_var(k) for k in ref.var_names()}
    env["x"] = x
    run_ops(block.ops, env)
    ref.set_parameters({k: env[k] for k in ref.parameters()})
    assert loss == pytest.approx(float(env[block.returns]), rel=1e-5)


def _same_parameters(prog, ref) -> None:
    for name, value in prog.parameters().items():
        np.testing.assert_allclose(value, ref.parameters()[name], rtol=1e-5, atol=1e-6)


def test_a_filter_applied_twice_to_one_input_rebuilds_the_columns_its_gradient_spent(
        rng, im2col_calls):
    class Twice(fluid.Program):
        @fluid.network("x")
        def train(self, x):
            x = fluid.layers.data(name="x", shape=[2, 7, 7], dtype="float32")
            h = fluid.layers.conv2d(x, num_filters=2, filter_size=1)   # h needs a gradient
            w = fluid.ParamAttr(name="w")
            a = fluid.layers.conv2d(h, num_filters=3, filter_size=3, param_attr=w,
                                    bias_attr=False)
            b = fluid.layers.conv2d(h, num_filters=3, filter_size=3, param_attr=w,
                                    bias_attr=False)
            loss = fluid.layers.mean(a * b)
            fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
            return loss
    prog, ref = Twice().Compile(seed=4), Twice().Compile(seed=4)
    for _ in range(3):
        x = rng.standard_normal((5, 2, 7, 7)).astype(np.float32)
        im2col_calls.clear()
        loss = prog.train(x)
        # the convs over h share one geometry: the first gradient reads the columns,
        # then writes its dcols over them; the second takes them anew (h's own conv, the
        # two forwards, and that)
        assert len(im2col_calls) == 4
        _like_the_interpreter(loss, ref, x)
    _same_parameters(prog, ref)


@pytest.fixture
def splits(monkeypatch):
    calls = []
    real = _SplitWindows.split

    def counting(self, xp, a, views):
        calls.append(self)
        return real(self, xp, a, views)
    monkeypatch.setattr(_SplitWindows, "split", counting)
    return calls


def test_max_pool_splits_its_windows_once_per_step_and_only_for_a_gradient(rng, splits,
                                                                          monkeypatch):
    # NCHW pools split their windows (batch-innermost ones, which the layout pass makes
    # of this program, need not)
    monkeypatch.setenv("FLUID_PLAN_PASSES", "fuse_optimizer_updates,fuse_elementwise_chains")
    prog = TwoConvs().Compile(seed=0)
    data = [rng.standard_normal((4, 2, 9, 9)).astype(np.float32) for _ in range(4)]
    prog.train(data[0])
    prog.infer(data[0])
    splits.clear()
    for x in data[1:]:
        prog.train(x)
    assert len(splits) == 3     # the forward op splits; its gradient op reuses the parts
    splits.clear()
    out = prog.infer(data[1])   # no gradient op in this plan: the strided loops, no copy
    assert splits == []
    np.testing.assert_array_equal(out, data[1].reshape(4, 2, 3, 3, 3, 3).max(axis=(3, 5)))


def test_split_windows_keep_the_first_maximum_rule_with_ties(splits):
    class Pool(fluid.Program):
        @fluid.network("x")
        def train(self, x):
            x = fluid.layers.data(name="x", shape=[1, 4, 4], dtype="float32")
            h = fluid.layers.pool2d(x, pool_size=2, pool_stride=2)
            grads = fluid.gradients(fluid.layers.reduce_sum(h), [x])
            return grads[0]
    prog = Pool().Compile()
    x = np.zeros((1, 1, 4, 4), np.float32)     # all ties: row-major first position wins
    x[0, 0, 2:, 2:] = [[1, 3], [3, 2]]          # a tie for the max at (0, 1) and (1, 0)
    got = prog.train(x)
    assert splits   # the split path ran
    want = np.zeros((1, 1, 4, 4), np.float32)
    want[0, 0, 0, 0] = want[0, 0, 0, 2] = want[0, 0, 2, 0] = want[0, 0, 2, 3] = 1
    np.testing.assert_array_equal(got, want)
