"""Paddle 1.8's test_array_read_write_op.py, ported: writes and reads of a tensor array
and their gradients. Its dygraph half is out of scope (docs/paddle_tests.md)."""
import numpy
import pytest
from paddle.common import compile_fetches, zeros

import fluid

layers = fluid.layers


def _test_read_write(x):
    i = zeros(shape=[1], dtype='int64')
    i.stop_gradient = False
    arr = layers.array_write(x=x[0], i=i)
    i = layers.increment(x=i)
    arr = layers.array_write(x=x[1], i=i, array=arr)
    i = layers.increment(x=i)
    arr = layers.array_write(x=x[2], i=i, array=arr)

    i = zeros(shape=[1], dtype='int64')
    i.stop_gradient = False
    a0 = layers.array_read(array=arr, i=i)
    i = layers.increment(x=i)
    a1 = layers.array_read(array=arr, i=i)
    i = layers.increment(x=i)
    a2 = layers.array_read(array=arr, i=i)

    a_sum = layers.sums(input=[layers.mean(a0), layers.mean(a1), layers.mean(a2)])
    x_sum = layers.sums(input=[layers.mean(x[0]), layers.mean(x[1]), layers.mean(x[2])])
    return a_sum, x_sum


def test_read_write():
    def build():
        x = [layers.data(name='x0', shape=[100]), layers.data(name='x1', shape=[100]),
             layers.data(name='x2', shape=[100])]
        for each_x in x:
            each_x.stop_gradient = False
        a_sum, x_sum = _test_read_write(x)
        total_sum = layers.sums(input=[a_sum, x_sum])
        total_sum_scaled = layers.scale(x=total_sum, scale=1 / 6.0)
        fluid.backward.append_backward(total_sum_scaled)
        return [a_sum, x_sum, *fluid.gradients(total_sum_scaled, x)]
    tensor = numpy.random.RandomState(0).random_sample(size=(100, 100)).astype('float32')
    outs = compile_fetches(build, ["x0", "x1", "x2"])(x0=tensor, x1=tensor, x2=tensor)
    assert outs[0] == outs[1]
    # the final gradient is 1 and the network is linear with means: the input gradients
    # sum to 1 as well
    g_out_sum = numpy.array([item.sum() for item in outs[2:]]).sum()
    assert abs(1.0 - g_out_sum) <= 0.1


def test_errors():   # TestArrayReadWriteOpError
    def build():
        x1 = numpy.random.RandomState(0).randn(2, 4).astype('int32')
        x2 = fluid.layers.fill_constant(shape=[1], dtype='int32', value=1)
        x3 = numpy.random.RandomState(1).randn(2, 4).astype('int32')
        with pytest.raises(TypeError):
            fluid.layers.array_read(array=x1, i=x2)
        with pytest.raises(TypeError):
            fluid.layers.array_write(array=x1, i=x2, out=x3)
        return [x2]
    compile_fetches(build)()
