"""Programs with loops split over trainers and parameter servers: the transpiler keeps the
sub-blocks of each method, and sync training over 2 trainers x 2 pservers in one process
reaches the parameters of single-process training."""
import numpy as np
import pytest
from distributed.nets import max_diff

import fluid
from fluid_interactive.distributed import launch, transpile
from fluid_interactive.ir.blocks import sub_block_index

L = fluid.layers


class Looped(fluid.Program):
    """An fc, then a While loop over a shared weight, then an fc."""

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = L.data("x", shape=[4])
        y = L.data("y", shape=[1])
        w = L.create_parameter([4, 4], "float32", name="w")
        h = L.fc(x, size=4, act="tanh")
        i, n = L.fill_constant([1], "int64", 0), L.fill_constant([1], "int64", 3)
        cond = L.less_than(i, n)
        loop = L.While(cond)
        with loop.block():
            L.assign(L.tanh(L.matmul(h, w) + x), output=h)
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=cond)
        loss = L.mean(L.square_error_cost(L.fc(h, size=1), y))
        fluid.optimizer.Adam(learning_rate=0.05).minimize(loss)
        return loss


class Recurrent(fluid.Program):
    """A StaticRNN, Momentum. The sequences come batch-major ([batch, T, 2]: the trainers
    share the batch, the first dim) and are made time-major for the RNN."""

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = L.data("x", shape=[-1, -1, 2], append_batch_size=False)
        y = L.data("y", shape=[1])
        time_major = L.transpose(x, [1, 0, 2])
        rnn = L.StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(time_major)
            h_prev = rnn.memory(shape=[-1, 6], batch_ref=x_t)
            h = L.fc([x_t, h_prev], size=6, act="tanh")
            rnn.update_memory(h_prev, h)
            rnn.step_output(h)
        loss = L.mean(L.square_error_cost(L.fc(rnn()[-1], size=1), y))
        fluid.optimizer.Momentum(learning_rate=0.05, momentum=0.9).minimize(loss)
        return loss


def _batches(rng, recurrent, steps=6):
    for _ in range(steps):
        x = rng.standard_normal((8, 5, 2) if recurrent else (8, 4)).astype(np.float32)
        yield x, rng.standard_normal((8, 1)).astype(np.float32)


@pytest.mark.parametrize("cls", [Looped, Recurrent])
def test_sync_training_with_loops_matches_single_process(cls, rng):
    single = cls().Compile(seed=0)
    plan = transpile(cls().Compile(seed=0), trainers=2, pservers=2, min_block_size=4)
    for t in range(2):
        trainer = plan.trainer_program(t)
        fluid.check_program(trainer)
        owners = [op for op in trainer.block("train_step").ops
                  if sub_block_index(op) is not None]
        assert owners and all(trainer.blocks[sub_block_index(op)].parent_idx ==
                              trainer.block("train_step").idx for op in owners)
    for endpoint in plan.endpoints:
        fluid.check_program(plan.pserver_program(endpoint))
    with launch(plan) as dist:
        assert max_diff(dist.parameters(), single.parameters()) == 0.0
        for x, y in _batches(rng, cls is Recurrent):
            assert dist.train_step(x, y) == pytest.approx(single.train_step(x, y), rel=1e-5)
        assert max_diff(dist.parameters(), single.parameters()) <= 1e-5
