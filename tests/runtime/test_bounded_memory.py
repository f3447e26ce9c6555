"""Memory that stays bounded: a method served at a thousand batch sizes keeps at most
`fluid.plan_cache`'s plans (the hot one survives), and a history over hundreds of
redefinitions of a class stays within its budget, its recompile entries charged for the
programs and values only they hold."""
import gc
import tracemalloc
import weakref

import numpy as np
import pytest

import fluid
from fluid_interactive.runtime.live.history import program_nbytes


class MLP(fluid.Program):
    hidden = 64
    depth = 2

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[32], dtype="float32")
        with fluid.var_scope("mlp"):
            for _ in range(self.depth):
                x = fluid.layers.fc(input=x, size=self.hidden, act="relu")
            return fluid.layers.fc(input=x, size=10)

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name="x", shape=[32], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="int64")
        with fluid.var_scope("mlp"):
            for _ in range(self.depth):
                x = fluid.layers.fc(input=x, size=self.hidden, act="relu")
            logits = fluid.layers.fc(input=x, size=10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
        return loss


@pytest.fixture
def limits():
    before = fluid.plan_cache()
    yield
    fluid.plan_cache(**before)


def test_a_thousand_batch_sizes_keep_a_bounded_number_of_plans(limits):
    fluid.plan_cache(plans=8)
    prog = MLP().Compile(seed=0)
    rng = np.random.default_rng(0)
    hot = rng.standard_normal((16, 32)).astype("float32")
    expected = prog.infer(hot)
    runner = prog.infer.runner

    def serve(sizes):
        for size in sizes:
            out = prog.infer(rng.standard_normal((size, 32)).astype("float32"))
            assert out.shape == (size, 10)
            np.testing.assert_array_equal(prog.infer(hot), expected)   # the hot plan ...
            assert len(runner.plans) <= 8

    serve(range(1, 901))
    gc.collect()
    tracemalloc.start()    # the last hundred sizes, traced (tracing slows planning 5x)
    try:
        before, _ = tracemalloc.get_traced_memory()
        serve(range(901, 1001))
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert ((16, 32),) in runner.plans                  # ... stayed planned throughout
    assert runner.cache.evicted >= 990
    # unbounded, a hundred more plans of about 1.2 MB of buffers each were kept
    assert after - before < 4 << 20, (before, after)


def test_the_plans_of_every_batch_size_share_one_memory(limits):
    """A method's plans take their buffers from one memory (runtime/plan/buffers.py,
    PlanMemory): after calls at 512 sizes it holds the buffers of the largest call, not
    one plan's worth per size, and every plan's results are right."""
    prog = MLP().Compile(seed=0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 32)).astype("float32")
    want = prog.infer(x)
    runner = prog.infer.runner
    largest = runner.memory.nbytes
    assert largest > 512 * 64 * 4                  # the hidden activations at least
    for size in [*range(1, 512, 7), 511, 300, 512]:
        np.testing.assert_allclose(prog.infer(x[:size]), want[:size], rtol=1e-5, atol=1e-6)
    assert runner.memory.nbytes == largest
    assert all(code.nbytes == 0 for code in runner.plans.values())   # not theirs


def test_a_memory_grows_for_a_larger_call_and_replans_what_held_its_blocks(limits):
    prog = MLP().Compile(seed=0)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((600, 32)).astype("float32")
    want = prog.infer(x)
    runner = prog.infer.runner
    runner.plans.clear()
    runner.memory.blocks.clear()
    for size in (10, 11, 40, 600, 10, 11):      # grows twice, then serves the small again
        np.testing.assert_allclose(prog.infer(x[:size]), want[:size], rtol=1e-5, atol=1e-6)
    assert ((10, 32),) in runner.plans and ((40, 32),) not in runner.plans  # replanned
    assert runner.memory.nbytes < 1.6 * 600 * (3 * 64 + 10) * 4


def test_plan_cache_settings_are_checked(limits):
    for bad in (0, -1, 2.5, True, "8"):
        with pytest.raises(ValueError, match="plan_cache plans must be an int >= 1"):
            fluid.plan_cache(plans=bad)
    assert fluid.plan_cache(memory=1 << 20)["memory"] == 1 << 20


def _mlp_class(learning_rate: float):
    class Deep(MLP):
        depth = 2
        hidden = 8

        @fluid.network("x", "y")
        def train_step(self, x, y):
            x = fluid.layers.data(name="x", shape=[32], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="int64")
            with fluid.var_scope("mlp"):
                for _ in range(self.depth):
                    x = fluid.layers.fc(input=x, size=self.hidden, act="relu")
                logits = fluid.layers.fc(input=x, size=10)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
            fluid.optimizer.Adam(learning_rate=learning_rate).minimize(loss)
            return loss
    return Deep


def test_two_hundred_redefinitions_stay_within_the_history_budget():
    budget = 256 << 10
    prog = _mlp_class(0.01)().Compile(seed=0)
    prog.keep_history(calls=10_000, memory=budget)
    x = np.zeros((4, 32), "float32")
    y = np.zeros((4, 1), "int64")
    prog.train_step(x, y)
    per_program = program_nbytes(prog.program)
    assert per_program > 20_000                     # a program with Adam
    gc.collect()
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        for k in range(200):
            prog.recompile(_mlp_class(0.01 + k * 1e-4))
        gc.collect()
        grown, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    history = prog.history
    assert history.nbytes <= budget
    recompiles = [c for c in history.changes() if c.kind == "recompile"]
    assert recompiles and all(c.nbytes >= per_program for c in recompiles)
    assert len(recompiles) < 200                     # the oldest were forgotten
    # what the history holds is what it reports, within the interpreter's own overhead
    # (unbounded, the 200 earlier programs alone would hold 200 * per_program bytes)
    assert 200 * per_program > 4 * budget
    assert grown - start < budget + (512 << 10), (grown - start, history.nbytes)
    prog.rewind(1)                                   # the newest edit comes back off
    assert np.isfinite(prog.train_step(x, y))


def test_run_calls_a_method_by_name():
    prog = MLP().Compile(seed=0)
    x = np.ones((3, 32), "float32")
    np.testing.assert_array_equal(prog.run("infer", x), prog.infer(x))
    np.testing.assert_array_equal(prog.run("infer", x=x), prog.infer(x))
    with pytest.raises(KeyError, match="run: no method 'predict'; the methods are: infer, "
                                       "train_step"):
        prog.run("predict", x)


def test_rewind_takes_numpy_integers():
    prog = MLP().Compile(seed=0)
    prog.keep_history()
    before = prog.parameters()
    prog.train_step(np.ones((2, 32), "float32"), np.zeros((2, 1), "int64"))
    prog.rewind(np.int64(1))
    for name, value in before.items():
        np.testing.assert_array_equal(prog.get_var(name), value)
    with pytest.raises(fluid.RewindError, match="a number of changes >= 1, got 1.5"):
        prog.rewind(1.5)


class LoopNet(fluid.Program):
    @fluid.network("x")
    def train_step(self, x):
        x = fluid.layers.data(name="x", shape=[8], dtype="float32")
        h = fluid.layers.fc(input=x, size=8, act="tanh")
        i = fluid.layers.fill_constant(shape=[1], dtype="int64", value=0)
        n = fluid.layers.fill_constant(shape=[1], dtype="int64", value=3)
        cond = fluid.layers.less_than(i, n)
        loop = fluid.layers.While(cond)
        with loop.block():
            w = fluid.layers.create_parameter([8, 8], "float32", name="w")
            fluid.layers.assign(fluid.layers.tanh(fluid.layers.matmul(h, w)), output=h)
            fluid.layers.increment(i, in_place=True)
            fluid.layers.less_than(i, n, cond=cond)
        loss = fluid.layers.mean(h)
        fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)
        return loss


def test_loop_bodies_go_with_the_plans_that_called_them(limits):
    """Each batch size plans the loop's body and its gradient's body (two functions):
    when the plan cache drops a plan, the bodies only it called go too. Over 200 sizes
    with 8 plans kept, at most 16 bodies stay alive, not 400."""
    fluid.plan_cache(plans=8)
    prog = LoopNet().Compile(seed=0)
    runner = prog.train_step.runner
    rng = np.random.default_rng(0)
    bodies = []   # a weak reference to each body function a plan called
    for size in range(1, 201):
        prog.train_step(rng.standard_normal((size, 8)).astype("float32"))
        for plan in runner.plans.values():
            seen = {id(r()) for r in bodies}
            bodies += [weakref.ref(c) for c in plan.code.children.values()
                       if c.block != plan.code.block and id(c) not in seen]
    gc.collect()
    assert runner.cache.evicted >= 190 and len(bodies) >= 400
    alive = sum(r() is not None for r in bodies)
    assert alive <= 2 * 8, alive
    assert len(runner.subplans.cache) <= 2 * 8
