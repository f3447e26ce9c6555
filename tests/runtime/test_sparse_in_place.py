"""A sparse update writes its rows into the table in place (a step costs its rows, not the
table), and the live program's rules still hold: a failed step leaves the scope as it
was, rewind puts the rows back, the history keeps rows not tables, snapshots and
`parameters()` do not change under the user, and watched gradients are SelectedRows."""
import numpy as np
import pytest

import fluid
from fluid_interactive.errors import KernelError

V, D = 3000, 3
IDS = np.array([[4], [9], [4], [17]], np.int64)
Y = np.ones((4, 1), np.float32)
FAIL = {"now": False}


def fail_when_asked(x):
    if FAIL["now"]:
        raise RuntimeError("asked to fail after the update")
    return np.asarray(x).reshape(1)


class Table(fluid.Program):
    lazy = True

    @fluid.network("ids", "y")
    def train_step(self, ids, y):
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        e = fluid.layers.embedding(ids, size=[V, D], is_sparse=True,
                                   param_attr=fluid.ParamAttr(name="table"))
        loss = fluid.layers.mean(fluid.layers.square_error_cost(
            fluid.layers.fc(e, size=1), y))
        fluid.optimizer.Adam(0.1, lazy_mode=self.lazy).minimize(loss)
        after = fluid.layers.create_tensor("float32", shape=[1])
        fluid.layers.py_func(fail_when_asked, loss, after)   # runs after the updates
        return loss

    @fluid.network("ids")
    def infer(self, ids):
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        return fluid.layers.embedding(ids, size=[V, D], param_attr=fluid.ParamAttr(
            name="table"))


@pytest.fixture
def prog():
    FAIL["now"] = False
    p = Table().Compile(seed=0)
    yield p
    FAIL["now"] = False


def test_the_table_is_updated_in_place_on_its_rows(prog):
    table = prog.scope["table"]
    before = table.copy()
    prog.train_step(IDS, Y)
    assert prog.scope["table"] is table                     # no new table per step
    changed = np.flatnonzero((table != before).any(axis=1))
    np.testing.assert_array_equal(changed, [4, 9, 17])
    assert prog.scope.in_place == {"table", "table_moment1_0", "table_moment2_0"}
    assert "start_row_journal()" in prog.train_step.source


def test_a_failed_step_puts_the_rows_back(prog):
    prog.train_step(IDS, Y)
    state = {n: np.array(prog.scope[n]) for n in prog.scope.in_place}
    FAIL["now"] = True
    with pytest.raises(KernelError, match="asked to fail after the update"):
        prog.train_step(IDS, Y)
    for name, value in state.items():
        np.testing.assert_array_equal(prog.scope[name], value, err_msg=name)


def test_rewind_writes_the_rows_back_and_the_history_keeps_rows(prog):
    prog.keep_history()
    start = prog.get_var("table")
    prog.train_step(IDS, Y)
    one = prog.get_var("table")
    prog.train_step(IDS, Y)
    # per step: 3 unique rows of the table and of its two moments, not the arrays (the
    # two steps hold less than one table's bytes)
    assert prog.history.nbytes < V * D * 4
    prog.rewind(1)
    np.testing.assert_array_equal(prog.get_var("table"), one)
    prog.rewind(1)
    np.testing.assert_array_equal(prog.get_var("table"), start)
    prog.train_step(IDS, Y)
    np.testing.assert_array_equal(prog.get_var("table"), one)   # the same step again


def test_values_handed_out_do_not_change_under_the_user(prog):
    params = prog.parameters()
    snap = prog.scope.snapshot()
    inferred = prog.infer(IDS)
    prog.train_step(IDS, Y)
    assert not np.array_equal(prog.get_var("table"), params["table"])
    np.testing.assert_array_equal(snap["table"], params["table"])
    np.testing.assert_array_equal(inferred, params["table"][IDS[:, 0]])


def test_a_method_reading_the_table_runs_under_the_lock(prog):
    # infer changes nothing, but reads a table steps change in place: it must not see
    # half of a step's rows, so it takes turns with train_step (its entry takes the lock)
    assert "lock" in type(prog.infer).__call__.__code__.co_names


def test_watched_gradient_is_selected_rows(prog):
    prog.watch("table@GRAD")
    prog.train_step(IDS, Y)
    g = prog.watched["table@GRAD"]
    assert isinstance(g, fluid.SelectedRows) and g.height == V
    np.testing.assert_array_equal(g.rows, IDS[:, 0])
    merged = g.merged()
    np.testing.assert_array_equal(merged.rows, [4, 9, 17])
    np.testing.assert_allclose(merged.to_dense()[4], g.values[0] + g.values[2], rtol=1e-6)
    assert "SelectedRows" in repr(prog.watched)
    assert "table@GRAD:SelectedRows f32[3000,3]" in prog.train_step.text


def test_exact_adam_makes_new_arrays():
    p = Table(lazy=False).Compile(seed=0)
    table = p.scope["table"]
    p.train_step(IDS, Y)
    assert p.scope["table"] is not table and not p.scope.in_place
