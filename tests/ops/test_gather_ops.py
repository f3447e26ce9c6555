"""Forward, shape-rule and gradient checks of the gathering ops (gather, gather_nd,
index_select, index_sample), each on the inputs of Paddle 1.8's unit test of the op."""
import numpy as np
import pytest
from ops.harness import analytic_grads, build_op, check_grad, check_op
from ops.traced import traced_types

from fluid_interactive.errors import DTypeError, ShapeError
from fluid_interactive.ops.interpret import run_ops

f64 = np.float64


# --- gather ------------------------------------------------------------------------------------

@pytest.mark.parametrize("x_shape,index,index_type,overwrite", [
    ((10, 20), [1, 3, 5], "int32", True), (100, [1, 3, 5], "int32", True),
    (100, [1, 3, 5], "int64", True), ((10, 20), [1, 3, 5], "int64", True),
    ((10, 20), [1, 1], "int32", False), ((10, 20), [1, 1, 3], "int32", False),
    ((10, 20), [1, 3], "int32", True),
])
def test_gather_matches_paddle_cases(rng, x_shape, index, index_type, overwrite):
    x = rng.random(x_shape)
    idx = np.array(index, index_type)
    check_op("gather", {"X": x, "Index": idx}, {"overwrite": overwrite},
             reference=lambda X, Index, **a: X[Index], batch_unknown=False)
    check_grad("gather", {"X": x, "Index": idx}, {"overwrite": overwrite})


def test_gather_takes_a_column_of_indices(rng):
    x = rng.random((6, 3))
    idx = np.array([[4], [0], [4]], "int64")
    check_op("gather", {"X": x, "Index": idx}, reference=lambda X, Index, **a: X[Index[:, 0]])
    assert traced_types("gather", {"X": ((-1, 3), "float32"), "Index": ((-1, 1), "int64")}
                        ) == [((-1, 3), "float32")]


def _gather_grad(x, idx, dout, overwrite):
    op, env = build_op("gather", {"X": x, "Index": idx}, {"overwrite": overwrite})
    run_ops([op], env)
    return analytic_grads(op, env, {op.output_names()[0]: dout}, ["X"])["X"][0]


def test_gather_gradient_of_repeated_rows():
    """Paddle's overwrite mode keeps the gradient of a row's last occurrence; accumulate
    mode (overwrite=False) adds every occurrence's."""
    x = np.zeros((4, 2))
    idx = np.array([2, 0, 2, 2], "int64")
    dout = np.arange(8, dtype=f64).reshape(4, 2)
    kept = _gather_grad(x, idx, dout, overwrite=True)
    np.testing.assert_array_equal(kept, [[2, 3], [0, 0], [6, 7], [0, 0]])
    summed = _gather_grad(x, idx, dout, overwrite=False)
    np.testing.assert_array_equal(summed, [[2, 3], [0, 0], [0 + 4 + 6, 1 + 5 + 7], [0, 0]])


def test_gather_rejects_bad_indices(rng):
    with pytest.raises(IndexError, match=r"gather: index 7 at position \[1\] is out of range: "
                                         r"indices must lie in \[0, 5\)"):
        check_op("gather", {"X": rng.random((5, 2)), "Index": np.array([0, 7], "int64")})
    with pytest.raises(IndexError, match="index -1"):
        check_op("gather", {"X": rng.random((5, 2)), "Index": np.array([-1], "int64")})
    with pytest.raises(DTypeError, match="gather: Index must be int32 or int64"):
        traced_types("gather", {"X": ((5, 2), "float32"), "Index": ((3,), "float32")})
    with pytest.raises(ShapeError, match=r"must be a vector \[N\] or a column \[N, 1\], got "
                                         r"\[3, 2\]"):
        traced_types("gather", {"X": ((5, 2), "float32"), "Index": ((3, 2), "int64")})
