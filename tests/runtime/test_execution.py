"""The compiled runtime: plans match the reference interpreter, updates commit only after a
whole step succeeded, kernel failures name the op and the user's line."""
import linecache

import numpy as np
import pytest

import fluid
from fluid_interactive.ops.interpret import run_ops


class MLP(fluid.Program):
    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[6], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        h = fluid.layers.fc(input=x, size=16, act="tanh")
        h = fluid.layers.fc(input=[h, x], size=8, act="relu")   # x read twice: grads summed
        out = fluid.layers.fc(input=h, size=1, act="sigmoid")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(out, y))
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
        return loss

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name="x", shape=[6], dtype="float32")
        return fluid.layers.fc(input=x, size=3, act="sigmoid")


def _data(rng, n=32):
    return (rng.standard_normal((n, 6)).astype(np.float32),
            rng.uniform(0, 1, (n, 1)).astype(np.float32))


def test_plan_matches_reference_interpreter(rng):
    prog = MLP().Compile(seed=3)
    x, y = _data(rng)
    before = {k: prog.get_var(k) for k in prog.var_names()}
    env = dict(before, x=x, y=y)
    run_ops(prog.program.block("train").ops, env)
    loss = prog.train(x, y)
    assert loss == pytest.approx(float(env[prog.program.block("train").returns]), rel=1e-6)
    trained = {n for op in prog.program.block("train").ops for n in op.input_names()}
    for name, value in prog.parameters().items():
        np.testing.assert_allclose(value, env[name], rtol=1e-5, atol=1e-6)
        updated = not np.array_equal(value, before[name])
        assert updated == (name in trained), name   # infer's own fc is left alone


def test_repeated_steps_reuse_buffers_without_corruption(rng):
    """Temporaries share buffers across ops and calls; results must not depend on that."""
    a, b = MLP().Compile(seed=5), MLP().Compile(seed=5)
    x, y = _data(rng)
    for _ in range(5):
        la = a.train(x, y)
        env = {k: b.get_var(k) for k in b.var_names()}
        env.update(x=x, y=y)
        run_ops(b.program.block("train").ops, env)
        b.set_parameters({k: env[k] for k in b.parameters()})
        assert la == pytest.approx(float(env[b.program.block("train").returns]), rel=1e-5)
    for k, v in a.parameters().items():
        np.testing.assert_allclose(v, b.parameters()[k], rtol=1e-5, atol=1e-6)


def test_fetched_arrays_are_not_overwritten_by_later_calls(rng):
    prog = MLP().Compile(seed=1)
    x1, x2 = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    first = prog.infer(x1)
    kept = first.copy()
    prog.infer(x2)
    np.testing.assert_array_equal(first, kept)


def test_a_new_batch_size_gets_its_own_plan(rng):
    """Its own kernels, over buffers of the method's one memory: the plans of 1 and 7,
    which held blocks that 32 outgrew, are planned again when next called."""
    prog = MLP().Compile(seed=1)
    for n in (1, 7, 32, 7):
        assert prog.infer(rng.standard_normal((n, 6))).shape == (n, 3)
    assert set(prog.infer._runner.plans) == {((32, 6),), ((7, 6),)}


def test_source_is_readable_python(rng):
    prog = MLP().Compile(seed=1)
    assert "no plan yet" in prog.infer.source
    prog.infer(rng.standard_normal((2, 6)))
    src = prog.infer.source
    assert src.startswith("def infer(S, x):")
    assert "= mul(X=x" in src and "return " in src
    compile(src, "<check>", "exec")


def _break_after_backward(prog, name="train"):
    """Make the first optimizer kernel of the plan raise, after forward and backward ran."""
    code = list(getattr(prog, name)._runner.plans.values())[0]
    ns = code.code.fn.__globals__
    sgd = [k for k in ns if k.endswith("_sgd")]
    original = ns[sgd[-1]]

    def boom(*args):
        raise FloatingPointError("injected failure")
    ns[sgd[-1]] = boom
    return lambda: ns.__setitem__(sgd[-1], original)


def test_failed_step_changes_nothing(rng):
    prog = MLP().Compile(seed=2)
    x, y = _data(rng)
    prog.train(x, y)                      # build the plan
    before = {k: prog.get_var(k) for k in prog.var_names()}
    restore = _break_after_backward(prog)
    with pytest.raises(fluid.KernelError) as info:
        prog.train(x, y)
    for k, v in before.items():
        np.testing.assert_array_equal(prog.get_var(k), v)
    message = str(info.value)
    assert "injected failure" in message and "sgd(" in message
    assert "test_execution.py:" in message       # the user's line that recorded the op
    assert "No state was changed" in message
    restore()
    prog.train(x, y)                      # and it recovers
    assert any(not np.array_equal(prog.get_var(k), before[k]) for k in prog.parameters())


def test_keyboard_interrupt_mid_step_leaves_parameters_whole(rng, monkeypatch):
    monkeypatch.setenv("FLUID_PLAN_PASSES", "none")  # one update op per parameter
    prog = MLP().Compile(seed=2)
    x, y = _data(rng)
    prog.train(x, y)
    code = list(prog.train._runner.plans.values())[0]
    ns = code.code.fn.__globals__
    sgd = sorted(k for k in ns if k.endswith("_sgd"))
    original = ns[sgd[1]]

    def interrupt(*args):
        raise KeyboardInterrupt
    ns[sgd[1]] = interrupt                # the first update already ran when this fires
    before = {k: prog.get_var(k) for k in prog.parameters()}
    with pytest.raises(KeyboardInterrupt):
        prog.train(x, y)
    for k, v in before.items():
        np.testing.assert_array_equal(prog.get_var(k), v)
    ns[sgd[1]] = original


def test_kernel_error_traceback_shows_generated_line(rng):
    prog = MLP().Compile(seed=2)
    x, y = _data(rng)
    prog.train(x, y)
    _break_after_backward(prog)
    with pytest.raises(fluid.KernelError) as info:
        prog.train(x, y)
    tb = info.value.__cause__.__traceback__
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    generated = [f for f in frames if f.startswith("<fluid:")]
    assert generated and linecache.getlines(generated[0])


def test_constant_gradient_seed_is_folded(rng):
    prog = MLP().Compile(seed=2)
    prog.train(*_data(rng))
    src = prog.train.source
    assert "fill_constant" not in src.split("return")[0].replace("# ", "#").split("#")[0]
    assert "k" in src and "c_" in src       # the seed and what follows from it are constants
