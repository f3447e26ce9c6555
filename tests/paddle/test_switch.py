"""Paddle 1.8's test_switch.py, ported: `Switch` cases tried in order, and its errors."""
import pytest
from paddle.common import compile_fetches, create_global_var

import fluid

layers = fluid.layers


def check_switch(value):
    def build():
        x = layers.fill_constant(shape=[1], dtype='float32', value=value)
        zero_var = layers.fill_constant(shape=[1], dtype='float32', value=0.0)
        one_var = layers.fill_constant(shape=[1], dtype='float32', value=1.0)
        two_var = layers.fill_constant(shape=[1], dtype='float32', value=2.0)
        three_var = layers.fill_constant(shape=[1], dtype='float32', value=3.0)
        result = create_global_var(shape=[1], value=-1.0, dtype='float32', persistable=True)
        with layers.Switch() as switch:
            with switch.case(layers.less_than(x, zero_var)):
                layers.assign(zero_var, result)
            with switch.case(layers.less_than(x, one_var)):
                layers.assign(one_var, result)
            with switch.case(layers.less_than(x, two_var)):
                layers.assign(two_var, result)
            with switch.default():
                layers.assign(three_var, result)
        return [result]
    return compile_fetches(build)()[0][0]


def test_switch():
    test_data = {(-0.1, 0), (0.1, 1), (1.1, 2), (2.1, 3)}
    for x, expected_result in test_data:
        assert check_switch(x) == expected_result


def test_error():   # TestSwitchCaseError
    def build():
        cond = layers.fill_constant(shape=[1], dtype='float32', value=0.0)
        zero_var = layers.fill_constant(shape=[1], dtype='float32', value=0.0)
        result = create_global_var(shape=[1], value=-1.0, dtype='float32', persistable=True)
        # the condition of a case must be a Variable, of dtype bool
        for condition in (1, cond):
            with pytest.raises(TypeError):
                with layers.Switch() as switch:
                    with switch.case(condition):
                        layers.assign(zero_var, result)
        return [result]
    compile_fetches(build)()
