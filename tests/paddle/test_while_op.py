"""Paddle 1.8's test_while_op.py, ported: nested `While` loops reading and writing tensor
arrays, and its errors. CompiledProgram is this project's compiled method."""
import numpy as np
import pytest
from paddle.common import compile_fetches, three_element_arrays, zeros

import fluid

layers = fluid.layers


def simple_net():
    mem_array, data_array = three_element_arrays()
    i = zeros(shape=[1], dtype='int64')
    i.stop_gradient = True
    array_len = layers.fill_constant(shape=[1], dtype='int64', value=1)
    array_len.stop_gradient = True
    cond = layers.less_than(x=i, y=array_len)
    j = layers.fill_constant(shape=[1], dtype='int64', value=1)
    j.stop_gradient = True
    array_len2 = layers.fill_constant(shape=[1], dtype='int64', value=3)
    array_len2.stop_gradient = True
    cond2 = layers.less_than(x=j, y=array_len2)
    while_op = layers.While(cond=cond)
    while_op2 = layers.While(cond=cond2)

    def step(k, n, cond):
        """mem[k + 1] = data[k] + mem[k]; k += 1 (in place), while k < n."""
        result = layers.sums(input=[layers.array_read(array=data_array, i=k),
                                    layers.array_read(array=mem_array, i=k)])
        k = layers.increment(x=k, in_place=True)
        layers.array_write(result, i=k, array=mem_array)
        layers.less_than(x=k, y=n, cond=cond)
    with while_op.block():
        step(i, array_len, cond)
        with while_op2.block():
            step(j, array_len2, cond2)
    sum_result = layers.array_read(array=mem_array, i=j)
    loss = layers.mean(sum_result)
    return loss, sum_result


def test_simple_net():
    def build():
        loss, sum_result = simple_net()
        fluid.backward.append_backward(loss)
        return [sum_result]
    rng = np.random.RandomState(0)
    d = [rng.random_sample(size=[10]).astype('float32') for _ in range(3)]
    outs = compile_fetches(build, ["d0", "d1", "d2"])(d0=d[0], d1=d[1], d2=d[2])
    assert abs(np.sum(d) - np.sum(outs[0])) <= 0.01


def test_simple_net_forward():
    def build():
        return list(simple_net())
    run = compile_fetches(build, ["d0", "d1", "d2"])
    rng = np.random.RandomState(0)
    d = [rng.random_sample(size=[10]).astype('float32') for _ in range(3)]
    for _ in range(2):
        run(d0=d[0], d1=d[1], d2=d[2])


def test_exceptions():
    def build():
        i = zeros(shape=[2], dtype='int64')
        array_len = layers.fill_constant(shape=[2], dtype='int64', value=1)
        cond = layers.less_than(x=i, y=array_len)
        with pytest.raises(TypeError):
            layers.While(cond=cond)
        cond = layers.cast(cond, dtype='float64')
        with pytest.raises(TypeError):
            layers.While(cond=cond)
        return [i]
    compile_fetches(build)()


def test_bad_input_error():   # BadInputTest.test_error
    def build():
        with pytest.raises(TypeError):
            fluid.layers.increment([1, 2, 3])
        return [layers.fill_constant([1], "int64", 0)]
    compile_fetches(build)()
