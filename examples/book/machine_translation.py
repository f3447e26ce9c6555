"""Paddle 1.8's book network ``tests/book/test_machine_translation.py`` over padded batches.

An LSTM encoder reads the source words; a decoder written in a `DynamicRNN` (an `fc`
step with tanh, the encoder's last state as its first memory) predicts each next target
word; the decode method is the book's beam search written with the low-level ops: a
`While` over tensor arrays of the ids, scores, states and parents of each step,
`beam_search` choosing the beam of each source and `beam_search_decode` tracing the
hypotheses back after the last step.

Where the book's LoD tensors carried the sequences and the beams, a batch here is padded:
words ``[batch, T]`` int64 with their lengths ``[batch]``, and a beam of ``beam_size``
rows per source (docs/decoding.md maps one onto the other). The book's sizes and
optimizer (Adagrad, 1e-4, L2 decay 0.1) are the class's defaults.

    python examples/book/machine_translation.py      # a few steps on synthetic data
"""
from __future__ import annotations

import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "extension")]

import fluid  # noqa: E402

pd = fluid.layers


def book_optimizer(learning_rate: float, **kwargs):
    """The book's optimizer: Adagrad."""
    return fluid.optimizer.Adagrad(learning_rate=learning_rate, **kwargs)


def words(name: str):
    """A padded batch of word ids [batch, T] and its lengths [batch]."""
    return (pd.data(name=name, shape=[-1, -1], dtype="int64", append_batch_size=False),
            pd.data(name=f"{name}_len", shape=[-1], dtype="int64", append_batch_size=False))


class MachineTranslation(fluid.Program):
    dict_size = 30000
    hidden_dim = 32
    word_dim = 16
    beam_size = 2
    max_length = 8
    end_id = 10
    learning_rate = 1e-4
    regularization = 0.1

    def embed(self, ids):
        return fluid.embedding(ids, size=[self.dict_size, self.word_dim],
                               param_attr=fluid.ParamAttr(name="vemb"))

    def encoder(self, src, src_len):
        with fluid.var_scope("encoder"):
            fc1 = pd.fc(input=self.embed(src), size=self.hidden_dim * 4, act="tanh",
                        num_flatten_dims=2)
            lstm_hidden0, _ = pd.dynamic_lstm(input=fc1, size=self.hidden_dim * 4,
                                              lengths=src_len)
            return pd.sequence_last_step(input=lstm_hidden0, lengths=src_len)

    def decoder_step(self, word, state):
        """The decoder's step, shared by training and decoding (its parameters named)."""
        current_state = pd.fc(input=[word, state], size=self.hidden_dim, act="tanh",
                              param_attr=["decoder.w_word", "decoder.w_state"],
                              bias_attr="decoder.b")
        current_score = pd.fc(input=current_state, size=self.dict_size, act="softmax",
                              param_attr="decoder.w_out", bias_attr="decoder.b_out")
        return current_state, current_score

    @fluid.network("src", "src_len", "trg", "trg_len", "label")
    def train_step(self, src, src_len, trg, trg_len, label):
        (src, src_len), (trg, trg_len) = words("src"), words("trg")
        label = pd.data(name="label", shape=[-1, -1, 1], dtype="int64",
                        append_batch_size=False)
        context = self.encoder(src, src_len)
        trg_embedding = self.embed(trg)
        rnn = pd.DynamicRNN()
        with rnn.block():
            current_word = rnn.step_input(trg_embedding, lengths=trg_len)
            pre_state = rnn.memory(init=context)
            current_state, current_score = self.decoder_step(current_word, pre_state)
            rnn.update_memory(pre_state, current_state)
            rnn.output(current_score)
        scores = rnn()                                               # [batch, T, dict]
        cost = pd.cross_entropy(input=pd.reshape(scores, [-1, self.dict_size]),
                                label=pd.reshape(label, [-1, 1]))
        mask = pd.reshape(pd.sequence_mask(trg_len, maxlen=pd.shape(trg)[1:2],
                                           dtype="float32"), [-1, 1])
        avg_cost = pd.reduce_sum(cost * mask) / pd.reduce_sum(mask)   # over real words
        book_optimizer(self.learning_rate, regularization=fluid.regularizer.L2DecayRegularizer(
            regularization_coeff=self.regularization)).minimize(avg_cost)
        return avg_cost

    @fluid.network("src", "src_len", "init_ids", "init_scores")
    def decode(self, src, src_len, init_ids, init_scores):
        """The book's beam search: ``init_ids``/``init_scores`` [batch * beam, 1] (the
        start id everywhere; 0 for each source's first row, -1e9 for its copies). Returns
        the hypotheses (ids, scores [batch, beam, T]) and their lengths [batch, beam]."""
        src, src_len = words("src")
        # [batch * beam, 1]: rows of their own count (two unknown dims keep them out of
        # the check that data vars share one batch size)
        init_ids = pd.data(name="init_ids", shape=[-1, -1], dtype="int64",
                           append_batch_size=False)
        init_scores = pd.data(name="init_scores", shape=[-1, -1], dtype="float32",
                              append_batch_size=False)
        context = self.encoder(src, src_len)
        init_state = fluid.layers.BeamSearchDecoder.tile_beam_merge_with_batch(
            context, self.beam_size)                      # a row per hypothesis
        array_len = pd.fill_constant(shape=[1], dtype="int64", value=self.max_length)
        counter = pd.zeros(shape=[1], dtype="int64", force_cpu=True)
        state_array = pd.array_write(init_state, i=counter)
        ids_array = pd.array_write(init_ids, i=counter)
        scores_array = pd.array_write(init_scores, i=counter)
        parents_array = pd.create_array("int32")
        cond = pd.less_than(x=counter, y=array_len)
        while_op = pd.While(cond=cond)
        with while_op.block():
            pre_ids = pd.array_read(array=ids_array, i=counter)
            pre_state = pd.array_read(array=state_array, i=counter)
            pre_score = pd.array_read(array=scores_array, i=counter)
            current_state, current_score = self.decoder_step(
                self.embed(pd.reshape(pre_ids, [-1])), pre_state)
            topk_scores, topk_indices = pd.topk(current_score, k=self.beam_size)
            accu_scores = pd.elementwise_add(x=pd.log(x=topk_scores), y=pre_score)
            selected_ids, selected_scores, parent_idx = pd.beam_search(
                pre_ids, pre_score, topk_indices, accu_scores, self.beam_size,
                end_id=self.end_id, level=0, return_parent_idx=True)
            pd.array_write(parent_idx, array=parents_array, i=counter)
            pd.increment(x=counter, value=1, in_place=True)
            # each hypothesis's state is the one of the row it extends
            pd.array_write(pd.gather(current_state, parent_idx), array=state_array, i=counter)
            pd.array_write(selected_ids, array=ids_array, i=counter)
            pd.array_write(selected_scores, array=scores_array, i=counter)
            # go on up to the max length, while some hypothesis has not ended
            length_cond = pd.less_than(x=counter, y=array_len)
            ended = pd.equal(selected_ids, pd.fill_constant([1], "int64", self.end_id))
            finish_cond = pd.logical_not(pd.reshape(pd.reduce_all(ended), [1]))
            pd.logical_and(x=length_cond, y=finish_cond, out=cond)
        return pd.beam_search_decode(ids=ids_array, scores=scores_array,
                                     beam_size=self.beam_size, end_id=self.end_id,
                                     parent_idx=parents_array, return_length=True)


def synthetic_batch(rng, batch_size: int, dict_size: int, max_len: int = 8
                    ) -> dict[str, np.ndarray]:
    """Random sentences of the right shapes: source and target ids with their lengths,
    and the target shifted by one word as the label."""
    src_len = rng.integers(2, max_len + 1, batch_size)
    trg_len = rng.integers(2, max_len + 1, batch_size)
    src = rng.integers(0, dict_size, (batch_size, src_len.max()))
    trg = rng.integers(0, dict_size, (batch_size, trg_len.max() + 1))
    return {"src": src, "src_len": src_len, "trg": trg[:, :-1], "trg_len": trg_len,
            "label": trg[:, 1:, None]}


def start_beam(batch_size: int, beam_size: int, start_id: int = 1
               ) -> tuple[np.ndarray, np.ndarray]:
    """The first step's ids and scores: each source's first row live, its copies at
    -1e9 (so that the beam does not hold one hypothesis several times)."""
    ids = np.full((batch_size * beam_size, 1), start_id, np.int64)
    scores = np.tile([[0.0]] + [[-1e9]] * (beam_size - 1), (batch_size, 1))
    return ids, scores.astype(np.float32)


def train_synthetic(cls: type, steps: int, batch_size: int, seed: int, options: dict
                    ) -> tuple[object, dict[str, np.ndarray], list[float]]:
    """A book network ``cls`` compiled with ``options`` and trained ``steps`` times on one
    synthetic batch: (the program, the batch, the losses)."""
    rng = np.random.default_rng(seed)
    prog = cls(**options).Compile(seed=seed)
    data = synthetic_batch(rng, batch_size, options.get("dict_size", cls.dict_size))
    losses = [prog.train_step(**data) for _ in range(steps)]
    print("losses:", " ".join(f"{x:.6f}" for x in losses))
    return prog, data, losses


def main(steps: int = 5, batch_size: int = 2, seed: int = 0, **options) -> list[float]:
    """Train ``steps`` steps on one synthetic batch, decode it; returns the losses."""
    prog, data, losses = train_synthetic(MachineTranslation, steps, batch_size, seed, options)
    ids, scores = start_beam(batch_size, options.get("beam_size", MachineTranslation.beam_size))
    sentences, sentence_scores, lengths = prog.decode(data["src"], data["src_len"], ids, scores)
    print("hypotheses", sentences.shape, "lengths", lengths.tolist())
    return losses


if __name__ == "__main__":
    main()
