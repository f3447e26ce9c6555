"""Paddle 1.8's test_dyn_rnn.py, ported: `DynamicRNN` trained over padded batches with
lengths (Paddle's LoD sequences; the padding holds a non-zero id), nested over sentences
of words. test_plain_while_op (lod_rank_table, lod_tensor_to_array, shrink_memory) is
out of scope (docs/paddle_tests.md)."""
import numpy
from paddle.common import compile_fetches, padded

import fluid

WORD_DICT_LEN, BATCH_SIZE = 5147, 2


def fake_imdb_batch(rng, lower_seq_len=100, upper_seq_len=200, class_dim=2):
    """The first batch of Paddle's fake_imdb_reader: BATCH_SIZE random id sequences of
    100 to 200 words, and their labels."""
    ids, labels = [], []
    for _ in range(BATCH_SIZE):
        length = rng.randint(lower_seq_len, upper_seq_len + 1)
        ids.append(rng.randint(0, WORD_DICT_LEN, size=[length, 1]).astype('int64'))
        labels.append([rng.randint(0, class_dim)])
    return ids, numpy.array(labels, 'float32')


def train(run, feed, max_iters):
    """Paddle's _train: the same batch ``max_iters`` times; the loss is one finite value,
    and after more than 10 steps it is below the first."""
    for iter_id in range(max_iters):
        loss_i = run(**feed)[-1]
        assert loss_i.shape == (1, )
        assert not numpy.isnan(loss_i)
        if iter_id == 0:
            loss_0 = loss_i
    if max_iters > 10:
        assert loss_i[0] < loss_0[0]


def test_train_dynamic_rnn():
    def build():
        sentence = fluid.layers.data(name='word', shape=[-1, -1, 1], dtype='int64',
                                     append_batch_size=False)
        lengths = fluid.layers.data(name='lengths', shape=[-1], dtype='int64',
                                    append_batch_size=False)
        sent_emb = fluid.layers.embedding(input=sentence, size=[WORD_DICT_LEN, 32],
                                          dtype='float32')
        drnn = fluid.layers.DynamicRNN()
        with drnn.block():
            in_ = drnn.step_input(sent_emb, lengths=lengths)
            mem = drnn.memory(shape=[100], dtype='float32')
            out_ = fluid.layers.fc(input=[in_, mem], size=100, act='tanh')
            drnn.update_memory(mem, out_)
            drnn.output(out_)
        drnn_result = drnn()
        last = fluid.layers.sequence_last_step(input=drnn_result, lengths=lengths)
        logits = fluid.layers.fc(input=last, size=1, act=None)
        label = fluid.layers.data(name='label', shape=[1], dtype='float32')
        loss = fluid.layers.sigmoid_cross_entropy_with_logits(x=logits, label=label)
        loss = fluid.layers.mean(loss)
        fluid.optimizer.Adam(1e-3).minimize(loss=loss)
        return [sent_emb, drnn_result, loss]
    ids, label = fake_imdb_batch(numpy.random.RandomState(0))
    word, lengths = padded(ids, 'int64')
    run = compile_fetches(build, ["word", "lengths", "label"])
    rnn_in_seq, rnn_out_seq, _ = run(word=word, lengths=lengths, label=label)
    # the output has the input's lengths (Paddle: the same LoD): zero past each row's end
    assert rnn_out_seq.shape[:2] == rnn_in_seq.shape[:2]
    for b, n in enumerate(lengths):
        assert not numpy.any(rnn_out_seq[b, n:]) and numpy.all(
            numpy.any(rnn_out_seq[b, :n], axis=-1))
    train(run, {'word': word, 'lengths': lengths, 'label': label}, max_iters=100)


def fake_nested_batch(rng):
    """Paddle's _fake_reader, batched by 2: two paragraphs of two sentences of two word
    ids (below 30) each, labels [0, 1] per paragraph."""
    data = [[[rng.randint(30)] for _ in range(2)] for _ in range(2)]
    return [data, data], [[0, 1], [0, 1]]


def nested_feed(rng):
    """The nested batch as padded arrays: words [B, S, W, 1] with the sentence lengths [B]
    and the word lengths [B, S]; labels [B, S, 1]."""
    paragraphs, labels = fake_nested_batch(rng)
    sentences = [padded(p, 'int64') for p in paragraphs]
    width = max(s.shape[1] for s, _ in sentences)
    words, sent_lengths = padded([numpy.pad(s, ((0, 0), (0, width - s.shape[1]), (0, 0)),
                                            constant_values=7) for s, _ in sentences],
                                 'int64')
    word_lengths, _ = padded([n for _, n in sentences], 'int64')
    label = numpy.array(labels, 'float32')[..., None]
    return {'word': words, 'sentence_lengths': sent_lengths, 'word_lengths': word_lengths,
                'label': label}


def nested_net(inner):
    """The outer DynamicRNN over the sentences of each paragraph; ``inner(in_0, words)``
    gives each sentence's vector [B, 100] from its word ids [B, W, 1] and their lengths
    [B]; the loss of the logits [B, S, 1] against the labels [B, S, 1]."""
    def build():
        sentence = fluid.layers.data(name='word', shape=[-1, -1, -1, 1], dtype='int64',
                                     append_batch_size=False)
        sentence_lengths = fluid.layers.data(name='sentence_lengths', shape=[-1],
                                             dtype='int64', append_batch_size=False)
        word_lengths = fluid.layers.data(name='word_lengths', shape=[-1, -1], dtype='int64',
                                         append_batch_size=False)
        label = fluid.layers.data(name='label', shape=[-1, -1, 1], dtype='float32',
                                  append_batch_size=False)
        drnn0 = fluid.layers.DynamicRNN()
        with drnn0.block():
            in_0 = drnn0.step_input(sentence, lengths=sentence_lengths)
            words = drnn0.step_input(word_lengths)   # int lengths: no gradient
            drnn0.output(inner(in_0, words))
        last = drnn0()
        logits = fluid.layers.fc(input=last, size=1, act=None, num_flatten_dims=2)
        loss = fluid.layers.sigmoid_cross_entropy_with_logits(x=logits, label=label)
        loss = fluid.layers.mean(loss)
        fluid.optimizer.SGD(1e-3).minimize(loss=loss)
        return [loss]
    return compile_fetches(build, ["word", "sentence_lengths", "word_lengths", "label"])


def words_rnn(words_in, words):
    """The inner DynamicRNN of both nested tests: fc(100, tanh) at each word of
    ``words_in`` [B, W, ...] (``words`` long), the last word's output [B, 100]."""
    drnn1 = fluid.layers.DynamicRNN()
    with drnn1.block():
        in_1 = drnn1.step_input(words_in, lengths=words)
        out_1 = fluid.layers.fc(input=[in_1], size=100, act='tanh')
        drnn1.output(out_1)
    return fluid.layers.sequence_last_step(input=drnn1(), lengths=words)


def test_train_nested_dynamic_rnn():
    word_dict = list(range(30))

    def inner(in_0, words):
        sentence_emb = fluid.layers.embedding(input=in_0, size=[len(word_dict), 32],
                                              dtype='float32')
        out_0 = fluid.layers.fc(input=sentence_emb, size=100, act='tanh', num_flatten_dims=2)
        return words_rnn(out_0, words)
    train(nested_net(inner), nested_feed(numpy.random.RandomState(0)), max_iters=100)


def test_train_nested_dynamic_rnn2():
    word_dict = list(range(30))
    hidden_size = 32

    def inner(in_0, words):
        sentence_emb = fluid.layers.embedding(input=in_0, size=[len(word_dict), hidden_size],
                                              dtype='float32')
        input_forward_proj = fluid.layers.fc(input=sentence_emb, size=hidden_size * 4,
                                             act=None, bias_attr=False, num_flatten_dims=2)
        forward, _ = fluid.layers.dynamic_lstm(input=input_forward_proj,
                                               size=hidden_size * 4, use_peepholes=False,
                                               lengths=words)
        return words_rnn(forward, words)
    train(nested_net(inner), nested_feed(numpy.random.RandomState(0)), max_iters=100)
