"""word2vec: Paddle 1.8's book test of the same name (an N-gram language model: four words
predict the fifth) as a `fluid.Program`, on a synthetic corpus.

    python examples/book/word2vec.py [--steps N]

The network is the book's: four embeddings of 32 that share one table (`shared_w`, the
book's `is_sparse` choice kept), concatenated, an fc of 256 (sigmoid) and an fc over the
dictionary (softmax), cross_entropy against the next word, SGD(0.001) on batches of 32.
Words are int64 [1] each. The book's dictionary is built from the PTB corpus (imikolov,
words seen more than 50 times); `dict_size` here is about its size. The synthetic corpus
makes the next word follow from the one before it, so the loss has a pattern to learn.
SGD at the book's rate learns slowly (the book's test runs up to 100 passes over PTB);
`--learning-rate 1.0` shows the pattern learned in a few hundred steps.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from book_common import command_line, train

import fluid

WORDS = ("firstw", "secondw", "thirdw", "forthw")


class Word2Vec(fluid.Program):
    dict_size = 2073
    embed_size = 32
    hidden_size = 256
    is_sparse = True
    learning_rate = 0.001

    def network(self, words):
        """The book's __network__: (avg_cost, predict_word); ``words`` are the four
        context words and the next one."""
        embeds = [fluid.layers.embedding(input=w, size=[self.dict_size, self.embed_size],
                                         dtype="float32", is_sparse=self.is_sparse,
                                         param_attr="shared_w") for w in words[:4]]
        concat_embed = fluid.layers.concat(input=embeds, axis=1)
        hidden1 = fluid.layers.fc(input=concat_embed, size=self.hidden_size, act="sigmoid")
        predict_word = fluid.layers.fc(input=hidden1, size=self.dict_size, act="softmax")
        cost = fluid.layers.cross_entropy(input=predict_word, label=words[4])
        avg_cost = fluid.layers.mean(cost)
        return avg_cost, predict_word

    def context(self):
        return [fluid.layers.data(name=n, shape=[1], dtype="int64") for n in WORDS]

    @fluid.network(*WORDS, "nextw")
    def train_step(self, firstw, secondw, thirdw, forthw, nextw):
        next_word = fluid.layers.data(name="nextw", shape=[1], dtype="int64")
        with fluid.var_scope("ngram"):
            avg_cost, _ = self.network(self.context() + [next_word])
        fluid.optimizer.SGD(learning_rate=self.learning_rate).minimize(avg_cost)
        return avg_cost

    @fluid.network(*WORDS)
    def infer(self, firstw, secondw, thirdw, forthw):
        """The probabilities of the next word, [B, dict_size]."""
        words = self.context()
        label = fluid.layers.fill_constant_batch_size_like(words[0], [-1, 1], "int64", 0)
        with fluid.var_scope("ngram"):
            return self.network(words + [label])[1]


def batches(seed: int, batch_size: int, dict_size: int) -> Iterator[dict[str, np.ndarray]]:
    """Five-word windows over the 100 most frequent words whose fifth word follows from
    the fourth by a fixed rule (a bigram table, the same for every seed)."""
    follows = np.random.default_rng(7).permutation(min(100, dict_size))
    rng = np.random.default_rng(seed)
    while True:
        ctx = rng.integers(0, len(follows), (4, batch_size, 1))
        nxt = follows[ctx[3]]
        yield dict(zip(WORDS + ("nextw",), [c.astype(np.int64) for c in (*ctx, nxt)]))


def main(steps: int = 50, batch_size: int = 32, seed: int = 0, **options) -> list[float]:
    """Train ``steps`` steps; return the losses."""
    net = Word2Vec(**options)
    prog = net.Compile(seed=seed)
    return train(prog.train_step, batches(seed, batch_size, net.dict_size), steps, every=10)


if __name__ == "__main__":
    args = command_line(__doc__, steps=50, learning_rate=0.001)
    main(args.steps, seed=args.seed, learning_rate=args.learning_rate)
