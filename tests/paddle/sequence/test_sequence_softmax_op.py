"""Paddle 1.8's sequence/test_sequence_softmax_op.py, ported: a softmax over each row's
valid steps (LoD sequences as a padded batch with lengths; the padding holds a non-zero
value and gets 0), and the gradient. The cuDNN case (CUDA-only) is out of scope."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op
from paddle.common import lod_batch

CASES = {"TestSequenceSoftmaxOp": [40, 10, 30, 30],
         "TestSequenceSoftmaxOpSeqLen0Case0": [40, 0, 40, 30],
         "TestSequenceSoftmaxOpSeqLen0Case1": [0, 40, 70, 0],
         "TestSequenceSoftmaxOpSeqLen0Case2": [0, 0, 0, 110]}


def softmax_case(name):
    lod = CASES[name]
    x = np.random.RandomState(0).uniform(0.1, 1, (110, 1))
    batch, lengths = lod_batch(x, lod)
    out = np.zeros_like(batch)
    for b, n in enumerate(lod):   # Paddle's stable softmax of each sequence
        if n:
            e = np.exp(batch[b, :n] - batch[b, :n].max())
            out[b, :n] = e / e.sum()
    return {"X": batch, "Lengths": lengths}, out


@pytest.mark.parametrize("name", list(CASES))
def test_check_output(name):
    inputs, out = softmax_case(name)
    check_op("sequence_softmax", inputs, {}, reference=lambda **_: out, batch_unknown=False)


@pytest.mark.parametrize("name", list(CASES))
def test_check_grad(name):
    inputs, _ = softmax_case(name)
    check_grad("sequence_softmax", inputs, {}, wrt=["X"], rtol=5e-3, max_elements=200)
