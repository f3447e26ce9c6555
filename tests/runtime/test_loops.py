"""Loops and branches in compiled methods: the generated source is a real Python loop
calling the body's own function, planning does not grow with the trip count or the
sequence length, a failure inside a loop names the op, the line and the iteration, an
interrupted loop changes nothing, and a plan can gather a loop var's value of every
iteration."""
import dataclasses
import signal
import time

import numpy as np
import pytest

import fluid
from fluid_interactive.runtime.plan.runner import BlockRunner

L = fluid.layers


class Recurrence(fluid.Program):
    """DESIGN §1, as written there."""

    @fluid.network("x", "n")
    def step(self, x, n):
        x = fluid.layers.data(name='x', shape=[4], dtype='float32')
        n = fluid.layers.data(name='n', shape=[1], dtype='int64', append_batch_size=False)
        w = fluid.layers.create_parameter(shape=[4, 4], dtype='float32', name='w')
        h = fluid.layers.fill_constant_batch_size_like(x, shape=[-1, 4], dtype='float32',
                                                       value=0.0)
        i = fluid.layers.fill_constant(shape=[1], dtype='int64', value=0)
        cond = fluid.layers.less_than(x=i, y=n)
        loop = fluid.layers.While(cond=cond)
        with loop.block():                      # a sub-block; the generated source is a while loop
            fluid.layers.assign(fluid.layers.tanh(fluid.layers.matmul(h, w) + x), output=h)
            fluid.layers.increment(x=i, value=1, in_place=True)
            fluid.layers.less_than(x=i, y=n, cond=cond)
        return h


def _reference(x, w, n):
    h = np.zeros_like(x)
    for _ in range(n):
        h = np.tanh(h @ w + x)
    return h


def test_the_design_example_runs_as_written(rng):
    prog = Recurrence().Compile(seed=0)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    for n in (0, 1, 7):
        np.testing.assert_allclose(prog.step(x, np.array([n])), _reference(x, prog.get_var("w"), n),
                                   rtol=1e-5, atol=1e-6)


def test_the_source_is_a_real_loop_calling_the_body(rng):
    prog = Recurrence().Compile(seed=0)
    prog.step(rng.standard_normal((2, 4)).astype(np.float32), np.array([3]))
    src = prog.step.source
    head, _, body = src.partition("\ndef b2_while(")
    loop = [line for line in head.splitlines() if line.strip().startswith("while ")]
    assert len(loop) == 1
    after = head.splitlines()[head.splitlines().index(loop[0]) + 1]
    assert "= b2_while(" in after
    assert "k0_matmul(" in body and "tanh" in body and "def " not in body
    compile(src, "<check>", "exec")


def _adding_class(hidden=8):
    class Adding(fluid.Program):
        @fluid.network("x", "y")
        def train_step(self, x, y):
            x = L.data(name="x", shape=[-1, -1, 2], dtype="float32", append_batch_size=False)
            y = L.data(name="y", shape=[1], dtype="float32")
            rnn = L.StaticRNN()
            with rnn.step():
                x_t = rnn.step_input(x)
                h_prev = rnn.memory(shape=[-1, hidden], batch_ref=x_t)
                h = L.fc(input=[x_t, h_prev], size=hidden, act="tanh")
                rnn.update_memory(h_prev, h)
                rnn.step_output(h)
            loss = L.mean(L.square_error_cost(L.fc(rnn()[-1], size=1), y))
            fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
            return loss
    return Adding


def _adding_program():
    return _adding_class()().Compile(seed=0)


def test_planning_does_not_grow_with_the_sequence_length(rng):
    """A plan for T=200 has the source of the plan for T=20, and takes the step functions
    (forward and gradient) that T=20 planned: the steps are planned once."""
    prog = _adding_program()
    runner = prog.train_step.runner
    y = rng.standard_normal((4, 1)).astype(np.float32)
    short = runner.plan([rng.standard_normal((20, 4, 2)).astype(np.float32), y])
    bodies = dict(runner.subplans.cache)
    long = runner.plan([rng.standard_normal((200, 4, 2)).astype(np.float32), y])
    assert long.code.source == short.code.source
    assert runner.subplans.cache == bodies and len(bodies) == 2   # step, step gradient
    assert set(long.code.children) == set(short.code.children)
    assert "for " in short.code.source and "range(" in short.code.source


def test_each_sequence_length_trains(rng):
    prog = _adding_program()
    for steps in (3, 9, 3):
        x = rng.standard_normal((steps, 4, 2)).astype(np.float32)
        assert np.isfinite(prog.train_step(x, rng.standard_normal((4, 1)).astype(np.float32)))
    assert len(prog.train_step.runner.plans) == 2


class Reads(fluid.Program):
    """Reads element i of an array of 3 in each iteration: the fourth fails."""

    @fluid.network("x", "n")
    def step(self, x, n):
        x = L.data(name="x", shape=[3], dtype="float32")
        n = L.data(name="n", shape=[1], dtype="int64", append_batch_size=False)
        arr = L.create_array("float32")
        for k in range(3):
            L.array_write(x * float(k), L.fill_constant([1], "int64", k), array=arr)
        total = L.scale(x, 0.0)
        i = L.fill_constant([1], "int64", 0)
        cond = L.less_than(i, n)
        loop = L.While(cond)
        with loop.block():
            L.assign(total + L.array_read(arr, i), output=total)   # the line that fails
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=cond)
        return total


def test_a_failure_inside_a_loop_names_the_op_the_line_and_the_iteration(rng):
    prog = Reads().Compile(seed=0)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(prog.step(x, np.array([3])), x * 3, rtol=1e-6)
    with pytest.raises(fluid.KernelError) as err:
        prog.step(x, np.array([5]))
    message = str(err.value)
    assert "read_from_array" in message and "index 3 is out of range" in message
    assert "test_loops.py:" in message and "iteration 3" in message
    assert "inside while" in message and "No state was changed" in message


def carried(update):
    """A program whose method ``step(h, n)`` runs ``h = update(h)`` n times (h [?, ?])."""
    class Carried(fluid.Program):
        @fluid.network("h", "n")
        def step(self, h, n):
            h = L.data(name="h", shape=[-1, -1], dtype="float32", append_batch_size=False)
            n = L.data(name="n", shape=[1], dtype="int64", append_batch_size=False)
            i = L.fill_constant([1], "int64", 0)
            cond = L.less_than(i, n)
            loop = L.While(cond)
            with loop.block():
                L.assign(update(h), output=h)
                L.increment(i, in_place=True)
                L.less_than(i, n, cond=cond)
            return h
    return Carried


def test_a_carried_var_may_change_its_dims_from_run_to_run():
    """As in Paddle: the var's dims the runs change are -1 in the loop's types."""
    prog = carried(lambda h: L.concat([h, h], axis=1))().Compile()   # [?, ?] when traced
    h = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(prog.step(h, np.array([2])), np.tile(h, (1, 4)))
    np.testing.assert_array_equal(prog.step(h, np.array([0])), h)


def test_a_carried_var_that_changes_rank_is_a_clear_error():
    with pytest.raises(fluid.ShapeError, match=r"assign: input is float32\[\?\] but output "
                                               r"'h' is float32\[\?, \?\]"):
        carried(lambda h: L.reshape(h, [-1]))().Compile()


class LongLoop(fluid.Program):
    """Updates a parameter in a loop of n iterations, then trains it."""

    @fluid.network("x", "n")
    def train(self, x, n):
        x = L.data(name="x", shape=[3], dtype="float32")
        n = L.data(name="n", shape=[1], dtype="int64", append_batch_size=False)
        w = L.create_parameter([3], "float32", name="w")
        counter = L.create_parameter([1], "float32", name="counter",
                                     default_initializer=fluid.initializer.Constant(0.0))
        i = L.fill_constant([1], "int64", 0)
        cond = L.less_than(i, n)
        loop = L.While(cond)
        with loop.block():
            L.assign(counter + 1.0, output=counter)
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=cond)
        loss = L.mean(x * w)
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss, parameter_list=["w"])
        return loss


def test_an_interrupt_inside_a_long_loop_changes_nothing(rng):
    prog = LongLoop().Compile(seed=0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    prog.train(x, np.array([2]))
    before = prog.parameters()
    assert before["counter"].tolist() == [2.0]

    def interrupt(*_):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    start = time.perf_counter()
    try:
        with pytest.raises(KeyboardInterrupt):
            prog.train(x, np.array([10 ** 9]))   # hours, were it not interrupted
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.perf_counter() - start < 30
    after = prog.parameters()
    assert all(np.array_equal(before[k], after[k]) for k in before)
    prog.train(x, np.array([1]))
    assert prog.get_var("counter").tolist() == [3.0]


def test_a_plan_gathers_a_loop_var_of_every_iteration(rng):
    """The hook of watching: a plan whose block also returns a var of the loop's body
    gives its value of each iteration, stacked."""
    prog = Recurrence().Compile(seed=0)
    block = prog.step.block
    body = prog.program.blocks[2]
    name = next(n for n in body.vars if n.startswith("tanh"))
    runner = BlockRunner(prog.program, dataclasses.replace(
        block, returns=(block.returns, {name: name})), np, 0)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    h, seen = runner.run(prog.scope.values, [x, np.array([4])])
    assert seen[name].shape == (4, 3, 4)
    expected = [_reference(x, prog.get_var("w"), k) for k in range(1, 5)]
    np.testing.assert_allclose(seen[name], np.stack(expected), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(seen[name][-1], h)
    _, none = runner.run(prog.scope.values, [x, np.array([0])])
    assert none[name].shape == (0,)


def test_nested_loops_gather_every_inner_iteration(rng):
    class Nested(fluid.Program):
        @fluid.network("x")
        def step(self, x):
            x = L.data(name="x", shape=[2], dtype="float32")
            total = L.scale(x, 0.0)
            i = L.fill_constant([1], "int64", 0)
            two, three = L.fill_constant([1], "int64", 2), L.fill_constant([1], "int64", 3)
            cond = L.less_than(i, two)
            outer = L.While(cond)
            with outer.block():
                j = L.fill_constant([1], "int64", 0)
                inner_cond = L.less_than(j, three)
                inner = L.While(inner_cond)
                with inner.block():
                    L.assign(total + x, output=total)
                    L.increment(j, in_place=True)
                    L.less_than(j, three, cond=inner_cond)
                L.increment(i, in_place=True)
                L.less_than(i, two, cond=cond)
            return total
    prog = Nested().Compile()
    inner = prog.program.blocks[3]
    name = next(n for n in inner.vars if n.startswith("elementwise_add"))
    block = prog.step.block
    runner = BlockRunner(prog.program, dataclasses.replace(
        block, returns=(block.returns, {name: name})), np, 0)
    x = np.ones((1, 2), np.float32)
    total, seen = runner.run(prog.scope.values, [x])
    assert total.tolist() == [[6.0, 6.0]]
    assert seen[name][:, 0, 0].tolist() == [1, 2, 3, 4, 5, 6]


@pytest.fixture
def standin(monkeypatch):
    """'gpu' is the CuPy stand-in of tests/device_standin.py for the test."""
    from device_standin import module

    from fluid_interactive import backend
    monkeypatch.setattr(backend, "_cupy_with_gpu", lambda: module)
    return module


def test_loops_run_on_the_device_reading_back_only_their_condition(standin, rng):
    from device_standin import counting
    prog = Recurrence().Compile(seed=0, device="gpu")
    x = rng.standard_normal((3, 4)).astype(np.float32)
    expected = _reference(x, prog.get_var("w"), 5)
    prog.step(x, np.array([5]))                  # plans
    with counting() as moved:
        h = prog.step(x, np.array([5]))
    # x and n go in, h comes out; the condition is read before each of 5 iterations and
    # once more to stop
    assert dict(+moved) == {"to_device": 2, "to_host": 1, "sync": 6}
    np.testing.assert_allclose(h, expected, rtol=1e-5, atol=1e-6)


def test_a_static_rnn_trains_on_the_device_without_crossing(standin, rng):
    from device_standin import counting
    prog = _adding_class()().Compile(seed=0, device="gpu")
    host = _adding_class()().Compile(seed=0, device="cpu")
    x = rng.standard_normal((6, 4, 2)).astype(np.float32)
    y = rng.standard_normal((4, 1)).astype(np.float32)
    assert prog.train_step(x, y) == pytest.approx(host.train_step(x, y), rel=1e-5)
    with counting() as moved:
        loss = prog.train_step(x, y)
    assert dict(+moved) == {"to_device": 2, "sync": 1}   # x, y in; the loss out
    assert loss == pytest.approx(host.train_step(x, y), rel=1e-5)


def test_summary_counts_the_parameters_of_loop_bodies():
    summary = _adding_program().summary()
    rows = {row.layer: row for row in summary.rows}
    assert rows["fc_0"].trainable == (2 + 8) * 8 + 8   # the step's fc, inside the loop
    assert summary.trainable == rows["fc_0"].trainable + rows["fc_1"].trainable


class TrainedRecurrence(Recurrence):
    @fluid.network("x", "n", "y")
    def train_step(self, x, n, y):
        x = L.data(name='x', shape=[4], dtype='float32')
        n = L.data(name='n', shape=[1], dtype='int64', append_batch_size=False)
        y = L.data(name='y', shape=[4], dtype='float32')
        w = L.create_parameter(shape=[4, 4], dtype='float32', name='w')
        h = L.fill_constant_batch_size_like(x, shape=[-1, 4], dtype='float32', value=0.0)
        i = L.fill_constant(shape=[1], dtype='int64', value=0)
        cond = L.less_than(x=i, y=n)
        loop = L.While(cond=cond)
        with loop.block():
            with fluid.var_scope("cell"):
                L.assign(L.tanh(L.matmul(h, w) + x), output=h)
            L.increment(x=i, value=1, in_place=True)
            L.less_than(x=i, y=n, cond=cond)
        loss = L.mean(L.square_error_cost(h, y))
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
        return loss


def test_watching_a_var_inside_a_loop_keeps_one_value_per_iteration(rng):
    prog = TrainedRecurrence().Compile(seed=0)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    y = np.zeros((5, 4), np.float32)
    kept = prog.watch("cell")
    assert list(kept) == ["train_step"]
    w = prog.get_var("w")
    prog.train_step(x, np.array([3]), y)
    watched = prog.train_step.watched
    inner = [n for n in watched if n.startswith("cell/") and "@GRAD" not in n
             and watched[n].shape[-2:] == (5, 4)]
    assert inner, list(watched)
    states = watched[inner[-1]]                  # the new h of each iteration
    assert states.shape == (3, 5, 4)
    h = np.zeros_like(x)
    for t in range(3):
        h = np.tanh(h @ w + x)
        np.testing.assert_allclose(states[t], h, rtol=1e-5, atol=1e-6)
    prog.train_step(x, np.array([0]), y)        # zero iterations: an empty stack
    assert prog.train_step.watched[inner[-1]].shape[0] == 0


def test_a_random_op_inside_a_loop_makes_the_method_change_state():
    class Noisy(fluid.Program):
        @fluid.network("x", "n", is_test=False)      # dropout draws (training mode)
        def step(self, x, n):
            x = L.data(name='x', shape=[4], dtype='float32')
            n = L.data(name='n', shape=[1], dtype='int64', append_batch_size=False)
            i = L.fill_constant(shape=[1], dtype='int64', value=0)
            cond = L.less_than(x=i, y=n)
            loop = L.While(cond=cond)
            with loop.block():
                L.assign(L.dropout(x, dropout_prob=0.5), output=x)
                L.increment(x=i, value=1, in_place=True)
                L.less_than(x=i, y=n, cond=cond)
            return x
    assert Noisy().Compile(seed=0).step.changes_state
    assert not Recurrence().Compile(seed=0).step.changes_state


def test_history_rewinds_calls_of_a_method_with_a_loop(rng):
    prog = TrainedRecurrence().Compile(seed=0)
    prog.keep_history()
    x = rng.standard_normal((5, 4)).astype(np.float32)
    y = np.ones((5, 4), np.float32)
    before = prog.get_var("w")
    first = prog.train_step(x, np.array([4]), y)
    for _ in range(3):
        prog.train_step(x, np.array([4]), y)
    prog.rewind(4)
    np.testing.assert_array_equal(prog.get_var("w"), before)
    assert prog.train_step(x, np.array([4]), y) == first


def test_watched_gradients_inside_a_loop_come_in_iteration_order(rng):
    prog = TrainedRecurrence().Compile(seed=0)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    y = rng.standard_normal((2, 4)).astype(np.float32)
    prog.watch("cell/tanh_0.tmp_0", "cell/tanh_0.tmp_0@GRAD")
    prog.train_step(x, np.array([3]), y)
    watched = prog.train_step.watched
    states, grads = watched["cell/tanh_0.tmp_0"], watched["cell/tanh_0.tmp_0@GRAD"]
    assert states.shape == grads.shape == (3, 2, 4)
    # the last iteration's output is h itself: its gradient is d(mean square error)/dh
    np.testing.assert_allclose(grads[2], 2 * (states[2] - y) / y.size, rtol=1e-5)


def test_a_loop_carried_state_that_starts_as_a_constant_carries_its_gradient(rng):
    """h starts as fill_constant (stop_gradient, as Paddle's constants are) and the loop
    overwrites it with values depending on w: the gradient reaches w through every
    iteration."""
    prog = TrainedRecurrence().Compile(seed=0)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.standard_normal((3, 4)).astype(np.float32)
    w = prog.get_var("w").astype(np.float64)

    def loss(w64):
        h = np.zeros((3, 4))
        for _ in range(4):
            h = np.tanh(h @ w64 + x)
        return np.mean((h - y) ** 2)
    numeric = np.zeros_like(w)
    for idx in np.ndindex(*w.shape):
        e = np.zeros_like(w)
        e[idx] = 1e-6
        numeric[idx] = (loss(w + e) - loss(w - e)) / 2e-6
    prog.train_step(x, np.array([4]), y)
    grad = (w - prog.get_var("w")) / 0.1              # one SGD step at rate 0.1
    np.testing.assert_allclose(grad, numeric, rtol=2e-3, atol=1e-5)
