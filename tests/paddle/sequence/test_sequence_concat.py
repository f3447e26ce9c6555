"""Paddle 1.8's sequence/test_sequence_concat.py, ported: each row's valid steps of x1,
then of x2 (LoD sequences as padded batches with lengths; the padding holds a non-zero
value), and its gradients."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op
from paddle.common import compile_fetches, lod_batch

import fluid

# (class, lod1, lod2, out_lod)
CASES = {"TestSequenceConcat": ([7, 3], [12, 8], [19, 11]),
         "TestSequenceConcatCase2": ([10, 0], [12, 8], [22, 8]),
         "TestSequenceConcatCase3": ([10, 0], [20, 0], [30, 0]),
         "TestSequenceConcatCase4": ([0, 10], [0, 20], [0, 30]),
         "TestSequenceConcatCase5": ([0, 10], [20, 0], [20, 10])}


def concat_case(name):
    lod1, lod2, out_lod = CASES[name]
    rng = np.random.RandomState(0)
    x1 = rng.random_sample(size=(10, 80))
    x2 = rng.random_sample(size=(20, 80))
    # Paddle's expected rows: x1's first sequence, x2's first, x1's second, x2's second
    out = np.concatenate((x1[0:lod1[0]], x2[0:lod2[0]], x1[lod1[0]:], x2[lod2[0]:]))
    (p1, n1), (p2, n2) = lod_batch(x1, lod1), lod_batch(x2, lod2)
    return {"X": [p1, p2], "Lengths": [n1, n2]}, out, out_lod


def reference(out, out_lod, width):
    """The expected LoD rows as a padded batch [B, width, 80] (zero past each length)."""
    batch, lengths = lod_batch(out, out_lod, pad=0.0)
    padded = np.zeros((len(out_lod), width, out.shape[1]))
    padded[:, :batch.shape[1]] = batch
    return {"Out": padded, "OutLengths": lengths}


@pytest.mark.parametrize("name", list(CASES))
def test_output(name):
    inputs, out, out_lod = concat_case(name)
    width = sum(x.shape[1] for x in inputs["X"])
    check_op("sequence_concat", inputs, {}, reference=lambda **_: reference(out, out_lod,
                                                                            width),
             batch_unknown=False)


@pytest.mark.parametrize("name", list(CASES))
def test_dx(name):
    inputs, _, _ = concat_case(name)
    check_grad("sequence_concat", inputs, {}, wrt=["X"], through=["Out"], rtol=5e-3,
               max_elements=400)


def test_errors():   # TestSequenceConcatOpError
    def build():
        x_data = fluid.layers.data(name='x', shape=[4], dtype='float32')
        with pytest.raises(TypeError):   # a list of vars
            fluid.layers.sequence_concat(input=x_data)
        y1_data = fluid.layers.data(name='y1', shape=[4], dtype='float32')
        for inputs in ([np.array([[3, 5]]).astype('float32'), y1_data],
                       [y1_data, np.array([[3, 5]]).astype('float32')]):
            with pytest.raises(TypeError):   # of Variables
                fluid.layers.sequence_concat(input=inputs)
        x3_data = fluid.layers.data(name="x3", shape=[3, 5], dtype='int32')
        y3_data = fluid.layers.data(name="y3", shape=[3, 5], dtype='int16')
        with pytest.raises(TypeError):   # float32, float64 or int64
            fluid.layers.sequence_concat(input=[x3_data, y3_data])
        return [x_data]
    compile_fetches(build, ["x", "y1", "x3", "y3"])
