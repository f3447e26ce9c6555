"""Paddle 1.8's sequence/test_sequence_softmax_op.py, ported: a softmax over each row's
valid steps (LoD sequences as a padded batch with lengths; the padding holds a non-zero
value and gets 0), and the gradient. The cuDNN case (CUDA-only) is out of scope."""
import numpy as np
import pytest
from paddle.common import check_op_grad, check_op_output, lod_batch

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
    check_op_output("sequence_softmax", *softmax_case(name))


@pytest.mark.parametrize("name", list(CASES))
def test_check_grad(name):
    check_op_grad("sequence_softmax", softmax_case(name)[0], ["X"])
