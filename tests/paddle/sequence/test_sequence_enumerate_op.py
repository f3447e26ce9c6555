"""Paddle 1.8's sequence/test_sequence_enumerate_op.py, ported: the windows of win_size
ids from each step of each sequence, pad_value past its end (LoD sequences as a padded
batch with lengths; the padding holds a non-zero id, and pad_value at padded steps)."""
import numpy as np
import pytest
from ops.harness import check_op
from paddle.common import lod_batch

# (class, dtype, lod, win_size, pad_value)
CASES = {"TestSequenceEnumerateOp": ("int32", [9, 4, 11, 6], 2, 0),
         "TesSequenceEnumerateOpInt64": ("int64", [9, 4, 11, 6], 2, 0),
         "TestSequenceEnumerateOpLargeWinSize": ("int32", [9, 4, 11, 6], 5, 0),
         "TestSequenceEnumerateOpMaxWinSize": ("int32", [9, 4, 11, 6], 30, 0),
         "TestSequenceEnumerateOpLargePadValue": ("int32", [9, 4, 11, 6], 5, 5),
         "TestSequenceEnumerateOpLargePadValueSeqLen0": ("int32", [0, 14, 0, 16, 0], 5, 5)}


@pytest.mark.parametrize("name", list(CASES))
def test_check_output(name):
    dtype, lod, win_size, pad_value = CASES[name]
    in_seq = np.random.RandomState(0).randint(0, 10, (30, 1)).astype(dtype)
    ids, lengths = lod_batch(in_seq[:, 0], lod)
    out = np.full(ids.shape + (win_size,), pad_value, dtype)
    for b, seq in enumerate(np.split(in_seq[:, 0], np.cumsum(lod)[:-1])):
        for t in range(len(seq)):   # Paddle's: the window from t, pad_value past the end
            window = seq[t:t + win_size]
            out[b, t, :len(window)] = window
    check_op("sequence_enumerate", {"X": ids, "Lengths": lengths},
             {'win_size': win_size, 'pad_value': pad_value}, reference=lambda **_: out,
             batch_unknown=False)
