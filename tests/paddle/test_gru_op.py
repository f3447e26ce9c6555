"""Paddle 1.8's test_gru_op.py, ported: the ``gru`` op (dynamic_gru's) over LoD sequences
as a padded batch with lengths (the padding holds a non-zero value) against Paddle's NumPy
GRU, its gradients, and the errors of `dynamic_gru`. Paddle's BatchGate,
BatchResetHiddenPrev and BatchHidden hold its batch-sorted internals (LoD-only): Hidden is
compared."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op
from paddle.common import compile_fetches, lod_batch
from paddle.test_lstm_op import ACTIVATION

import fluid

#: The gradient check's absolute tolerance. Paddle's kernels clip a sigmoid's input at 13,
#: where the function is flat, but its gradient comes from the sigmoid's value (2.3e-6 of
#: the gradient flowing in, not 0): with these inputs (rand, D = 40) some gates pass 13, and
#: central differences then differ from Paddle's gradient, and ours, by up to 7e-6. Paddle's
#: own check compares gradients under 1e-3 absolutely, at max_relative_error (0.005).
ATOL = 1e-5


def reference_gru(Input, Weight, Bias, H0, Lengths, is_reverse, activation,
                  gate_activation, origin_mode, **_):
    """Paddle's test reference, row by row: u and r from the first 2*D*D values of Weight
    (as [D, 2D]), the candidate from the last D*D (as [D, D]); zero past each length."""
    act_state, act_gate = ACTIVATION[activation], ACTIVATION[gate_activation]
    batch, steps, three_d = Input.shape
    d = three_d // 3
    w_u_r = Weight.flatten()[:d * d * 2].reshape((d, d * 2))
    w_c = Weight.flatten()[d * d * 2:].reshape((d, d))
    hidden = np.zeros((batch, steps, d))
    for row in range(batch):
        h_p = H0[row]
        positions = range(Lengths[row])
        for t in (reversed(positions) if is_reverse else positions):
            g = Input[row, t] + Bias[0]
            u_r = act_gate(np.dot(h_p, w_u_r) + g[:d * 2])
            u, r = u_r[:d], u_r[d:]
            c = act_state(np.dot(r * h_p, w_c) + g[d * 2:])
            h_p = (1 - u) * c + u * h_p if origin_mode else u * c + (1 - u) * h_p
            hidden[row, t] = h_p
    return {"Hidden": hidden}


# (class, its lod, is_reverse, with_h0, with_bias, origin_mode); every case is float64
CASES = {
    "TestGRUOp": ([2, 4, 3], False, True, True, False),
    "TestGRUOriginMode": ([2, 4, 3], False, True, True, True),
    "TestGRUOp2": ([2, 4, 3], False, True, True, False),
    "TestGRUOp2Len0": ([2, 0, 4], False, True, True, False),
    "TestGRUOp2OriginMode": ([2, 4, 3], False, True, True, True),
    "TestGRUOp2OriginModeLen0": ([0, 3, 4], False, True, True, True),
    "TestGRUOp2OriginModeLastLen0": ([0, 3, 0], False, True, True, True),
    "TestGRUOpNoInitial": ([2, 4, 3], False, False, True, False),
    "TestGRUOpNoBias": ([2, 4, 3], False, True, False, False),
    "TestGRUOpReverse": ([2, 4, 3], True, True, True, False),
    "TestGRUOpReverseOriginMode": ([2, 4, 3], True, True, True, True),
}


def gru_case(name, d=40):
    lod, is_reverse, with_h0, with_bias, origin_mode = CASES[name]
    rng = np.random.RandomState(0)
    x = rng.rand(sum(lod), 3 * d)
    weight = rng.rand(d, 3 * d)
    bias = rng.rand(1, 3 * d) if with_bias else np.zeros((1, 3 * d))
    h0 = rng.rand(len(lod), d) if with_h0 else np.zeros((len(lod), d))
    batch, lengths = lod_batch(x, lod)
    inputs = {"Input": batch, "Weight": weight, "Lengths": lengths}
    if with_bias:
        inputs["Bias"] = bias
    if with_h0:
        inputs["H0"] = h0
    attrs = {'activation': 'tanh', 'gate_activation': 'sigmoid', 'is_reverse': is_reverse,
             'origin_mode': origin_mode}
    return inputs, attrs, {"Bias": bias, "H0": h0}


@pytest.mark.parametrize("name", list(CASES))
def test_check_output(name):   # atol 1e-8
    inputs, attrs, defaults = gru_case(name)
    check_op("gru", inputs, attrs, reference=lambda **kw: reference_gru(**{**defaults, **kw}),
             rtol=0, atol=1e-8, batch_unknown=False)


@pytest.mark.parametrize("name", list(CASES))
def test_check_grad(name):   # OpTest's max_relative_error 0.005, through Hidden
    inputs, attrs, _ = gru_case(name)
    wrt = [slot for slot in ("Input", "H0", "Weight", "Bias") if slot in inputs]
    check_grad("gru", inputs, attrs, wrt=wrt, through=["Hidden"], rtol=5e-3, atol=ATOL,
               max_elements=200)


def test_errors():   # TestGruOpError
    def build():
        with pytest.raises(TypeError):
            fluid.layers.dynamic_gru(input=np.random.random((1, 1536)).astype("float32"),
                                     size=512)
        in_data = fluid.data(name="input", shape=[None, None, 1536], dtype="float32")
        h = fluid.data(name="h", shape=[None, 512], dtype="int32")
        with pytest.raises(TypeError):
            fluid.layers.dynamic_gru(input=in_data, size=512, h_0=h)
        return [in_data]
    compile_fetches(build, ["input", "h"])
