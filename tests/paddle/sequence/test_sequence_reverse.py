"""Paddle 1.8's sequence/test_sequence_reverse.py, ported: each row's valid steps reversed
(LoD sequences as a padded batch with lengths; the padding, which holds a non-zero value,
stays in place), the gradient and the errors. Paddle defines TestSequenceReverse3 twice:
the second runs."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op
from paddle.common import compile_fetches, lod_batch

import fluid

CASES = {"TestSequenceReverseBase": ((10, 3, 4), [2, 3, 5]),
         "TestSequenceReserve1": ((12, 10), [4, 5, 3]),
         "TestSequenceReverse2": ((12, 10), [12]),
         "TestSequenceReverse3": ((12, 10), [0, 2, 10, 0])}


def reverse_case(name):
    size, lod = CASES[name]
    x = np.random.RandomState(0).random_sample(size).astype('float32')
    batch, lengths = lod_batch(x, lod)
    y = batch.copy()
    for b, n in enumerate(lod):   # Paddle's: each sequence flipped
        y[b, :n] = np.flip(batch[b, :n], 0)
    return {"X": batch, "Lengths": lengths}, y


@pytest.mark.parametrize("name", list(CASES))
def test_output(name):   # atol 0: exact
    inputs, y = reverse_case(name)
    check_op("sequence_reverse", inputs, {}, reference=lambda **_: {"Y": y}, rtol=0, atol=0,
             batch_unknown=False)


@pytest.mark.parametrize("name", list(CASES))
def test_grad(name):
    inputs, _ = reverse_case(name)
    check_grad("sequence_reverse", inputs, {}, wrt=["X"], rtol=5e-3, max_elements=200)


def test_error():   # TestSequenceReverseOpError
    def build():
        x2_data = fluid.layers.data(name='x2', shape=[4], dtype='float16')
        for x in (np.random.random((2, 4)).astype("float32"), x2_data):
            with pytest.raises(TypeError):   # a Variable of float32, float64, int8/32/64
                fluid.layers.sequence_reverse(x=x)
        return [x2_data]
    compile_fetches(build, ["x2"])
