"""Paddle 1.8's sequence/test_sequence_conv.py, ported: the context window of each step
within its sequence (LoD sequences as a padded batch with lengths; the padding holds a
non-zero value), with trainable padding rows where the window leaves the sequence, times
the filter; every gradient Paddle checks; and the layer."""
import random

import numpy as np
import pytest
from ops.harness import check_grad, check_op
from paddle.common import compile_fetches, lod_batch

import fluid


def offsets_to_lengths(offsets):
    return [b - a for a, b in zip(offsets, offsets[1:])]


def case3_lod():
    """TestSeqProjectCase3's 9 random sequences of 25 rows (Python's random, seeded)."""
    state = random.getstate()
    random.seed(0)
    try:
        cuts = np.sort(random.sample(list(range(1, 25)), 8)).tolist()
    finally:
        random.setstate(state)
    return offsets_to_lengths([0] + cuts + [25])


# class -> (rows, width, lod, context_start, context_length, padding_trainable)
CASES = {"TestSeqProject": (11, 23, offsets_to_lengths([0, 4, 5, 8, 11]), 0, 1, False),
         "TestSeqProjectCase1": (11, 50, offsets_to_lengths([0, 4, 5, 8, 11]), -1, 3, True),
         "TestSeqProjectCase2Len0": (11, 50, offsets_to_lengths([0, 0, 4, 5, 5, 8, 11, 11]),
                                     -1, 3, True),
         "TestSeqProjectCase3": (25, 25, case3_lod(), 2, 3, True)}


def reference(x, lod, filt, start, length, trainable, pad):
    """Paddle's seqconv, one sequence at a time: the rows of each window position j,
    padding rows where it leaves the sequence (when trainable; zeros otherwise)."""
    m = x.shape[1]
    begin_pad = max(0, -start)
    out = []
    for seq in np.split(x, np.cumsum(lod)[:-1]):
        n = len(seq)
        col = np.zeros((n, length * m))
        for j in range(length):
            for t in range(n):
                s = t + start + j
                if 0 <= s < n:
                    col[t, j * m:(j + 1) * m] = seq[s]
                elif trainable and s < 0 and t < min(-(start + j), n):
                    col[t, j * m:(j + 1) * m] = pad[j + t]
                elif trainable and s >= n:
                    over = min(start + j, n)   # rows past the end at this j
                    col[t, j * m:(j + 1) * m] = pad[begin_pad + start + j - over + (t - (n - over))]
        out.append(col @ filt)
    return np.concatenate(out) if out else np.zeros((0, filt.shape[1]))


def conv_case(name):
    rows, width, lod, start, length, trainable = CASES[name]
    rng = np.random.RandomState(0)
    x = rng.uniform(0.1, 1, [rows, width])
    w = rng.uniform(0.1, 1, [length * width, 8])
    total_pad = max(0, -start) + max(0, start + length - 1)
    pad = rng.uniform(0.1, 1, [total_pad, width])
    batch, lengths = lod_batch(x, lod)
    inputs = {"X": batch, "Filter": w, "Lengths": lengths}
    if total_pad:
        inputs["PaddingData"] = pad
    attrs = {'contextStart': start, 'contextLength': length, 'paddingTrainable': trainable,
             'contextStride': 1}
    out = lod_batch(reference(x, lod, w, start, length, trainable, pad), lod, pad=0.0)[0]
    return inputs, attrs, out


@pytest.mark.parametrize("name", list(CASES))
def test_check_output(name):
    inputs, attrs, out = conv_case(name)
    check_op("sequence_conv", inputs, attrs, reference=lambda **_: out, batch_unknown=False)


# Paddle's gradient checks: (method, the inputs checked (None: all), max_relative_error,
# only with trainable padding)
GRADS = [("test_check_grad", None, 0.05, True), ("test_check_grad_input", ["X"], 0.05, False),
         ("test_check_grad_padding_data", ["PaddingData"], 0.005, True),
         ("test_check_grad_Filter", ["Filter"], 0.05, False),
         ("test_check_grad_input_filter", ["X", "Filter"], 0.05, True),
         ("test_check_grad_padding_input", ["PaddingData", "X"], 0.05, True),
         ("test_check_grad_padding_filter", ["PaddingData", "Filter"], 0.05, True)]


@pytest.mark.parametrize("method,wrt,error,trainable_only", GRADS, ids=[g[0] for g in GRADS])
@pytest.mark.parametrize("name", list(CASES))
def test_gradients(name, method, wrt, error, trainable_only):
    inputs, attrs, _ = conv_case(name)
    if trainable_only and not attrs['paddingTrainable']:
        return   # Paddle checks nothing here
    wanted = [s for s in ("X", "PaddingData", "Filter") if s in inputs] if wrt is None else wrt
    check_grad("sequence_conv", inputs, attrs, wrt=wanted, rtol=error, atol=1e-8,
               max_elements=150)


def test_api():   # TestSeqConvApi
    def build():
        x = fluid.layers.data('x', shape=[-1, -1, 32], append_batch_size=False)
        lengths = fluid.layers.data('lengths', shape=[-1], dtype='int64',
                                    append_batch_size=False)
        return [fluid.layers.sequence_conv(input=x, num_filters=2, filter_size=3,
                                           padding_start=None, lengths=lengths)]
    x, lengths = lod_batch(np.random.RandomState(0).rand(10, 32).astype("float32"),
                           [2, 3, 1, 4])
    out, = compile_fetches(build, ["x", "lengths"])(x=x, lengths=lengths)
    assert out.shape == (4, 4, 2)
