"""Paddle 1.8's test_row_conv_op.py, ported: out[t] = sum_k x[t + k] * W[k] within each
sequence (LoD sequences as a padded batch with lengths; the padding holds a non-zero
value), or over every step of a tensor [B, T, D], and the gradients."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op
from paddle.common import lod_batch

# (class, lod or None (a tensor [2, 6, D]), D, context length, max_relative_error)
CASES = {"TestRowConvOp1": ([2, 3, 2], 16, 8, 0.005),
         "TestRowConvOp2": ([20, 30, 50], 35, 35, 0.06),
         "TestRowOpWithTensorInput": (None, 20, 6, 0.005)}


def row_conv_case(name):
    lod, d, context, _ = CASES[name]
    rng = np.random.RandomState(0)
    x = rng.random_sample((sum(lod), d) if lod else (2, 6, d)).astype("float32")
    wt = rng.random_sample((context, d)).astype("float32")
    sequences = np.split(x, np.cumsum(lod)[:-1]) if lod else list(x)
    outs = []
    for seq in sequences:   # Paddle's: the steps j + k inside the sequence
        out = np.zeros_like(seq)
        for j in range(len(seq)):
            for k in range(context):
                if j + k < len(seq):
                    out[j] += seq[j + k] * wt[k]
        outs.append(out)
    if lod is None:
        return {"X": x, "Filter": wt}, np.stack(outs)
    batch, lengths = lod_batch(x, lod)
    return {"X": batch, "Filter": wt, "Lengths": lengths}, lod_batch(
        np.concatenate(outs), lod, pad=0.0)[0]


@pytest.mark.parametrize("name", list(CASES))
def test_check_output(name):
    inputs, out = row_conv_case(name)
    check_op("row_conv", inputs, {}, reference=lambda **_: out, batch_unknown=False)


@pytest.mark.parametrize("wrt", [["X", "Filter"], ["Filter"], ["X"]],
                         ids=["normal", "ignore_x", "ignore_wt"])
@pytest.mark.parametrize("name", list(CASES))
def test_check_grad(name, wrt):
    inputs, _ = row_conv_case(name)
    check_grad("row_conv", inputs, {}, wrt=wrt, rtol=CASES[name][3], atol=1e-8,
               max_elements=150)
