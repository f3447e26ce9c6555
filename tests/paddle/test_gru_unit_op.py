"""Paddle 1.8's test_gru_unit_op.py, ported: the ``gru_unit`` op against Paddle's NumPy
step (Gate, ResetHiddenPrev, Hidden; its sigmoid unclipped, as Paddle's gru_unit kernel),
its gradients, and the errors of `fluid.layers.gru_unit`. Paddle's op takes its
activations as ints (0 identity, 1 sigmoid, 2 tanh, 3 relu), this one by name.
TestGRUUnitAPIError (dygraph's GRUUnit layer) is out of scope (docs/paddle_tests.md)."""
import math

import numpy as np
import pytest
from ops.harness import check_grad, check_op
from paddle.common import compile_fetches

import fluid

BATCH_SIZE, FRAME_SIZE = 5, 40
#: The activations of Paddle's test (its own: the sigmoid unclipped, tanh through it)
UNIT_ACTIVATION = {'identity': lambda x: x, 'sigmoid': lambda x: 1. / (1. + np.exp(-x)),
                   'tanh': lambda x: 2. / (1. + np.exp(-2. * x)) - 1.,
                   'relu': lambda x: np.maximum(x, 0)}


def gru_unit_case(with_bias, origin_mode):
    """(inputs, attrs): TestGRUUnitOp's, with TestGRUUnitOpWithBias's bias and identity
    candidate activation."""
    rng = np.random.RandomState(0)
    inputs = {
        'Input': rng.uniform(-0.1, 0.1, (BATCH_SIZE, FRAME_SIZE * 3)),
        'HiddenPrev': rng.uniform(-0.1, 0.1, (BATCH_SIZE, FRAME_SIZE)),
        'Weight': rng.uniform(-1. / math.sqrt(FRAME_SIZE), 1. / math.sqrt(FRAME_SIZE),
                              (FRAME_SIZE, FRAME_SIZE * 3)),
    }
    if with_bias:
        inputs['Bias'] = rng.uniform(-0.1, 0.1, (1, FRAME_SIZE * 3))
    attrs = {'activation': 'identity' if with_bias else 'tanh', 'gate_activation': 'sigmoid',
             'origin_mode': origin_mode}
    return inputs, attrs


def reference(Input, HiddenPrev, Weight, activation, gate_activation, origin_mode,
              Bias=None, **_):
    """Paddle's step: u and r from the first 2*D*D values of Weight, the candidate from the
    last D*D."""
    d = FRAME_SIZE
    b = Bias if Bias is not None else np.zeros((1, d * 3))
    g = Input + np.tile(b, (BATCH_SIZE, 1))
    w_u_r = Weight.flatten()[:d * d * 2].reshape((d, d * 2))
    u_r = UNIT_ACTIVATION[gate_activation](np.dot(HiddenPrev, w_u_r) + g[:, :d * 2])
    u, r = u_r[:, :d], u_r[:, d:d * 2]
    r_h_p = r * HiddenPrev
    w_c = Weight.flatten()[d * d * 2:].reshape((d, d))
    c = UNIT_ACTIVATION[activation](np.dot(r_h_p, w_c) + g[:, d * 2:])
    h = (1 - u) * c + u * HiddenPrev if origin_mode else u * c + (1 - u) * HiddenPrev
    return {'Gate': np.hstack((u_r, c)), 'ResetHiddenPrev': r_h_p, 'Hidden': h}


# (class, with_bias, origin_mode)
CASES = {"TestGRUUnitOp": (False, False), "TestGRUUnitOpOriginMode": (False, True),
         "TestGRUUnitOpWithBias": (True, False), "TestGRUUnitOpWithBiasOriginMode": (True, True)}


@pytest.mark.parametrize("name", list(CASES))
def test_check_output(name):   # OpTest's atol 1e-5
    inputs, attrs = gru_unit_case(*CASES[name])
    check_op("gru_unit", inputs, attrs, reference=reference, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", list(CASES))
def test_check_grad(name):   # max_relative_error 0.005, through Hidden
    inputs, attrs = gru_unit_case(*CASES[name])
    check_grad("gru_unit", inputs, attrs, wrt=list(inputs), through=["Hidden"], rtol=5e-3,
               atol=1e-8, max_elements=200)


@pytest.mark.parametrize("name", ["TestGRUUnitOpWithBias", "TestGRUUnitOpWithBiasOriginMode"])
def test_check_grad_ingore_input(name):   # no gradient for Input
    inputs, attrs = gru_unit_case(*CASES[name])
    check_grad("gru_unit", inputs, attrs, wrt=['HiddenPrev', 'Weight', 'Bias'],
               through=["Hidden"], rtol=5e-3, atol=1e-8, max_elements=200)


def test_errors():   # TestGRUUnitOpError
    hidden_dim = 40
    rng = np.random.RandomState(0)

    def build():
        input = fluid.data(name='input', shape=[None, hidden_dim * 3], dtype='float32')
        pre_hidden = fluid.data(name='pre_hidden', shape=[None, hidden_dim], dtype='float32')
        np_input = rng.uniform(-0.1, 0.1, (BATCH_SIZE, hidden_dim * 3))
        np_pre_hidden = rng.uniform(-0.1, 0.1, (BATCH_SIZE, hidden_dim))
        error_input = fluid.data(name='error_input', shape=[None, hidden_dim * 3],
                                 dtype='int32')
        error_pre_hidden = fluid.data(name='error_pre_hidden', shape=[None, hidden_dim],
                                      dtype='int32')
        for args in ((np_input, pre_hidden), (input, np_pre_hidden),
                     (error_input, pre_hidden), (input, error_pre_hidden)):
            with pytest.raises(TypeError):
                fluid.layers.gru_unit(*args, hidden_dim * 3)
        return [input]
    compile_fetches(build, ["input", "pre_hidden", "error_input", "error_pre_hidden"])
