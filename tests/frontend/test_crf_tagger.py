"""A tiny CRF tagger as a compiled program: embedding -> fc -> linear_chain_crf trains with
falling loss over padded batches with lengths, crf_decoding (in another method, sharing the
transitions by name) recovers the tags, and chunk_eval scores the decoded chunks. Plus the
layers' trace-time errors."""
import numpy as np
import pytest

import fluid
from fluid_interactive.errors import OpArgumentError, ShapeError

L = fluid.layers
VOCAB, TAGS = 12, 5     # IOB with 2 chunk types: B-0, I-0, B-1, I-1, O


def corpus(rng, batch=16, t=9):
    """Words whose tag follows from the word, except that an I tag must follow a B or I
    of its type: the CRF's transitions have something to learn."""
    words = rng.integers(0, VOCAB, (batch, t))
    tags = np.where(words < 4, 4, words % 4)
    for k in range(1, t):            # I-x without B-x/I-x before it becomes B-x
        bad = (tags[:, k] % 2 == 1) & (tags[:, k] < 4) & \
            ~((tags[:, k - 1] < 4) & (tags[:, k - 1] // 2 == tags[:, k] // 2))
        tags[bad, k] -= 1
    lengths = rng.integers(2, t + 1, batch)
    for i, n in enumerate(lengths):
        words[i, n:], tags[i, n:] = 0, 0
    return words[:, :, None], tags, lengths


def features(words):
    with fluid.var_scope("tagger"):
        emb = L.embedding(words, size=[VOCAB, 16])
        return L.fc(emb, size=TAGS, num_flatten_dims=2)


class Tagger(fluid.Program):
    @fluid.network("words", "tags", "length")
    def train(self, words, tags, length):
        words = L.data("words", shape=[-1, -1, 1], dtype="int64", append_batch_size=False)
        tags = L.data("tags", shape=[-1, -1], dtype="int64", append_batch_size=False)
        length = L.data("length", shape=[-1], dtype="int64", append_batch_size=False)
        nll = L.linear_chain_crf(features(words), tags,
                                 param_attr=fluid.ParamAttr(name="crfw"), length=length)
        loss = L.mean(nll)
        fluid.optimizer.Adam(learning_rate=0.05).minimize(loss)
        return loss

    @fluid.network("words", "tags", "length")
    def decode(self, words, tags, length):
        words = L.data("words", shape=[-1, -1, 1], dtype="int64", append_batch_size=False)
        tags = L.data("tags", shape=[-1, -1], dtype="int64", append_batch_size=False)
        length = L.data("length", shape=[-1], dtype="int64", append_batch_size=False)
        path = L.crf_decoding(features(words), param_attr=fluid.ParamAttr(name="crfw"),
                              length=length)
        scores = L.chunk_eval(path, tags, "IOB", num_chunk_types=2, seq_length=length)
        return path, scores[2]


def test_crf_tagger_trains_and_decodes():
    rng = np.random.default_rng(0)
    prog = Tagger().Compile(seed=0)
    assert prog.get_var("crfw").shape == (TAGS + 2, TAGS)
    words, tags, lengths = corpus(rng)
    losses = [prog.train(words, tags, lengths) for _ in range(60)]
    assert all(isinstance(v, float) and np.isfinite(v) for v in losses)
    assert losses[-1] < 0.2 * losses[0]
    test_words, test_tags, test_lengths = corpus(np.random.default_rng(1), batch=8, t=11)
    path, f1 = prog.decode(test_words, test_tags, test_lengths)
    valid = np.arange(11) < test_lengths[:, None]
    assert path.shape == (8, 11) and path.dtype == np.int64
    assert (path[~valid] == 0).all()
    assert (path[valid] == test_tags[valid]).mean() > 0.9
    assert f1 > 0.8


def test_crf_layer_errors():
    def build(fn):
        class One(fluid.Program):
            @fluid.network("x", "y")
            def f(self, x, y):
                x = L.data("x", shape=[-1, 3, 4], dtype="float32", append_batch_size=False)
                y = L.data("y", shape=[-1, 3], dtype="int64", append_batch_size=False)
                return fn(x, y)
        One().Compile()
    with pytest.raises(ShapeError, match=r"padded batch of tag scores \[B, T, D\]"):
        build(lambda x, y: L.linear_chain_crf(L.reshape(x, [-1, 4]), y))
    with pytest.raises(ShapeError, match="one tag per step"):
        build(lambda x, y: L.linear_chain_crf(x, L.reshape(y, [-1, 1, 3])))
    with pytest.raises(OpArgumentError, match="there is no parameter 'nope'"):
        build(lambda x, y: L.crf_decoding(x, param_attr="nope"))
    with pytest.raises(ShapeError, match=r"needs transitions \[6, 4\]"):
        build(lambda x, y: (L.linear_chain_crf(L.reshape(x, [-1, 4, 3]), L.reshape(y, [-1, 4]),
                                               param_attr="w"),
                            L.crf_decoding(x, param_attr="w")))
    with pytest.raises(OpArgumentError, match="chunk_scheme must be one of"):
        build(lambda x, y: L.chunk_eval(y, y, "BIO", 2))
