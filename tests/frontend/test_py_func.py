"""`fluid.layers.py_func`: Python functions as ops, called on NumPy arrays on every call,
with gradients through a backward function in the normal backward pass; programs and
checkpoints keep only the functions' registered names."""
import os

import numpy as np
import pytest

import fluid
from fluid_interactive.errors import CheckpointError, KernelError, OpArgumentError
from fluid_interactive.ir.serialize import program_to_json
from fluid_interactive.ops import py_func as registry

L = fluid.layers
THIS_FILE = os.path.basename(__file__)


def cube(x):
    return x ** 3


def cube_grad(x, y, dy):
    return 3 * x ** 2 * dy


def cube_grad_without_y(x, dy):
    return 3 * x ** 2 * dy


class Cubed(fluid.Program):
    """loss = sum(cube(x) * w): the gradient of w flows through py_func's backward."""
    skip = False

    @fluid.network("x")
    def grads(self, x):
        x = L.data("x", shape=[3], dtype="float64")
        w = L.create_parameter([3], "float64", name="w",
                               default_initializer=fluid.initializer.Constant(0.5))
        h = x * w
        y = L.create_tensor("float64", shape=[-1, 3])
        L.py_func(cube, h, y, backward_func=cube_grad_without_y if self.skip else cube_grad,
                  skip_vars_in_backward_input=y if self.skip else None)
        loss = L.reduce_sum(y)
        return (loss,) + tuple(fluid.gradients(loss, [w]))


def test_forward_calls_the_function_with_arrays_each_call():
    seen = []

    def double_and_norm(a, b):
        seen.append((type(a), a.flags.writeable, a.shape))
        return a * 2, np.array([np.abs(b).sum()], np.float32)

    class Net(fluid.Program):
        @fluid.network("a", "b")
        def f(self, a, b):
            a = L.data("a", shape=[2], dtype="float32")
            b = L.data("b", shape=[3], dtype="float32", append_batch_size=False)
            outs = [L.create_tensor("float32", shape=[-1, 2]),
                    L.create_tensor("float32", shape=[1])]
            L.py_func(double_and_norm, [a, b], outs)
            return outs[0], outs[1] + 1.0

    prog = Net().Compile(seed=0)
    a = np.arange(8, dtype=np.float32).reshape(4, 2)
    b = np.array([-1.0, 2.0, -3.0], np.float32)
    for batch in (4, 2):
        doubled, norm = prog.f(a[:batch], b)
        np.testing.assert_array_equal(doubled, a[:batch] * 2)
        assert norm == pytest.approx(7.0)
    assert seen == [(np.ndarray, False, (4, 2)), (np.ndarray, False, (2, 2))]


def test_a_function_without_outputs_runs_on_every_call():
    calls = []

    class Net(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data("x", shape=[2], dtype="float32")
            L.py_func(lambda v: calls.append(v.sum()), x, None)
            return x * 2.0

    prog = Net().Compile(seed=0)
    for k in range(3):
        prog.f(np.full((1, 2), k, np.float32))
    assert calls == [0.0, 2.0, 4.0]


@pytest.mark.parametrize("skip", [False, True])
def test_gradients_go_through_the_backward_function(skip):
    prog = Cubed(skip=skip).Compile(seed=0)
    x = np.random.default_rng(0).standard_normal((4, 3))
    loss, dw = prog.grads(x)
    w = np.full(3, 0.5)
    assert loss == pytest.approx(np.sum((x * w) ** 3))
    eps, numeric = 1e-6, np.empty(3)
    for i in range(3):
        up, down = w.copy(), w.copy()
        up[i] += eps
        down[i] -= eps
        numeric[i] = (np.sum((x * up) ** 3) - np.sum((x * down) ** 3)) / (2 * eps)
    np.testing.assert_allclose(dw, numeric, rtol=1e-6)


def test_training_through_py_func_moves_the_parameters():
    class Trained(fluid.Program):
        @fluid.network("x")
        def train(self, x):
            x = L.data("x", shape=[3], dtype="float64")
            w = L.create_parameter([3], "float64", name="w",
                                   default_initializer=fluid.initializer.Constant(1.0))
            y = L.create_tensor("float64", shape=[-1, 3])
            L.py_func(cube, x * w, y, backward_func=cube_grad)
            loss = L.mean(y * y)
            fluid.optimizer.SGD(0.01).minimize(loss)
            return loss

    prog = Trained().Compile(seed=0)
    x = np.random.default_rng(1).uniform(0.5, 1.0, (8, 3))
    losses = [prog.train(x) for _ in range(5)]
    assert losses[-1] < losses[0]


def test_programs_keep_names_only_and_load_needs_them_registered(tmp_path):
    prog = Cubed().Compile(seed=0)
    text = program_to_json(prog.program)
    name = f"{__name__}.cube"
    assert f'"{name}"' in text and "return x ** 3" not in text
    path = str(tmp_path / "cubed")
    prog.save(path)
    saved = registry._FUNCS.pop(name)
    try:
        with pytest.raises(CheckpointError, match=rf"register_py_func\('{name}', "):
            fluid.load(path)
        L.register_py_func(name, saved)
        x = np.ones((2, 3))
        np.testing.assert_allclose(fluid.load(path).grads(x)[0], prog.grads(x)[0])
    finally:
        registry._FUNCS[name] = saved


def test_a_registered_name_stands_for_the_function():
    L.register_py_func("test_py_func.negate", lambda a: -a)

    class Net(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data("x", shape=[2], dtype="float32")
            y = L.create_tensor("float32", shape=[-1, 2])
            return L.py_func("test_py_func.negate", x, y)

    prog = Net().Compile(seed=0)
    np.testing.assert_array_equal(prog.f(np.ones((1, 2), np.float32)), [[-1, -1]])
    L.register_py_func("test_py_func.negate", lambda a: a * 10)   # the name is what counts
    np.testing.assert_array_equal(prog.f(np.ones((1, 2), np.float32)), [[10, 10]])


def test_two_lambdas_get_two_names():
    first, second = (lambda a: a), (lambda a: a + 1)
    names = [L.register_py_func(registry.py_func_name(f), f) for f in (first, second)]
    assert names[0] != names[1] and names[1].endswith("#2")
    assert registry.py_func_name(first) == names[0]   # a function keeps its name


@pytest.mark.parametrize("func,match", [
    (lambda a: a[:, :1], r"returned shape \[1, 1\] for output 0, declared \[\?, 2\]"),
    (lambda a: (a, a), r"returned 2 value\(s\) for 1 output\(s\)"),
    (lambda a: a.__setitem__(0, 1.0), "read-only"),
])
def test_bad_results_are_kernel_errors(func, match):
    class Net(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data("x", shape=[2], dtype="float32")
            y = L.create_tensor("float32", shape=[-1, 2])
            return L.py_func(func, x, y)

    with pytest.raises(KernelError, match=match):
        Net().Compile(seed=0).f(np.ones((1, 2), np.float32))


@pytest.mark.parametrize("build,match", [
    (lambda x: L.py_func(cube, x, L.create_tensor("float32")), "has no shape"),
    (lambda x: L.py_func(42, x, None), "func must be a Python function"),
    (lambda x: L.py_func("nobody.registered.this", x, None),
     r"no Python function is registered under 'nobody.registered.this'"),
    (lambda x: L.py_func(cube, x, None, cube_grad, skip_vars_in_backward_input=x * 1.0),
     "not among its inputs and outputs"),
    (lambda x: L.py_func(cube, "x", None), "x must be a Variable, a list of them or None"),
    (lambda x: L.py_func(cube, ["x"], None), "must be a fluid Variable"),
])
def test_layer_errors_name_the_line(build, match):
    class Net(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data("x", shape=[2], dtype="float32")
            build(x)
            return x

    with pytest.raises(OpArgumentError, match=match) as info:
        Net().Compile(seed=0)
    assert THIS_FILE in str(info.value)
