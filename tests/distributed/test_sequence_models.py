"""An LSTM classifier over padded sequences with lengths splits over trainers and
parameter servers: its weight [H, 4H] and its Adam state are cut into row blocks, each
trainer takes half of every batch (x, lengths and labels alike), and sync training ends at
the single-process parameters."""
import numpy as np
import pytest
from distributed.nets import max_diff

import fluid
from fluid_interactive.distributed import launch, transpile

H, D, T = 16, 3, 9
TOL = 1e-5


class SequenceClassifier(fluid.Program):
    @fluid.network("x", "lengths", "label")
    def train_step(self, x, lengths, label):
        x = fluid.layers.data(name="x", shape=[-1, -1, D], dtype="float32",
                              append_batch_size=False)
        lengths = fluid.layers.data(name="lengths", shape=[-1], dtype="int64",
                                    append_batch_size=False)
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
            self.logits(x, lengths), label))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
        return loss

    @fluid.network("x", "lengths")
    def infer(self, x, lengths):
        x = fluid.layers.data(name="x", shape=[-1, -1, D], dtype="float32",
                              append_batch_size=False)
        lengths = fluid.layers.data(name="lengths", shape=[-1], dtype="int64",
                                    append_batch_size=False)
        return fluid.layers.softmax(self.logits(x, lengths))

    def logits(self, x, lengths):
        with fluid.var_scope("rnn"):
            proj = fluid.layers.fc(x, size=4 * H, num_flatten_dims=2)
            hidden, _ = fluid.layers.dynamic_lstm(proj, size=4 * H, lengths=lengths)
            last = fluid.layers.sequence_last_step(hidden, lengths=lengths)
            return fluid.layers.fc(last, size=3)


def sequence_batches(steps, batch=8, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x = rng.standard_normal((batch, T, D)).astype(np.float32)
        n = rng.integers(1, T + 1, batch).astype(np.int64)
        valid = np.arange(T)[None, :, None] < n[:, None, None]
        y = (x * valid).sum(1).argmax(1).reshape(batch, 1).astype(np.int64)
        yield x, n, y


@pytest.mark.parametrize("trainers,pservers,min_block", [(2, 2, 64), (2, 3, 16)])
def test_an_lstm_trains_to_the_single_process_parameters(trainers, pservers, min_block):
    single = SequenceClassifier().Compile(seed=0)
    plan = transpile(SequenceClassifier().Compile(seed=0), trainers=trainers,
                     pservers=pservers, min_block_size=min_block)
    assert len(plan.param_blocks("rnn/lstm_0.w_0")) > 1       # the recurrent weight is cut
    with launch(plan) as dist:
        assert max_diff(dist.parameters(), single.parameters()) == 0.0
        for x, n, y in sequence_batches(15):
            a, b = single.train_step(x, n, y), dist.train_step(x, n, y)
            assert abs(a - b) <= 1e-5 * max(1.0, abs(a))
        assert max_diff(dist.parameters(), single.parameters()) <= TOL
        x, n, _ = next(sequence_batches(1, seed=9))
        np.testing.assert_allclose(dist.infer(x, n), single.infer(x, n), atol=TOL)
