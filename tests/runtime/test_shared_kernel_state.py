"""Kernels of one plan share state through `KernelContext.shared`: a conv2d gradient op
reads the columns its forward op built in the same call instead of rebuilding them, and
the results stay those of the reference interpreter, call after call."""
import numpy as np
import pytest

import fluid
from fluid_interactive.ops.im2col import ConvGeometry
from fluid_interactive.ops.interpret import run_ops


class TwoConvs(fluid.Program):
    @fluid.network("x")
    def train(self, x):
        x = fluid.layers.data(name="x", shape=[2, 9, 9], dtype="float32")
        h = fluid.layers.conv2d(x, num_filters=3, filter_size=3, act="tanh")
        h = fluid.layers.conv2d(h, num_filters=4, filter_size=3, padding=1)   # input grad too
        loss = fluid.layers.mean(h * h)
        fluid.optimizer.SGD(learning_rate=0.05).minimize(loss)
        return loss


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
    block = ref.program.block("train")
    x = rng.standard_normal((4, 2, 9, 9)).astype(np.float32)
    for step in range(4):
        if step != 2:   # step 2 feeds the same array object again, changed in place
            x = rng.standard_normal((4, 2, 9, 9)).astype(np.float32)
        else:
            x *= -0.5
        loss = prog.train(x)
        env = {k: ref.get_var(k) for k in ref.var_names()}
        env["x"] = x
        run_ops(block.ops, env)
        ref.set_parameters({k: env[k] for k in ref.parameters()})
        assert loss == pytest.approx(float(env[block.returns]), rel=1e-5)
    for name, value in prog.parameters().items():
        np.testing.assert_allclose(value, ref.parameters()[name], rtol=1e-5, atol=1e-6)
