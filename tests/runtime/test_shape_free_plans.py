"""One plan for every batch size and length: a method called at many batch sizes, or a
sequence model at many lengths, runs one generated function over one memory of buffers
(runtime/plan/buffers.py, PlanMemory), its kernels prepared per concrete shape, and
`prog.<method>.plans` says so; every call's values are those of a program that only
ever saw that shape."""
import os
import sys

import numpy as np

import fluid


class MLP(fluid.Program):
    @fluid.network("x")
    def infer(self, x):
        h = fluid.layers.fc(input=fluid.layers.data(name="x", shape=[6], dtype="float32"),
                            size=16, act="relu")
        return fluid.layers.fc(input=h, size=3)


def _seq_class():
    """The LSTM of benchmarks/bench_memory.py (its time dim unknown until it runs),
    small."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "benchmarks"))
    try:
        from bench_memory import lstm_program
    finally:
        sys.path.pop(0)
    return lstm_program(hidden=8, features=3, optimizer=fluid.optimizer.SGD(0.1))


def test_one_plan_serves_every_batch_size(rng):
    prog = MLP().Compile(seed=2)
    x = rng.standard_normal((40, 6)).astype("float32")
    sizes = [40, 3, 17, 1, 29, 3, 40, 8]
    got = {n: prog.infer(x[:n]) for n in sizes}
    (family,) = prog.infer.plans
    assert family.inputs == ((-1, 6),)                 # any batch size
    assert family.functions == 1                        # one generated function
    assert set(family.shapes) <= {((n, 6),) for n in sizes}
    assert "mul" in family.per_size                     # kernels prepared per size
    runner = prog.infer.runner
    memory = runner.memory.nbytes
    for n in sizes:   # a fresh program that only saw this size computes the same values
        alone = MLP().Compile(seed=2).infer(x[:n])
        np.testing.assert_allclose(got[n], alone, rtol=1e-5, atol=1e-6)
    prog.infer(x[:40])
    assert runner.memory.nbytes == memory              # the largest call's buffers
    assert "[?, 6]" in repr(family)


def test_one_plan_serves_every_sequence_length(rng):
    def data(t):
        r = np.random.default_rng(t)
        return (r.standard_normal((4, t, 3)).astype("float32"),
                r.standard_normal((4, 1)).astype("float32"))

    seq = _seq_class()
    prog = seq().Compile(seed=5)
    lengths = [12, 5, 9, 12, 7, 5]
    losses = [prog.train_step(*data(t)) for t in lengths]
    (family,) = prog.train_step.plans
    assert family.inputs == ((-1, -1, 3), (-1, 1))      # any batch size and length
    assert family.functions == 1
    assert "lstm" in family.per_size and "lstm_grad" in family.per_size
    # the same steps in a program whose every plan is new: the same losses
    fresh = seq().Compile(seed=5)
    again = []
    for t in lengths:
        again.append(fresh.train_step(*data(t)))
        fresh.train_step.runner.plans.clear()
        fresh.train_step.runner.memory.blocks.clear()
    np.testing.assert_allclose(losses, again, rtol=1e-6)
