"""Decoding in ONNX: a greedy decoder (BasicDecoder + GreedyEmbeddingHelper through
dynamic_decode) exports as an ONNX Loop whose body picks the argmax, and onnxruntime gives
the ids and lengths ``infer`` gives at several batch sizes; an LSTMCell run by rnn with
lengths exports as a Loop too. A beam search does not export: its backtrack, gather_tree,
has no ONNX form."""
from __future__ import annotations

import numpy as np
import pytest

import fluid

from .helpers import ort_run

L = fluid.layers
V, H, D = 9, 6, 4


class Cell(L.RNNCell):
    def call(self, inputs, states):
        h = L.tanh(L.fc(inputs, H, param_attr="wx", bias_attr=False) +
                   L.fc(states, H, param_attr="wh", bias_attr="bh"))
        return h, h


def embed(ids):
    return fluid.embedding(ids, size=[V, D], param_attr="emb")


def project(x):
    return L.fc(x, V, num_flatten_dims=len(x.shape) - 1, param_attr="wo", bias_attr="bo")


class Greedy(fluid.Program):
    @fluid.network("h0")
    def infer(self, h0):
        h0 = L.data("h0", shape=[H])
        start = L.fill_constant_batch_size_like(h0, [-1], "int64", 0)
        decoder = L.BasicDecoder(Cell(), L.GreedyEmbeddingHelper(embed, start, 1),
                                 output_fn=project)
        out, _, lengths = L.dynamic_decode(decoder, inits=h0, max_step_num=10,
                                           return_length=True, is_test=True)
        return out.sample_ids, lengths


class Beam(fluid.Program):
    @fluid.network("h0")
    def infer(self, h0):
        h0 = L.data("h0", shape=[H])
        decoder = L.BeamSearchDecoder(Cell(), 0, 1, 3, embedding_fn=embed, output_fn=project)
        return L.dynamic_decode(decoder, inits=h0, max_step_num=10, is_test=True)[0]


class Encoder(fluid.Program):
    @fluid.network("x", "n")
    def infer(self, x, n):
        x = L.data("x", shape=[-1, -1, D], append_batch_size=False)
        n = L.data("n", shape=[-1], dtype="int64", append_batch_size=False)
        out, (h, c) = L.rnn(L.LSTMCell(H), x, sequence_length=n)
        return out, h, c


def _spread(prog, rng):
    """Weights large enough that the argmax moves from step to step, and the end token
    (id 1) sometimes wins."""
    values = {k: (0.8 * rng.standard_normal(v.shape)).astype(np.float32)
              for k, v in prog.parameters().items()}
    if "bo" in values:
        values["bo"][1] += 2.5
    prog.set_parameters(values)


@pytest.mark.parametrize("opset", [13, 17])
def test_a_greedy_decoder_is_an_onnx_loop_and_onnxruntime_agrees(opset, tmp_path, rng):
    prog = Greedy().Compile(seed=0)
    _spread(prog, rng)
    path = str(tmp_path / "greedy.onnx")
    model = fluid.export_onnx(prog, path, opset=opset)
    loop = next(node for node in model.graph.node if node.op_type == "Loop")
    assert "ArgMax" in {node.op_type for node in loop.attribute[0].g.node}
    seen_lengths = set()
    for batch in (1, 3, 16):
        h0 = rng.standard_normal((batch, H)).astype(np.float32)
        ids, lengths = prog.infer(h0)
        theirs = ort_run(path, {"h0": h0})
        np.testing.assert_array_equal(theirs[0], ids)
        np.testing.assert_array_equal(theirs[1], lengths)
        seen_lengths.update(lengths.tolist())
    assert len(seen_lengths) > 2    # sequences of several lengths


def test_an_lstm_cell_run_by_rnn_exports(tmp_path, rng):
    prog = Encoder().Compile(seed=0)
    path = str(tmp_path / "encoder.onnx")
    fluid.export_onnx(prog, path)
    x = rng.standard_normal((3, 6, D)).astype(np.float32)
    n = np.array([6, 2, 4], np.int64)
    for got, want in zip(ort_run(path, {"x": x, "n": n}), prog.infer(x, n)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_beam_search_exports_and_onnxruntime_gives_its_ids(tmp_path, rng):
    """The decode loop, its top-k over beam x vocab and gather_tree's backtracking (a
    Loop of its own) in one file."""
    prog = Beam().Compile(seed=0)
    _spread(prog, rng)
    path = str(tmp_path / "beam.onnx")
    fluid.export_onnx(prog, path)
    h0 = rng.standard_normal((4, H)).astype(np.float32)
    np.testing.assert_array_equal(ort_run(path, {"h0": h0})[0], prog.infer(h0))
