"""The sequence ops ONNX expresses with masks of the valid steps (`onnx/export_seq_mask.py`):
sequence_pool (every pool type, sequence_last_step and sequence_first_step among them),
sequence_softmax, sequence_mask, sequence_reverse, sequence_slice, sequence_enumerate and
sequence_expand, with and without lengths. onnxruntime and the imported file give what
``infer`` gives at two batch sizes and two sequence lengths (zero lengths included), with
garbage at the padding that must not matter."""
from __future__ import annotations

import numpy as np
import pytest

import fluid
from tests.onnx_io.helpers import check_exported

L = fluid.layers
D = 3


def _data():
    x = L.data("x", shape=[-1, -1, D], append_batch_size=False)
    n = L.data("lengths", shape=[-1], dtype="int64", append_batch_size=False)
    ids = L.data("ids", shape=[-1, -1], dtype="int64", append_batch_size=False)
    return x, n, ids


def _pools(x, n, ids):
    outs = [L.sequence_pool(x, kind, lengths=n, pad_value=-7.0)
            for kind in ("sum", "average", "sqrt", "max", "first", "last")]
    with pytest.warns(fluid.SequenceWarning):   # pooled whole on purpose: both forms export
        outs += [L.sequence_pool(x, kind) for kind in ("sum", "average", "sqrt", "max",
                                                       "first", "last")]
    outs += [L.sequence_last_step(x, lengths=n), L.sequence_first_step(x, lengths=n),
             L.sequence_pool(L.reduce_sum(x, dim=2), "max", lengths=n)]
    return tuple(outs)


def _edits(x, n, ids):
    half = L.cast(L.elementwise_floordiv(n, L.fill_constant([1], "int64", 2)), "int64")
    return (L.sequence_softmax(L.reduce_sum(x, dim=2), lengths=n),
            L.sequence_softmax(L.reduce_sum(x, dim=2, keep_dim=True)),
            L.sequence_mask(n, maxlen=6, dtype="float32"), L.sequence_mask(n, dtype="int32"),
            L.sequence_reverse(x, lengths=n), L.sequence_reverse(x),
            L.sequence_reverse(L.reduce_sum(x, dim=2), lengths=n),
            L.sequence_slice(x, half, n - half, lengths=n),
            L.sequence_enumerate(ids, 3, pad_value=-1, lengths=n),
            L.sequence_expand(L.reduce_mean(x, dim=1), x, y_lengths=n),
            L.sequence_expand(x, x, x_lengths=n, y_lengths=n))


def _joins(x, n, ids):
    short = L.slice(x, axes=[1], starts=[0], ends=[1])
    m = L.elementwise_min(n, L.fill_constant([1], "int64", 1))
    evens = L.elementwise_floordiv(n, L.fill_constant([1], "int64", 2)) * 2
    columns = L.elementwise_mod(ids, L.fill_constant([1], "int64", 3))
    return (*L.sequence_concat([x, short, x], lengths=[n, m, n]),
            *L.sequence_reshape(L.reshape(x[:, :, :2], [0, -1, 2]), 4, lengths=evens),
            L.sequence_reshape(x, 1, lengths=n)[0],
            L.sequence_scatter(L.reduce_sum(x, dim=1), columns, L.cast(ids, "float32"),
                               lengths=n))


CASES = {"pools": _pools, "edits": _edits, "joins": _joins}


def _program(build):
    class Net(fluid.Program):
        @fluid.network("x", "lengths", "ids")
        def infer(self, x, lengths, ids):
            return build(*_data())
    return Net().Compile(seed=0)


@pytest.mark.parametrize("opset", [13, 18])   # ReduceMax's axes: an attr, then an input
@pytest.mark.parametrize("case", sorted(CASES))
def test_sequence_ops_match_onnxruntime_and_import_back(case, opset, tmp_path, rng):
    feeds = []
    for batch, time in ((3, 5), (4, 2)):
        n = rng.integers(0, time + 1, batch).astype(np.int64)
        n[0] = 0                                           # an empty row
        x = rng.standard_normal((batch, time, D)).astype(np.float32)
        x[np.arange(time)[None, :] >= n[:, None]] = 1e3    # padding must not matter
        feeds.append({"x": x, "lengths": n,
                      "ids": rng.integers(0, 9, (batch, time)).astype(np.int64)})
    check_exported(_program(CASES[case]), str(tmp_path / f"{case}.onnx"), feeds, opset=opset)


class LstmClassifier(fluid.Program):
    """The classifier of DESIGN.md: fc, dynamic_lstm with lengths, sequence_last_step,
    fc, softmax."""

    @fluid.network("x", "lengths")
    def infer(self, x, lengths):
        x = L.data("x", shape=[-1, -1, 12], append_batch_size=False)
        lengths = L.data("lengths", shape=[-1], dtype="int64", append_batch_size=False)
        proj = L.fc(input=x, size=4 * 8, num_flatten_dims=2)
        hidden, _ = L.dynamic_lstm(input=proj, size=4 * 8, lengths=lengths)
        last = L.sequence_last_step(hidden, lengths=lengths)
        return L.fc(last, size=3, act="softmax")


def test_an_lstm_classifier_ending_in_sequence_last_step_exports(tmp_path, rng):
    feeds = [{"x": rng.standard_normal((batch, time, 12)).astype(np.float32),
              "lengths": rng.integers(1, time + 1, batch).astype(np.int64)}
             for batch, time in ((2, 7), (5, 3))]
    back = check_exported(LstmClassifier().Compile(seed=0), str(tmp_path / "lstm.onnx"), feeds)
    ops = [op.type for op in back.program.block("infer").ops]
    assert ops.count("lstm") == 1 and ops.count("mul") == 2   # fc, lstm, fc: as they were

