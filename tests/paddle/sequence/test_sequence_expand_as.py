"""Paddle 1.8's sequence/test_sequence_expand_as.py, ported: row i of X repeated as often
as Y's sequence i has steps (Y's lengths the op's YLengths; its padding holds a non-zero
value), and its errors."""
import numpy as np
import pytest
from paddle.common import PAD, compile_fetches
from paddle.sequence.test_sequence_expand import check_expand, check_expand_grad

import fluid

# (class, x shape, y lod); Paddle's X LoD ([[2, 3]], [[1]]) is not read by the op
CASES = {"TestSequenceExpandAs": ([3, 40], [1, 3, 4]),
         "TestSequenceExpandAsCase1": ([5, 20], [2, 2, 0, 3, 3]),
         "TestSequenceExpandAsCase2": ([5, 20], [0, 4, 0, 6, 0]),
         "TestSequenceExpandAsCase3": ([1, 2, 50], [2])}


def expand_as_case(name):
    shape, y_lod = CASES[name]
    x = np.random.RandomState(0).uniform(0.1, 1, shape)
    inputs = {"X": x, "Y": np.full((len(y_lod), max(y_lod), 1), PAD, 'float64'),
              "YLengths": np.array(y_lod, np.int64)}
    expected = np.zeros((len(y_lod), max(y_lod)) + x.shape[1:])
    for i, r in enumerate(y_lod):   # Paddle's out_data = x_data[repeats]
        expected[i, :r] = x[i]
    return inputs, expected


@pytest.mark.parametrize("name", list(CASES))
def test_check_output(name):
    check_expand(*expand_as_case(name))


@pytest.mark.parametrize("name", list(CASES))
def test_check_grad(name):
    check_expand_grad(expand_as_case(name)[0])


def test_errors():   # TestSequenceExpandAsOpError
    def build():
        with pytest.raises(TypeError):   # x: a Variable
            fluid.layers.sequence_expand_as(np.random.random((2, 4)).astype("float32"), None)
        x2 = fluid.data(name='x2', shape=[None, 4], dtype="bool")
        with pytest.raises(TypeError):   # of float32, float64, int32 or int64
            fluid.layers.sequence_expand_as(x2, x2)
        x3 = fluid.data(name='x3', shape=[None, 4], dtype="float32")
        with pytest.raises(TypeError):   # y: a Variable
            fluid.layers.sequence_expand_as(x3, np.random.random((2, 4)).astype("float32"))
        return [x3]
    compile_fetches(build, ["x2", "x3"])
