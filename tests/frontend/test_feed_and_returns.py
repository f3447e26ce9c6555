"""What compiled methods accept (feeds) and what they give back (returns)."""
import numpy as np
import pytest
from distributed.nets import FitALine

import fluid


class Echo(fluid.Program):
    @fluid.network("x")
    def floats(self, x):
        x = fluid.layers.data(name='x', shape=[3], dtype='float32')
        return x

    @fluid.network("i")
    def ints(self, i):
        i = fluid.layers.data(name='i', shape=[2], dtype='int64')
        return i

    @fluid.network("s")
    def single(self, s):
        s = fluid.layers.data(name='s', shape=[1], dtype='float32')
        return s

    @fluid.network("m")
    def matrix(self, m):
        m = fluid.layers.data(name='m', shape=[2, 3], dtype='float32')
        return m


@pytest.fixture(scope="module")
def echo():
    return Echo().Compile()


# --- feeding ------------------------------------------------------------------------------

def test_lists_nested_lists_and_arrays(echo):
    for value in ([[1, 2, 3], [4, 5, 6]], np.array([[1, 2, 3], [4, 5, 6]], "float32")):
        out = echo.floats(value)
        assert out.dtype == np.float32 and out.shape == (2, 3)
        np.testing.assert_array_equal(out, [[1, 2, 3], [4, 5, 6]])
    out = echo.matrix([[[1, 2, 3], [4, 5, 6]]] * 4)
    assert out.shape == (4, 2, 3)


def test_one_sample_gets_a_batch_dim(echo):
    assert echo.floats([1.5, 2, 3]).shape == (1, 3)
    assert echo.matrix([[1, 2, 3], [4, 5, 6]]).shape == (1, 2, 3)
    assert echo.ints(np.array([7, 8])).shape == (1, 2)


def test_scalars_feed_a_one_value_sample(echo):
    for value in (3, 3.0, np.float64(3.0), np.array(3.0)):
        out = echo.single(value)
        assert out.shape == (1, 1) and out.dtype == np.float32 and out[0, 0] == 3.0
    np.testing.assert_array_equal(echo.single([3.0]), [[3.0]])


def test_casts_within_a_kind(echo):
    out = echo.floats(np.array([[0.1, 0.2, 0.3]], dtype=np.float64))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.1, 0.2, 0.3]], rtol=1e-6)
    out = echo.ints(np.array([[1, 2]], dtype=np.int32))
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [[1, 2]])
    out = echo.floats(np.array([[1, 2, 3]], dtype=np.int64))      # ints into a float var
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [[1, 2, 3]])
    assert echo.ints([[1, 2]]).dtype == np.int64


def _feed_error(fn, *args):
    with pytest.raises(fluid.FeedError) as info:
        fn(*args)
    assert isinstance(info.value, ValueError) and isinstance(info.value, fluid.FluidError)
    return str(info.value)


def test_a_change_of_kind_is_a_feed_error_naming_method_var_expected_and_got(echo):
    message = _feed_error(echo.ints, [[1.5, 2.0]])
    for part in ("ints()", "'i'", "int64[?, 2]", "float64"):
        assert part in message
    message = _feed_error(echo.ints, np.array([[1, 2]], dtype=np.float32))
    assert "float32" in message and "int64" in message
    message = _feed_error(echo.floats, np.array([[1j, 2, 3]]))
    assert "complex" in message
    message = _feed_error(echo.floats, [["a", "b", "c"]])
    assert "not numeric" in message


def test_a_wrong_shape_is_a_feed_error_naming_method_var_expected_and_got(echo):
    message = _feed_error(echo.floats, [[1, 2]])
    for part in ("floats()", "'x'", "float32[?, 3]", "[1, 2]"):
        assert part in message
    message = _feed_error(echo.matrix, np.zeros((4, 3, 2)))
    assert "[4, 3, 2]" in message and "[?, 2, 3]" in message
    message = _feed_error(echo.floats, 5.0)
    assert "has shape []" in message


def test_ragged_and_none_are_feed_errors(echo):
    message = _feed_error(echo.floats, [[1, 2, 3], [4, 5]])
    assert "'x'" in message and ("ragged" in message or "cannot be turned" in message)
    assert "is None" in _feed_error(echo.floats, None)


def test_a_failed_feed_changes_nothing(echo):
    before = echo.floats([[1, 2, 3]])
    _feed_error(echo.floats, [[1, 2]])
    np.testing.assert_array_equal(echo.floats([[1, 2, 3]]), before)


# --- returns -------------------------------------------------------------------------------

class Shapes(fluid.Program):
    @fluid.network("x")
    def loss(self, x):
        x = fluid.layers.data(name='x', shape=[2])
        return fluid.layers.mean(x)

    @fluid.network("x")
    def nested(self, x):
        x = fluid.layers.data(name='x', shape=[2])
        m = fluid.layers.mean(x)
        return {"mean": m, "pair": (x * 2, m), "none": None}

    @fluid.network("x")
    def pair(self, x):
        x = fluid.layers.data(name='x', shape=[2])
        return x + 1, fluid.layers.mean(x)

    @fluid.network("x")
    def nothing(self, x):
        fluid.layers.data(name='x', shape=[2])
        return None

    @fluid.network("x")
    def one(self, x):
        x = fluid.layers.data(name='x', shape=[2])
        return (x,)


@pytest.fixture(scope="module")
def shapes():
    return Shapes().Compile()


def test_a_var_without_batch_dim_and_one_element_is_a_float(shapes):
    value = shapes.loss([[1, 2], [3, 4]])
    assert type(value) is float and value == pytest.approx(2.5)


def test_a_batched_var_is_an_array_even_for_one_sample(shapes):
    first, mean = shapes.pair([1, 2])
    assert isinstance(first, np.ndarray) and first.shape == (1, 2)
    assert type(mean) is float


def test_tuple_dict_and_none_keep_their_structure(shapes):
    out = shapes.nested([[1, 3]])
    assert isinstance(out, dict) and list(out) == ["mean", "pair", "none"]
    assert type(out["mean"]) is float and out["mean"] == pytest.approx(2.0)
    assert out["none"] is None
    doubled, mean = out["pair"]
    np.testing.assert_array_equal(doubled, [[2, 6]])
    assert type(mean) is float
    assert shapes.nothing([1, 2]) is None
    single = shapes.one([1, 2])
    assert isinstance(single, tuple) and len(single) == 1
    np.testing.assert_array_equal(single[0], [[1, 2]])


def test_returned_arrays_are_the_callers_own(shapes):
    a, _ = shapes.pair([1, 2])
    a[...] = 100
    b, _ = shapes.pair([1, 2])
    np.testing.assert_array_equal(b, [[2, 3]])


def test_bad_return_values_are_definition_errors():
    class ReturnsNumber(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            fluid.layers.data(name='x', shape=[1])
            return 3

    class ReturnsIntKeys(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name='x', shape=[1])
            return {1: x}

    with pytest.raises(fluid.ProgramDefinitionError, match="returns int"):
        ReturnsNumber().Compile()
    with pytest.raises(fluid.ProgramDefinitionError, match="strings"):
        ReturnsIntKeys().Compile()


def test_returning_another_methods_var_is_an_error():
    class Leak(fluid.Program):
        @fluid.network("x")
        def a(self, x):
            x = fluid.layers.data(name='x', shape=[1])
            self.kept = x * 2
            return self.kept

        @fluid.network("y")
        def b(self, y):
            fluid.layers.data(name='y', shape=[1])
            return self.kept

    with pytest.raises(fluid.FluidError, match="another method"):
        Leak().Compile()


# --- messages that say what happened --------------------------------------------------------

@pytest.fixture
def pair():
    return FitALine().Compile(seed=0)


def _xy(rows=8):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((rows, 13)).astype("float32"),
            rng.standard_normal((rows, 1)).astype("float32"))


def test_arguments_that_disagree_on_the_batch_size_name_both(pair):
    x, y = _xy()
    before = pair.parameters()
    with pytest.raises(fluid.FeedError) as info:
        pair.train_step(x[:8], y[:5])
    message = str(info.value)
    assert "x has 8 rows" in message and "y has 5 rows" in message
    assert "shape=[1]" not in message and "elementwise" not in message
    for name, value in before.items():
        np.testing.assert_array_equal(pair.get_var(name), value)


def test_a_1d_label_is_reported_as_given_with_the_reshape_that_fixes_it(pair):
    x, y = _xy()
    with pytest.raises(fluid.FeedError) as info:
        pair.train_step(x, y[:, 0])
    message = str(info.value)
    assert "has shape [8]" in message and "[1, 8]" not in message
    assert "reshape(-1, 1)" in message


def test_an_empty_batch_is_a_feed_error(pair):
    x, y = _xy()
    for args in ((x[:0], y[:0]), (x[:0].tolist(), y[:0].tolist())):
        with pytest.raises(fluid.FeedError, match="empty batch"):
            pair.train_step(*args)


def test_an_option_passed_to_a_method_says_where_options_go(pair):
    with pytest.raises(TypeError, match=r"option of FitALine.*FitALine\(learning_rate=\.\.\.\)"
                                        r"\.Compile"):
        pair.train_step(learning_rate=0.1)


def test_calling_a_method_of_an_uncompiled_program_says_to_compile_it():
    with pytest.raises(fluid.NotCompiledError) as info:
        FitALine().infer([3, 4, 6, 3, 5, 7, 8, 6, 5, 4, 1, 5, 8])
    assert "fit_a_line = FitALine().Compile()" in str(info.value)
    assert "fit_a_line.infer(" in str(info.value)


def test_set_parameters_converts_within_a_kind_and_refuses_what_does_not_fit(pair):
    w = "prediction/fc_0.w_0"
    pair.set_parameters({w: np.full((13, 1), 0.5)})            # float64 -> float32
    assert pair.get_var(w).dtype == np.float32
    with pytest.raises(fluid.FeedError, match="Convert the value explicitly"):
        pair.set_parameters({w: np.full((13, 1), 1, "int64")})


class Decaying(fluid.Program):
    @fluid.network("x")
    def train_step(self, x):
        x = fluid.layers.data(name='x', shape=[2], dtype='float32')
        loss = fluid.layers.mean(fluid.layers.fc(input=x, size=1))
        lr = fluid.layers.exponential_decay(0.1, decay_steps=10, decay_rate=0.5)
        fluid.optimizer.SGD(learning_rate=lr).minimize(loss)
        return loss


def test_an_integer_that_does_not_fit_its_var_is_refused_not_wrapped():
    prog = Decaying().Compile(seed=0)
    counter = "@LR_DECAY_COUNTER@"
    dtype = prog.get_var(counter).dtype
    big = np.iinfo(dtype).max
    prog.set_var(counter, np.array([7], "int32"))              # int32 -> the counter's ints
    assert prog.get_var(counter)[0] == 7
    with pytest.raises(fluid.FeedError, match="which holds"):
        prog.set_var(counter, np.array([big], "uint64") + np.uint64(1))
    assert prog.get_var(counter)[0] == 7
