"""The random ops of a compiled method draw one stream per op, whatever plan runs them
(another batch size, a watching plan), and a rewind puts their generators back, so the
calls after it draw what the rewound calls drew (runtime/plan/streams.py)."""
import numpy as np
import pytest

import fluid

L = fluid.layers


class Dropped(fluid.Program):
    @fluid.network("x")
    def train(self, x):
        x = L.data("x", shape=[8])
        h = L.dropout(L.fc(x, size=8, name="fc"), 0.5)
        loss = L.mean(h)
        fluid.optimizer.SGD(0.1).minimize(loss)
        return h


def ones(batch):
    return np.ones((batch, 8), np.float32)


def masks(out):
    return out != 0


def test_rewind_repeats_the_dropout_masks():
    net = Dropped().Compile(seed=1)
    net.keep_history()
    first = [masks(net.train(ones(4))) for _ in range(5)]
    net.rewind(3)
    again = [masks(net.train(ones(4))) for _ in range(3)]
    for a, b in zip(first[2:], again):
        np.testing.assert_array_equal(a, b)
    assert not all(np.array_equal(first[0], m) for m in first[1:])   # masks do change


def test_calls_after_a_rewind_draw_as_if_the_rewound_calls_never_ran():
    net, reference = Dropped().Compile(seed=2), Dropped().Compile(seed=2)
    net.keep_history()
    net.train(ones(4))
    net.train(ones(4))
    net.rewind(1)
    reference.train(ones(4))
    for _ in range(3):
        np.testing.assert_array_equal(net.train(ones(4)), reference.train(ones(4)))


def test_a_new_batch_size_continues_the_stream():
    """A second plan (another batch size) draws on from the same generator: its mask is
    not the first plan's first rows again."""
    net = Dropped().Compile(seed=3)
    four = masks(net.train(ones(4)))
    three = masks(net.train(ones(3)))
    assert not np.array_equal(three, four[:3])
    fresh = Dropped().Compile(seed=3)
    np.testing.assert_array_equal(masks(fresh.train(ones(4))), four)   # same seed: same


def test_watching_continues_the_stream():
    net = Dropped().Compile(seed=4)
    plain = Dropped().Compile(seed=4)
    net.train(ones(4))
    plain.train(ones(4))
    net.watch("fc*")
    np.testing.assert_array_equal(masks(net.train(ones(4))), masks(plain.train(ones(4))))


def test_rewind_before_a_plan_existed_restarts_its_generator():
    """A generator made after the rewound-to point starts again from the seed."""
    net = Dropped().Compile(seed=5)
    net.keep_history()
    net.train(ones(4))
    net.train(ones(4))
    after = masks(net.train(ones(4)))
    net.rewind(3)
    np.testing.assert_array_equal(masks(net.train(ones(4))),
                                  masks(Dropped().Compile(seed=5).train(ones(4))))
    net.train(ones(4))
    np.testing.assert_array_equal(masks(net.train(ones(4))), after)


@pytest.mark.parametrize("steps", [1, 4])
def test_history_off_draws_as_history_on(steps):
    on, off = Dropped().Compile(seed=6), Dropped().Compile(seed=6)
    on.keep_history()
    for _ in range(steps):
        np.testing.assert_array_equal(on.train(ones(2)), off.train(ones(2)))
