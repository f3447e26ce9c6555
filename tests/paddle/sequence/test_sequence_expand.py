"""Paddle 1.8's sequence/test_sequence_expand.py, ported: each row of X (or each sequence
of X) repeated as often as Y's sequence at the reference level has steps; Y's lengths at
that level are the op's YLengths (a padded batch has one level), X's sequences a padded
batch with XLengths (the padding holds a non-zero value)."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op
from paddle.common import PAD, lod_batch

# (class, x shape, x lod, y lod, ref_level)
CASES = {
    "TestSequenceExpand": ([3, 40], None, [[1, 3, 4]], None),
    "TestSequenceExpandCase1": ([5, 20], None, [[2, 3], [2, 2, 3, 3, 3]], 1),
    "TestSequenceExpandCase2": ([1, 2, 50], [[1]], [[2], [1, 1]], 0),
    "TestSequenceExpandCase3": ([4, 25], [[1, 1, 1, 1]], [[2, 2, 2, 2]], None),
    "TestSequenceExpandCase4": ([5, 20], [[2, 3]], [[2], [2, 3]], None),
    "TestSequenceExpandCase5": ([6, 20], None, [[2, 4], [2, 2, 3, 0, 3, 3]], 1),
    "TestSequenceExpandCase6": ([4, 25], [[1, 1, 0, 1, 1]], [[0, 2, 4, 2, 0]], None),
}


def expand_case(name):
    shape, x_lod, y_lod, ref_level = CASES[name]
    rng = np.random.RandomState(0)
    x = rng.uniform(0.1, 1, shape)
    level = len(y_lod) - 1 if ref_level is None else ref_level
    repeats = y_lod[level]
    y_lengths = np.array(repeats, np.int64)
    y = np.full((len(repeats), max(repeats), 1), PAD, 'float64')
    inputs = {"Y": y, "YLengths": y_lengths}
    x_len = [1] * x.shape[0] if x_lod is None else x_lod[0]
    # Paddle's expected rows: sequence i of X (x_len[i] rows) repeated repeats[i] times
    offsets = np.cumsum([0] + x_len)
    expected = np.zeros((len(repeats), max(repeats)) + ((max(x_len),) if x_lod else ())
                        + x.shape[1:])
    for i, r in enumerate(repeats):
        sub = x[offsets[i]:offsets[i + 1]]
        for j in range(r):
            if x_lod is None:
                expected[i, j] = sub[0]
            else:
                expected[i, j, :len(sub)] = sub
    if x_lod is None:
        inputs["X"] = x
    else:
        inputs["X"], inputs["XLengths"] = lod_batch(x, x_lod[0])
    return inputs, expected


def check_expand(inputs, expected):
    """The op's output against ``expected``, and its gradient of X (OpTest's
    max_relative_error 0.005)."""
    check_op("sequence_expand", inputs, {"ref_level": -1},
             reference=lambda **_: {"Out": expected}, batch_unknown=False)


def check_expand_grad(inputs):
    check_grad("sequence_expand", inputs, {"ref_level": -1}, wrt=["X"], rtol=5e-3,
               max_elements=200)


@pytest.mark.parametrize("name", list(CASES))
def test_check_output(name):
    check_expand(*expand_case(name))


@pytest.mark.parametrize("name", list(CASES))
def test_check_grad(name):
    check_expand_grad(expand_case(name)[0])
