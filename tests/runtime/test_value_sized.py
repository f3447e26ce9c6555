"""Sizes that depend on values (where, unique) in a plan built for concrete feed shapes:
the dims stay -1, the steps that see them are prepared each time their input shapes
change, and an output whose shape the plan knows anyway still lands in its planned
buffer."""
import numpy as np

import fluid
from fluid_interactive.ops.spec import TensorType
from fluid_interactive.runtime.plan.analysis import analyse_block
from fluid_interactive.runtime.plan.emitter import DynamicKernel, dynamic

L = fluid.layers


class Picks(fluid.Program):
    """Rows of a table picked by where, summed into a loss, trained with Adam (its update
    of several parameters is fused, with the gradients in one arena)."""

    @fluid.network("ids")
    def train(self, ids):
        ids = L.data("ids", shape=[6], dtype="int64", append_batch_size=False)
        table = L.create_parameter([10, 4], "float32", name="table")
        scales = [L.create_parameter([4], "float32", name=f"s{i}") for i in range(3)]
        rows = L.gather(table, L.gather_nd(ids, L.where(ids > 4)))
        h = L.reduce_sum(rows, dim=[0])
        for s in scales:
            h = h * s + s
        loss = L.reduce_sum(h * h)
        fluid.optimizer.Adam(learning_rate=0.1).minimize(loss)
        return loss


def _analysis(prog, ids):
    runner = prog.train._runner
    feeds = {"ids": TensorType(ids.shape, "int64")}
    return analyse_block(runner.program, runner.plan_block, feeds, np)


def test_value_sized_dims_stay_unknown_and_later_steps_are_sized_per_call():
    ids = np.array([1, 5, 7, 2, 9, 9])
    analysis = _analysis(Picks().Compile(seed=0), ids)
    by_type = {s.op.type: s for s in analysis.steps}
    coords = by_type["where_index"].outputs[0]
    assert analysis.types[coords].shape == (-1, 1)
    for op_type in ("where_index", "gather_nd", "gather", "reduce_sum_grad", "gather_grad"):
        step = by_type[op_type]
        assert dynamic(analysis.types, step.inputs + step.outputs), op_type
    update = by_type["fused_adam"]   # the parameters' gradients have known shapes
    assert not dynamic(analysis.types, update.inputs + update.outputs)


def test_an_output_the_plan_knows_goes_into_its_planned_buffer():
    """gather's gradient reads dOut [?, 4] but gives the table's [10, 4]: the dynamic
    step writes it into the buffer the plan gave it (a view of the gradients' arena)."""
    prog = Picks().Compile(seed=0)
    ids = np.array([1, 5, 7, 2, 9, 9])
    analysis = _analysis(prog, ids)
    step = next(s for s in analysis.steps if s.op.type == "gather_grad")
    planned = step.buffers["X@GRAD"][0]
    assert planned is not None
    kernel = DynamicKernel(step.op, analysis.types, np, None, False, step.buffers)
    table = np.zeros((10, 4), np.float32)
    for rows in (np.array([5, 7, 9]), np.array([9])):
        dout = np.ones((len(rows), 4), np.float32)
        got = kernel(table, rows, dout)
        assert got is planned.materialize()
        np.testing.assert_array_equal(got[:, 0], np.bincount(rows, minlength=10))


def test_training_through_value_sized_rows_runs_call_after_call():
    prog = Picks().Compile(seed=0)
    before = prog.get_var("table").copy()
    losses = [prog.train(np.array(ids)) for ids in
              ([1, 5, 7, 2, 9, 9], [0, 1, 2, 3, 4, 0], [6, 6, 6, 6, 6, 6])]
    assert all(np.isfinite(losses))
    changed = np.flatnonzero(np.any(prog.get_var("table") != before, axis=1))
    np.testing.assert_array_equal(changed, [5, 6, 7, 9])   # only the rows picked


def test_value_sized_results_inside_a_loop():
    class Loop(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data("x", shape=[5], dtype="float32")
            i, n = L.fill_constant([1], "int64", 0), L.fill_constant([1], "int64", 3)
            total = L.fill_constant([1], "float32", 0.0)
            cond = L.less_than(i, n)
            loop = L.While(cond)
            with loop.block():
                picked = L.gather_nd(x, L.where(x > L.cast(i, "float32") * 0.3))
                L.assign(total + L.reduce_sum(picked), output=total)
                L.increment(i, in_place=True)
                L.less_than(i, n, cond=cond)
            return total
    prog = Loop().Compile()
    for seed in (0, 1):
        x = np.random.default_rng(seed).random((2, 5)).astype(np.float32)
        want = sum(x[x > k * np.float32(0.3)].sum() for k in range(3))
        np.testing.assert_allclose(prog.f(x), [want], rtol=1e-6)
