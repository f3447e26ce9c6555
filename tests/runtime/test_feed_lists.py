"""One sample given as a Python list takes a short conversion path; it must accept and
refuse exactly what the general path does."""
import numpy as np
import pytest

import fluid


class Net(fluid.Program):
    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[3], dtype="float32")
        return fluid.layers.scale(x, scale=2.0)

    @fluid.network("i")
    def ids(self, i):
        i = fluid.layers.data(name="i", shape=[2], dtype="int64")
        return fluid.layers.scale(i, scale=1.0)


@pytest.fixture(scope="module")
def prog():
    return Net().Compile(seed=0)


@pytest.mark.parametrize("value,expected", [
    ([1.0, 2.0, 3.0], [[2.0, 4.0, 6.0]]),
    ([1, 2, 3], [[2.0, 4.0, 6.0]]),                 # integers feed a float var
    ([True, False, True], [[2.0, 0.0, 2.0]]),      # and booleans
    ([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]], [[2.0, 4.0, 6.0], [1.0, 1.0, 1.0]]),  # a batch
])
def test_lists_that_fit(prog, value, expected):
    out = prog.infer(value)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array(expected, np.float32))


@pytest.mark.parametrize("value,problem", [
    ([1.0, 2.0], "shape"),
    (["1", "2", "3"], "dtype"),
    ([1.0, [2.0], 3.0], "ragged|cannot be turned"),
])
def test_lists_that_do_not_fit_get_the_usual_error(prog, value, problem):
    with pytest.raises(fluid.FeedError, match=problem):
        prog.infer(value)


def test_floats_do_not_feed_an_integer_var(prog):
    with pytest.raises(fluid.FeedError, match="dtype"):
        prog.ids([1.5, 2.0])
    np.testing.assert_array_equal(prog.ids([1, 2]), [[1, 2]])
