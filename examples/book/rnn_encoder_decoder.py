"""Paddle 1.8's book network ``tests/book/test_rnn_encoder_decoder.py`` over padded batches.

A bidirectional LSTM encoder (two `dynamic_lstm`s, one reversed) reads the source words;
its last forward and first backward states start and feed a decoder whose LSTM step is
written by hand in a `DynamicRNN` (four `fc` gates), predicting each next target word with
a softmax. Sequences are padded batches ``[batch, T]`` int64 with lengths ``[batch]``
where the book used LoD tensors; the book's sizes and optimizer (Adagrad, 1e-4) are the
class's defaults.

    python examples/book/rnn_encoder_decoder.py      # a few steps on synthetic data
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [ROOT, os.path.join(ROOT, "extension"), HERE]

from machine_translation import book_optimizer, train_synthetic, words  # noqa: E402

import fluid  # noqa: E402

layers = fluid.layers


def lstm_step(x_t, hidden_t_prev, cell_t_prev, size):
    """The book's LSTM step: four gates, each an fc of [hidden, x]."""
    def linear(inputs):
        return layers.fc(input=inputs, size=size, bias_attr=True)

    forget_gate = layers.sigmoid(x=linear([hidden_t_prev, x_t]))
    input_gate = layers.sigmoid(x=linear([hidden_t_prev, x_t]))
    output_gate = layers.sigmoid(x=linear([hidden_t_prev, x_t]))
    cell_tilde = layers.tanh(x=linear([hidden_t_prev, x_t]))
    cell_t = layers.sums(input=[layers.elementwise_mul(x=forget_gate, y=cell_t_prev),
                                layers.elementwise_mul(x=input_gate, y=cell_tilde)])
    hidden_t = layers.elementwise_mul(x=output_gate, y=layers.tanh(x=cell_t))
    return hidden_t, cell_t


class RnnEncoderDecoder(fluid.Program):
    dict_size = 30000
    hidden_dim = 32
    embedding_dim = 16
    use_peepholes = False
    learning_rate = 1e-4

    def bi_lstm_encoder(self, input_seq, lengths):
        size = self.hidden_dim * 4
        forward_proj = layers.fc(input=input_seq, size=size, bias_attr=True,
                                 num_flatten_dims=2)
        forward, _ = layers.dynamic_lstm(input=forward_proj, size=size,
                                         use_peepholes=self.use_peepholes, lengths=lengths)
        backward_proj = layers.fc(input=input_seq, size=size, bias_attr=True,
                                  num_flatten_dims=2)
        backward, _ = layers.dynamic_lstm(input=backward_proj, size=size, is_reverse=True,
                                          use_peepholes=self.use_peepholes, lengths=lengths)
        return (layers.sequence_last_step(input=forward, lengths=lengths),
                layers.sequence_first_step(input=backward, lengths=lengths))

    def lstm_decoder_without_attention(self, target_embedding, trg_len, decoder_boot,
                                       context):
        rnn = layers.DynamicRNN()
        cell_init = layers.fill_constant_batch_size_like(
            input=decoder_boot, value=0.0, shape=[-1, self.hidden_dim], dtype="float32")
        cell_init.stop_gradient = False
        with rnn.block():
            current_word = rnn.step_input(target_embedding, lengths=trg_len)
            context = rnn.static_input(context)
            hidden_mem = rnn.memory(init=decoder_boot, need_reorder=True)
            cell_mem = rnn.memory(init=cell_init)
            decoder_inputs = layers.concat(input=[context, current_word], axis=1)
            h, c = lstm_step(decoder_inputs, hidden_mem, cell_mem, self.hidden_dim)
            rnn.update_memory(hidden_mem, h)
            rnn.update_memory(cell_mem, c)
            out = layers.fc(input=h, size=self.dict_size, bias_attr=True, act="softmax")
            rnn.output(out)
        return rnn()

    def seq_to_seq_net(self, src, src_len, trg, trg_len):
        src_embedding = layers.embedding(input=layers.unsqueeze(src, [2]),
                                         size=[self.dict_size, self.embedding_dim])
        src_forward_last, src_backward_first = self.bi_lstm_encoder(src_embedding, src_len)
        encoded_vector = layers.concat(input=[src_forward_last, src_backward_first], axis=1)
        decoder_boot = layers.fc(input=src_backward_first, size=self.hidden_dim,
                                 bias_attr=False, act="tanh")
        trg_embedding = layers.embedding(input=layers.unsqueeze(trg, [2]),
                                         size=[self.dict_size, self.embedding_dim])
        return self.lstm_decoder_without_attention(trg_embedding, trg_len, decoder_boot,
                                                   encoded_vector)

    @fluid.network("src", "src_len", "trg", "trg_len", "label")
    def train_step(self, src, src_len, trg, trg_len, label):
        (src, src_len), (trg, trg_len) = words("src"), words("trg")
        label = layers.data(name="label", shape=[-1, -1, 1], dtype="int64",
                            append_batch_size=False)
        prediction = self.seq_to_seq_net(src, src_len, trg, trg_len)   # [batch, T, dict]
        cost = layers.cross_entropy(input=layers.reshape(prediction, [-1, self.dict_size]),
                                    label=layers.reshape(label, [-1, 1]))
        mask = layers.reshape(layers.sequence_mask(trg_len, maxlen=layers.shape(trg)[1:2],
                                                   dtype="float32"), [-1, 1])
        avg_cost = layers.reduce_sum(cost * mask) / layers.reduce_sum(mask)
        book_optimizer(self.learning_rate).minimize(avg_cost)
        return avg_cost


def main(steps: int = 5, batch_size: int = 10, seed: int = 0, **options) -> list[float]:
    """Train ``steps`` steps on one synthetic batch; returns the losses."""
    return train_synthetic(RnnEncoderDecoder, steps, batch_size, seed, options)[2]


if __name__ == "__main__":
    main()
