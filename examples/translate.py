"""Numbers into English words: an encoder-decoder with attention learns the rule that
writes 40512 as "forty thousand five hundred twelve", and decodes with greedy search and
with a beam search of 4.

The source is the number's digits (1 to 5 of them: a padded batch with lengths); the
target its words (1 to 7, from a vocabulary of 30 and the start and end tokens). A
bidirectional GRU (`birnn` of two `GRUCell`s) reads the digits; a GRU cell with
attention over them writes the words. Training is teacher forcing through `rnn` with a
masked cross-entropy; decoding runs the same cell in `dynamic_decode`, greedy
(`GreedyEmbeddingHelper`) and beam search (`BeamSearchDecoder`). The numbers to test on
are never seen in training.

    python examples/translate.py [--steps 1000] [--batch-size 64]

Prints the loss and the held-out exact-match accuracy as it trains, then a few
translations with the beam's hypotheses and their log-probabilities.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "extension")]

import fluid  # noqa: E402

L = fluid.layers
ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
        "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
        "seventeen", "eighteen", "nineteen"]
TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
WORDS = ["<s>", "</s>"] + ONES + TENS + ["hundred", "thousand"]
START, END = 0, 1
WORD_ID = {w: i for i, w in enumerate(WORDS)}
MAX_DIGITS, MAX_WORDS = 5, 7


def below_thousand(n: int) -> list[str]:
    """The words of 1 <= n < 1000."""
    words = [ONES[n // 100], "hundred"] if n >= 100 else []
    n %= 100
    if n >= 20:
        words.append(TENS[n // 10 - 2])
        n %= 10
        if n:
            words.append(ONES[n])
    elif n or not words:
        words.append(ONES[n])
    return words


def number_words(n: int) -> list[str]:
    """English words of 0 <= n < 100000: 40512 -> forty thousand five hundred twelve."""
    if n == 0:
        return ["zero"]
    words = below_thousand(n // 1000) + ["thousand"] if n >= 1000 else []
    return words + (below_thousand(n % 1000) if n % 1000 else [])


def batch(numbers: np.ndarray) -> dict[str, np.ndarray]:
    """The padded arrays of ``numbers``: digit ids and their count, the target words
    with the start token before them (``tgt_in``) and the end token after (``tgt_out``),
    and the target's length (the words and the end)."""
    n = len(numbers)
    src = np.zeros((n, MAX_DIGITS), np.int64)
    src_len = np.zeros(n, np.int64)
    words = [[WORD_ID[w] for w in number_words(int(x))] for x in numbers]
    tgt_len = np.array([len(w) + 1 for w in words], np.int64)
    tgt_in = np.zeros((n, tgt_len.max()), np.int64)
    tgt_out = np.zeros((n, tgt_len.max(), 1), np.int64)
    for i, (x, w) in enumerate(zip(numbers, words)):
        digits = [int(d) for d in str(int(x))]
        src[i, :len(digits)], src_len[i] = digits, len(digits)
        tgt_in[i, :len(w) + 1] = [START] + w
        tgt_out[i, :len(w) + 1, 0] = w + [END]
    return {"src": src[:, :src_len.max()], "src_len": src_len, "tgt_in": tgt_in,
            "tgt_out": tgt_out, "tgt_len": tgt_len}


def split(seed: int = 0, train: int = 20000, test: int = 1000
          ) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sets of numbers below 100000 to train and to test on."""
    order = np.random.default_rng(seed).permutation(100000)
    return order[:train], order[train:train + test]


class AttentionCell(L.RNNCell):
    """One decoder step: attention of the state over the encoder's outputs (``memory``
    [batch, S, 2H], masked past each source's length by ``bias``), then a GRU step on the
    word embedding joined with what the attention read. Outputs (the state joined with
    the read, for the projection to the vocabulary; the attention weights [batch, S])."""

    def __init__(self, hidden: int):
        self.hidden = hidden
        self.gru = L.GRUCell(hidden, name="decoder")

    def call(self, inputs, states, memory, bias):
        query = L.fc(states, memory.shape[-1], bias_attr=False,
                     param_attr=fluid.ParamAttr(name="attention.query"))
        scores = L.matmul(L.unsqueeze(query, [1]), memory, transpose_y=True) + bias
        weights = L.softmax(scores)                                    # [batch, 1, S]
        read = L.squeeze(L.matmul(weights, memory), [1])
        out, new_state = self.gru(L.concat([inputs, read], axis=1), states)
        return (L.concat([out, read], axis=1), L.squeeze(weights, [1])), new_state

    @property
    def state_shape(self):
        return [self.hidden]


class Translator(fluid.Program):
    hidden = 64
    embedding = 32
    learning_rate = 0.005
    beam_size = 4

    # --- the model, shared by every method through its parameters' names --------------

    def encode(self, src, src_len):
        """memory [batch, S, 2H], the decoder's first state [batch, H], and the attention
        bias [batch, 1, S] (0 on a digit, -1e9 on padding)."""
        with fluid.var_scope("encoder"):
            digits = fluid.embedding(src, size=[10, self.embedding],
                                     param_attr=fluid.ParamAttr(name="source.embedding"))
            fw = L.GRUCell(self.hidden, name="forward")
            bw = L.GRUCell(self.hidden, name="backward")
            memory, (last_fw, last_bw) = L.birnn(fw, bw, digits, sequence_length=src_len)
            state = L.fc(L.concat([last_fw, last_bw], axis=1), self.hidden, act="tanh",
                         param_attr=fluid.ParamAttr(name="bridge.w"),
                         bias_attr=fluid.ParamAttr(name="bridge.b"))
            mask = L.sequence_mask(src_len, maxlen=L.shape(src)[1:2], dtype="float32")
            return memory, state, L.unsqueeze(L.scale(mask, 1e9, bias=-1e9), [1])

    def embed(self, ids):
        return fluid.embedding(ids, size=[len(WORDS), self.embedding],
                               param_attr=fluid.ParamAttr(name="target.embedding"))

    def project(self, outputs):
        """The cell's outputs -> logits over the words (the weights are not used)."""
        joined = outputs[0]
        return L.fc(joined, len(WORDS), num_flatten_dims=len(joined.shape) - 1,
                    param_attr=fluid.ParamAttr(name="output.w"),
                    bias_attr=fluid.ParamAttr(name="output.b"))

    def cell(self):
        """A new cell object in each method: traced under ``var_scope("decoder")``, its
        parameters take the same names in every method, so the methods share them."""
        return AttentionCell(self.hidden)

    def data(self, *names):
        shapes = {"src": ([-1, -1], "int64"), "src_len": ([-1], "int64"),
                  "tgt_in": ([-1, -1], "int64"), "tgt_out": ([-1, -1, 1], "int64"),
                  "tgt_len": ([-1], "int64")}
        return [L.data(n, shape=shapes[n][0], dtype=shapes[n][1], append_batch_size=False)
                for n in names]

    def teacher_forced(self, src, src_len, tgt_in, tgt_len):
        memory, state, bias = self.encode(src, src_len)
        with fluid.var_scope("decoder"):
            outputs, _ = L.rnn(self.cell(), self.embed(tgt_in), state,
                               sequence_length=tgt_len, memory=memory, bias=bias)
            return outputs

    # --- methods ------------------------------------------------------------------------

    @fluid.network("src", "src_len", "tgt_in", "tgt_out", "tgt_len")
    def train_step(self, src, src_len, tgt_in, tgt_out, tgt_len):
        src, src_len, tgt_in, tgt_out, tgt_len = self.data("src", "src_len", "tgt_in",
                                                           "tgt_out", "tgt_len")
        outputs = self.teacher_forced(src, src_len, tgt_in, tgt_len)
        with fluid.var_scope("loss"):
            loss = L.softmax_with_cross_entropy(self.project(outputs), tgt_out)   # [batch, T, 1]
            mask = L.sequence_mask(tgt_len, maxlen=L.shape(tgt_in)[1:2], dtype="float32")
            loss = L.reduce_sum(L.squeeze(loss, [2]) * mask) / L.reduce_sum(mask)
        fluid.optimizer.Adam(learning_rate=self.learning_rate).minimize(loss)
        return loss

    @fluid.network("src", "src_len")
    def greedy(self, src, src_len):
        """The words (ids [batch, T]) and their count with the end token."""
        src, src_len = self.data("src", "src_len")
        memory, state, bias = self.encode(src, src_len)
        start = L.fill_constant_batch_size_like(src, [-1], "int64", START)
        helper = L.GreedyEmbeddingHelper(self.embed, start, END)
        with fluid.var_scope("decoder"):
            decoder = L.BasicDecoder(self.cell(), helper, output_fn=self.project)
            out, _, lengths = L.dynamic_decode(decoder, inits=state, max_step_num=MAX_WORDS,
                                               return_length=True, is_test=True,
                                               memory=memory, bias=bias)
        return out.sample_ids, lengths

    @fluid.network("src", "src_len")
    def beam_search(self, src, src_len):
        """The beam's hypotheses: ids [batch, T, beam], log-probabilities [batch, beam]
        and lengths [batch, beam], best first."""
        src, src_len = self.data("src", "src_len")
        memory, state, bias = self.encode(src, src_len)
        tile = L.BeamSearchDecoder.tile_beam_merge_with_batch
        with fluid.var_scope("decoder"):
            decoder = L.BeamSearchDecoder(self.cell(), START, END, self.beam_size,
                                          embedding_fn=self.embed, output_fn=self.project)
            ids, states = L.dynamic_decode(decoder, inits=state, max_step_num=MAX_WORDS,
                                           is_test=True, memory=tile(memory, self.beam_size),
                                           bias=tile(bias, self.beam_size))
        return ids, states.log_probs, states.lengths

    @fluid.network("src", "src_len", "tgt_in", "tgt_len")
    def attention(self, src, src_len, tgt_in, tgt_len):
        """The attention weights [batch, T, S] while writing ``tgt_in``'s words."""
        src, src_len, tgt_in, tgt_len = self.data("src", "src_len", "tgt_in", "tgt_len")
        return self.teacher_forced(src, src_len, tgt_in, tgt_len)[1]


# --- evaluation -----------------------------------------------------------------------------

def words_of(ids, length: int | None = None) -> list[str]:
    """The words of decoded ids, up to (without) the end token."""
    out = []
    for i in list(ids)[:length]:
        if i == END:
            break
        out.append(WORDS[i])
    return out


def accuracy(prog, numbers: np.ndarray) -> tuple[float, float]:
    """Exact-match accuracy of greedy decoding and of the beam's best hypothesis."""
    data = batch(numbers)
    greedy_ids, _ = prog.greedy(data["src"], data["src_len"])
    beam_ids, _, beam_lengths = prog.beam_search(data["src"], data["src_len"])
    truth = [number_words(int(x)) for x in numbers]
    greedy = np.mean([words_of(g) == t for g, t in zip(greedy_ids, truth)])
    beam = np.mean([words_of(b[:, 0], n) == t
                    for b, n, t in zip(beam_ids, beam_lengths[:, 0], truth)])
    return float(greedy), float(beam)


def train(prog, numbers: np.ndarray, steps: int, batch_size: int, seed: int,
          report=None) -> None:
    rng = np.random.default_rng(seed)
    for step in range(1, steps + 1):
        loss = prog.train_step(**batch(rng.choice(numbers, batch_size)))
        if report is not None:
            report(step, loss)


def main(steps: int = 1000, batch_size: int = 64, seed: int = 0, report_every: int = 250
         ) -> tuple[float, float]:
    """Train for ``steps`` batches; print and return the held-out exact-match accuracy
    of greedy decoding and of the beam search."""
    train_numbers, test_numbers = split(seed)
    prog = Translator().Compile(seed=seed)
    start = time.perf_counter()

    def report(step, loss):
        if step % report_every == 0 or step == steps:
            greedy, beam = accuracy(prog, test_numbers[:200])
            print(f"step {step:5d}  loss {loss:.4f}  held-out exact match: greedy "
                  f"{greedy:.3f}, beam {beam:.3f}  ({time.perf_counter() - start:.0f} s)")
    train(prog, train_numbers, steps, batch_size, seed, report)
    greedy, beam = accuracy(prog, test_numbers)
    print(f"held-out exact match on {len(test_numbers)} numbers: greedy {greedy:.3f}, "
          f"beam {Translator.beam_size} {beam:.3f}")
    show(prog, test_numbers[:4])
    return greedy, beam


def show(prog, numbers: np.ndarray) -> None:
    """A few numbers, each with its beam's hypotheses and their log-probabilities."""
    data = batch(numbers)
    ids, log_probs, lengths = prog.beam_search(data["src"], data["src_len"])
    for b, x in enumerate(numbers):
        print(f"{int(x)}:")
        for j in range(ids.shape[2]):
            print(f"   {log_probs[b, j]:8.3f}  {' '.join(words_of(ids[b, :, j], lengths[b, j]))}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(args.steps, args.batch_size, args.seed)
