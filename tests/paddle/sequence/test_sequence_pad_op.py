"""Paddle 1.8's sequence/test_sequence_pad_op.py, ported: LoD sequences (here a padded
batch with lengths whose padding holds a non-zero value) padded with PadValue to
padded_length steps; Paddle's output is the padded batch itself."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op, run_forward
from paddle.common import compile_fetches, lod_batch

import fluid

# (class, x shape, lod, pad value (None: random, one step's shape), padded_length)
CASES = {"TestSequencePadOp": ([12, 10], [2, 3, 4, 3], [1.0], -1),
         "TestSequencePadOp2": ([12, 10], [2, 3, 4, 3], None, -1),
         "TestSequencePadOp3": ([12, 10], [2, 3, 4, 3], [1.0], 7),
         "TestSequencePadOp4": ([12, 10], [2, 3, 4, 3], None, 7),
         "TestSequencePadOp5": ([12, 2, 5], [2, 3, 4, 3], [1.0], -1),
         "TestSequencePadOp6": ([12, 2, 5], [2, 3, 4, 3], None, -1),
         "TestSequencePadOp7": ([12, 2, 5], [2, 3, 4, 3], [1.0], 7),
         "TestSequencePadOp8": ([12, 2, 5], [0, 8, 0, 4, 0], [1.0], 10)}


def pad_case(name):
    shape, lod, pad_value, padded_length = CASES[name]
    rng = np.random.RandomState(0)
    x = rng.uniform(0.1, 0.5, shape)
    pad = np.array(pad_value if pad_value is not None else rng.random_sample(shape[1:]))
    batch, lengths = lod_batch(x, lod)
    inputs = {"X": batch, "PadValue": pad, "Lengths": lengths}
    # Paddle's expected: each sequence followed by the pad value up to the padded length
    steps = max(lod) if padded_length == -1 else padded_length
    out = np.empty((len(lod), steps) + tuple(shape[1:]))
    out[...] = np.broadcast_to(pad, shape[1:])
    for b, (seq, n) in enumerate(zip(np.split(x, np.cumsum(lod)[:-1]), lod)):
        out[b, :n] = seq
    return inputs, {'padded_length': padded_length}, {"Out": out, "Length": np.array(lod)}


@pytest.mark.parametrize("name", list(CASES))
def test_check_output(name):
    inputs, attrs, expected = pad_case(name)
    if attrs["padded_length"] >= 0:
        check_op("sequence_pad", inputs, attrs, reference=lambda **_: expected,
                 batch_unknown=False)
        return
    got = run_forward("sequence_pad", inputs, attrs)   # -1: the longest, known when run
    for slot, want in expected.items():
        np.testing.assert_allclose(got[slot][0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", list(CASES))
def test_check_grad(name):
    inputs, attrs, _ = pad_case(name)
    check_grad("sequence_pad", inputs, attrs, wrt=["X"], through=["Out"], rtol=5e-3,
               max_elements=200)


def test_error():   # TestSequencePadOpError
    def build():
        pad_value = fluid.layers.assign(input=np.array([0.0], dtype=np.float32))
        with pytest.raises(TypeError):   # x: a Variable
            fluid.layers.sequence_pad(x=np.random.random((2, 4)).astype("float32"),
                                      pad_value=pad_value)
        x1 = fluid.layers.data(name='x1', shape=[-1, 10, 5], dtype='float32')
        with pytest.raises(TypeError):   # pad_value: a Variable
            fluid.layers.sequence_pad(x=x1, pad_value=np.array([0.0], dtype=np.float32))
        x2 = fluid.layers.data(name='x2', shape=[-1, 10, 5], dtype='int16')
        pad_value2 = fluid.layers.assign(input=np.array([0.0], dtype=np.int32))
        with pytest.raises(TypeError):   # dtype
            fluid.layers.sequence_pad(x=x2, pad_value=pad_value2)
        return [x1]
    compile_fetches(build, ["x1", "x2"])


def test_length_dtype():
    seen = {}

    def build():
        x = fluid.data(name='x', shape=[None, None, 5], dtype='float32')
        pad_value = fluid.layers.assign(input=np.array([0.0], dtype=np.float32))
        out, length = fluid.layers.sequence_pad(x=x, pad_value=pad_value)
        seen["dtype"] = length.dtype   # int64 when the program is built
        return [out]
    compile_fetches(build, ["x"])
    assert seen["dtype"] == "int64"
