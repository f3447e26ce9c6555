"""Rows-only gradients: lookup_table_grad with is_sparse gives a SelectedRows equal to the
dense gradient, checked against float64 central differences; padding_idx gets no rows."""
import numpy as np
import pytest
from ops.device import run_on_device
from ops.harness import analytic_grads, build_op

from fluid_interactive.errors import ShapeError
from fluid_interactive.ir.records import OpDesc
from fluid_interactive.ops.apply import infer_op, prepare_kernel
from fluid_interactive.ops.interpret import run_ops
from fluid_interactive.ops.spec import TensorType
from fluid_interactive.util.selected_rows import SelectedRows


def _sparse_grad(w, ids, attrs, cot):
    op, env = build_op("lookup_table", {"W": w, "Ids": ids}, attrs)
    run_ops([op], env)
    return analytic_grads(op, env, {op.output_names()[0]: cot}, ["W"])["W"][0]


@pytest.mark.parametrize("padding_idx", [-1, 2])
def test_sparse_grad_equals_finite_differences(rng, padding_idx):
    w = rng.standard_normal((7, 3))
    ids = np.array([[2], [5], [2], [0], [2]], np.int64)      # 2 three times
    attrs = {"padding_idx": padding_idx, "is_sparse": True}
    cot = rng.standard_normal((5, 3))
    g = _sparse_grad(w, ids, attrs, cot)
    assert isinstance(g, SelectedRows) and g.height == 7
    expected_rows = [2, 5, 2, 0, 2] if padding_idx == -1 else [5, 0]
    np.testing.assert_array_equal(g.rows, expected_rows)
    assert g.rows.dtype == np.int64 and g.values.shape == (len(expected_rows), 3)

    def loss(table):
        out = table[ids[:, 0]].copy()
        if padding_idx != -1:
            out[ids[:, 0] == padding_idx] = 0
        return float(np.sum(out * cot))
    numeric = np.zeros_like(w)
    eps = 1e-6
    for i in np.ndindex(w.shape):
        wp, wm = w.copy(), w.copy()
        wp[i] += eps
        wm[i] -= eps
        numeric[i] = (loss(wp) - loss(wm)) / (2 * eps)
    np.testing.assert_allclose(g.to_dense(), numeric, rtol=1e-6, atol=1e-8)
    dense = _sparse_grad(w, ids, {"padding_idx": padding_idx}, cot)
    np.testing.assert_array_equal(g.to_dense(), dense)


# --- the value ----------------------------------------------------------------------------------

def _dense_sum(rows, values, height):
    out = np.zeros((height,) + values.shape[1:], values.dtype)
    np.add.at(out, rows, values)
    return out


@pytest.mark.parametrize("hot", [3, 100])   # repeats within and beyond the stepwise merge
def test_merged_rows_add_up_as_a_scatter_add_does(rng, hot):
    rows = np.concatenate([rng.integers(0, 50, 40), np.full(hot, 7)]).astype(np.int64)
    rng.shuffle(rows)
    values = rng.standard_normal((len(rows), 3)).astype(np.float32)
    sr = SelectedRows(rows, values, 50)
    merged = sr.merged()
    np.testing.assert_array_equal(merged.rows, np.unique(rows))
    dense = _dense_sum(rows, values, 50)
    np.testing.assert_array_equal(merged.values, dense[merged.rows])   # bit for bit
    np.testing.assert_array_equal(sr.to_dense(), dense)
    assert sr.shape == (50, 3) and sr.dtype == np.float32 and sr.nbytes == rows.nbytes + \
        values.nbytes
    copy = sr.copy()
    assert copy.rows is not sr.rows and copy.get().height == 50


def test_selected_rows_checks_what_it_is_given():
    with pytest.raises(ValueError, match="1-D int array"):
        SelectedRows(np.zeros((2, 1), np.int64), np.zeros((2, 3)), 5)
    with pytest.raises(ValueError, match="one row per id"):
        SelectedRows(np.zeros(2, np.int64), np.zeros((3, 3)), 5)
    with pytest.raises(ValueError, match="height must be an int"):
        SelectedRows(np.zeros(2, np.int64), np.zeros((2, 3)), -1)
    sr = SelectedRows(np.arange(20, dtype=np.int64), np.zeros((20, 2), np.float32), 30)
    assert repr(sr) == ("SelectedRows(height=30, rows=[0, 1, 2, 3, 4, 5, 6, 7, ...] "
                        "(20 rows), values=float32[20, 2])")


# --- ops on rows-only values ---------------------------------------------------------------------

ROWS = TensorType((6, 2), "float64", "selected_rows")
DENSE = TensorType((6, 2), "float64")


def _kernel(op, types):
    """The op's output types (from its rule) and its kernel."""
    types = dict(types)
    for slot, ts in infer_op(op, types.__getitem__).items():
        types.update(zip(op.outputs[slot], ts))
    return types, prepare_kernel(op, types.__getitem__, np)


def _values(rng):
    a = SelectedRows(np.array([4, 1, 4], np.int64), rng.standard_normal((3, 2)), 6)
    b = SelectedRows(np.array([1, 5], np.int64), rng.standard_normal((2, 2)), 6)
    return a, b, rng.standard_normal((6, 2))


def test_sum_of_rows_only_values_lists_every_row_and_with_a_dense_one_is_dense(rng):
    a, b, d = _values(rng)
    types, fn = _kernel(OpDesc("sum", {"X": ["a", "b"]}, {"Out": ["s"]}),
                        {"a": ROWS, "b": ROWS})
    s = fn(a, b)
    assert types["s"].kind == "selected_rows"
    np.testing.assert_array_equal(s.rows, [4, 1, 4, 1, 5])
    np.testing.assert_allclose(s.to_dense(), a.to_dense() + b.to_dense())
    types, fn = _kernel(OpDesc("sum", {"X": ["a", "d"]}, {"Out": ["m"]}),
                        {"a": ROWS, "d": DENSE})
    assert types["m"].kind == "tensor"
    np.testing.assert_allclose(fn(a, d), a.to_dense() + d)


def test_clip_and_product_map_the_merged_rows_and_other_ops_densify(rng):
    a, _, _ = _values(rng)
    types, fn = _kernel(OpDesc("clip", {"X": ["a"]}, {"Out": ["c"]},
                               {"min": -0.1, "max": 0.1}), {"a": ROWS})
    c = fn(a)
    assert types["c"].kind == "selected_rows"
    np.testing.assert_array_equal(c.rows, [1, 4])
    np.testing.assert_allclose(c.to_dense(), np.clip(a.to_dense(), -0.1, 0.1))
    _, fn = _kernel(OpDesc("elementwise_mul", {"X": ["a"], "Y": ["k"]}, {"Out": ["p"]}),
                    {"a": ROWS, "k": TensorType((1,), "float64")})
    np.testing.assert_allclose(fn(a, np.array([0.5])).to_dense(), a.to_dense() * 0.5)
    types, fn = _kernel(OpDesc("square", {"X": ["a"]}, {"Out": ["q"]}), {"a": ROWS})
    assert types["q"].kind == "tensor"                       # no rows path: densified
    np.testing.assert_allclose(fn(a), a.to_dense() ** 2)


def test_merge_and_values_ops(rng):
    a, _, _ = _values(rng)
    ops = [OpDesc("merge_selected_rows", {"X": ["a"]}, {"Out": ["m"]}),
           OpDesc("get_tensor_from_selected_rows", {"X": ["m"]}, {"Out": ["v"]})]
    env = {"a": a}
    run_ops(ops, env)
    run_on_device(ops, {"a": a}, env)     # the same on the device array module
    np.testing.assert_array_equal(env["m"].rows, [1, 4])
    np.testing.assert_allclose(env["v"], a.to_dense()[[1, 4]])
    types, _ = _kernel(ops[1], {"m": ROWS})
    assert types["v"].shape == (-1, 2)
    with pytest.raises(ShapeError, match="X must be rows only"):
        infer_op(OpDesc("merge_selected_rows", {"X": ["d"]}, {"Out": ["x"]}),
                 {"d": DENSE}.__getitem__)


def test_prefetch_grad_sums_the_gradient_of_each_id():
    local = np.array([0, 2, 2, 1, 0], np.int64)            # each looked-up id's position
    row_ids = np.array([3, 7, 9], np.int64)                # the distinct ids
    g = np.arange(10, dtype=np.float32).reshape(5, 2)
    ops = [OpDesc("prefetch_grad", {"Local": ["l"], "RowIds": ["r"], "Out@GRAD": ["g"]},
                  {"Grad": ["d"]}, {"padding_idx": -1})]
    env = {"l": local, "r": row_ids, "g": g}
    run_ops(ops, env)
    np.testing.assert_array_equal(env["d"], [g[0] + g[4], g[3], g[1] + g[2]])
    run_on_device(ops, {"l": local, "r": row_ids, "g": g}, env)   # the same on the device
