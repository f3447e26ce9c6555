"""`fluid.var_scope`, unique names and parameter sharing."""
import numpy as np
import pytest

import fluid
from fluid_interactive.frontend.program import trace_program
from fluid_interactive.ir.names import UniqueNameGenerator


def _param_names(compiled):
    return list(compiled.parameters())


def _all_var_names(program):
    return [list(block.vars) for block in program.blocks]


def test_unique_name_generator_counts_per_key_with_its_prefix():
    gen = UniqueNameGenerator("a/b/")
    assert [gen.generate("fc"), gen.generate("fc"), gen.generate("conv")] == \
        ["a/b/fc_0", "a/b/fc_1", "a/b/conv_0"]


class Shared(fluid.Program):
    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name='x', shape=[4])
        y = fluid.layers.data(name='y', shape=[1])
        with fluid.var_scope('prediction'):
            pred = fluid.layers.fc(input=x, size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
        return loss

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name='x', shape=[4])
        with fluid.var_scope('prediction'):
            return fluid.layers.fc(input=x, size=1)


def test_same_scope_in_two_methods_shares_parameters(rng):
    prog = Shared().Compile(seed=0)
    assert _param_names(prog) == ["prediction/fc_0.w_0", "prediction/fc_0.b_0"]
    x = rng.normal(size=(32, 4)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    for _ in range(100):
        prog.train_step(x, y)
    p = prog.parameters()
    np.testing.assert_allclose(prog.infer(x), x @ p["prediction/fc_0.w_0"] +
                               p["prediction/fc_0.b_0"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(prog.infer(x), y, atol=0.1)   # it learned, infer sees it


class SubNetwork(fluid.Program):
    def tower(self, x):
        with fluid.var_scope('tower'):
            hidden = fluid.layers.fc(input=x, size=4, act='relu')
            return fluid.layers.fc(input=hidden, size=4)

    @fluid.network("a", "b")
    def siamese(self, a, b):
        a = fluid.layers.data(name='a', shape=[4])
        b = fluid.layers.data(name='b', shape=[4])
        return self.tower(a), self.tower(b)

    @fluid.network("x")
    def plain_one(self, x):
        x = fluid.layers.data(name='x', shape=[4])
        return fluid.layers.fc(input=x, size=2)

    @fluid.network("x")
    def plain_two(self, x):
        x = fluid.layers.data(name='x', shape=[4])
        return fluid.layers.fc(input=x, size=2)


def test_sub_network_called_twice_shares_parameters_with_unique_temporaries():
    prog = SubNetwork().Compile(seed=0)
    tower = [n for n in _param_names(prog) if n.startswith("tower/")]
    assert tower == ["tower/fc_0.w_0", "tower/fc_0.b_0", "tower/fc_1.w_0", "tower/fc_1.b_0"]
    block = prog.program.block("siamese")
    outputs = [n for op in block.ops for n in op.output_names()]
    assert len(outputs) == len(set(outputs))          # every temporary written once
    fluid.check_program(prog.program)
    same = np.ones((1, 4), "float32")
    left, right = prog.siamese(same, same)
    np.testing.assert_array_equal(left, right)        # same weights for both towers


def test_unscoped_layers_in_two_methods_get_distinct_parameters():
    prog = SubNetwork().Compile(seed=0)
    one = prog.program.block("plain_one").ops[0].input("Y")
    two = prog.program.block("plain_two").ops[0].input("Y")
    assert one == ["fc_0.w_0"] and two == ["fc_1.w_0"]
    x = np.ones((1, 4), "float32")
    assert not np.allclose(prog.plain_one(x), prog.plain_two(x))


def test_nested_scopes_give_a_path_and_restore_on_exit():
    seen = {}

    class Nested(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name='x', shape=[2])
            with fluid.var_scope('outer') as outer:
                seen["outer"] = outer
                with fluid.var_scope('inner') as inner:
                    seen["inner"] = inner
                    a = fluid.layers.fc(x, 2)
                b = fluid.layers.fc(a, 2)
            return fluid.layers.fc(b, 2)

    names = _param_names(Nested().Compile())
    assert seen == {"outer": "outer/", "inner": "outer/inner/"}
    assert names == ["outer/inner/fc_0.w_0", "outer/inner/fc_0.b_0", "outer/fc_0.w_0",
                     "outer/fc_0.b_0", "fc_0.w_0", "fc_0.b_0"]


def test_scope_is_restored_when_the_body_raises():
    class Raising(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name='x', shape=[2])
            try:
                with fluid.var_scope('broken'):
                    fluid.layers.fc(x, 2)
                    raise RuntimeError("inside the scope")
            except RuntimeError:
                pass
            return fluid.layers.fc(x, 2)

    names = _param_names(Raising().Compile())
    assert names == ["broken/fc_0.w_0", "broken/fc_0.b_0", "fc_0.w_0", "fc_0.b_0"]


def test_var_scope_outside_tracing_and_bad_names_are_errors():
    with pytest.raises(fluid.FluidError, match="@fluid.network"):
        with fluid.var_scope('x'):
            pass

    class BadName(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            with fluid.var_scope('a/b'):
                pass
    with pytest.raises(fluid.OpArgumentError, match="without '/'"):
        BadName().Compile()


class Alpha(fluid.Program):
    @fluid.network("x")
    def f(self, x):
        x = fluid.layers.data(name='x', shape=[3])
        h = fluid.layers.fc(x, 3, act='tanh')
        loss = fluid.layers.mean(fluid.layers.fc(h, 1))
        fluid.optimizer.SGD(0.1).minimize(loss)
        return loss


class Beta(fluid.Program):
    @fluid.network("x")
    def g(self, x):
        x = fluid.layers.data(name='x', shape=[3])
        loss = fluid.layers.mean(fluid.layers.fc(x, 2) * 2)
        fluid.optimizer.SGD(0.5).minimize(loss)
        return loss


def test_names_depend_only_on_the_class_not_on_earlier_compiles():
    alpha_first = _all_var_names(trace_program(Alpha()))
    beta_second = _all_var_names(trace_program(Beta()))
    beta_first = _all_var_names(trace_program(Beta()))
    alpha_second = _all_var_names(trace_program(Alpha()))
    assert alpha_first == alpha_second and beta_first == beta_second
    assert trace_program(Alpha()) == trace_program(Alpha())
    a1 = Alpha().Compile(seed=5).parameters()
    Beta().Compile(seed=5)
    a2 = Alpha().Compile(seed=5).parameters()
    assert list(a1) == list(a2)
    for name in a1:
        np.testing.assert_array_equal(a1[name], a2[name])


def test_param_attr_name_shares_explicitly_across_methods_and_scopes():
    class Explicit(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name='x', shape=[3])
            with fluid.var_scope('one'):
                return fluid.layers.fc(x, 2, param_attr='W', bias_attr=False)

        @fluid.network("x")
        def g(self, x):
            x = fluid.layers.data(name='x', shape=[3])
            with fluid.var_scope('two'):
                return fluid.layers.fc(x, 2, param_attr=fluid.ParamAttr(name='W'),
                                       bias_attr=False)

    prog = Explicit().Compile(seed=1)
    assert _param_names(prog) == ["W"]
    x = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal(prog.f(x), prog.g(x))
    np.testing.assert_allclose(prog.f(x), x @ prog.parameters()["W"], rtol=1e-6)


def test_param_attr_initializer_and_no_bias():
    class Init(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name='x', shape=[3])
            return fluid.layers.fc(x, 2, param_attr=fluid.initializer.Constant(0.5),
                                   bias_attr=fluid.initializer.Constant(1.0))

        @fluid.network("x")
        def nobias(self, x):
            x = fluid.layers.data(name='x', shape=[3])
            return fluid.layers.fc(x, 2, bias_attr=False)

    prog = Init().Compile()
    np.testing.assert_allclose(prog.f([1, 2, 3]), [[4.0, 4.0]])
    assert [op.type for op in prog.program.block("nobias").ops] == ["mul"]
    assert "fc_1.b_0" not in prog.parameters()


def test_sharing_a_name_with_another_shape_is_a_name_conflict():
    class Conflict(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name='x', shape=[3])
            h = fluid.layers.fc(x, 2, param_attr='W')
            return fluid.layers.fc(h, 2, param_attr='W')

    with pytest.raises(fluid.NameConflictError) as info:
        Conflict().Compile()
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert "'W'" in message and "f32[3,2]" in message and "f32[2,2]" in message
    assert "fc" in message


def test_a_parameter_name_never_overwrites_optimizer_state():
    class Clash(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name='x', shape=[4])
            return fluid.layers.fc(x, 1, param_attr='learning_rate_0')

        @fluid.network("x")
        def g(self, x):
            x = fluid.layers.data(name='x', shape=[4])
            loss = fluid.layers.mean(fluid.layers.fc(x, 1))
            fluid.optimizer.SGD(0.1).minimize(loss)
            return loss

    prog = Clash().Compile()
    block0 = prog.program.global_block()
    assert block0.vars["learning_rate_0"].shape == (4, 1)
    assert block0.vars["learning_rate_0"].is_parameter
    written = [n for op in block0.ops for n in op.output_names()]
    assert len(written) == len(set(written))


def test_a_parameter_name_taken_by_state_is_a_name_conflict():
    class Clash(fluid.Program):
        @fluid.network("x")
        def g(self, x):
            x = fluid.layers.data(name='x', shape=[1])
            loss = fluid.layers.mean(fluid.layers.fc(x, 1))
            fluid.optimizer.SGD(0.1).minimize(loss)
            return loss

        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name='x', shape=[1])
            return fluid.layers.fc(x, 1, param_attr='learning_rate_0')

    with pytest.raises(fluid.NameConflictError, match="already taken"):
        Clash().Compile()
