"""One plan serves every batch size and sequence length (runtime/plan/family.py): the
calls of a method at many sizes build one plan (one generated function), `.plans` says
which kernels are prepared per size and why (op, var, sizes), a step whose kernel input
is the same at every size is prepared once, and every call's values are bit-identical
to those of a program compiled fresh for that size alone."""
import numpy as np
import pytest

import fluid

L = fluid.layers


@pytest.fixture(autouse=True)
def one_thread():
    """Bit-identical results: every program runs its BLAS calls on one thread."""
    before = fluid.get_threads()
    fluid.set_threads(1)
    yield
    fluid.set_threads(before)


class BatchDims(fluid.Program):
    """What a batch size reaches besides rows: a mean over the batch, a reshape with -1,
    a constant of the batch's size, a sum over the batch broadcast back."""

    @fluid.network("x")
    def infer(self, x):
        x = L.data(name="x", shape=[6], dtype="float32")
        h = L.fc(input=x, size=4, act="relu")
        flat = L.reshape(h, [-1, 2, 2])                           # [B, 2, 2]
        ones = L.fill_constant_batch_size_like(x, shape=[-1, 4], dtype="float32",
                                               value=1.5)
        total = L.reduce_sum(h, dim=0, keep_dim=True)             # over the batch
        mixed = h * ones + total
        return {"mean": L.mean(mixed), "flat": flat, "mixed": mixed}


class Train(fluid.Program):
    hidden = 8

    def make_optimizer(self):
        return fluid.optimizer.SGD(learning_rate=0.1)

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = L.data(name="x", shape=[5], dtype="float32")
        y = L.data(name="y", shape=[1], dtype="float32")
        pred = L.fc(input=L.fc(input=x, size=self.hidden, act="tanh"), size=1)
        loss = L.mean(L.square_error_cost(pred, y))
        self.make_optimizer().minimize(loss)
        return loss


def _equal(got, want):
    if isinstance(got, dict):
        for k in got:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    else:
        np.testing.assert_array_equal(got, want)


def test_one_plan_serves_every_batch_size_bit_identically(rng):
    prog = BatchDims().Compile(seed=3)
    x = rng.standard_normal((50, 6)).astype("float32")
    sizes = [7, 50, 1, 23, 7, 2, 31, 50]
    got = {n: prog.infer(x[:n]) for n in sizes}
    (plan,) = prog.infer.plans                          # one plan built
    assert plan.inputs == ((-1, 6),) and plan.functions == 1
    assert plan.sizes_planned == len(set(sizes))
    assert 0 < plan.planning_ms < 10_000 and "ms to plan a size" in repr(plan)
    for n in set(sizes):
        _equal(got[n], BatchDims().Compile(seed=3).infer(x[:n]))
        # the mean divides by the actual batch, the sum over the batch sees its rows
        h = np.maximum(x[:n] @ prog.get_var("fc_0.w_0") + prog.get_var("fc_0.b_0"), 0)
        np.testing.assert_allclose(got[n]["mean"], (h * 1.5 + h.sum(0)).mean(), rtol=1e-5)
        assert got[n]["flat"].shape == (n, 2, 2)


def test_plans_say_which_kernels_are_per_size_and_why(rng):
    prog = BatchDims().Compile(seed=3)
    x = rng.standard_normal((9, 6)).astype("float32")
    for n in (3, 9, 4):
        prog.infer(x[:n])
    (plan,) = prog.infer.plans
    by_op = {s.op: s for s in plan.specialised}
    mean = by_op["mean"]                                 # it reads a var of the batch's size
    assert mean.var in prog.infer.runner.plan_block.ops[mean.index].input_names()
    assert {s[0] for s in mean.shapes} == {3, 9, 4}
    assert by_op["mul"].var == "x" and set(by_op["mul"].shapes) == {(3, 6), (9, 6), (4, 6)}
    assert "mean" in plan.per_size and "mean" not in plan.shape_free
    assert "mean (op" in repr(plan) and "[?, 6]" in repr(plan)


class DecayTrain(Train):
    def make_optimizer(self):
        return fluid.optimizer.SGD(learning_rate=0.1,
                                   regularization=fluid.regularizer.L2Decay(1e-2))


def test_a_step_on_parameters_alone_is_prepared_once(rng):
    """The weight decay's steps read parameters and gradients of parameters: the same at
    every batch size, so later sizes take their kernels; the SGD update is not per size
    either; the losses and the parameters equal a fresh program's at each size."""
    prog, fresh = DecayTrain().Compile(seed=1), DecayTrain().Compile(seed=1)
    x = rng.standard_normal((40, 5)).astype("float32")
    y = rng.standard_normal((40, 1)).astype("float32")
    for n in (8, 3, 40, 17, 3):
        loss = prog.train_step(x[:n], y[:n])
        assert loss == fresh.train_step(x[:n], y[:n])
        fresh.train_step.runner.plans.clear()            # fresh: a new plan at every call
        fresh.train_step.runner.lanes[0].families.clear()
    for name in ("fc_0.w_0", "fc_1.w_0", "fc_1.b_0"):
        np.testing.assert_array_equal(prog.get_var(name), fresh.get_var(name))
    (plan,) = prog.train_step.plans
    assert "sgd" in plan.shape_free or "fused_sgd" in plan.shape_free \
        or any("sgd" in op for op in plan.shape_free)
    decay = [op.type for op in prog.train_step.runner.plan_block.ops
             if op.input_names() and all(n.startswith("fc_") and ".tmp" not in n
                                         for n in op.input_names())]
    assert decay and set(decay) <= set(plan.shape_free)
    # the decay's kernels at the first size serve the three other sizes
    assert plan.kernels_reused >= 3 * len(decay)
    assert not any("sgd" in s.op for s in plan.specialised)


def test_a_kernel_prepared_for_one_size_is_not_kept_for_others(rng):
    """Once a var's shape has changed between sizes, the kernels of the steps reading or
    writing it are the plans' of each size alone: the family keeps only the kernels that
    serve every size."""
    prog = DecayTrain().Compile(seed=1)
    x = rng.standard_normal((40, 5)).astype("float32")
    y = rng.standard_normal((40, 1)).astype("float32")
    for n in (8, 3, 40, 17):
        prog.train_step(x[:n], y[:n])
    runner = prog.train_step.runner
    (family,) = runner.lanes[0].families.values()
    kept = {sig[0] for sig in family.kernels.kernels}
    (plan,) = prog.train_step.plans
    special = {s.index for s in plan.specialised}
    assert kept and not kept & special


class AdamTrain(Train):
    hidden = 256

    def make_optimizer(self):
        return fluid.optimizer.Adam(learning_rate=0.01)


def test_a_fused_update_keeps_one_pair_of_generations_for_every_size(rng, monkeypatch):
    """Adam's fused update keeps the parameters and moments it writes in generations of
    flat arrays (ops/flat_state.py), which every size's plan shares: a step at another
    batch size finds the last step's outputs in a generation (and updates them flat), the
    plans of many sizes keep two generations in all, not two each, and the values are
    those of plans that each kept their own."""
    from fluid_interactive.ops import flat_state
    prog, fresh = AdamTrain().Compile(seed=1), AdamTrain().Compile(seed=1)
    found = []
    holding = flat_state.DoubleBuffer.holding
    monkeypatch.setattr(flat_state.DoubleBuffer, "holding",
                        lambda self, arrays: found.append(holding(self, arrays)) or found[-1])
    x = rng.standard_normal((40, 5)).astype("float32")
    y = rng.standard_normal((40, 1)).astype("float32")
    held = []
    for n in (8, 3, 40, 17, 3, 8):
        found.clear()
        loss = prog.train_step(x[:n], y[:n])
        held += [g is not None for g in found]
        assert loss == fresh.train_step(x[:n], y[:n])
        fresh.train_step.runner.plans.clear()            # fresh: a new plan at every call
        fresh.train_step.runner.lanes[0].families.clear()
    assert held == [False] + [True] * 5   # the first step reads the initial values
    for name in ("fc_0.w_0", "fc_0.b_0", "fc_1.w_0"):
        np.testing.assert_array_equal(prog.get_var(name), fresh.get_var(name))
    parameter_bytes = sum(prog.get_var(n).nbytes for n in prog.parameters())
    runner = prog.train_step.runner
    assert len(runner.plans) == 4
    assert runner.cache.nbytes < parameter_bytes, (runner.cache.nbytes, parameter_bytes)


def test_a_new_size_asks_the_shape_rules_only_of_ops_whose_inputs_changed(
        rng, monkeypatch):
    """The types a plan inferred for the SGD updates (parameters and their gradients: no
    batch dim) serve the next size's plan; the ops on the batch are typed again."""
    from fluid_interactive.runtime.plan import shapes
    asked: list[str] = []
    infer = shapes.infer_op

    def counted(op, *args):
        asked.append(op.type)
        return infer(op, *args)
    monkeypatch.setattr(shapes, "infer_op", counted)
    prog = Train().Compile(seed=1)
    x = rng.standard_normal((9, 5)).astype("float32")
    y = rng.standard_normal((9, 1)).astype("float32")
    prog.train_step(x[:4], y[:4])
    first = list(asked)
    asked.clear()
    prog.train_step(x, y)
    updates = [t for t in first if "sgd" in t]
    assert updates and not [t for t in asked if "sgd" in t]
    assert "mul" in asked and len(asked) < len(first)
    asked.clear()
    prog.train_step(x[:4], y[:4])   # a size planned before: no typing at all
    assert asked == []


class Recurrence(fluid.Program):
    @fluid.network("x", "n")
    def step(self, x, n):
        x = L.data(name="x", shape=[4], dtype="float32")
        n = L.data(name="n", shape=[1], dtype="int64", append_batch_size=False)
        w = L.create_parameter(shape=[4, 4], dtype="float32", name="w")
        h = L.fill_constant_batch_size_like(x, shape=[-1, 4], dtype="float32", value=0.0)
        i = L.fill_constant(shape=[1], dtype="int64", value=0)
        cond = L.less_than(x=i, y=n)
        loop = L.While(cond=cond)
        with loop.block():
            L.assign(L.tanh(L.matmul(h, w) + x), output=h)
            L.increment(x=i, value=1, in_place=True)
            L.less_than(x=i, y=n, cond=cond)
        return L.reduce_mean(h)


class Stepped(fluid.Program):
    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = L.data(name="x", shape=[-1, -1, 2], dtype="float32", append_batch_size=False)
        y = L.data(name="y", shape=[1], dtype="float32")
        rnn = L.StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(x)
            h_prev = rnn.memory(shape=[-1, 5], batch_ref=x_t)
            h = L.fc(input=[x_t, h_prev], size=5, act="tanh")
            rnn.update_memory(h_prev, h)
            rnn.step_output(h)
        loss = L.mean(L.square_error_cost(L.fc(rnn()[-1], size=1), y))
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
        return loss


class Dynamic(fluid.Program):
    @fluid.network("x", "lengths")
    def f(self, x, lengths):
        x = L.data(name="x", shape=[-1, -1, 3], dtype="float32", append_batch_size=False)
        lengths = L.data(name="lengths", shape=[-1], dtype="int64", append_batch_size=False)
        drnn = L.DynamicRNN()
        with drnn.block():
            x_t = drnn.step_input(x, lengths=lengths)
            h = drnn.memory(shape=[4], dtype="float32")
            new_h = L.fc(input=[x_t, h], size=4, act="tanh")
            drnn.update_memory(h, new_h)
            drnn.output(new_h)
        out = drnn()
        return {"out": out, "last": L.sequence_last_step(out, lengths=lengths),
                "pooled": L.sequence_pool(out, "average", lengths=lengths)}


class Lstm(fluid.Program):
    @fluid.network("x", "lengths", "y")
    def train_step(self, x, lengths, y):
        x = L.data(name="x", shape=[-1, -1, 3], dtype="float32", append_batch_size=False)
        lengths = L.data(name="lengths", shape=[-1], dtype="int64", append_batch_size=False)
        y = L.data(name="y", shape=[1], dtype="float32")
        proj = L.fc(input=x, size=4 * 6, num_flatten_dims=2)
        h, _ = L.dynamic_lstm(input=proj, size=4 * 6, lengths=lengths)
        last = L.sequence_last_step(h, lengths=lengths)
        loss = L.mean(L.square_error_cost(L.fc(input=last, size=1), y))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
        return loss


def _fresh_each_call(cls, method, calls, seed=0):
    """The values of ``calls`` on a program that plans every call anew."""
    prog = cls().Compile(seed=seed)
    out = []
    for args in calls:
        out.append(getattr(prog, method)(*args))
        runner = getattr(prog, method).runner
        runner.plans.clear()
        runner.lanes[0].families.clear()
        runner.memory.blocks.clear()
    return out


@pytest.mark.parametrize("case", ["while", "static_rnn", "dynamic_rnn", "lstm"])
def test_loops_and_sequences_at_many_sizes_equal_fresh_plans(case, rng):
    if case == "while":
        cls, method = Recurrence, "step"
        calls = [(rng.standard_normal((b, 4)).astype("float32"), np.array([k]))
                 for b, k in ((3, 2), (7, 5), (1, 0), (3, 4), (12, 3))]
    elif case == "static_rnn":
        cls, method = Stepped, "train_step"
        calls = [(rng.standard_normal((t, b, 2)).astype("float32"),
                  rng.standard_normal((b, 1)).astype("float32"))
                 for t, b in ((4, 3), (9, 3), (2, 6), (4, 3))]
    elif case == "dynamic_rnn":
        cls, method = Dynamic, "f"
        calls = [(rng.standard_normal((b, t, 3)).astype("float32"),
                  rng.integers(1, t + 1, size=b).astype("int64"))
                 for b, t in ((3, 5), (3, 8), (5, 2), (2, 8))]
    else:
        cls, method = Lstm, "train_step"
        calls = [(rng.standard_normal((b, t, 3)).astype("float32"),
                  rng.integers(1, t + 1, size=b).astype("int64"),
                  rng.standard_normal((b, 1)).astype("float32"))
                 for b, t in ((4, 6), (4, 11), (2, 3), (4, 6), (7, 20))]
    prog = cls().Compile(seed=0)
    got = [getattr(prog, method)(*args) for args in calls]
    for g, want in zip(got, _fresh_each_call(cls, method, calls)):
        _equal(g, want)
    plans = getattr(prog, method).plans
    assert len(plans) == 1 and plans[0].functions == 1


def test_a_rank_or_a_declared_dim_is_another_plan(rng):
    """A plan is keyed by what its code depends on: a feed of another rank (a time-major
    sequence given without its batch) is another plan."""
    prog = Dynamic().Compile(seed=0)
    x = rng.standard_normal((3, 4, 3)).astype("float32")
    prog.f(x, np.array([4, 2, 1]))
    prog.f(x[:2, :3], np.array([3, 3]))
    assert len(prog.f.plans) == 1
    assert prog.f.plans[0].inputs == ((-1, -1, 3), (-1,))


def test_a_batch_size_an_attr_bakes_in_is_an_error_at_other_sizes(rng):
    """A reshape to a fixed first dim serves that batch size only: at another one the
    plan fails as a fresh program does (its shape rule, with the fed shapes)."""
    class Fixed(fluid.Program):
        @fluid.network("x")
        def infer(self, x):
            x = L.data(name="x", shape=[6], dtype="float32")
            return L.reshape(x, [4, 3, 2])

    prog = Fixed().Compile()
    x = rng.standard_normal((4, 6)).astype("float32")
    np.testing.assert_array_equal(prog.infer(x), x.reshape(4, 3, 2))
    with pytest.raises(fluid.ShapeError) as fresh:
        Fixed().Compile().infer(x[:3])
    with pytest.raises(fluid.ShapeError) as again:
        prog.infer(x[:3])
    assert str(again.value).splitlines()[0] == str(fresh.value).splitlines()[0]
    np.testing.assert_array_equal(prog.infer(x), x.reshape(4, 3, 2))


def _fail_at_last_step(monkeypatch, runner, seen: list):
    """Planning fails at the block's last step, with MemoryError, once the steps before
    it are prepared (their buffers taken); ``seen`` gets the method's blocks then."""
    from fluid_interactive.runtime.plan import emitter
    real, last = emitter.prepare_kernel, runner.plan_block.ops[-1]

    def prepare(op, *args, **kwargs):
        if op is last:
            seen.append(dict(runner.lanes[0].memory.blocks))
            raise MemoryError
        return real(op, *args, **kwargs)
    monkeypatch.setattr(emitter, "prepare_kernel", prepare)


def test_a_plan_that_fails_part_way_leaves_the_method_as_it_was(rng, monkeypatch):
    """The memory blocks the failed plan grew, the kernels it kept for other sizes and
    the parameters are as before; the plans kept still run, without planning again."""
    prog = DecayTrain().Compile(seed=1)
    x = rng.standard_normal((40, 5)).astype("float32")
    y = rng.standard_normal((40, 1)).astype("float32")
    for n in (8, 3):
        prog.train_step(x[:n], y[:n])
    runner = prog.train_step.runner
    lane = runner.lanes[0]
    (family,) = lane.families.values()
    blocks, kept = dict(lane.memory.blocks), list(family.kernels.kernels)
    params, plans = prog.parameters(), dict(runner.plans)
    seen: list = []
    _fail_at_last_step(monkeypatch, runner, seen)
    with pytest.raises(fluid.KernelError, match="out of memory while planning"):
        prog.train_step(x, y)                            # batch 40: larger buffers
    assert any(seen[0][k] is not b for k, b in blocks.items())   # it had grown them
    assert lane.memory.blocks.keys() == blocks.keys()
    assert all(lane.memory.blocks[k] is b for k, b in blocks.items())
    assert list(family.kernels.kernels) == kept and lane.families == {family.key: family}
    for name, value in params.items():
        np.testing.assert_array_equal(prog.get_var(name), value)
    monkeypatch.undo()
    prog.train_step(x[:3], y[:3])                        # the plan kept
    assert runner.plans == plans and not lane.memory.replaced()
    prog.train_step(x, y)                                # now it plans
    assert (40, 5) in {k[0] for k in runner.plans}


def test_a_first_plan_that_fails_keeps_no_family(rng, monkeypatch):
    prog = DecayTrain().Compile(seed=1)
    x = rng.standard_normal((8, 5)).astype("float32")
    y = rng.standard_normal((8, 1)).astype("float32")
    runner = prog.train_step.runner
    _fail_at_last_step(monkeypatch, runner, [])
    with pytest.raises(fluid.KernelError, match="No state was changed"):
        prog.train_step(x, y)
    assert not runner.lanes[0].families and not runner.lanes[0].memory.blocks
    assert prog.train_step.plans == []
    monkeypatch.undo()
    prog.train_step(x, y)
    (plan,) = prog.train_step.plans
    assert plan.sizes_planned == 1
