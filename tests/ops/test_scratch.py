"""Per-call working arrays shared by the plans of every size (ops/scratch.py): one block per
(op, array) grown to the largest size, and the same results as kernels with arrays of their
own."""
import numpy as np
import pytest

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


class Conv(fluid.Program):
    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name="x", shape=[1, 12, 12], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        h = fluid.layers.conv2d(input=x, num_filters=4, filter_size=3, act="relu")
        h = fluid.layers.pool2d(input=h, pool_size=2, pool_stride=2)
        h = fluid.layers.conv2d(input=h, num_filters=3, filter_size=3, padding=1)
        out = fluid.layers.fc(input=h, size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(out, y))
        fluid.optimizer.SGD(learning_rate=1e-3).minimize(loss)
        return loss


def test_convolutions_at_many_batch_sizes_share_their_columns_and_equal_fresh_programs():
    """A convolution's columns (and its gradient's, which take their memory) are blocks of
    the family's scratch: every batch size's plan reads and writes the same memory, one
    call at a time, and each call gives what a program that only ever saw its batch size
    gives, in NCHW and in the CHWN layout the plan chooses for LeNet-like chains."""
    rng = np.random.default_rng(1)
    shared = Conv().Compile(seed=0)
    for b in (5, 16, 5, 9, 16, 1, 2):
        x = rng.standard_normal((b, 1, 12, 12)).astype("float32")
        y = rng.standard_normal((b, 1)).astype("float32")
        fresh = Conv().Compile(seed=0)
        before = {name: shared.get_var(name) for name in shared.var_names()}
        for name in shared.var_names():
            fresh.set_var(name, shared.get_var(name))
        assert shared.train_step(x, y) == fresh.train_step(x, y)
        for name in shared.var_names():
            np.testing.assert_array_equal(shared.get_var(name), fresh.get_var(name), name)
        _check_against_torch(before, x, y, shared)
    plans = shared.train_step.plans
    assert len(plans) == 1 and plans[0].sizes_planned == 5


def _check_against_torch(before: dict, x, y, prog) -> None:
    """One SGD step of the same network in PyTorch, from the parameters ``before`` the
    step: each convolution's filter update reads its own columns (no other op's)."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    p = {k: torch.tensor(before[k], dtype=torch.float64, requires_grad=True)
         for k in ("conv2d_0.w_0", "conv2d_0.b_0", "conv2d_1.w_0", "conv2d_1.b_0", "fc_0.w_0",
                   "fc_0.b_0")}
    h = F.relu(F.conv2d(torch.tensor(x, dtype=torch.float64), p["conv2d_0.w_0"],
                        p["conv2d_0.b_0"]))
    h = F.conv2d(F.max_pool2d(h, 2, 2), p["conv2d_1.w_0"], p["conv2d_1.b_0"], padding=1)
    out = h.reshape(len(x), -1) @ p["fc_0.w_0"] + p["fc_0.b_0"]
    ((out - torch.tensor(y, dtype=torch.float64)) ** 2).mean().backward()
    for name, t in p.items():
        want = (t - 1e-3 * t.grad).detach().numpy()
        np.testing.assert_allclose(prog.get_var(name), want, rtol=1e-4, atol=1e-6,
                                   err_msg=name)
