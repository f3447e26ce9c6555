"""Paddle 1.8's test_lstm_unit_op.py, ported: the ``lstm_unit`` op (gates i, f, o, j)
against Paddle's NumPy step, its gradients, and the errors of `fluid.layers.lstm_unit`."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op
from paddle.common import compile_fetches

import fluid


def sigmoid_np(x):
    return 1. / (1. + np.exp(-x))


def tanh_np(x):
    return 2 * sigmoid_np(2. * x) - 1.


def reference(X, C_prev, forget_bias, **_):
    i_np, f_np, o_np, j_np = np.split(X, 4, axis=1)
    new_c = C_prev * sigmoid_np(f_np + forget_bias) + sigmoid_np(i_np) * tanh_np(j_np)
    return {"C": new_c, "H": tanh_np(new_c) * sigmoid_np(o_np)}


def inputs():
    rng = np.random.RandomState(0)
    return {"X": rng.normal(size=(15, 160)).astype("float64"),
            "C_prev": rng.normal(size=(15, 40)).astype("float64")}


def test_check_output():   # LstmUnitTest: OpTest's atol 1e-5
    check_op("lstm_unit", inputs(), {'forget_bias': 0.}, reference=reference, rtol=0,
             atol=1e-5)


def test_check_grad():   # max_relative_error 0.005
    check_grad("lstm_unit", inputs(), {'forget_bias': 0.}, wrt=["X", "C_prev"],
               through=["C", "H"], rtol=5e-3, atol=1e-8, max_elements=10 ** 6)


def test_errors():   # LstmUnitTestError
    batch_size, dict_dim, emb_dim, hidden_dim = 32, 128, 64, 512
    rng = np.random.RandomState(0)

    def build():
        data = fluid.data(name='step_data', shape=[batch_size], dtype='int64')
        inputs = fluid.embedding(input=data, size=[dict_dim, emb_dim])
        pre_hidden = fluid.data(name='pre_hidden', shape=[batch_size, hidden_dim],
                                dtype='float32')
        pre_cell = fluid.data(name='pre_cell', shape=[batch_size, hidden_dim],
                              dtype='float32')
        np_input = rng.uniform(-0.1, 0.1, (batch_size, emb_dim)).astype('float64')
        np_pre_hidden = rng.uniform(-0.1, 0.1, (batch_size, hidden_dim)).astype('float64')
        np_pre_cell = rng.uniform(-0.1, 0.1, (batch_size, hidden_dim)).astype('float64')
        error_input = fluid.data(name='error_input', shape=[batch_size, emb_dim],
                                 dtype='int32')
        error_pre_hidden = fluid.data(name='error_pre_hidden',
                                      shape=[batch_size, hidden_dim], dtype='int32')
        error_pre_cell = fluid.data(name='error_pre_cell', shape=[batch_size, hidden_dim],
                                    dtype='int32')
        for args in ((np_input, pre_hidden, pre_cell), (inputs, np_pre_hidden, pre_cell),
                     (inputs, pre_hidden, np_pre_cell), (error_input, pre_hidden, pre_cell),
                     (inputs, error_pre_hidden, pre_cell),
                     (inputs, pre_hidden, error_pre_cell)):
            with pytest.raises(TypeError):
                fluid.layers.lstm_unit(*args)
        return [pre_hidden]
    compile_fetches(build, ["step_data", "pre_hidden", "pre_cell", "error_input",
                            "error_pre_hidden", "error_pre_cell"])
