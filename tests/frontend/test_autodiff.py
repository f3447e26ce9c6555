"""Autodiff inside a network (`append_backward`, `gradients`) and Variable operators."""
import numpy as np
import pytest

import fluid
from fluid import OpRole

# --- gradients ------------------------------------------------------------------------------

class Poly(fluid.Program):
    @fluid.network("x")
    def grad(self, x):
        x = fluid.layers.data(name='x', shape=[3])
        y = x * x + 3 * x                      # x is read three times
        return y, fluid.gradients(y, x)[0]

    @fluid.network("x")
    def grad_of_mean(self, x):
        x = fluid.layers.data(name='x', shape=[3])
        y = fluid.layers.mean(x * x * x - x / 2)
        return fluid.gradients([y], [x])[0]


def test_gradients_of_a_var_used_several_times_are_summed():
    prog = Poly().Compile()
    x = np.array([[1.0, -2.0, 0.5], [3.0, 0.0, -1.5]], "float32")
    y, dx = prog.grad(x)
    np.testing.assert_allclose(y, x * x + 3 * x, rtol=1e-6)
    np.testing.assert_allclose(dx, 2 * x + 3, rtol=1e-6)
    sums = [op for op in prog.program.block("grad").ops if op.type == "sum"]
    assert len(sums) == 1 and len(sums[0].input("X")) == 3


def test_gradients_of_a_mean_match_finite_differences():
    prog = Poly().Compile()
    x = np.array([[0.3, -0.7, 1.1]], "float32")
    dx = prog.grad_of_mean(x)
    np.testing.assert_allclose(dx, (3 * x * x - 0.5) / 3, rtol=1e-5)


def test_stop_gradient_is_honoured():
    class Stopped(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name='x', shape=[3], stop_gradient=False)
            h = x * x
            h.stop_gradient = True           # treated as a constant below
            y = fluid.layers.mean(h * x + x)
            return fluid.gradients(y, x)[0]

    x = np.array([[1.0, 2.0, 3.0]], "float32")
    np.testing.assert_allclose(Stopped().Compile().f(x), (x * x + 1) / 3, rtol=1e-6)


def test_gradient_of_an_unreachable_input_is_none():
    seen = {}

    class Apart(fluid.Program):
        @fluid.network("x", "z")
        def f(self, x, z):
            x = fluid.layers.data(name='x', shape=[1])
            z = fluid.layers.data(name='z', shape=[1])
            seen["grads"] = fluid.gradients(x * 2, [x, z])
            return x

    Apart().Compile()
    assert seen["grads"][0] is not None and seen["grads"][1] is None


class Regression(fluid.Program):
    @fluid.network("x", "y")
    def grads(self, x, y):
        x = fluid.layers.data(name='x', shape=[3])
        y = fluid.layers.data(name='y', shape=[1])
        pred = fluid.layers.fc(x, 1, param_attr='w', bias_attr='b')
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        pairs = fluid.backward.append_backward(loss)
        return {p.name: g for p, g in pairs}

    @fluid.network("x", "y")
    def only_w(self, x, y):
        x = fluid.layers.data(name='x', shape=[3])
        y = fluid.layers.data(name='y', shape=[1])
        pred = fluid.layers.fc(x, 1, param_attr='w', bias_attr='b')
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        return {p.name: g for p, g in fluid.backward.append_backward(
            loss, parameter_list=['w'])}

    @fluid.network("x", "y")
    def no_b(self, x, y):
        x = fluid.layers.data(name='x', shape=[3])
        y = fluid.layers.data(name='y', shape=[1])
        pred = fluid.layers.fc(x, 1, param_attr='w', bias_attr='b')
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        return {p.name: g for p, g in fluid.backward.append_backward(
            loss, no_grad_set=['b'])}


def test_append_backward_gives_the_analytic_gradients(rng):
    prog = Regression().Compile(seed=3)
    x = rng.normal(size=(8, 3)).astype("float32")
    y = rng.normal(size=(8, 1)).astype("float32")
    grads = prog.grads(x, y)
    w, b = prog.parameters()["w"], prog.parameters()["b"]
    residual = x @ w + b - y
    np.testing.assert_allclose(grads["w"], 2 * x.T @ residual / 8, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(grads["b"], 2 * residual.sum(0) / 8, rtol=1e-4, atol=1e-6)


def test_append_backward_parameter_list_and_no_grad_set(rng):
    prog = Regression().Compile(seed=3)
    x = rng.normal(size=(4, 3)).astype("float32")
    y = rng.normal(size=(4, 1)).astype("float32")
    assert list(prog.only_w(x, y)) == ["w"]
    assert list(prog.no_b(x, y)) == ["w"]
    np.testing.assert_allclose(prog.only_w(x, y)["w"], prog.grads(x, y)["w"], rtol=1e-6)


def test_roles_and_op_role_vars_are_in_the_block():
    block = Regression().Compile().program.block("grads")
    loss_ops = [op for op in block.ops if op.role & OpRole.LOSS]
    assert [op.role for op in loss_ops] == [OpRole.FORWARD | OpRole.LOSS,
                                            OpRole.BACKWARD | OpRole.LOSS]
    assert loss_ops[0].type == "mean"
    assert loss_ops[1].output_names() == [loss_ops[0].output_names()[0] + "@GRAD"]
    role_vars = {op.role_var for op in block.ops if op.role_var}
    assert ("w", "w@GRAD") in role_vars and ("b", "b@GRAD") in role_vars
    seed_index = block.ops.index(loss_ops[1])
    assert all(op.role == OpRole.BACKWARD for op in block.ops[seed_index + 1:])
    assert all(op.loc is not None for op in block.ops)    # every op names a user line


def test_minimize_roles_include_optimize_with_role_vars():
    class Train(fluid.Program):
        @fluid.network("x")
        def step(self, x):
            x = fluid.layers.data(name='x', shape=[2])
            loss = fluid.layers.mean(fluid.layers.fc(x, 1, param_attr='w', bias_attr=False))
            fluid.optimizer.SGD(0.1).minimize(loss)
            return loss

    ops = Train().Compile().program.block("step").ops
    update = [op for op in ops if op.role == OpRole.OPTIMIZE]
    assert [op.type for op in update] == ["sgd"] and update[0].role_var == ("w", "w@GRAD")


def test_autodiff_errors_name_the_users_line():
    class NotScalar(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name='x', shape=[2])
            fluid.backward.append_backward(x * 2)

    with pytest.raises(fluid.OpArgumentError, match="mean") as info:
        NotScalar().Compile()
    assert "test_autodiff.py:" in str(info.value)

    class Unknown(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name='x', shape=[2])
            fluid.backward.append_backward(fluid.layers.mean(x), parameter_list=['nope'])

    with pytest.raises(fluid.OpArgumentError, match="'nope'"):
        Unknown().Compile()


# --- Variable operators ----------------------------------------------------------------------

class Ops(fluid.Program):
    @fluid.network("a", "b")
    def f(self, a, b):
        a = fluid.layers.data(name='a', shape=[3])
        b = fluid.layers.data(name='b', shape=[3])
        return (a + b, a - b, a * b, a / b, a + 2, 2 + a, a - 2, 2 - a, a * 3, 3 * a,
                a / 4, 4 / a, -a, +a, a ** 2, a ** 0.5, 2 ** a, a ** b,
                np.float32(2) * a, a * np.float64(0.5), (a + 1) * (b - 1) / 2)


def test_operators_match_numpy():
    a = np.array([[1.0, 2.0, 4.0], [0.5, 3.0, 9.0]], "float32")
    b = np.array([[2.0, -1.0, 0.5], [4.0, 2.0, 1.5]], "float32")
    expected = (a + b, a - b, a * b, a / b, a + 2, 2 + a, a - 2, 2 - a, a * 3, 3 * a,
                a / 4, 4 / a, -a, +a, a ** 2, a ** 0.5, 2 ** a, a ** b,
                2 * a, a * 0.5, (a + 1) * (b - 1) / 2)
    got = Ops().Compile().f(a, b)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g.shape == e.shape, i
        np.testing.assert_allclose(g, e, rtol=1e-5, err_msg=f"expression {i}")


def test_operator_misuse_is_a_clear_error():
    def compile_with(body):
        class Misuse(fluid.Program):
            @fluid.network("a")
            def f(self, a):
                a = fluid.layers.data(name='a', shape=[3])
                return body(a)
        return Misuse().Compile()

    with pytest.raises(fluid.OpArgumentError, match="ndarray"):
        compile_with(lambda a: a + np.ones(3))
    with pytest.raises(fluid.OpArgumentError, match="NoneType"):
        compile_with(lambda a: a * None)
    with pytest.raises(fluid.OpArgumentError, match="constant 0"):
        compile_with(lambda a: a / 0)
    with pytest.raises(fluid.ProgramDefinitionError, match="truth value"):
        compile_with(lambda a: a if a else a)


def test_the_gradient_of_a_one_element_factor_sums_every_value():
    """x [?, 2] * s [1] in a plan: s's gradient (a temporary: it has a buffer) reduces both
    dims of the 2-d gradient into its one-element buffer."""
    class Scaled(fluid.Program):
        @fluid.network("x", "s")
        def f(self, x, s):
            x = fluid.layers.data(name='x', shape=[2])
            s = fluid.layers.data(name='s', shape=[1], append_batch_size=False,
                                  stop_gradient=False)
            return fluid.gradients(fluid.layers.reduce_sum(x * s), [s])[0] * 1.0

    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_allclose(Scaled().Compile().f(x, np.array([2.0], np.float32)), 15.0)
