"""Paddle 1.8's test_dynrnn_static_input.py, ported: a `DynamicRNN` reading a static input
(a LoD sequence per row: here a padded batch with its own lengths) at every step, and its
gradient. Paddle's batch shrinks as its sequences end (sorted by length); here every row
runs every step, so the value a step sees is compared on the rows still running, in
Paddle's order. A DynamicRNN block writes no var of the method around it (Paddle's
test_step_out writes each step's value into an array at ``step_idx``): here each step's
value leaves as an output, and ``step_idx`` is checked as one."""
import bisect

import numpy as np
from paddle.common import compile_fetches, padded

import fluid

MAX_SEQUENCE_LEN, OUTPUT_DIM, DELTA = 3, 10, 0.005


def prepare():
    """x: sequences of 2, 1 and 3 steps of 10 values; the static input: sequences of 1, 2
    and 3 rows of 4 values; both padded (with a non-zero value) and their lengths."""
    rng = np.random.RandomState(0)
    x_lod, static_lod = [2, 1, 3], [1, 2, 3]
    x_data = rng.random_sample([sum(x_lod), 10]).astype('float32')
    static_data = rng.random_sample([sum(static_lod), 4]).astype('float32')
    x, x_len = padded(np.split(x_data, np.cumsum(x_lod)[:-1]), 'float32')
    static, static_len = padded(np.split(static_data, np.cumsum(static_lod)[:-1]),
                                'float32')
    return {"x_tensor": x, "x_lengths": x_len, "static_input_tensor": static,
            "static_lengths": static_len}, static_data


def build_graph(only_forward):
    x_tensor = fluid.layers.data(name='x_tensor', shape=[-1, -1, 10], dtype='float32',
                                 append_batch_size=False)
    x_tensor.stop_gradient = False
    x_lengths = fluid.layers.data(name='x_lengths', shape=[-1], dtype='int64',
                                  append_batch_size=False)
    static_input_tensor = fluid.layers.data(name='static_input_tensor', shape=[-1, -1, 4],
                                            dtype='float32', append_batch_size=False)
    static_input_tensor.stop_gradient = False
    static_lengths = fluid.layers.data(name='static_lengths', shape=[-1], dtype='int64',
                                       append_batch_size=False)
    rnn = fluid.layers.DynamicRNN()
    with rnn.block():
        step_x = rnn.step_input(x_tensor, lengths=x_lengths)
        step_static_input = rnn.static_input(static_input_tensor)
        if only_forward:
            # step_idx [1], as a row per sequence: [B, 10]
            index = fluid.layers.scale(step_x, 0.0) + fluid.layers.cast(rnn.step_idx,
                                                                        'float32')
            rnn.output(step_static_input, index)
        last = fluid.layers.sequence_pool(input=step_static_input, pool_type='last',
                                          lengths=static_lengths)
        projected = fluid.layers.fc(input=[step_x, last], size=OUTPUT_DIM)
        rnn.output(projected)
    if only_forward:
        return rnn()[:2]
    last = fluid.layers.sequence_pool(input=rnn(), pool_type='last', lengths=x_lengths)
    loss = fluid.layers.mean(last)
    fluid.backward.append_backward(loss)
    return [fluid.gradients(loss, [static_input_tensor])[0], loss]


def expected_static_step_outs(feed, static_data):
    """Paddle's: at step i, the static sequences of the rows whose x is longer than i,
    longest x first, one after another."""
    x_seq_len = list(feed["x_lengths"])
    x_seq_len_sorted = sorted(x_seq_len)
    x_sorted_indices = np.argsort(x_seq_len)[::-1]
    static_seq_len = list(feed["static_lengths"])
    static_sliced = np.split(static_data, np.cumsum(static_seq_len)[:-1])
    outs = []
    for i in range(MAX_SEQUENCE_LEN):
        end = len(x_seq_len) - bisect.bisect_left(x_seq_len_sorted, i + 1)
        outs.append(np.concatenate([static_sliced[k] for k in x_sorted_indices[:end]]))
    return outs, x_sorted_indices


def test_step_out():
    feed, static_data = prepare()
    static_steps, step_idx = compile_fetches(lambda: build_graph(True), list(feed))(**feed)
    expected_outs, order = expected_static_step_outs(feed, static_data)
    for i in range(MAX_SEQUENCE_LEN):
        running = [b for b in order if feed["x_lengths"][b] > i]
        step_out = np.concatenate([static_steps[b, i, :feed["static_lengths"][b]]
                                   for b in running])
        assert np.allclose(step_out, expected_outs[i])
        assert np.all(step_idx[running, i] == i)


def test_network_gradient():
    feed, _ = prepare()
    run = compile_fetches(lambda: build_graph(False), list(feed), seed=1)
    actual_gradients = run(**feed)[0]
    static = feed["static_input_tensor"]
    numeric_gradients = np.zeros(shape=static.shape).astype('float32')
    for i in range(static.size):
        origin = static.ravel()[i]
        static.ravel()[i] = origin + DELTA
        y_pos = run(**feed)[1][0]
        static.ravel()[i] = origin - DELTA
        y_neg = run(**feed)[1][0]
        static.ravel()[i] = origin
        numeric_gradients.ravel()[i] = (y_pos - y_neg) / DELTA / 2
    assert np.allclose(actual_gradients, numeric_gradients, 0.001)
    # the padded rows get no gradient (Paddle's gradient has the input's LoD)
    for b, n in enumerate(feed["static_lengths"]):
        assert not np.any(actual_gradients[b, n:])
