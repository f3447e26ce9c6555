"""Paddle 1.8's test_lod_array_length_op.py, ported: the length of an array written past
its end."""
import numpy
import pytest
from paddle.common import compile_fetches, zeros

import fluid

layers = fluid.layers


def test_array_length():
    def build():
        tmp = zeros(shape=[10], dtype='int32')
        i = layers.fill_constant(shape=[1], dtype='int64', value=10)
        arr = layers.array_write(tmp, i=i)   # at 10 of an empty array: grows it to 11
        return [layers.array_length(arr)]
    result = compile_fetches(build)()[0]
    assert result[0] == 11


def test_errors():   # TestLoDArrayLengthOpError
    def build():
        x1 = numpy.random.RandomState(0).randn(2, 4).astype('int32')
        with pytest.raises(TypeError):
            fluid.layers.array_length(array=x1)
        return [layers.fill_constant(shape=[1], dtype='int64', value=0)]
    compile_fetches(build)()
