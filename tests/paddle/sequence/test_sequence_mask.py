"""Paddle 1.8's sequence/test_sequence_mask.py, ported: the mask of lengths x (1 where
t < x), maxlen as an attr, as a tensor or the largest length, in each dtype; and its
error. (sequence_mask takes lengths: there is no LoD to convert.)"""
import numpy as np
import pytest
from ops.harness import check_op, run_forward
from paddle.common import compile_fetches

import fluid

DTYPES = ['int64', 'bool', 'uint8', 'int32', 'float32', 'float64']
X = np.array([[0, 3, 4], [5, 7, 9]])


def ground_truth(maxlen, dtype):
    maxlen = np.max(X) if maxlen < 0 else maxlen
    return (np.arange(maxlen) < X[..., None]).astype(dtype)


# SequenceMaskTestBase and SequenceMaskTest1..5 (the dtypes), SequenceMaskTest6 (maxlen -1)
@pytest.mark.parametrize("dtype", DTYPES)
def test_check_output(dtype):
    check_op("sequence_mask", {"X": X}, {'maxlen': 10, 'out_dtype': dtype},
             reference=lambda **_: {"Y": ground_truth(10, dtype)}, batch_unknown=False)


def test_check_output_maxlen_from_the_lengths():   # SequenceMaskTest6
    got = run_forward("sequence_mask", {"X": X}, {'maxlen': -1, 'out_dtype': 'int64'})
    np.testing.assert_array_equal(got["Y"][0], ground_truth(-1, 'int64'))


# SequenceMaskTestBase_tensor_attr and its dtypes: maxlen from a tensor
@pytest.mark.parametrize("dtype", DTYPES)
def test_check_output_tensor_attr(dtype):
    got = run_forward("sequence_mask", {"X": X, "MaxLenTensor": np.ones((1), 'int32') * 10},
                      {'out_dtype': dtype})
    np.testing.assert_array_equal(got["Y"][0], ground_truth(10, dtype))
    assert got["Y"][0].dtype == np.dtype(dtype)


def test_errors():   # TestSequenceMaskOpError
    def build():
        with pytest.raises(TypeError):
            fluid.layers.sequence_mask(np.random.uniform(1, 5, [4]).astype("float32"),
                                       maxlen=4)
        return [fluid.layers.fill_constant([1], 'int64', 0)]
    compile_fetches(build)
