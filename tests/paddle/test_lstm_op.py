"""Paddle 1.8's test_lstm_op.py, ported: the ``lstm`` op (dynamic_lstm's) over LoD
sequences as a padded batch with lengths (the padding holds a non-zero value), against
Paddle's step-by-step NumPy LSTM, and its gradients; the errors of `fluid.layers.lstm`
and `dynamic_lstm`."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op
from paddle.common import compile_fetches, lod_batch

import fluid

fill_constant, lstm = fluid.layers.fill_constant, fluid.layers.lstm

def sigmoid(x):
    """Paddle's reference: the input clipped to [-40, 13] first, as its fused RNN kernels
    (and ours) do."""
    return 1. / (1. + np.exp(-np.clip(x, -40.0, 13.0)))


def tanh(x):
    return (2. / (1. + np.exp(np.minimum(-2. * x, 40.0)))) - 1.


ACTIVATION = {'identity': lambda x: x, 'sigmoid': sigmoid, 'tanh': tanh,
              'relu': lambda x: np.maximum(x, 0)}


def reference_lstm(Input, Weight, Bias, Lengths, use_peepholes, gate_activation,
                   cell_activation, candidate_activation, **_):
    """Paddle's test reference, row by row and step by step: gates c~, i, f, o, the
    peepholes the last 3D values of Bias; zero past each row's length."""
    act_gate, act_cell, act_cand = (ACTIVATION[gate_activation], ACTIVATION[cell_activation],
                                    ACTIVATION[candidate_activation])
    batch, steps, four_d = Input.shape
    d = four_d // 4
    w_b = Bias[:, :4 * d]
    w_ic, w_fc, w_oc = np.split(Bias[:, 4 * d:], 3, axis=1) if use_peepholes else (0, 0, 0)
    hidden, cell = np.zeros((batch, steps, d)), np.zeros((batch, steps, d))
    for row in range(batch):
        h_pre, c_pre = np.zeros((1, d)), np.zeros((1, d))
        for t in range(Lengths[row]):
            g = np.dot(h_pre, Weight) + Input[row, t] + w_b
            c, g_i, g_f, g_o = np.split(g, 4, axis=1)
            g_i = act_gate(g_i + w_ic * c_pre)
            g_f = act_gate(g_f + w_fc * c_pre)
            c_pre = g_f * c_pre + g_i * act_cand(c)
            h_pre = act_gate(g_o + w_oc * c_pre) * act_cell(c_pre)
            hidden[row, t], cell[row, t] = h_pre[0], c_pre[0]
    return {"Hidden": hidden, "Cell": cell}


ATTRS = {'use_peepholes': True, 'is_reverse': False, 'gate_activation': 'sigmoid',
         'cell_activation': 'tanh', 'candidate_activation': 'tanh'}


def lstm_inputs(lod, d=16, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.normal(size=(sum(lod), 4 * d)).astype('float64')
    w = rng.normal(size=(d, 4 * d)).astype('float64')
    b = rng.normal(size=(1, 7 * d)).astype('float64')
    batch, lengths = lod_batch(x, lod)
    return {"Input": batch, "Weight": w, "Bias": b, "Lengths": lengths}


# TestLstmOp and its cases (lengths 0 included): the output, then the gradients of Input,
# Weight and Bias through Hidden (max_relative_error 5e-4)
LODS = [[2, 3, 2], [0, 3, 2], [0, 3, 0], [2, 0, 4]]


@pytest.mark.parametrize("lod", LODS, ids=["TestLstmOp", "Case1", "Case2", "Case3"])
def test_check_output(lod):
    check_op("lstm", lstm_inputs(lod), ATTRS, reference=reference_lstm, rtol=0, atol=1e-8,
             batch_unknown=False)


@pytest.mark.parametrize("lod", LODS, ids=["TestLstmOp", "Case1", "Case2", "Case3"])
def test_check_grad(lod):
    check_grad("lstm", lstm_inputs(lod), ATTRS, wrt=["Input", "Weight", "Bias"],
               through=["Hidden"], rtol=5e-4, atol=1e-8, max_elements=400)


def test_lstm_layer_errors():   # LstmUnitTestError: fluid.layers.lstm's arguments
    batch_size, seq_len, dropout_prob, hidden_size, num_layers = 20, 100, 0.2, 150, 1
    rng = np.random.RandomState(0)

    def build():
        input = fluid.data(name='input', shape=[batch_size, seq_len, hidden_size],
                           dtype='float32')
        pre_hidden = fill_constant([num_layers, batch_size, hidden_size], 'float32', 0.0)
        pre_cell = fill_constant([num_layers, batch_size, hidden_size], 'float32', 0.0)
        np_input = rng.uniform(-0.1, 0.1, (batch_size, seq_len, hidden_size))
        np_pre_hidden = rng.uniform(-0.1, 0.1, (num_layers, batch_size, hidden_size))
        np_pre_cell = rng.uniform(-0.1, 0.1, (num_layers, batch_size, hidden_size))
        int_input = fluid.data(name='error_input', shape=[None, hidden_size * 3],
                               dtype='int32')
        int_pre_hidden = fluid.data(name='error_pre_hidden', shape=[None, hidden_size],
                                    dtype='int32')
        int_pre_cell = fluid.data(name='error_pre_cell', shape=[None, hidden_size],
                                  dtype='int32')
        for args in ((np_input, pre_hidden, pre_cell), (np_input, np_pre_hidden, pre_cell),
                     (np_input, pre_hidden, np_pre_cell), (int_input, pre_hidden, pre_cell),
                     (input, int_pre_hidden, pre_cell), (input, pre_hidden, int_pre_cell)):
            with pytest.raises(TypeError):
                lstm(*args, seq_len, hidden_size, num_layers, dropout_prob=dropout_prob)
        return [pre_hidden]
    compile_fetches(build, ["input", "error_input", "error_pre_hidden", "error_pre_cell"])


def test_dynamic_lstm_errors():   # TestLstmOpError
    def build():
        with pytest.raises(TypeError):
            fluid.layers.dynamic_lstm(input=np.random.random((1, 2048)).astype("float32"),
                                      size=2048, use_peepholes=False)
        in_data = fluid.data(name="input", shape=[None, None, 2048], dtype="float32")
        for h_dtype, c_dtype in (("int32", "float32"), ("float32", "int32")):
            h = fluid.data(name=f"h_{h_dtype}", shape=[None, 512], dtype=h_dtype)
            c = fluid.data(name=f"c_{c_dtype}", shape=[None, 512], dtype=c_dtype)
            with pytest.raises(TypeError):
                fluid.layers.dynamic_lstm(input=in_data, size=2048, use_peepholes=False,
                                          h_0=h, c_0=c)
        return [in_data]
    compile_fetches(build, ["input", "h_int32", "c_float32", "h_float32", "c_int32"])
