"""Initializers: the ops they emit in block 0, the values they give, the defaults of fc
(Xavier weights, zero biases), and reproducibility through ``Compile(seed=...)``."""
import math

import numpy as np
import pytest

import fluid
from fluid_interactive.frontend.initializer import fans

init = fluid.initializer


def compile_fc(in_dim=13, size=1, seed=0, **fc_kwargs):
    class Net(fluid.Program):
        @fluid.network("x")
        def predict(self, x):
            x = fluid.layers.data(name="x", shape=[in_dim])
            return fluid.layers.fc(input=x, size=size, **fc_kwargs)
    return Net().Compile(seed=seed)


def init_op(compiled, name):
    ops = [op for op in compiled.program.global_block().ops if name in op.output_names()]
    assert len(ops) == 1
    return ops[0]


# --- defaults -------------------------------------------------------------------------------

def test_fc_weight_defaults_to_xavier_uniform_and_bias_to_zero():
    compiled = compile_fc(13, 1)
    op = init_op(compiled, "fc_0.w_0")
    assert op.type == "uniform_random"
    bound = math.sqrt(6.0 / 14)
    assert round(bound, 4) == 0.6547
    assert op.attrs["min"] == pytest.approx(-bound) and op.attrs["max"] == pytest.approx(bound)
    assert op.attrs["seed"] == 0 and op.attrs["shape"] == [13, 1]
    w = compiled.parameters()["fc_0.w_0"]
    assert w.shape == (13, 1) and w.dtype == np.float32
    assert np.all(np.abs(w) <= bound) and np.std(w) > 0
    assert init_op(compiled, "fc_0.b_0").type == "fill_constant"
    np.testing.assert_array_equal(compiled.parameters()["fc_0.b_0"], np.zeros(1))


def test_xavier_bound_follows_the_weight_shape():
    compiled = compile_fc(300, 200)
    w = compiled.parameters()["fc_0.w_0"]
    bound = math.sqrt(6.0 / 500)
    assert np.abs(w).max() <= bound
    assert np.abs(w).max() > 0.95 * bound        # the whole range is used
    assert abs(w.mean()) < 0.01
    np.testing.assert_allclose(w.std(), bound / math.sqrt(3), rtol=0.02)


# --- each initializer -----------------------------------------------------------------------

BIG = (300, 200)


def big_weight(initializer, seed=0):
    return compile_fc(BIG[0], BIG[1], seed=seed, param_attr=initializer).parameters()["fc_0.w_0"]


def test_constant():
    compiled = compile_fc(4, 3, param_attr=init.Constant(0.5),
                          bias_attr=init.ConstantInitializer(value=-2.0))
    np.testing.assert_array_equal(compiled.parameters()["fc_0.w_0"], np.full((4, 3), 0.5))
    np.testing.assert_array_equal(compiled.parameters()["fc_0.b_0"], np.full(3, -2.0))
    assert init.Constant().op([2], "float32") == (
        "fill_constant", {"shape": [2], "dtype": "float32", "value": 0.0})


def test_uniform():
    w = big_weight(init.Uniform(-0.2, 0.6))
    assert w.min() >= -0.2 and w.max() < 0.6
    np.testing.assert_allclose(w.mean(), 0.2, atol=0.01)
    np.testing.assert_allclose(w.std(), 0.8 / math.sqrt(12), rtol=0.02)
    assert init.UniformInitializer().op([3], "float32")[1]["min"] == -1.0


def test_normal():
    w = big_weight(init.Normal(loc=1.0, scale=0.3))
    np.testing.assert_allclose(w.mean(), 1.0, atol=0.01)
    np.testing.assert_allclose(w.std(), 0.3, rtol=0.02)
    assert np.abs(w - 1.0).max() > 3 * 0.3      # real tails


def test_truncated_normal_stays_within_two_standard_deviations():
    w = big_weight(init.TruncatedNormal(loc=-0.5, scale=0.1))
    assert np.abs(w + 0.5).max() <= 0.2 + 1e-6
    np.testing.assert_allclose(w.mean(), -0.5, atol=0.005)
    # A normal truncated at +-2 sigma has std 0.8796 sigma.
    np.testing.assert_allclose(w.std(), 0.08796, rtol=0.03)
    assert init_op(compile_fc(3, 2, param_attr=init.TruncatedNormalInitializer()),
                   "fc_0.w_0").type == "truncated_gaussian_random"


def test_xavier_variants():
    limit = math.sqrt(6.0 / 500)
    w = big_weight(init.Xavier())
    assert np.abs(w).max() <= limit
    w = big_weight(init.XavierInitializer(uniform=False))
    np.testing.assert_allclose(w.std(), math.sqrt(2.0 / 500), rtol=0.02)
    # Explicit fans override the shape's.
    op_type, attrs = init.Xavier(fan_in=10, fan_out=14).op([3, 4], "float32")
    assert op_type == "uniform_random" and attrs["max"] == pytest.approx(0.5)


def test_msra_variants():
    w = big_weight(init.MSRA())
    limit = math.sqrt(6.0 / 300)
    assert np.abs(w).max() <= limit and np.abs(w).max() > 0.95 * limit
    w = big_weight(init.MSRAInitializer(uniform=False))
    np.testing.assert_allclose(w.std(), math.sqrt(2.0 / 300), rtol=0.02)
    op_type, attrs = init.MSRA(uniform=False, fan_in=8).op([3, 4], "float32")
    assert op_type == "gaussian_random" and attrs["std"] == pytest.approx(0.5)


def test_fans_of_matrices_vectors_and_filters():
    assert fans([]) == (1, 1)
    assert fans([7]) == (7, 7)
    assert fans([13, 1]) == (13, 1)
    assert fans([16, 3, 5, 5]) == (3 * 25, 16 * 25)   # conv filter [out_c, in_c, kh, kw]


def test_numpy_array():
    values = np.arange(12, dtype=np.float64).reshape(4, 3) / 10
    compiled = compile_fc(4, 3, param_attr=init.NumpyArrayInitializer(values))
    np.testing.assert_allclose(compiled.parameters()["fc_0.w_0"], values, rtol=1e-6)
    assert init_op(compiled, "fc_0.w_0").type == "assign_value"


# --- how initializers are given -------------------------------------------------------------

def test_initializer_through_param_attr_and_bias_attr():
    compiled = compile_fc(5, 2, param_attr=fluid.ParamAttr(initializer=init.Constant(0.25)),
                          bias_attr=fluid.ParamAttr(initializer=init.Constant(1.5)))
    np.testing.assert_array_equal(compiled.parameters()["fc_0.w_0"], np.full((5, 2), 0.25))
    np.testing.assert_array_equal(compiled.parameters()["fc_0.b_0"], np.full(2, 1.5))


def test_initialised_values_are_what_the_network_computes_with():
    compiled = compile_fc(3, 2, param_attr=init.Constant(0.5), bias_attr=init.Constant(0.1))
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    np.testing.assert_allclose(compiled.predict(x), [[3.1, 3.1]], rtol=1e-6)


def test_a_shared_parameter_is_initialised_once():
    class Net(fluid.Program):
        @fluid.network("x")
        def predict(self, x):
            x = fluid.layers.data(name="x", shape=[3])
            a = fluid.layers.fc(input=x, size=3, param_attr="shared", bias_attr=False)
            return fluid.layers.fc(input=a, size=3, param_attr="shared", bias_attr=False)

    compiled = Net().Compile(seed=0)
    assert [op.type for op in compiled.program.global_block().ops] == ["uniform_random"]


# --- seeds ----------------------------------------------------------------------------------

def test_same_seed_same_parameters_different_seed_different():
    def params(seed):
        return compile_fc(6, 5, seed=seed, act="tanh").parameters()
    a, b, c = params(11), params(11), params(12)
    np.testing.assert_array_equal(a["fc_0.w_0"], b["fc_0.w_0"])
    assert not np.array_equal(a["fc_0.w_0"], c["fc_0.w_0"])
    # Without a seed, each compile draws afresh.
    u = compile_fc(6, 5, seed=None).parameters()["fc_0.w_0"]
    v = compile_fc(6, 5, seed=None).parameters()["fc_0.w_0"]
    assert not np.array_equal(u, v)


def test_seeded_values_do_not_depend_on_other_parameters():
    class One(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name="x", shape=[4])
            return fluid.layers.fc(input=x, size=4, param_attr="w1")

    class Two(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name="x", shape=[4])
            h = fluid.layers.fc(input=x, size=4, param_attr="w0")
            return fluid.layers.fc(input=h, size=4, param_attr="w1")

    np.testing.assert_array_equal(One().Compile(seed=5).get_var("w1"),
                                  Two().Compile(seed=5).get_var("w1"))


def test_an_initializer_seed_fixes_values_regardless_of_the_program_seed():
    a = compile_fc(6, 5, seed=1, param_attr=init.Normal(seed=42)).parameters()["fc_0.w_0"]
    b = compile_fc(6, 5, seed=2, param_attr=init.Normal(seed=42)).parameters()["fc_0.w_0"]
    np.testing.assert_array_equal(a, b)


def test_different_seeds_give_different_values_for_every_random_initializer():
    for initializer in (init.Uniform(), init.Normal(), init.TruncatedNormal(), init.Xavier(),
                        init.MSRA(uniform=False)):
        a = compile_fc(6, 5, seed=1, param_attr=initializer).get_var("fc_0.w_0")
        b = compile_fc(6, 5, seed=1, param_attr=initializer).get_var("fc_0.w_0")
        c = compile_fc(6, 5, seed=2, param_attr=initializer).get_var("fc_0.w_0")
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c), initializer


# --- errors ---------------------------------------------------------------------------------

def test_bad_initializers_name_the_users_line():
    with pytest.raises(fluid.OpArgumentError, match=r"low must not exceed high[\s\S]*"
                                                     r"test_initializers.py"):
        compile_fc(3, 2, param_attr=init.Uniform(1.0, -1.0))
    with pytest.raises(fluid.OpArgumentError, match="must not be negative"):
        compile_fc(3, 2, param_attr=init.Normal(scale=-1.0))
    with pytest.raises(fluid.OpArgumentError, match=r"shape \[2, 2\].*shape \[3, 2\]"):
        compile_fc(3, 2, param_attr=init.NumpyArray(np.zeros((2, 2))))
