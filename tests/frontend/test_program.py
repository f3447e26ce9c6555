"""`fluid.Program`, `@fluid.network` / `@fluid.Input`, `Compile()`: the contract of DESIGN §1."""
import numpy as np
import pytest

import fluid


class FitALine(fluid.Program):
    batch_size = 128

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name='x', shape=[13], dtype='float32')
        y = fluid.layers.data(name='y', shape=[1], dtype='float32')
        with fluid.var_scope('prediction'):
            y_predict = fluid.layers.fc(input=x, size=1, act=None)
        cost = fluid.layers.square_error_cost(input=y_predict, label=y)
        avg_cost = fluid.layers.mean(cost, name='avg_cost')
        fluid.optimizer.SGD(learning_rate=0.001).minimize(avg_cost)
        return avg_cost

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name='x', shape=[13], dtype='float32')
        with fluid.var_scope('prediction'):
            return fluid.layers.fc(input=x, size=1, act=None)


def _data(rng, n=256):
    x = rng.normal(size=(n, 13)).astype("float32")
    y = (x @ np.linspace(-1, 1, 13, dtype="float32"))[:, None] + 0.5
    return x, y


# --- the contract example -----------------------------------------------------------------

def test_contract_example_trains_and_infers(rng):
    fit_a_line = FitALine(batch_size=256).Compile(seed=7)
    x, y = _data(rng)
    losses = [fit_a_line.train_step(x, y) for _ in range(200)]
    assert all(type(v) is float for v in losses)
    assert losses[-1] < 0.5 * losses[0]
    out = fit_a_line.infer([3, 4, 6, 3, 5, 7, 8, 6, 5, 4, 1, 5, 8])
    assert isinstance(out, np.ndarray) and out.shape == (1, 1) and out.dtype == np.float32


def test_infer_uses_what_train_step_learned(rng):
    prog = FitALine().Compile(seed=1)
    x, y = _data(rng)
    params = prog.parameters()
    w, b = params["prediction/fc_0.w_0"], params["prediction/fc_0.b_0"]
    np.testing.assert_allclose(prog.infer(x), x @ w + b, rtol=1e-5, atol=1e-5)
    for _ in range(5):
        prog.train_step(x, y)
    trained = prog.parameters()
    assert not np.allclose(trained["prediction/fc_0.w_0"], w)
    expected = x @ trained["prediction/fc_0.w_0"] + trained["prediction/fc_0.b_0"]
    np.testing.assert_allclose(prog.infer(x), expected, rtol=1e-5, atol=1e-5)


def test_compile_and_lowercase_compile_give_equal_programs():
    a, b = FitALine().Compile(seed=3), FitALine().compile(seed=3)
    assert a.program == b.program
    for name, value in a.parameters().items():
        np.testing.assert_array_equal(value, b.parameters()[name])


def test_methods_called_in_any_order_repeatedly_share_one_scope(rng):
    prog = FitALine().Compile(seed=2)
    x, y = _data(rng, 16)
    first = prog.infer(x)
    np.testing.assert_array_equal(prog.infer(x), first)     # infer changes nothing
    prog.train_step(x, y)
    second = prog.infer(x)
    assert not np.allclose(first, second)                    # train_step updated the scope
    prog.train_step(x, y)
    prog.train_step(x, y)
    assert not np.allclose(prog.infer(x), second)


# --- blocks ----------------------------------------------------------------------------------

class Zoo(fluid.Program):
    @fluid.network("a")
    def zeta(self, a):
        a = fluid.layers.data(name='a', shape=[2])
        return a * 2

    @fluid.network("a")
    def alpha(self):
        a = fluid.layers.data(name='a', shape=[2])
        return a + 1

    @fluid.Input("a")
    def middle(self, a):
        fluid.layers.data(name='a', shape=[2])
        return -a


def test_each_method_is_one_block_of_one_program_in_definition_order():
    prog = Zoo().Compile()
    blocks = prog.program.blocks
    assert [b.name for b in blocks[1:]] == ["zeta", "alpha", "middle"]
    assert [b.idx for b in blocks] == [0, 1, 2, 3]
    assert all(b.parent_idx == 0 for b in blocks[1:])
    assert blocks[0].parent_idx == -1
    assert sorted(prog.methods) == ["alpha", "middle", "zeta"]


def test_mapped_names_may_be_parameters_or_not_and_input_spelling_works():
    prog = Zoo().Compile()
    np.testing.assert_allclose(prog.zeta([1, 2]), [[2, 4]])
    np.testing.assert_allclose(prog.alpha([1, 2]), [[2, 3]])      # def alpha(self)
    np.testing.assert_allclose(prog.middle([1, 2]), [[-1, -2]])   # @fluid.Input
    np.testing.assert_allclose(prog.middle(a=[1, 2]), [[-1, -2]])


def test_any_method_names_and_bare_decorator():
    class Many(fluid.Program):
        @fluid.network
        def evaluate(self, v):
            v = fluid.layers.data(name='v', shape=[1])
            return v * 3

        @fluid.network()
        def discriminator_step(self, w):
            w = fluid.layers.data(name='w', shape=[1])
            return w - 1

    prog = Many().Compile()
    np.testing.assert_allclose(prog.evaluate([2.0]), [[6.0]])
    np.testing.assert_allclose(prog.discriminator_step(w=[2.0]), [[1.0]])


def test_arguments_positional_or_keyword_feed_the_data_vars():
    class Two(fluid.Program):
        @fluid.network("x", "y")
        def diff(self, first, second):     # parameter names need not match the var names
            first = fluid.layers.data(name='x', shape=[2])
            second = fluid.layers.data(name='y', shape=[2])
            return first - second

    prog = Two().Compile()
    np.testing.assert_allclose(prog.diff([5, 5], [1, 2]), [[4, 3]])
    np.testing.assert_allclose(prog.diff(y=[1, 2], x=[5, 5]), [[4, 3]])
    np.testing.assert_allclose(prog.diff([5, 5], y=[1, 2]), [[4, 3]])
    with pytest.raises(TypeError, match="missing argument"):
        prog.diff([5, 5])
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        prog.diff([5, 5], z=[1, 2])
    with pytest.raises(TypeError, match="takes 2 argument"):
        prog.diff([1, 1], [2, 2], [3, 3])


def test_parameters_with_defaults_and_keyword_only_parameters():
    class Defaults(fluid.Program):
        @fluid.network("x")
        def scaled(self, x, factor=3.0):
            x = fluid.layers.data(name='x', shape=[1])
            return x * factor

        @fluid.network()
        def kw(self, *, z):
            z = fluid.layers.data(name='z', shape=[1])
            return z + 1

    prog = Defaults().Compile()
    np.testing.assert_allclose(prog.scaled([2.0]), [[6.0]])
    np.testing.assert_allclose(prog.kw(z=[1.0]), [[2.0]])


def test_placeholder_is_adopted_by_data():
    class Adopt(fluid.Program):
        @fluid.network("x", "y")
        def f(self, x, y):
            fluid.layers.data(name='x', shape=[3])     # result not assigned: x adopts it
            fluid.layers.data(name='y', shape=[3])
            return x - y, x * y, 2 ** x, fluid.layers.mean(x)

    prog = Adopt().Compile()
    d, p, e, m = prog.f([1, 2, 3], [3, 2, 1])
    np.testing.assert_allclose(d, [[-2, 0, 2]])
    np.testing.assert_allclose(p, [[3, 4, 3]])
    np.testing.assert_allclose(e, [[2, 4, 8]], rtol=1e-6)
    assert m == pytest.approx(2.0)
    assert prog.program.block("f").vars["x"].is_data


def test_options_override_class_attributes():
    class Wide(fluid.Program):
        width = 3
        scale = 1.0

        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name='x', shape=[self.width])
            return x * self.scale

    prog = Wide(width=5, scale=2.0).Compile()
    assert prog.program.block("f").vars["x"].shape == (-1, 5)
    np.testing.assert_allclose(prog.f([1, 2, 3, 4, 5]), [[2, 4, 6, 8, 10]])
    assert Wide.width == 3 and Wide().width == 3    # the class keeps its defaults


def test_unknown_option_is_a_type_error_listing_known_options():
    with pytest.raises(TypeError) as info:
        FitALine(batch_sizes=256)
    assert "batch_sizes" in str(info.value) and "batch_size" in str(info.value)
    with pytest.raises(TypeError, match="Compile"):
        FitALine(Compile=1)     # methods are not options


@pytest.mark.parametrize("name", ["save", "parameters", "set_var", "program", "methods",
                                  "Compile", "compile", "_values"])
def test_method_name_colliding_with_the_compiled_api_fails_at_class_definition(name):
    def method(self):
        return None
    with pytest.raises(fluid.ProgramDefinitionError, match=repr(name)) as info:
        type("Bad", (fluid.Program,), {name: fluid.network()(method)})
    assert isinstance(info.value, TypeError)
    assert "rename the method" in str(info.value)


def test_subclass_inherits_networks_and_may_override_them():
    class Base(fluid.Program):
        @fluid.network("x")
        def a(self, x):
            x = fluid.layers.data(name='x', shape=[1])
            return x + 1

        @fluid.network("x")
        def b(self, x):
            x = fluid.layers.data(name='x', shape=[1])
            return x + 2

    class Child(Base):
        @fluid.network("x")
        def b(self, x):
            x = fluid.layers.data(name='x', shape=[1])
            return x + 20

        def a(self, x):          # an override without the decorator is a plain method
            return None

        @fluid.network("x")
        def c(self, x):
            x = fluid.layers.data(name='x', shape=[1])
            return x + 3

    prog = Child().Compile()
    assert list(prog.methods) == ["b", "c"]
    np.testing.assert_allclose(prog.b([1.0]), [[21.0]])


def test_decorator_argument_mismatch_is_a_definition_error():
    class Mismatch(fluid.Program):
        @fluid.network("x", "y")
        def f(self, x):
            return None
    with pytest.raises(fluid.ProgramDefinitionError, match="maps 2 data var"):
        Mismatch().Compile()
    with pytest.raises(fluid.ProgramDefinitionError, match="strings"):
        fluid.network(3)


def test_mapped_argument_never_declared_names_the_method():
    class Undeclared(fluid.Program):
        @fluid.network("x")
        def f(self):
            return None
    with pytest.raises(fluid.ProgramDefinitionError, match=r"Undeclared.f\(\) maps argument 'x'"):
        Undeclared().Compile()


def test_data_var_no_argument_feeds_is_a_definition_error_naming_its_line():
    class Unfed(fluid.Program):
        @fluid.network()
        def f(self):
            z = fluid.layers.data(name='z', shape=[2])  # unfed-data
            return z
    with pytest.raises(fluid.ProgramDefinitionError) as info:
        Unfed().Compile()
    message = str(info.value)
    assert "'z'" in message and "@fluid.network('z')" in message
    assert f"test_program.py:{_line_of('unfed-data')}" in message


def test_compile_twice_gives_independent_scopes(rng):
    instance = FitALine()
    a, b = instance.Compile(seed=4), instance.Compile(seed=4)
    x, y = _data(rng, 8)
    a.train_step(x, y)
    assert not np.allclose(a.infer(x), b.infer(x))


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        hits = [i for i, line in enumerate(f, 1) if line.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return hits[0]
