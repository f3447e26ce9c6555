"""label_semantic_roles: Paddle 1.8's book test of the same name (a deep bidirectional LSTM
tagger with a linear-chain CRF, for CoNLL-05 semantic roles) as a `fluid.Program`, on
synthetic sentences.

    python examples/book/label_semantic_roles.py [--steps N]

The network is the book's `db_lstm`: eight features per word (the word, five words of
context around the predicate, the predicate, a mark), embedded (the six word features in
one table `emb` of 32 that does not train, the predicate in `vemb` of 32, the mark in 5),
each through an fc of 512 and summed; a `dynamic_lstm` of 512 (relu candidate, sigmoid
gates and cell), then seven more, each over the sum of an fc of the layer below's input
and an fc of its LSTM, alternately reversed; the tag scores are the sum of two fc layers
(tanh) over the last input and LSTM. `linear_chain_crf` (transitions `crfw`, learning
rate x 1e-3) gives the loss, SGD under `exponential_decay(0.01, 100000, 0.5,
staircase=True)` trains it on batches of 10 sentences, and `crf_decoding` with the same
`crfw` tags a sentence (the `decode` method). As in the book, `fc` over an LSTM's result
takes the pair `dynamic_lstm` returns (hidden and cell): an fc over both.

Paddle's LoD sequences become padded batches: every feature is int64 ``[B, T, 1]``, the
gold tags ``[B, T]``, with one ``length [B]`` for all of them. The tables are about the
sizes of the CoNLL-05 dictionaries (44,068 words, 3,162 verbs, 59 tags). The book loads
pretrained word vectors into `emb`; here it keeps its random start. Each word's tag
follows from the word, so the loss has something to learn.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from book_common import command_line, train

import fluid

WORD_DICT_LEN, PRED_DICT_LEN, LABEL_DICT_LEN, MARK_DICT_LEN = 44068, 3162, 59, 2
WORD_INPUTS = ("word_data", "ctx_n2_data", "ctx_n1_data", "ctx_0_data", "ctx_p1_data",
               "ctx_p2_data")
FEEDS = WORD_INPUTS + ("verb_data", "mark_data", "length")


class LabelSemanticRoles(fluid.Program):
    word_dim = 32
    mark_dim = 5
    hidden_dim = 512
    depth = 8
    mix_hidden_lr = 1e-3
    is_sparse = True
    embedding_name = "emb"

    def db_lstm(self, word, predicate, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, mark, length):
        layers, hidden_dim = fluid.layers, self.hidden_dim
        predicate_embedding = layers.embedding(
            input=predicate, size=[PRED_DICT_LEN, self.word_dim], dtype="float32",
            is_sparse=self.is_sparse, param_attr="vemb")
        mark_embedding = layers.embedding(
            input=mark, size=[MARK_DICT_LEN, self.mark_dim], dtype="float32",
            is_sparse=self.is_sparse)
        word_input = [word, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2]
        emb_layers = [layers.embedding(size=[WORD_DICT_LEN, self.word_dim], input=x,
                                       param_attr=fluid.ParamAttr(name=self.embedding_name,
                                                                  trainable=False))
                      for x in word_input]
        emb_layers += [predicate_embedding, mark_embedding]

        def fc(x, size, act=None):      # over [B, T, D]: keep both leading dims
            return layers.fc(input=x, size=size, act=act, num_flatten_dims=2)

        def lstm(x, is_reverse=False):
            return layers.dynamic_lstm(input=x, size=hidden_dim, candidate_activation="relu",
                                       gate_activation="sigmoid", cell_activation="sigmoid",
                                       is_reverse=is_reverse, lengths=length)

        hidden_0 = layers.sums(input=[fc(emb, hidden_dim) for emb in emb_layers])
        input_tmp = [hidden_0, lstm(hidden_0)]
        for i in range(1, self.depth):
            mix_hidden = layers.sums(input=[fc(input_tmp[0], hidden_dim),
                                            fc(input_tmp[1], hidden_dim)])
            input_tmp = [mix_hidden, lstm(mix_hidden, is_reverse=(i % 2) == 1)]
        return layers.sums(input=[fc(input_tmp[0], LABEL_DICT_LEN, act="tanh"),
                                  fc(input_tmp[1], LABEL_DICT_LEN, act="tanh")])

    def feature_out(self):
        """The tag scores [B, T, LABEL_DICT_LEN] of the eight features (data vars)."""
        seq = {n: fluid.layers.data(name=n, shape=[-1, -1, 1], dtype="int64",
                                    append_batch_size=False) for n in FEEDS[:-1]}
        length = fluid.layers.data(name="length", shape=[-1], dtype="int64",
                                   append_batch_size=False)
        with fluid.var_scope("srl"):
            return self.db_lstm(seq["word_data"], seq["verb_data"], seq["ctx_n2_data"],
                                seq["ctx_n1_data"], seq["ctx_0_data"], seq["ctx_p1_data"],
                                seq["ctx_p2_data"], seq["mark_data"], length), length

    @fluid.network(*FEEDS, "target")
    def train_step(self, *args):
        feature_out, length = self.feature_out()
        target = fluid.layers.data(name="target", shape=[-1, -1], dtype="int64",
                                   append_batch_size=False)
        crf_cost = fluid.layers.linear_chain_crf(
            input=feature_out, label=target,
            param_attr=fluid.ParamAttr(name="crfw", learning_rate=self.mix_hidden_lr),
            length=length)
        avg_cost = fluid.layers.mean(crf_cost)
        fluid.optimizer.SGD(learning_rate=fluid.layers.exponential_decay(
            learning_rate=0.01, decay_steps=100000, decay_rate=0.5, staircase=True)
        ).minimize(avg_cost)
        return avg_cost

    @fluid.network(*FEEDS)
    def decode(self, *args):
        """The best tag path [B, T] (0 past each sentence's length)."""
        feature_out, length = self.feature_out()
        return fluid.layers.crf_decoding(input=feature_out,
                                         param_attr=fluid.ParamAttr(name="crfw"), length=length)


def batches(seed: int, batch_size: int, max_len: int = 30) -> Iterator[dict[str, np.ndarray]]:
    """Sentences over the 300 most frequent words; a word's tag is fixed by the word (a
    table, the same for every seed), the context features are the words around the
    predicate, and the mark flags the predicate's neighbourhood."""
    tag_of = np.random.default_rng(5).integers(0, LABEL_DICT_LEN, 300)
    rng = np.random.default_rng(seed)
    while True:
        length = rng.integers(5, max_len + 1, batch_size)
        length[0] = max_len
        valid = np.arange(max_len)[None, :] < length[:, None]
        words = np.where(valid, rng.integers(0, 300, (batch_size, max_len)), 0)
        at = rng.integers(0, length)                      # the predicate's position
        rows = np.arange(batch_size)
        batch = {"word_data": words, "target": np.where(valid, tag_of[words], 0),
                 "verb_data": np.repeat(words[rows, at][:, None] % PRED_DICT_LEN, max_len, 1),
                 "mark_data": (np.abs(np.arange(max_len)[None, :] - at[:, None]) <= 1)
                 & valid}
        for name, shift in zip(WORD_INPUTS[1:], (-2, -1, 0, 1, 2)):
            ctx = words[rows, np.clip(at + shift, 0, length - 1)]
            batch[name] = np.where(valid, ctx[:, None], 0)
        batch = {n: (v[:, :, None] if n != "target" else v).astype(np.int64)
                 for n, v in batch.items()}
        batch["length"] = length.astype(np.int64)
        yield batch


def main(steps: int = 20, batch_size: int = 10, seed: int = 0, **options) -> list[float]:
    """Train ``steps`` steps; return the losses."""
    prog = LabelSemanticRoles(**options).Compile(seed=seed)
    losses = train(prog.train_step, batches(seed, batch_size), steps, every=5)
    test = next(batches(seed + 1, batch_size))
    path = prog.decode(**{n: test[n] for n in FEEDS})
    valid = np.arange(path.shape[1])[None, :] < test["length"][:, None]
    print(f"decoded tags right: {np.mean(path[valid] == test['target'][valid]):.3f}")
    return losses


if __name__ == "__main__":
    args = command_line(__doc__, steps=20)
    main(args.steps, seed=args.seed)
