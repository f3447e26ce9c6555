"""Paddle 1.8's test_case.py, ported: `fluid.layers.case`. TestMutiTask (an optimizer's
minimize inside a branch) is out of scope (docs/paddle_tests.md)."""
from functools import partial

import numpy as np
import pytest
from paddle.common import compile_fetches, fill, three_point_preds, tuple_branches

import fluid

layers = fluid.layers


def test_return_single_var():
    fn_1, fn_2, fn_3 = fill(1, [4, 2]), fill(2, [4, 2]), fill(3, [4, 3])

    def build():
        _, _, _, (pred_1, pred_2) = three_point_preds()   # true, false
        return [
            layers.case(pred_fn_pairs=[(pred_1, fn_1), (pred_1, fn_2)], default=fn_3),
            layers.case(pred_fn_pairs=[(pred_2, fn_1), (pred_1, fn_2)], default=fn_3),
            layers.case(pred_fn_pairs=((pred_2, fn_1), (pred_2, fn_2)), default=fn_3),
            layers.case(pred_fn_pairs=[(pred_1, fn_2)]),    # no default: fn_2
            layers.case(pred_fn_pairs=[(pred_2, fn_2)]),    # no default: fn_2, pred false
        ]
    res = compile_fetches(build)()
    for got, want in zip(res, (1, 2, 3, 2, 2)):
        assert np.allclose(got, want)


def test_return_var_tuple():
    fn_1, fn_2, fn_3 = tuple_branches()

    def build():
        x = layers.fill_constant(shape=[1], dtype='float32', value=1)
        y = layers.fill_constant(shape=[1], dtype='float32', value=1)
        z = layers.fill_constant(shape=[1], dtype='float32', value=3)
        pred_1 = layers.equal(x, y)  # true
        pred_2 = layers.equal(x, z)  # false
        return list(layers.case(((pred_1, fn_1), (pred_2, fn_2)), fn_3))
    ret = compile_fetches(build)()
    assert np.allclose(np.asarray(ret[0]), np.full((1, 2), 1, np.int32))
    assert np.allclose(np.asarray(ret[1]), np.full((2, 3), 2, np.float32))


def test_nested_case():   # TestAPICase_Nested
    def five_six():
        return (layers.fill_constant(shape=[1], dtype='int32', value=5),
                layers.fill_constant(shape=[1], dtype='int32', value=6))

    def fn_1(x=1):
        var_5, var_6 = five_six()
        return layers.case(pred_fn_pairs=[(var_5 < var_6, fill(x, [1])),
                                          (var_5 == var_6, fill(x, [2]))])

    def fn_2(x=2):
        var_5, var_6 = five_six()
        return layers.case(pred_fn_pairs=[(var_5 < var_6, partial(fn_1, x=x)),
                                          (var_5 == var_6, fill(x, [2]))])

    def fn_3():
        var_5, var_6 = five_six()
        return layers.case(pred_fn_pairs=[(var_5 < var_6, partial(fn_2, x=3)),
                                          (var_5 == var_6, fill(7, [2]))])

    def build():
        x, y, z, (pred_1, pred_2) = three_point_preds()   # true, false
        return [layers.case(pred_fn_pairs=[(pred_1, fn_1), (pred_2, fn_2)], default=fn_3),
                layers.case(pred_fn_pairs=[(pred_2, fn_1), (pred_1, fn_2)], default=fn_3),
                layers.case(pred_fn_pairs=[(x == y, fn_1), (x == z, fn_2)], default=fn_3)]
    res = compile_fetches(build)()
    for got, want in zip(res, (1, 2, 3)):
        assert np.allclose(got, want)


def test_error():   # TestAPICase_Error
    fn_1 = fill(1, [4, 2])

    def build():
        x = layers.fill_constant(shape=[1], dtype='float32', value=0.23)
        z = layers.fill_constant(shape=[1], dtype='float32', value=0.2)
        pred_1 = layers.less_than(z, x)  # true
        for pairs, default in ((1, fn_1),                 # pred_fn_pairs: a list or tuple
                               ([1], fn_1),               # of tuples
                               ([(1, 2, 3)], fn_1),       # of two
                               ([(1, fn_1)], fn_1),       # a bool Variable first
                               ([(pred_1, 2)], fn_1),     # a function second
                               ([(pred_1, fn_1)], fn_1())):   # default: a function
            with pytest.raises(TypeError):
                layers.case(pred_fn_pairs=pairs, default=default)
        return [x]
    compile_fetches(build)()
