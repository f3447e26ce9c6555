"""Per-call working arrays shared by the plans of every size (ops/scratch.py): one block per
(op, array) grown to the largest size, and the same results as kernels with arrays of their
own."""
import numpy as np

import fluid_interactive as fluid
from fluid_interactive.ops.scratch import Scratch


def test_a_block_is_reused_and_grows_to_the_largest_request():
    s = Scratch()
    a = s.take(np, ("op", "k"), (3, 4), "float32")
    b = s.take(np, ("op", "k"), (2, 2), "float32")
    assert a.shape == (3, 4) and b.shape == (2, 2) and b.dtype == np.float32
    assert np.shares_memory(a, b) and s.nbytes == 48
    c = s.take(np, ("op", "k"), (5, 4), "float64")          # larger: a new block
    assert not np.shares_memory(a, c) and s.nbytes == 160
    d = s.take(np, ("other", "k"), (3, 4), "float32")       # another op: its own block
    assert not np.shares_memory(c, d) and s.nbytes == 160 + 48


class Seq(fluid.Program):
    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name="x", shape=[-1, -1, 3], dtype="float32",
                              append_batch_size=False)
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        proj = fluid.layers.fc(input=x, size=4 * 8, num_flatten_dims=2)
        h, _ = fluid.layers.dynamic_lstm(input=proj, size=4 * 8)
        g = fluid.layers.dynamic_gru(input=fluid.layers.fc(input=h, size=3 * 8,
                                                           num_flatten_dims=2), size=8)
        out = fluid.layers.fc(input=fluid.layers.sequence_last_step(g), size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(out, y))
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
        return loss


def test_recurrent_gradients_at_many_lengths_equal_fresh_programs():
    """The LSTM and GRU gradient kernels of every length take their arrays from the same
    blocks: alternating lengths (a longer one in between) gives what a program that only
    ever saw each call's length gives."""
    rng = np.random.default_rng(0)
    y = rng.standard_normal((4, 1)).astype("float32")
    shared = Seq().Compile(seed=0)
    for t in (6, 17, 6, 11, 17, 3):
        x = rng.standard_normal((4, t, 3)).astype("float32")
        fresh = Seq().Compile(seed=0)
        for name in shared.var_names():
            fresh.set_var(name, shared.get_var(name))
        assert shared.train_step(x, y) == fresh.train_step(x, y)
        for name in ("lstm_0.w_0", "gru_0.w_0", "fc_0.w_0"):
            np.testing.assert_array_equal(shared.get_var(name), fresh.get_var(name))
