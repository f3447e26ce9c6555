"""The control-flow layers as users write them (While, while_loop, cond, Switch, tensor
arrays, StaticRNN, increment, create_parameter, comparisons with cond=), and the errors
they give while a method is traced: each names the problem, the user's line, and the fix."""
from contextlib import contextmanager

import numpy as np
import pytest

import fluid

L = fluid.layers


def compile_method(body, feeds=("x",), shape=(3,)):
    """Compile a program whose method ``f`` declares float data vars ``feeds`` and returns
    ``body(*vars)``."""
    class P(fluid.Program):
        @fluid.network(*feeds)
        def f(self):
            xs = [L.data(name=n, shape=list(shape), dtype="float32") for n in feeds]
            return body(*xs)
    return P().Compile(seed=0)


def test_while_condition_must_be_a_bool_of_one_value():
    with pytest.raises(fluid.DTypeError, match=r"(?s)While: cond must be a bool var of "
                                               r"shape \[1\].*less_than.*test_control_flow.py:"):
        compile_method(lambda x: L.While(cond=L.fill_constant([1], "float32", 1.0)))
    with pytest.raises(fluid.OpArgumentError, match=r"one value \(shape \[1\]\).*reduce_sum\("
                                              r"fluid.layers.cast\(mask, 'int32'\)\) > 0"):
        compile_method(lambda x: L.While(cond=x > 0))


def test_the_condition_errors_recommend_layers_that_exist():
    from fluid_interactive.ops.control import ANY_OF_MASK
    seen = {}

    def body(x):
        c = eval(ANY_OF_MASK, {"fluid": fluid, "mask": x > 0})
        seen["type"] = (c.dtype, tuple(c.shape))
        return c
    prog = compile_method(body)
    assert seen["type"] == ("bool", (1,))
    assert prog.f(np.array([[-1, 0, 2]], np.float32)) and \
        not prog.f(np.array([[-1, 0, 0]], np.float32))


def test_a_while_body_must_update_its_condition():
    def body(x):
        i = L.fill_constant([1], "int64", 0)
        loop = L.While(cond=L.less_than(i, L.fill_constant([1], "int64", 3)))
        with loop.block():
            L.increment(i, in_place=True)
        return x
    with pytest.raises(fluid.ProgramDefinitionError, match=r"never updates its condition "
                                                           r".*less_than\(x=i, y=n, cond=cond\)"):
        compile_method(body)


def test_python_if_and_while_on_a_traced_value_show_how_to_record_them():
    def with_if(x):
        if L.reduce_sum(x) > 0:
            return x * 2
        return x

    def with_while(x):
        i = L.fill_constant([1], "int64", 0)
        while i < 3:
            i = i + 1
        return x
    with pytest.raises(fluid.ProgramDefinitionError) as err:
        compile_method(with_if)
    assert "pred = L.reduce_sum(x) > 0" in str(err.value)
    assert "fluid.layers.cond(pred, lambda: value_if_true" in str(err.value)
    assert "fluid.layers.Switch()" in str(err.value)
    with pytest.raises(fluid.ProgramDefinitionError) as err:
        compile_method(with_while)
    assert "cond = i < 3" in str(err.value)
    assert "loop = fluid.layers.While(cond=cond)" in str(err.value)
    assert "fluid.layers.while_loop(" in str(err.value)


@contextmanager
def two_iterations(is_test=False):
    """A While running twice; the ``with`` body is the loop's body."""
    i, n = L.fill_constant([1], "int64", 0), L.fill_constant([1], "int64", 2)
    cond = L.less_than(i, n)
    loop = L.While(cond, is_test=is_test)
    with loop.block():
        yield
        L.increment(i, in_place=True)
        L.less_than(i, n, cond=cond)


def test_a_var_made_inside_a_loop_stays_inside():
    def body(x):
        with two_iterations():
            inner = x * 2.0
        return inner + 1.0
    with pytest.raises(fluid.OpArgumentError, match=r"(?s)declared inside a loop or branch "
                                                    r"body.*assign\(value, output=var\)"):
        compile_method(body)


def test_while_loop_returns_the_updated_loop_vars(rng):
    def body(x):
        i = L.fill_constant([1], "int64", 0)
        ten = L.fill_constant([1], "int64", 10)
        i, s = L.while_loop(lambda i, s: L.less_than(i, ten),
                            lambda i, s: [L.increment(i, in_place=False), s + x],
                            [i, L.scale(x, 1.0)])
        return s, i
    prog = compile_method(body)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    s, i = prog.f(x)
    np.testing.assert_allclose(s, 11 * x, rtol=1e-5)
    assert i == 10
    def never(*_):
        return L.less_than(L.fill_constant([1], "int64", 1), L.fill_constant([1], "int64", 0))
    with pytest.raises(fluid.OpArgumentError, match="body returns 2 value.*for 1 loop var"):
        compile_method(lambda x: L.while_loop(never, lambda a: [a, a], [L.scale(x, 1.0)]))


def test_cond_branches_and_their_structure(rng):
    def body(x):
        pred = L.greater_than(L.reshape(L.reduce_sum(x), [1]), L.fill_constant([1], "float32", 0))
        out = L.cond(pred, lambda: {"a": x * 2.0, "b": (x, x + 1.0)},
                     lambda: {"a": x * -1.0, "b": (x * 0.0, x)})
        return out["a"], out["b"][1]
    prog = compile_method(body)
    x = np.abs(rng.standard_normal((2, 3))).astype(np.float32)
    a, b = prog.f(x)
    np.testing.assert_allclose(a, 2 * x)
    np.testing.assert_allclose(b, x + 1)
    a, b = prog.f(-x)
    np.testing.assert_allclose(a, x)
    always = L.less_than   # pred below: 0 < 1
    with pytest.raises(fluid.OpArgumentError, match="same structure"):
        compile_method(lambda x: L.cond(always(L.fill_constant([1], "int64", 0),
                                               L.fill_constant([1], "int64", 1)),
                                        lambda: x, lambda: (x, x)))


def test_switch_picks_the_first_true_case(rng):
    def body(x):
        step = L.reshape(L.cast(L.reduce_sum(x), "int64"), [1])
        lr = L.fill_constant([1], "float32", -1.0)
        with L.Switch() as switch:
            with switch.case(L.less_than(step, L.fill_constant([1], "int64", 10))):
                L.assign(L.fill_constant([1], "float32", 0.1), output=lr)
            with switch.case(L.less_than(step, L.fill_constant([1], "int64", 20))):
                L.assign(L.fill_constant([1], "float32", 0.01), output=lr)
            with switch.default():
                L.assign(L.fill_constant([1], "float32", 0.001), output=lr)
        return lr
    prog = compile_method(body, shape=(1,))
    got = [prog.f(np.array([[v]], np.float32)) for v in (3, 15, 25)]
    assert got == pytest.approx([0.1, 0.01, 0.001])

    def late_case(x):
        switch = L.Switch()
        with switch.case(L.less_than(L.fill_constant([1], "int64", 0),
                                     L.fill_constant([1], "int64", 1))):
            pass
        with switch.default():
            pass
        with switch.case(L.less_than(L.fill_constant([1], "int64", 0),
                                     L.fill_constant([1], "int64", 1))):
            pass
        return x
    with pytest.raises(fluid.ProgramDefinitionError, match="a case after default"):
        compile_method(late_case)


def test_comparisons_write_into_cond_and_increment_in_place(rng):
    def body(x):
        i = L.fill_constant([1], "int64", 5)
        j = L.increment(i, value=2, in_place=False)
        k = L.increment(i, value=10, in_place=True)
        assert k.name == i.name and j.name != i.name
        return j, i
    j, i = compile_method(body).f(np.zeros((1, 3), np.float32))
    assert (j, i) == (7, 15)
    with pytest.raises(fluid.DTypeError, match="cond must be a bool var"):
        compile_method(lambda x: L.less_than(x, x, cond=x))

    def rewrite(x):
        flag = L.less_than(L.fill_constant([1], "int64", 1), L.fill_constant([1], "int64", 3))
        return L.greater_than(L.fill_constant([1], "int64", 1),
                              L.fill_constant([1], "int64", 3), cond=flag)
    with pytest.raises(fluid.OpArgumentError, match="already holds a value.*leave out cond="):
        compile_method(rewrite)


def test_create_parameter_is_shared_by_name(rng):
    class P(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data(name="x", shape=[3], dtype="float32")
            with fluid.var_scope("net"):
                w = L.create_parameter([3, 2], "float32", name="w")
                b = L.create_parameter([2], "float32", is_bias=True)
            return L.matmul(x, w) + b

        @fluid.network("x")
        def g(self, x):
            x = L.data(name="x", shape=[3], dtype="float32")
            with fluid.var_scope("net"):
                w = L.create_parameter([3, 2], "float32", name="w")
            return L.matmul(x, w)
    prog = P().Compile(seed=0)
    assert sorted(prog.parameters()) == ["net/create_parameter_0.b_0", "net/w"]
    assert not prog.get_var("net/create_parameter_0.b_0").any()
    x = rng.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(prog.f(x), prog.g(x), rtol=1e-6)


def test_array_errors_and_lengths(rng):
    def body(x):
        arr = L.create_array("float32")
        L.array_write(x, L.fill_constant([1], "int64", 0), array=arr)
        L.array_write(x * 2.0, L.fill_constant([1], "int64", 1), array=arr)
        return L.array_length(arr), L.array_read(arr, L.fill_constant([1], "int64", 1))
    n, second = compile_method(body).f(np.ones((2, 3), np.float32))
    assert n == 2 and second.tolist() == [[2.0] * 3] * 2
    with pytest.raises(fluid.OpArgumentError, match="nothing was written"):
        compile_method(lambda x: L.array_read(L.create_array("float32"),
                                              L.fill_constant([1], "int64", 0)))
    with pytest.raises(fluid.OpArgumentError, match="must be a tensor array"):
        compile_method(lambda x: L.array_length(x))


def test_static_rnn_errors():
    time_major = (4, -1, 3)     # [T, B, 3], as a StaticRNN steps over dim 0
    def never_updated(x):
        rnn = L.StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(x)
            rnn.memory(shape=[-1, 3], batch_ref=x_t)
            rnn.step_output(x_t)
        return rnn()
    with pytest.raises(fluid.ProgramDefinitionError, match="never updated.*update_memory"):
        compile_method(never_updated, shape=time_major)

    def writes_outside(x):
        total = L.scale(L.fill_constant_batch_size_like(x, [-1, 3], "float32", 0.0), 1.0)
        rnn = L.StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(x)
            L.assign(x_t, output=total)
            rnn.step_output(x_t)
        return rnn()
    with pytest.raises(fluid.ProgramDefinitionError, match="memory / update_memory"):
        compile_method(writes_outside, shape=time_major)
    with pytest.raises(fluid.ProgramDefinitionError, match="inside 'with rnn.step"):
        compile_method(lambda x: L.StaticRNN().step_input(x), shape=time_major)

    def sliced_inside(x):
        rnn = L.StaticRNN()
        with rnn.step():
            rnn.step_output(rnn.step_input(L.transpose(x, [1, 0, 2])))
        return rnn()
    with pytest.raises(fluid.ProgramDefinitionError, match="computed inside the step"):
        compile_method(sliced_inside, shape=time_major)


def test_static_rnn_runs_any_number_of_steps(rng):
    class P(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data(name="x", shape=[-1, -1, 2], dtype="float32", append_batch_size=False)
            rnn = L.StaticRNN()
            with rnn.step():
                x_t = rnn.step_input(x)
                total = rnn.memory(shape=[-1, 2], batch_ref=x_t)
                new = total + x_t
                rnn.update_memory(total, new)
                rnn.step_output(new)
            return rnn()
    prog = P().Compile()
    for steps in (1, 4, 9):
        x = rng.standard_normal((steps, 3, 2)).astype(np.float32)
        np.testing.assert_allclose(prog.f(x), np.cumsum(x, axis=0), rtol=1e-5, atol=1e-6)


def test_gradients_are_taken_outside_of_loop_bodies():
    def body(x):
        with two_iterations():
            fluid.gradients(L.mean(x), [x])
        return x
    with pytest.raises(fluid.OpArgumentError, match="outside of a While, cond or Switch"):
        compile_method(body)


def test_a_test_mode_loop_keeps_nothing_for_a_gradient():
    def body(x):
        x.stop_gradient = False
        h = L.scale(x, 1.0)
        with two_iterations(is_test=True):
            L.assign(h * 2.0, output=h)
        return fluid.gradients(L.mean(h), [x])
    with pytest.raises(fluid.OpArgumentError, match="is_test=True, so it keeps nothing"):
        compile_method(body)
