"""understand_sentiment: Paddle 1.8's book networks for IMDB sentiment
(`notest_understand_sentiment.py`: a text CNN, a stacked bidirectional LSTM and an LSTM
written by hand in a DynamicRNN) as a `fluid.Program`, on synthetic reviews.

    python examples/book/understand_sentiment.py [--net conv|stacked_lstm|dyn_rnn] [--steps N]

The networks are the book's: `convolution_net` (an embedding of 32, two
`sequence_conv_pool`s of 32 filters over 3 and 4 words, tanh, sqrt pooling, an fc of 2
over both with softmax), `stacked_lstm_net` (an embedding of 128, an fc of 512 and
`dynamic_lstm` of 512, two more fc + LSTM layers the second reversed, each fc over the
layer below's fc and LSTM outputs, max pooling over time of the last fc and LSTM, an fc
of 2) and `dyn_rnn_lstm` (an embedding of 32, an fc of 128 with tanh, a DynamicRNN whose
step computes the four gates with fc layers of 128, the last step's hidden state through
an fc of 2). All train with cross_entropy, accuracy and Adagrad(0.002) on batches of 128.

Paddle's LoD word sequences become padded id batches ``words [B, T, 1]`` with their
``lengths [B]``; the layers over sequences take the lengths (`lengths=`), and the fc
layers over ``[B, T, D]`` keep the two leading dims (``num_flatten_dims=2``), which an fc
over Paddle's flat LoD rows did not need. The dictionary is about the size of the book's
IMDB one (5147 words); a review is positive when it has more words from a "good" set than
from a "bad" one, so the loss has a pattern to learn.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from book_common import command_line, id_sequences, train

import fluid

layers = fluid.layers
DICT_DIM, CLASS_DIM = 5147, 2
GOOD, BAD = range(2, 42), range(42, 82)


def convolution_net(data, lengths, label, input_dim, class_dim=2, emb_dim=32, hid_dim=32):
    emb = layers.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)
    conv_3 = fluid.nets.sequence_conv_pool(input=emb, num_filters=hid_dim, filter_size=3,
                                           act="tanh", pool_type="sqrt", lengths=lengths)
    conv_4 = fluid.nets.sequence_conv_pool(input=emb, num_filters=hid_dim, filter_size=4,
                                           act="tanh", pool_type="sqrt", lengths=lengths)
    prediction = layers.fc(input=[conv_3, conv_4], size=class_dim, act="softmax")
    return prediction


def dyn_rnn_lstm(data, lengths, label, input_dim, class_dim=2, emb_dim=32, lstm_size=128):
    emb = layers.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)
    sentence = layers.fc(input=emb, size=lstm_size, act="tanh", num_flatten_dims=2)

    rnn = layers.DynamicRNN()
    with rnn.block():
        word = rnn.step_input(sentence, lengths=lengths)
        prev_hidden = rnn.memory(value=0.0, shape=[lstm_size])
        prev_cell = rnn.memory(value=0.0, shape=[lstm_size])

        def gate_common(ipt, hidden, size):
            gate0 = layers.fc(input=ipt, size=size, bias_attr=True)
            gate1 = layers.fc(input=hidden, size=size, bias_attr=False)
            return gate0 + gate1

        forget_gate = layers.sigmoid(x=gate_common(word, prev_hidden, lstm_size))
        input_gate = layers.sigmoid(x=gate_common(word, prev_hidden, lstm_size))
        output_gate = layers.sigmoid(x=gate_common(word, prev_hidden, lstm_size))
        cell_gate = layers.sigmoid(x=gate_common(word, prev_hidden, lstm_size))

        cell = forget_gate * prev_cell + input_gate * cell_gate
        hidden = output_gate * layers.tanh(x=cell)
        rnn.update_memory(prev_cell, cell)
        rnn.update_memory(prev_hidden, hidden)
        rnn.output(hidden)

    last = layers.sequence_last_step(rnn(), lengths=lengths)
    return layers.fc(input=last, size=class_dim, act="softmax")


def stacked_lstm_net(data, lengths, label, input_dim, class_dim=2, emb_dim=128,
                     hid_dim=512, stacked_num=3):
    if stacked_num % 2 != 1:
        raise ValueError(f"stacked_lstm_net: stacked_num must be odd, got {stacked_num}")
    emb = layers.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)
    fc1 = layers.fc(input=emb, size=hid_dim, num_flatten_dims=2)
    lstm1, cell1 = layers.dynamic_lstm(input=fc1, size=hid_dim, lengths=lengths)
    inputs = [fc1, lstm1]
    for i in range(2, stacked_num + 1):
        fc = layers.fc(input=inputs, size=hid_dim, num_flatten_dims=2)
        lstm, cell = layers.dynamic_lstm(input=fc, size=hid_dim, is_reverse=(i % 2) == 0,
                                         lengths=lengths)
        inputs = [fc, lstm]
    fc_last = layers.sequence_pool(input=inputs[0], pool_type="max", lengths=lengths)
    lstm_last = layers.sequence_pool(input=inputs[1], pool_type="max", lengths=lengths)
    return layers.fc(input=[fc_last, lstm_last], size=class_dim, act="softmax")


NETS = {"conv": convolution_net, "stacked_lstm": stacked_lstm_net, "dyn_rnn": dyn_rnn_lstm}


class UnderstandSentiment(fluid.Program):
    net = "conv"              # or "stacked_lstm", "dyn_rnn"
    learning_rate = 0.002
    sizes: dict = {}          # keyword arguments for the net function (the tests' thinner nets)

    def classify(self, words, lengths, label):
        with fluid.var_scope("sentiment"):
            prediction = NETS[self.net](words, lengths, label, input_dim=DICT_DIM,
                                        class_dim=CLASS_DIM, **self.sizes)
        cost = layers.cross_entropy(input=prediction, label=label)
        avg_cost = layers.mean(cost)
        accuracy = layers.accuracy(input=prediction, label=label)
        return avg_cost, accuracy, prediction

    def inputs(self):
        words = layers.data(name="words", shape=[-1, -1, 1], dtype="int64",
                            append_batch_size=False)
        lengths = layers.data(name="lengths", shape=[-1], dtype="int64",
                              append_batch_size=False)
        label = layers.data(name="label", shape=[1], dtype="int64")
        return words, lengths, label

    @fluid.network("words", "lengths", "label")
    def train_step(self, words, lengths, label):
        cost, acc, _ = self.classify(*self.inputs())
        fluid.optimizer.Adagrad(learning_rate=self.learning_rate).minimize(cost)
        return cost, acc

    @fluid.network("words", "lengths", "label")
    def test(self, words, lengths, label):
        cost, acc, _ = self.classify(*self.inputs())
        return cost, acc


def batches(seed: int, batch_size: int, max_len: int = 40) -> Iterator[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    while True:
        words, lengths = id_sequences(rng, batch_size, DICT_DIM, 5, max_len)
        valid = np.arange(max_len)[None, :] < lengths[:, None]
        w = words[:, :, 0]
        # a few sentiment words in every review, so that the label is rarely a tie
        k = rng.integers(0, max_len, (batch_size, 3)) % lengths[:, None]
        pick = rng.integers(GOOD.start, BAD.stop, (batch_size, 3))
        w[np.arange(batch_size)[:, None], k] = pick
        good = ((w >= GOOD.start) & (w < GOOD.stop) & valid).sum(1)
        bad = ((w >= BAD.start) & (w < BAD.stop) & valid).sum(1)
        label = (good > bad).astype(np.int64).reshape(-1, 1)
        yield {"words": words, "lengths": lengths, "label": label}


def main(net: str = "conv", steps: int = 20, batch_size: int = 128, seed: int = 0,
         **options) -> list[float]:
    """Train ``steps`` steps; return the losses."""
    prog = UnderstandSentiment(net=net, **options).Compile(seed=seed)
    losses = train(prog.train_step, batches(seed, batch_size), steps, every=5,
                   name=f"{net}: ")
    cost, acc = prog.test(**next(batches(seed + 1, batch_size)))
    print(f"{net}: test loss {cost:.4f}  accuracy {acc:.3f}")
    return losses


if __name__ == "__main__":
    args = command_line(__doc__, steps=20, net=tuple(NETS))
    main(args.net, args.steps, seed=args.seed)
