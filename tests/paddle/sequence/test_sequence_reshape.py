"""Paddle 1.8's sequence/test_sequence_reshape.py, ported: each row's values regrouped in
rows of new_dim (LoD sequences as a padded batch with lengths; the padding holds a
non-zero value), the new lengths, the gradient and the errors."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op
from paddle.common import compile_fetches, lod_batch

import fluid

# (class, new_dim, lod, x shape)
CASES = {"TestSequenceReshape": (12, [4, 1, 3, 3], [11, 24]),
         "TestSequenceReshape_reduce": (24, [4, 2, 2, 4], [12, 12]),
         "TestSequenceReshape_same": (12, [4, 2, 2, 4], [12, 12]),
         "TestSequenceReshape_reduce_seq_len0": (24, [0, 6, 0, 2, 4], [12, 12]),
         "TestSequenceReshape_reduce_seq_len0_case1": (24, [0, 2, 8, 2, 0], [12, 12])}


def reshape_case(name):
    dimension, lod, shape = CASES[name]
    x = np.random.RandomState(0).uniform(0.1, 1, shape)
    batch, lengths = lod_batch(x, lod)
    out_lod = [n * shape[1] // dimension for n in lod]   # Paddle's: each divides
    steps = -(-batch.shape[1] * shape[1] // dimension)
    out = np.zeros((len(lod), steps, dimension))
    rows = x.reshape(-1, dimension)   # Paddle's out: the values of x, regrouped
    start = 0
    for b, n in enumerate(out_lod):
        out[b, :n] = rows[start:start + n]
        start += n
    return ({"X": batch, "Lengths": lengths}, {'new_dim': dimension},
            {"Out": out, "OutLengths": np.array(out_lod)})


@pytest.mark.parametrize("name", list(CASES))
def test_check_output(name):
    inputs, attrs, expected = reshape_case(name)
    check_op("sequence_reshape", inputs, attrs, reference=lambda **_: expected,
             batch_unknown=False)


@pytest.mark.parametrize("name", list(CASES))
def test_check_grad(name):
    inputs, attrs, _ = reshape_case(name)
    check_grad("sequence_reshape", inputs, attrs, wrt=["X"], through=["Out"], rtol=5e-3,
               max_elements=200)


def test_error():   # TestSequenceReshapeOpError (Paddle's test calls it with x=)
    def build():
        x1 = fluid.layers.data(name='x1', shape=[2, 6], append_batch_size=False,
                               dtype='float16')
        for x in (np.random.random((2, 4)).astype("float32"), x1):
            with pytest.raises(TypeError):
                fluid.layers.sequence_reshape(x=x, new_dim=4)
        return [x1]
    compile_fetches(build, ["x1"])
