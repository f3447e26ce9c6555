"""Buffer planning (runtime/plan/buffers.py): outputs written in place into inputs that die at
that op, gradients of a fused update laid out in one flat array, and results equal to the
reference interpreter's however buffers are shared."""
import numpy as np
import pytest

import fluid
from fluid_interactive.ops.interpret import run_ops
from fluid_interactive.runtime.plan.buffers import ArenaSlot


class Chains(fluid.Program):
    """Activations that die at their next op, and one that is read again later."""

    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[5], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        h = fluid.layers.fc(x, size=7, act="tanh")
        s = fluid.layers.sigmoid(h)
        k = fluid.layers.scale(s, scale=2.0, bias=0.5)
        both = k + h                       # h is read again here: not overwritten before
        r = fluid.layers.relu(both)
        pred = fluid.layers.fc(r, size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
        return loss


def _steps(prog, x, y):
    from fluid_interactive.ops.spec import TensorType
    from fluid_interactive.runtime.plan.analysis import analyse_block
    runner = prog.train._runner
    feeds = {"x": TensorType(x.shape, "float32"), "y": TensorType(y.shape, "float32")}
    return analyse_block(runner.program, runner.plan_block, feeds, np).steps


def _buffer(steps, var):
    for step in steps:
        for slot, names in step.op.outputs.items():
            if var in names and slot in step.buffers:
                return step.buffers[slot][names.index(var)]
    return None


def test_an_op_writes_in_place_into_an_input_that_dies_there(rng, monkeypatch):
    monkeypatch.setenv("FLUID_PLAN_PASSES", "fuse_optimizer_updates")   # keep relu apart
    prog = Chains().Compile(seed=1)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    y = rng.standard_normal((8, 1)).astype(np.float32)
    steps = _steps(prog, x, y)
    by_type = {s.op.type: s for s in steps}
    relu = by_type["relu"]
    # relu's input (k + h) dies at relu: its buffer carries relu's output
    assert _buffer(steps, relu.op.outputs["Out"][0]) is _buffer(steps, relu.op.inputs["X"][0])
    # tanh's output h is read again by the add after sigmoid: sigmoid does not take it
    sig = by_type["sigmoid"]
    assert _buffer(steps, sig.op.outputs["Out"][0]) is not _buffer(steps, sig.op.inputs["X"][0])


def test_fused_update_gradients_are_consecutive_views_of_one_array(rng):
    prog = Chains().Compile(seed=1)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    y = rng.standard_normal((8, 1)).astype(np.float32)
    steps = _steps(prog, x, y)
    fused = next(s for s in steps if s.op.type == "fused_adam")
    slots = [_buffer(steps, g) for g in fused.op.inputs["Grads"]]
    assert all(isinstance(b, ArenaSlot) for b in slots)
    assert len({id(b.arena) for b in slots}) == 1
    offsets = [b.offset for b in slots]
    sizes = [int(np.prod(b.shape)) for b in slots]
    assert offsets == [sum(sizes[:i]) for i in range(len(sizes))]


@pytest.mark.parametrize("fused", [True, False])
def test_results_equal_the_reference_interpreter(monkeypatch, rng, fused):
    if not fused:
        monkeypatch.setenv("FLUID_PLAN_PASSES", "none")
    prog, ref = Chains().Compile(seed=4), Chains().Compile(seed=4)
    for _ in range(4):
        x = rng.standard_normal((8, 5)).astype(np.float32)
        y = rng.standard_normal((8, 1)).astype(np.float32)
        loss = prog.train(x, y)
        env = {k: ref.get_var(k) for k in ref.var_names()}
        env.update(x=x, y=y)
        run_ops(ref.program.block("train").ops, env)
        ref.set_parameters({k: env[k] for k in ref.parameters()})
        for k in ref.var_names():
            ref.set_var(k, env[k])
        assert loss == pytest.approx(float(env[ref.program.block("train").returns]),
                                     rel=1e-6)
    for k, v in ref.parameters().items():
        np.testing.assert_allclose(prog.parameters()[k], v, rtol=1e-5, atol=1e-7)


def test_a_returned_view_keeps_its_buffer_to_the_end(rng):
    """A method returning a view of a temporary (a transpose) hands the temporary's array
    out when it returns: no later op may take that buffer meanwhile."""
    class P(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name="x", shape=[-1, 4], dtype="float64",
                                  append_batch_size=False)
            seen = fluid.layers.transpose(fluid.layers.tanh(x), [1, 0])
            later = fluid.layers.tanh(fluid.layers.matmul(x, x))   # a temporary of one shape
            return seen, later
    x = rng.standard_normal((4, 4))
    seen, later = P().Compile().f(x)
    np.testing.assert_allclose(seen, np.tanh(x).T, rtol=1e-12)
    np.testing.assert_allclose(later, np.tanh(x @ x), rtol=1e-12)
