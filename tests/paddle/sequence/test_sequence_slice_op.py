"""Paddle 1.8's sequence/test_sequence_slice_op.py, ported: steps offset[b] to offset[b] +
length[b] of each row (LoD sequences as a padded batch with lengths; the padding holds a
non-zero value), at the front of the row, and the gradient."""
import numpy as np
import pytest
from paddle.common import check_op_grad, check_op_output, lod_batch

# (class, lod, offset, length); x is (100, 3, 2)
CASES = {"TestSequenceSliceOp": ([20, 20, 20, 20, 20], [1, 2, 3, 4, 5], [10, 8, 6, 4, 2]),
         "TestSequenceSliceOpSeqlen0Case0": ([20, 30, 0, 30, 20], [1, 2, 0, 4, 5],
                                             [10, 8, 0, 4, 2]),
         "TestSequenceSliceOpSeqlen0Case1": ([0, 70, 0, 30, 0], [0, 2, 0, 4, 0],
                                             [0, 8, 0, 4, 0]),
         "TestSequenceSliceOpSeqlen0Case2": ([0, 100, 0, 0, 0], [0, 2, 0, 0, 0],
                                             [0, 8, 0, 0, 0])}


def slice_case(name):
    lod, offset, length = CASES[name]
    x = np.random.RandomState(0).random_sample((100, 3, 2)).astype('float32')
    batch, lengths = lod_batch(x, lod)
    out = np.zeros_like(batch)
    start = 0
    for b in range(len(lod)):   # Paddle's: x[lod_offset + offset : ... + length]
        out[b, :length[b]] = x[start + offset[b]:start + offset[b] + length[b]]
        start += lod[b]
    inputs = {"X": batch, "Offset": np.array(offset, 'int64')[:, None],
              "Length": np.array(length, 'int64')[:, None], "Lengths": lengths}
    return inputs, out


@pytest.mark.parametrize("name", list(CASES))
def test_check_output(name):
    check_op_output("sequence_slice", *slice_case(name))


@pytest.mark.parametrize("name", list(CASES))
def test_check_grad(name):
    check_op_grad("sequence_slice", slice_case(name)[0], ["X"])
