"""Paddle 1.8's test_switch_case.py, ported: `fluid.layers.switch_case`."""
from functools import partial

import numpy as np
import pytest
from paddle.common import compile_fetches, fill, tuple_branches

import fluid

layers = fluid.layers


def test_return_single_var():
    fn_1, fn_2, fn_3 = fill(1, [4, 2]), fill(2, [4, 2]), fill(3, [4, 3])

    def build():
        index_1 = layers.fill_constant(shape=[1], dtype='int32', value=1)
        index_2 = layers.fill_constant(shape=[1], dtype='int32', value=2)
        index_5 = layers.fill_constant(shape=[1], dtype='int32', value=5)
        return [
            layers.switch_case(branch_index=index_1, branch_fns={1: fn_1, 2: fn_2, 3: fn_3}),
            # branch_fns={0: fn_1, 1: fn_2, 2: fn_3}: fn_2
            layers.switch_case(branch_index=index_1, branch_fns=(fn_1, fn_2, fn_3)),
            layers.switch_case(branch_index=index_5, branch_fns=((1, fn_1), (2, fn_2)),
                               default=fn_3),
            # no default: the largest index's
            layers.switch_case(branch_index=index_2, branch_fns=[(1, fn_1), (2, fn_2)]),
            layers.switch_case(branch_index=index_5,
                               branch_fns=[(1, fn_1), (3, fn_2), (2, fn_3)]),
        ]
    res = compile_fetches(build)()
    for got, want in zip(res, (1, 2, 3, 2, 2)):
        assert np.allclose(got, want), f"result is {got} but answer is {want}"


def test_return_var_tuple():
    fn_1, fn_2, fn_3 = tuple_branches()

    def build():
        index_1 = layers.fill_constant(shape=[1], dtype='int32', value=1)
        return list(layers.switch_case(index_1, ((1, fn_1), (2, fn_2)), fn_3))
    ret = compile_fetches(build)()
    assert np.allclose(np.asarray(ret[0]), np.full((1, 2), 1, np.int32))
    assert np.allclose(np.asarray(ret[1]), np.full((2, 3), 2, np.float32))


def test_nested_switch_case():   # TestAPISwitchCase_Nested
    def fn_1(x=1):
        return layers.switch_case(
            branch_index=layers.fill_constant(shape=[1], dtype='int32', value=x),
            branch_fns={1: fill(1, [1]), x: fill(x, [2])})

    def fn_2(x=2):
        return layers.switch_case(
            branch_index=layers.fill_constant(shape=[1], dtype='int32', value=2),
            branch_fns={1: fill(1, [4, 3]), 2: partial(fn_1, x=x)})

    def fn_3():
        return layers.switch_case(
            branch_index=layers.fill_constant(shape=[1], dtype='int32', value=3),
            branch_fns={1: fill(1, [4, 3]), 3: partial(fn_2, x=3)})

    def build():
        index_1 = fluid.data(name="index_1", shape=[1], dtype='uint8')
        index_2 = layers.fill_constant(shape=[1], dtype='int32', value=2)
        index_3 = layers.fill_constant(shape=[1], dtype='int64', value=3)
        return [layers.switch_case(branch_index=index, branch_fns={1: fn_1, 2: fn_2, 3: fn_3})
                for index in (index_1, index_2, index_3)]
    res = compile_fetches(build, ["index_1"])(index_1=np.array([1], dtype="uint8"))
    for got, want in zip(res, (1, 2, 3)):
        assert np.allclose(got, want), f"result is {got} but answer is {want}"


def test_error():   # TestAPISwitchCase_Error
    fn_1, fn_2, fn_3 = fill(1, [4, 2]), fill(2, [4, 2]), fill(3, [4, 3])

    def build():
        key_float32 = layers.fill_constant(shape=[1], dtype='float32', value=0.23)
        key_int32 = layers.fill_constant(shape=[1], dtype='int32', value=0.23)
        for error, index, fns, default in (
                (TypeError, 1, [(1, fn_1)], fn_3),             # branch_index: a Variable
                (TypeError, key_float32, [(1, fn_1)], fn_3),   # of an int dtype
                (TypeError, key_int32, 1, fn_3),               # branch_fns: list, tuple, dict
                (TypeError, key_int32, [1], fn_3),             # of tuples
                (TypeError, key_int32, [(1, 2, 3)], fn_3),     # of two
                (TypeError, key_int32, [(2.3, 2)], fn_3),      # an int key
                (ValueError, key_int32, [(2, fn_1), (2, fn_2)], fn_3),   # keys unique
                (TypeError, key_int32, [(1, 1), (2, fn_2)], fn_3),       # a function
                (TypeError, key_int32, [(1, fn_1), (2, fn_2)], 1)):      # default: a function
            with pytest.raises(error):
                layers.switch_case(branch_index=index, branch_fns=fns, default=default)
        return [key_int32]
    compile_fetches(build)()
