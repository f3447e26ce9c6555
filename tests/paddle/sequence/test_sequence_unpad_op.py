"""Paddle 1.8's sequence/test_sequence_unpad_op.py, ported: a padded batch cut to each
row's Length (Paddle gives LoD sequences; here the padded form, zeros from the length
on), its gradient and its errors. Paddle defines TestSequenceUnpadOp4 twice: the second
runs."""
import numpy as np
import pytest
from paddle.common import check_op_grad, check_op_output, compile_fetches

import fluid

CASES = {"TestSequenceUnpadOp": ([2, 3, 4], (3, 40)),
         "TestSequenceUnpadOp2": ([2, 3, 4], (3, 5, 4, 3)),
         "TestSequenceUnpadOp3": ([5, 2, 3, 4], (4, 5, 3, 3, 6)),
         "TestSequenceUnpadOp4": ([0, 4, 3, 0], (4, 5, 3, 3, 6))}


def unpad_case(name):
    length, shape = CASES[name]
    x = np.random.RandomState(0).random_sample(shape)
    out = np.zeros_like(x)
    for i, n in enumerate(length):   # Paddle's rows x[i, 0:length[i]], at their places
        out[i, :n] = x[i, :n]
    return {"X": x, "Lengths": np.array(length, 'int64')}, out


@pytest.mark.parametrize("name", list(CASES))
def test_check_output(name):
    check_op_output("sequence_unpad", *unpad_case(name))


@pytest.mark.parametrize("name", list(CASES))
def test_check_grad(name):
    check_op_grad("sequence_unpad", unpad_case(name)[0], ["X"])


def test_error():   # TestSequenceUnpadOpError: Paddle calls sequence_pad(x, length=...)
    def build():
        length = fluid.data(name='length2', shape=[10], dtype='int64')
        x1 = fluid.data(name='x1', shape=[10, 5], dtype='float32')
        x2 = fluid.data(name='x2', shape=[10, 5], dtype='float16')
        x3 = fluid.data(name='x3', shape=[10, 5], dtype='float64')
        len3 = fluid.data(name='length3', shape=[10], dtype='int32')
        for x, n in ((np.random.random((10, 5)), length),
                     (x1, np.random.random(10).astype("int64")), (x2, length), (x3, len3)):
            with pytest.raises(TypeError):
                fluid.layers.sequence_pad(x=x, length=n)
        return [x1]
    compile_fetches(build, ["length2", "x1", "x2", "x3", "length3"])
