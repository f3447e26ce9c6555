"""Paddle 1.8's sequence/test_sequence_scatter_op.py, ported: X [3, 6] plus each row's
Updates at the columns its Ids name (duplicates add up); Ids and Updates LoD sequences
as padded batches with lengths, the padded Ids out of range (7: an op that read the
padding would fail), and the gradient of Updates."""
import numpy as np
import pytest
from paddle.common import check_op_grad, check_op_output, lod_batch

CASES = {"TestSequenceScatterOp": [30, 50, 40],
         "TestSequenceScatterOpSeqLen0": [60, 60, 0],
         "TestSequenceScatterOpSeqLen0Case1": [0, 60, 60],
         "TestSequenceScatterOpSeqLen0Case2": [60, 0, 60],
         "TestSequenceScatterOpSeqLen0Case3": [120, 0, 0],
         "TestSequenceScatterOpSeqLen0Case4": [0, 120, 0],
         "TestSequenceScatterOpSeqLen0Case5": [0, 0, 120]}


def scatter_case(name):
    lod = CASES[name]
    rng = np.random.RandomState(0)
    x = rng.uniform(0.1, 1.0, [3, 6])
    ids = rng.randint(0, 6, (120, 1)).astype('int64')
    updates = rng.uniform(0.1, 1.0, [120, 1])
    out = np.copy(x)
    offset = 0
    for i in range(3):
        for j in range(lod[i]):
            out[i][ids[offset + j]] += updates[offset + j]
        offset += lod[i]
    id_batch, lengths = lod_batch(ids, lod)
    update_batch, _ = lod_batch(updates, lod)
    return {"X": x, "Ids": id_batch, "Updates": update_batch, "Lengths": lengths}, out


@pytest.mark.parametrize("name", list(CASES))
def test_check_output(name):
    check_op_output("sequence_scatter", *scatter_case(name))


@pytest.mark.parametrize("name", list(CASES))
def test_check_grad(name):
    check_op_grad("sequence_scatter", scatter_case(name)[0], ["Updates"])
