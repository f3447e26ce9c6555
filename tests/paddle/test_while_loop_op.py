"""Paddle 1.8's test_while_loop_op.py, ported: `fluid.layers.while_loop` with loop vars in
lists and dicts, nested loops, tensor arrays, gradients and its errors.

TestApiWhileLoop_Backward differs from Paddle on purpose: for ``x = i * i; i += 1`` from
i = 1 while i < 11, the gradient of x (100) with respect to the initial i is the true
one, 2 * (1 + 9) = 20, where Paddle 1.8 gives 110 (docs/control_flow.md)."""
import numpy as np
import pytest
from paddle.common import compile_fetches, three_element_arrays, zeros

import fluid

layers = fluid.layers


# --- TestApiWhileLoop --------------------------------------------------------------------------

def test_var_tuple():
    def build():
        i = layers.fill_constant(shape=[1], dtype='int64', value=0)
        one = layers.fill_constant(shape=[1], dtype='int64', value=1)
        ten = layers.fill_constant(shape=[1], dtype='int64', value=10)
        return layers.while_loop(lambda i: layers.less_than(i, ten),
                                 lambda i: layers.elementwise_add(x=i, y=one), (i, ))
    res = compile_fetches(build)()
    assert np.allclose(np.asarray(res[0]), np.full((1), 10, np.int64))


def test_var_list():
    def build():
        i = zeros(shape=[1], dtype='int64')
        ten = layers.fill_constant(shape=[1], dtype='int64', value=10)
        mem = fluid.data(name='mem', shape=[10], dtype='float32')
        one = layers.fill_constant(shape=[10], dtype='float32', value=1)

        def body(i, mem):
            mem = layers.elementwise_add(x=mem, y=one)
            return [layers.increment(i), mem]
        return layers.while_loop(lambda i, mem: layers.less_than(i, ten), body, [i, mem])
    data = np.random.RandomState(0).rand(10).astype('float32')
    res = compile_fetches(build, ["mem"])(mem=data)
    for _ in range(10):
        data = np.add(data, np.ones(10).astype('float32'))
    assert np.allclose(np.asarray(res[1]), data)


def test_var_dict():
    def body(i, ten, test_dict, test_list, test_list_dict):
        test_dict["test_key"] = i
        test_dict["test_key"] += 1
        test_list[0] = fluid.layers.reshape(test_list[0], [2, -1]) + 1   # [1, 2] to [2, 1]
        test_list_dict[0]["test_key"] += 1
        test_list_dict[0]["test_key"] = fluid.layers.relu(test_list_dict[0]["test_key"])
        i = layers.increment(i)
        return [i, ten, test_dict, test_list, test_list_dict]

    def build():
        i = zeros(shape=[1], dtype='int64')
        ten = layers.fill_constant(shape=[1], dtype='int64', value=10)
        test_data = layers.fill_constant(shape=[1], dtype='int64', value=0)
        test_dict = {"test_key": test_data}
        test_list = [layers.fill_constant(shape=[1, 2], dtype='int64', value=0)]
        test_list_dict = [{"test_key": layers.fill_constant(shape=[1], dtype='float32',
                                                            value=0)}]
        i, ten, test_dict, test_list, test_list_dict = layers.while_loop(
            lambda i, ten, *_: layers.less_than(i, ten), body,
            [i, ten, test_dict, test_list, test_list_dict])
        return [test_dict["test_key"], test_list[0], test_list_dict[0]["test_key"]]
    res = compile_fetches(build)()
    assert np.allclose(np.asarray(res[0]), np.full(shape=(1), fill_value=10, dtype=np.int64))
    assert np.asarray(res[1]).shape == (2, 1)
    assert np.allclose(np.asarray(res[1]), np.full(shape=(2, 1), fill_value=10,
                                                   dtype=np.int64))
    assert np.allclose(np.asarray(res[2]), np.full(shape=(1), fill_value=10,
                                                   dtype=np.float32))


# --- TestApiWhileLoop_Nested -------------------------------------------------------------------

def test_nested_net():
    def build():
        i = zeros(shape=[1], dtype='int64')
        j = zeros(shape=[1], dtype='int64')
        init = fluid.data(name='init', shape=[3, 3], dtype='float32')
        sums = fluid.data(name='sums', shape=[3, 3], dtype='float32')
        loop_len1 = layers.fill_constant(shape=[1], dtype='int64', value=2)
        loop_len2 = layers.fill_constant(shape=[1], dtype='int64', value=3)
        ones = layers.fill_constant(shape=[3, 3], dtype='float32', value=1)

        def internal_body(j, init, sums):
            init = layers.elementwise_add(x=init, y=ones)
            sums = layers.elementwise_add(x=init, y=sums)
            j = layers.increment(j)
            return [j, init, sums]

        def external_body(i, j, init, sums):
            j, init, sums = layers.while_loop(lambda j, init, sums: layers.less_than(j, loop_len2),
                                              internal_body, [j, init, sums])
            sums = layers.elementwise_add(x=init, y=sums)
            i = layers.increment(i)
            return [i, j, init, sums]
        return layers.while_loop(lambda i, j, init, sums: layers.less_than(i, loop_len1),
                                 external_body, [i, j, init, sums])
    data = np.random.RandomState(0).rand(3, 3).astype('float32')
    data_sums = np.zeros([3, 3]).astype('float32')
    res = compile_fetches(build, ["init", "sums"])(init=data, sums=data_sums)
    for _ in range(3):
        data = np.add(data, 1)
        data_sums = np.add(data, data_sums)
    for _ in range(2):
        data_sums = np.add(data, data_sums)
    assert np.allclose(np.asarray(res[3]), data_sums)


# --- TestApiWhileLoop_Backward -----------------------------------------------------------------

def test_while_loop_backward():
    def body(i, x):
        x = layers.elementwise_mul(x=i, y=i)
        i = layers.increment(i)
        return [i, x]

    def build():
        i = fluid.data(name='i', shape=[1], dtype='float32')
        i.stop_gradient = False
        eleven = layers.fill_constant(shape=[1], dtype='float32', value=11)
        x = fluid.data(name='x', shape=[1], dtype='float32')
        x.stop_gradient = False
        out = layers.while_loop(lambda i, x: layers.less_than(i, eleven), body, [i, x])
        mean = layers.mean(out[1])
        fluid.backward.append_backward(mean)
        return [mean, fluid.gradients(mean, [i])[0]]
    feed_i = np.ones(1).astype('float32')
    feed_x = np.ones(1).astype('float32')
    data = np.asarray([100]).astype('float32')
    i_grad = np.asarray([20]).astype('float32')   # true gradient; Paddle 1.8 gives 110
    res = compile_fetches(build, ["i", "x"])(i=feed_i, x=feed_x)
    assert np.allclose(np.asarray(res[0]), data)
    assert np.allclose(np.asarray(res[1]), i_grad)


# --- TestApiWhileLoop_NestedWithBackwardAndLoDTensorArray ------------------------------------

def test_nested_net_with_backward_and_lodtensor():
    def build():
        mem_array, data_array = three_element_arrays()
        x = fluid.data(name='x', shape=[10], dtype='float32')
        x.stop_gradient = False
        i = zeros(shape=[1], dtype='int64')
        i.stop_gradient = True
        array_len = layers.fill_constant(shape=[1], dtype='int64', value=1)
        j = layers.fill_constant(shape=[1], dtype='int64', value=1)
        j.stop_gradient = True
        array_len2 = layers.fill_constant(shape=[1], dtype='int64', value=3)

        def accumulate(k, x, mem_array):
            """mem[k + 1] = x + (data[k] + mem[k]); k += 1 (in place)."""
            data = layers.array_read(array=data_array, i=k)
            prev = layers.array_read(array=mem_array, i=k)
            total = layers.elementwise_add(x=x, y=layers.elementwise_add(x=data, y=prev))
            k = layers.increment(x=k, in_place=True)
            layers.array_write(total, i=k, array=mem_array)
            return k

        def internal_body(j, x, mem_array):
            return [accumulate(j, x, mem_array), x, mem_array]

        def external_body(i, j, x, mem_array):
            i = accumulate(i, x, mem_array)
            j, x, mem_array = layers.while_loop(
                lambda j, x, mem_array: layers.less_than(j, array_len2), internal_body,
                [j, x, mem_array])
            return [i, j, x, mem_array]
        layers.while_loop(lambda i, j, x, mem_array: layers.less_than(i, array_len),
                          external_body, [i, j, x, mem_array])
        sum_result = layers.array_read(array=mem_array, i=j)
        mean = layers.mean(sum_result)
        fluid.backward.append_backward(mean)
        return [sum_result, fluid.gradients(mean, [x])[0]]
    rng = np.random.RandomState(0)
    d = [rng.random_sample(size=[10]).astype('float32') for _ in range(3)]
    feed_x = np.ones(10).astype('float32')
    data_sum = d[0] + d[1] + d[2] + 3 * feed_x
    x_grad = [0.3] * 10
    res = compile_fetches(build, ["d0", "d1", "d2", "x"])(d0=d[0], d1=d[1], d2=d[2], x=feed_x)
    assert np.allclose(res[0], data_sum)
    assert np.allclose(res[1], x_grad)


# --- TestApiWhileLoopWithSwitchCase ------------------------------------------------------------

def test_with_switch_case():
    def build():
        i = layers.fill_constant(shape=[1], dtype='int64', value=1)
        ten = layers.fill_constant(shape=[1], dtype='int64', value=10)
        three = layers.fill_constant(shape=[1], dtype='int64', value=3)
        one = layers.fill_constant(shape=[1], dtype='int64', value=1)

        def body(i):
            return layers.switch_case(
                branch_index=i,
                branch_fns={2: lambda: layers.elementwise_add(x=i, y=three),
                            5: lambda: layers.elementwise_mul(x=i, y=i)},
                default=lambda: layers.elementwise_add(x=i, y=one))
        return layers.while_loop(lambda i: layers.less_than(i, ten), body, [i])
    res = compile_fetches(build)()
    assert np.allclose(np.asarray(res[0]), np.asarray([25]).astype('int64'))


# --- TestApiWhileLoop_Error --------------------------------------------------------------------

def test_error():
    def build():
        data = layers.fill_constant(shape=[1], dtype='int64', value=1)
        data_1d = layers.fill_constant(shape=[1], dtype='int64', value=1)
        data_2d = layers.fill_constant(shape=[2, 2], dtype='int64', value=1)
        ten = layers.fill_constant(shape=[1], dtype='int64', value=10)
        ten_2d = layers.fill_constant(shape=[2, 2], dtype='int64', value=10)

        def cond_returns_bool_tensor(i):
            return layers.less_than(i, ten)

        def body(i):
            return layers.increment(i)

        def body_returns_error_length(i):
            i = layers.increment(i)
            return [i, i]

        def body_returns_with_mutable_dict(i, test_dict):
            test_dict['new_key'] = layers.fill_constant(shape=[1], dtype='int64', value=1)
            return layers.increment(i), test_dict

        def body_returns_with_mutable_list(i, test_list):
            test_list.append(layers.fill_constant(shape=[1], dtype='int64', value=1))
            return layers.increment(i), test_list
        cases = [
            (TypeError, data, body, [data_1d]),                          # cond: callable
            (TypeError, cond_returns_bool_tensor, data, [data_1d]),      # body: callable
            (TypeError, cond_returns_bool_tensor, body, data_1d),        # loop_vars: a list
            (ValueError, cond_returns_bool_tensor, body, []),            # not empty
            (TypeError, lambda i: 1, body, [data_1d]),                   # cond: a Variable
            (TypeError, lambda i: layers.increment(i), body, [data_1d]),   # of bool
            (TypeError, lambda i: layers.less_than(i, ten_2d), body, [data_2d]),   # [1]
            (ValueError, cond_returns_bool_tensor, body_returns_error_length, [data]),
            (ValueError, lambda i, ten: layers.less_than(i, ten),          # body's arity
             lambda i, ten: layers.increment(i), [data, ten]),
            (ValueError, lambda i, test_dict: i > 0, body_returns_with_mutable_dict,
             [data, {"int_constant": layers.fill_constant(shape=[2, 2], dtype='int64',
                                                          value=1)}]),
            (ValueError, lambda i, test_list: i > 0, body_returns_with_mutable_list,
             [data, [layers.fill_constant(shape=[2, 2], dtype='int64', value=1)]]),
        ]
        for error, cond, body_fn, loop_vars in cases:
            with pytest.raises(error):
                layers.while_loop(cond, body_fn, loop_vars)
        return [data]
    compile_fetches(build)()
