"""The sequence ops in ONNX (`onnx/export_seq.py`): row_conv and sequence_conv as Conv,
sequence_pad / sequence_unpad through masks, add_position_encoding, Print as Identity, and
case / switch_case as If; onnxruntime gives what `infer` gives at several batch sizes and
lengths, and each file imports back through `fluid.import_onnx` giving them too."""
import numpy as np
import pytest

import fluid

from .helpers import check_exported, onnx

L = fluid.layers
T, D = 6, 4


class Sequences(fluid.Program):
    @fluid.network("x", "lengths")
    def infer(self, x, lengths):
        x = L.data("x", shape=[T, D])
        n = L.data("lengths", shape=[-1], dtype="int64", append_batch_size=False)
        padded, length = L.sequence_pad(x, L.fill_constant([1], "float32", -2.0), maxlen=8,
                                        lengths=n)
        return (L.row_conv(x, 2, lengths=n),
                L.sequence_conv(x, 3, 3, bias_attr=False, lengths=n),
                L.sequence_conv(x, 2, 4, padding_start=-3, bias_attr=False, lengths=n),
                L.sequence_unpad(x, n), padded, length,
                L.add_position_encoding(L.Print(x), 0.5, 1.5, lengths=n))


def _lengths_feeds(rng, batches=(1, 3, 5)):
    feeds = []
    for batch in batches:
        x = rng.standard_normal((batch, T, D)).astype(np.float32)
        n = rng.integers(0, T + 1, batch).astype(np.int64)
        x[np.arange(T)[None, :] >= n[:, None]] = 1e3      # padding must not matter
        feeds.append({"x": x, "lengths": n})
    return feeds


def test_sequence_ops_match_onnxruntime(tmp_path, rng):
    prog = Sequences().Compile(seed=0)
    path = str(tmp_path / "seq.onnx")
    check_exported(prog, path, _lengths_feeds(rng))
    types = {node.op_type for node in onnx.load(path).graph.node}
    assert {"Conv", "Where", "Range"} <= types


class Convs(fluid.Program):
    @fluid.network("x")
    def infer(self, x):
        x = L.data("x", shape=[T, D])
        return L.row_conv(L.Print(x, message="x"), 3) + L.sequence_conv(x, D, 3,
                                                                         bias_attr=False)


def test_the_convolutions_round_trip(tmp_path, rng):
    prog = Convs().Compile(seed=0)
    check_exported(prog, str(tmp_path / "convs.onnx"),
                   [{"x": rng.standard_normal((b, T, D)).astype(np.float32)} for b in (1, 4)])


class Branches(fluid.Program):
    @fluid.network("x", "k")
    def infer(self, x, k):
        x = L.data("x", shape=[3])
        k = L.data("k", shape=[1], dtype="int64", append_batch_size=False)
        two = L.fill_constant([1], "int64", 2)
        chosen = L.case([(L.less_than(k, two), lambda: x * 2.0)], default=lambda: x - 1.0)
        switched = L.switch_case(k, {0: lambda: L.tanh(x), 3: lambda: L.exp(x)},
                                 default=lambda: L.scale(x, 0.5))
        return chosen, switched


def test_case_and_switch_case_export_as_if(tmp_path, rng):
    prog = Branches().Compile(seed=0)
    path = str(tmp_path / "branches.onnx")
    check_exported(prog, path, [{"x": rng.standard_normal((b, 3)).astype(np.float32),
                                 "k": np.array([k])} for b in (2, 5) for k in (0, 1, 3, 7)])
    # one If per cond: case's, and switch_case's two nested ones
    assert [node.op_type for node in onnx.load(path).graph.node].count("If") == 2


@pytest.mark.parametrize("build,match", [
    (lambda x, n: L.sequence_pad(x, L.fill_constant([1], "float32", 0.0), lengths=n)[0],
     "padded_length=-1"),
    (lambda x, n: L.sequence_conv(x, 2, 3, padding_start=1, bias_attr=False),
     "does not cover the step itself"),
])
def test_what_onnx_cannot_express_says_why(build, match):
    class Net(fluid.Program):
        @fluid.network("x", "lengths")
        def infer(self, x, lengths):
            x = L.data("x", shape=[T, D])
            n = L.data("lengths", shape=[-1], dtype="int64", append_batch_size=False)
            return build(x, n)
    with pytest.raises(fluid.OnnxError, match=match):
        fluid.export_onnx(Net().Compile(seed=0), None)
