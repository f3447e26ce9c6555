"""DynamicRNN in ONNX: the step mask (sequence_step_mask) and the selections (where) a
DynamicRNN with lengths adds around and inside its loop, and cells written with gru_unit
and lstm_unit, checked against onnxruntime at several batch sizes, sequence lengths and
lengths vectors (zeros included), with B and T left dynamic in the file, and imported
back."""
import numpy as np
import pytest

import fluid

from .helpers import check_exported, onnx

L = fluid.layers
D, H = 5, 4
SHAPES = ((1, 4), (3, 7), (6, 2), (2, 1))


def _inputs():
    x = L.data("x", shape=[-1, -1, D], append_batch_size=False)
    lengths = L.data("lengths", shape=[-1], dtype="int64", append_batch_size=False)
    return x, lengths


def _gru_cell(origin_mode: bool, with_lengths: bool):
    class GruCell(fluid.Program):
        @fluid.network("x", "lengths")
        def infer(self, x, lengths):
            x, lengths = _inputs()
            proj = L.fc(input=x, size=3 * H, num_flatten_dims=2)
            drnn = L.DynamicRNN()
            with drnn.block():
                x_t = drnn.step_input(proj, lengths=lengths if with_lengths else None)
                h = drnn.memory(shape=[H])
                new_h, reset, gate = L.gru_unit(x_t, h, size=3 * H, origin_mode=origin_mode)
                drnn.update_memory(h, new_h)
                drnn.output(new_h, L.reduce_sum(gate, dim=1, keep_dim=True) + reset)
            hidden, extra = drnn()
            return hidden, extra
    return GruCell


def _lstm_cell(with_lengths: bool):
    class LstmCell(fluid.Program):
        @fluid.network("x", "lengths")
        def infer(self, x, lengths):
            x, lengths = _inputs()
            drnn = L.DynamicRNN()
            with drnn.block():
                x_t = drnn.step_input(x, lengths=lengths if with_lengths else None)
                h = drnn.memory(shape=[H])
                c = drnn.memory(shape=[H], value=0.5)
                new_h, new_c = L.lstm_unit(x_t, h, c, forget_bias=1.0)
                drnn.update_memory(h, new_h)
                drnn.update_memory(c, new_c)
                drnn.output(new_h, new_c)
            hidden, cells = drnn()
            return hidden, cells
    return LstmCell


def _compiled(cls):
    prog = cls().Compile(seed=1)
    rng = np.random.default_rng(2)
    prog.set_parameters({k: (0.6 * rng.standard_normal(v.shape)).astype(np.float32)
                         for k, v in prog.parameters().items()})
    return prog


def _check(prog, rng, path, opset=17):
    feeds = []
    for batch, steps in SHAPES:
        x = rng.standard_normal((batch, steps, D)).astype(np.float32)
        for lengths in (rng.integers(0, steps + 1, batch), np.full(batch, steps),
                        np.arange(batch) % (steps + 1)):   # the last has a zero at row 0
            feeds.append({"x": x, "lengths": lengths.astype(np.int64)})
    check_exported(prog, str(path), feeds, opset=opset, atol=1e-6)
    return onnx.load(str(path))


@pytest.mark.parametrize("origin_mode", [False, True], ids=["default", "origin"])
@pytest.mark.parametrize("with_lengths", [True, False], ids=["lengths", "full"])
def test_a_gru_unit_cell_matches_onnxruntime(origin_mode, with_lengths, rng, tmp_path):
    model = _check(_compiled(_gru_cell(origin_mode, with_lengths)), rng, tmp_path / "gru.onnx")
    graph = str(model.graph)
    assert ('op_type: "Where"' in graph) == with_lengths
    assert ('op_type: "Range"' in graph) == with_lengths


@pytest.mark.parametrize("with_lengths", [True, False], ids=["lengths", "full"])
def test_an_lstm_unit_cell_matches_onnxruntime(with_lengths, rng, tmp_path):
    _check(_compiled(_lstm_cell(with_lengths)), rng, tmp_path / "lstm.onnx")


@pytest.mark.parametrize("opset", [13, 21])
def test_the_oldest_and_newest_opsets_export_both_cells(opset, rng, tmp_path):
    _check(_compiled(_lstm_cell(True)), rng, tmp_path / "lstm.onnx", opset)
    _check(_compiled(_gru_cell(False, True)), rng, tmp_path / "gru.onnx", opset)


def test_the_batch_and_time_dims_stay_dynamic():
    model = fluid.export_onnx(_compiled(_lstm_cell(True)), None)
    x = model.graph.input[0].type.tensor_type.shape.dim
    assert x[0].dim_param == "batch" and not x[1].dim_param and not x[1].dim_value
    assert x[2].dim_value == D
    hidden = model.graph.output[0].type.tensor_type.shape.dim
    assert hidden[0].dim_param == "batch" and not hidden[1].dim_param


class Wide(fluid.Program):
    """A memory of rank 3 (a [T, B, 1, 1] mask), a step input of rank 4, a static input,
    and a given initial memory: the masks of other ranks, and where's broadcasting."""

    @fluid.network("x", "lengths", "init")
    def infer(self, x, lengths, init):
        x = L.data("x", shape=[-1, -1, 2, 3], append_batch_size=False)
        lengths = L.data("lengths", shape=[-1], dtype="int64", append_batch_size=False)
        init = L.data("init", shape=[-1, 2, 3], append_batch_size=False)
        bias = L.reduce_mean(x, dim=1)                        # [B, 2, 3]
        drnn = L.DynamicRNN()
        with drnn.block():
            x_t = drnn.step_input(x, lengths=lengths)
            m = drnn.memory(init=init)
            b = drnn.static_input(bias)
            new = L.tanh(m * 0.5 + x_t - b)
            drnn.update_memory(m, new)
            drnn.output(new * 2.0)
        return drnn()


def test_masks_of_other_ranks_match_onnxruntime(rng, tmp_path):
    prog = Wide().Compile(seed=0)
    feeds = []
    for batch, steps in SHAPES:
        feeds.append({"x": rng.standard_normal((batch, steps, 2, 3)).astype(np.float32),
                      "lengths": (np.arange(batch) % (steps + 1)).astype(np.int64),
                      "init": rng.standard_normal((batch, 2, 3)).astype(np.float32)})
    back = check_exported(prog, str(tmp_path / "wide.onnx"), feeds, atol=1e-6)
    assert not back.infer(**feeds[1])[0].any()   # row 0 has length 0: its outputs are zeros
