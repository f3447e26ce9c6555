"""where and sequence_step_mask through the op harness: forward against NumPy, the shape
rule against the kernel, gradients against float64 finite differences, NaN and inf on the
side not taken never reaching the result or its gradient, and errors that name the shapes."""
import numpy as np
import pytest
from ops.harness import analytic_grads, build_op, check_grad, check_op

from fluid_interactive.errors import DTypeError, ShapeError
from fluid_interactive.ops.interpret import run_ops


def _np_where(Condition, X, Y, **_):
    return np.where(Condition, X, Y)


@pytest.mark.parametrize("cond_shape", [(4, 3), (4, 1), (1, 3), (1, 1)])
def test_where_selects_with_a_broadcast_condition(rng, cond_shape):
    cond = rng.uniform(size=cond_shape) > 0.5
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    check_op("where", {"Condition": cond, "X": x, "Y": y}, reference=_np_where,
             rtol=0, atol=0, batch_unknown=cond_shape[0] != 1)
    check_grad("where", {"Condition": cond, "X": x, "Y": y}, wrt=["X", "Y"])


@pytest.mark.parametrize("y_shape", [(1, 1), (4, 1), (1, 3)])
def test_where_fills_from_a_broadcast_y(rng, y_shape):
    cond = rng.uniform(size=(4, 1)) > 0.5
    x, y = rng.standard_normal((4, 3)), rng.standard_normal(y_shape)
    check_op("where", {"Condition": cond, "X": x, "Y": y}, reference=_np_where,
             rtol=0, atol=0, batch_unknown=y_shape[0] != 1)
    check_grad("where", {"Condition": cond, "X": x, "Y": y}, wrt=["X", "Y"])


def test_where_of_three_dims_and_of_ints(rng):
    cond = rng.uniform(size=(5, 2, 1)) > 0.3
    x, y = rng.standard_normal((5, 2, 4)), rng.standard_normal((5, 2, 4))
    check_op("where", {"Condition": cond, "X": x, "Y": y}, reference=_np_where, rtol=0, atol=0)
    check_grad("where", {"Condition": cond, "X": x, "Y": y}, wrt=["X"])
    check_grad("where", {"Condition": cond, "X": x, "Y": y}, wrt=["Y"])
    xi, yi = rng.integers(0, 9, (5, 2, 4)), rng.integers(0, 9, (5, 2, 4))
    check_op("where", {"Condition": cond, "X": xi, "Y": yi}, reference=_np_where, rtol=0,
             atol=0)


def test_what_is_not_selected_never_reaches_the_result_or_its_gradient(rng):
    """Rows past a sequence's end may hold NaN or inf: a multiplication by a 0/1 mask
    would spread them (0 * inf is NaN), the selection does not."""
    cond = np.array([[True], [False], [True]])
    x = rng.standard_normal((3, 2))
    y = np.array([[np.nan, np.inf], [1.0, 2.0], [-np.inf, np.nan]])
    op, env = build_op("where", {"Condition": cond, "X": x, "Y": y})
    run_ops([op], env)
    out = env[op.output("Out")[0]]
    np.testing.assert_array_equal(out, [x[0], [1.0, 2.0], x[2]])
    dout = np.array([[1.0, 2.0], [np.nan, np.nan], [3.0, 4.0]])   # NaN where Y was taken
    grads = analytic_grads(op, env, {op.output("Out")[0]: dout}, ["X", "Y"])
    np.testing.assert_array_equal(grads["X"][0], [[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]])
    np.testing.assert_array_equal(grads["Y"][0], [[0.0, 0.0], [np.nan, np.nan], [0.0, 0.0]])


def test_where_errors_name_the_shapes(rng):
    x = rng.standard_normal((4, 3))
    with pytest.raises(DTypeError, match="Condition must be bool, got float64"):
        check_op("where", {"Condition": x, "X": x, "Y": x})
    with pytest.raises(ShapeError, match=r"Condition \[4\] must have X's rank.*X \[4, 3\]"):
        check_op("where", {"Condition": np.ones(4, bool), "X": x, "Y": x})
    with pytest.raises(ShapeError, match=r"Condition \[2, 3\].*X \[4, 3\]"):
        check_op("where", {"Condition": np.ones((2, 3), bool), "X": x, "Y": x})
    with pytest.raises(ShapeError, match=r"Y \[4, 2\] must have X's rank.*X \[4, 3\]"):
        check_op("where", {"Condition": np.ones((4, 3), bool), "X": x, "Y": x[:, :2]})
    with pytest.raises(DTypeError, match="X float64 and Y float32"):
        check_op("where", {"Condition": np.ones((4, 3), bool), "X": x,
                           "Y": x.astype(np.float32)})


@pytest.mark.parametrize("rank", [2, 3, 4])
def test_sequence_step_mask_is_time_major(rng, rank):
    x = rng.standard_normal((4, 6, 2))
    lengths = np.array([6, 1, 0, 3], np.int64)

    def reference(X, Lengths, rank, **_):
        mask = np.arange(X.shape[1])[:, None] < Lengths[None, :]
        return mask.reshape(mask.shape + (1,) * (rank - 2))
    (got,) = check_op("sequence_step_mask", {"X": x, "Lengths": lengths}, {"rank": rank},
                      reference=reference, rtol=0, atol=0)["Out"]
    assert got.dtype == np.bool_ and got.shape == (6, 4) + (1,) * (rank - 2)


def test_sequence_step_mask_checks_the_lengths(rng):
    x = rng.standard_normal((3, 5, 2))
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 5\].*from 1 to 6"):
        check_op("sequence_step_mask", {"X": x, "Lengths": np.array([1, 6, 2], np.int64)})
    with pytest.raises(ShapeError, match=r"Lengths must be \[B\].*B = 3"):
        check_op("sequence_step_mask", {"X": x, "Lengths": np.array([1, 2], np.int64)})
    with pytest.raises(DTypeError, match="Lengths must be int64"):
        check_op("sequence_step_mask", {"X": x, "Lengths": np.array([1.0, 2.0, 3.0])})
    with pytest.raises(ShapeError, match=r"X must be a padded batch \[B, T, ...\]"):
        check_op("sequence_step_mask", {"X": x[:, 0, 0], "Lengths": np.array([1, 2, 3])})
