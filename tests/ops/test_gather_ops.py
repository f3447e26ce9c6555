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


# --- gather_nd ----------------------------------------------------------------------------------

def _rows_into(rng, shape, count):
    """``count`` random in-range coordinates into every dim of ``shape``: [count, rank]."""
    return np.stack([rng.integers(0, s, count) for s in shape], -1)


@pytest.mark.parametrize("x_shape,index,expected_shape", [
    ((5, 20), np.zeros((2, 0), "int32"), (2, 5, 20)),        # an empty index: all of X
    ((10, 10), np.array([[1], [2]], "int64"), (2, 10)),
    ((10, 10), np.array([[1, 1], [2, 1]], "int64"), (2,)),
    ((20, 9, 8, 1, 31), "rows150", (150,)),
    ((20, 9, 8, 1, 31), "rows1000", (10, 5, 20)),
])
def test_gather_nd_matches_paddle_cases(rng, x_shape, index, expected_shape):
    x = rng.random(x_shape)
    if isinstance(index, str):   # Paddle's high-rank cases
        count = int(index[4:])
        index = _rows_into(rng, x_shape, count).astype("int32")
        if count == 1000:
            index = index.reshape(10, 5, 20, 5)

    def reference(X, Index, **_):
        rows = Index.reshape(-1, Index.shape[-1]) if Index.shape[-1] else None
        if rows is None:
            return np.broadcast_to(X, Index.shape[:-1] + X.shape)
        return X[tuple(rows.T)].reshape(Index.shape[:-1] + X.shape[Index.shape[-1]:])
    got = check_op("gather_nd", {"X": x, "Index": index}, reference=reference,
                   batch_unknown=False)
    assert got["Out"][0].shape == expected_shape
    check_grad("gather_nd", {"X": x, "Index": index})


def test_gather_nd_errors(rng):
    with pytest.raises(ShapeError, match=r"gather_nd: Index \[2, 10\] addresses 10 dims, but "
                                         r"X \[3, 4, 5\] has only 3"):
        traced_types("gather_nd", {"X": ((3, 4, 5), "float32"), "Index": ((2, 10), "int32")})
    with pytest.raises(IndexError, match=r"gather_nd: index 4 at position \[1, 0\] is out of "
                                         r"range: indices must lie in \[0, 3\)"):
        check_op("gather_nd", {"X": rng.random((3, 4)), "Index": np.array([[0, 1], [4, 0]])})


# --- index_select, index_sample -----------------------------------------------------------------

@pytest.mark.parametrize("x_shape,dim,size,x_type,index_type", [
    ((100, 4, 5), 1, 100, "float64", "int64"), ((10, 10, 4, 10), -2, 10, "float32", "int32"),
])
def test_index_select_matches_paddle_cases(rng, x_shape, dim, size, x_type, index_type):
    x = rng.random(x_shape).astype(x_type)
    index = rng.integers(0, x_shape[dim], size).astype(index_type)
    check_op("index_select", {"X": x, "Index": index}, {"dim": dim},
             reference=lambda X, Index, dim: np.take(X, Index, axis=dim), batch_unknown=False)
    check_grad("index_select", {"X": x, "Index": index}, {"dim": dim})


@pytest.mark.parametrize("x_shape,index_shape,index_type", [
    ((10, 20), (10, 10), "int32"), ((100, 1), (100, 1), "int32"),
    ((10, 100), (10, 10), "int64"), ((10, 100), (10, 10), "int32"),
])
def test_index_sample_matches_paddle_cases(rng, x_shape, index_shape, index_type):
    x = rng.random(x_shape)
    index = rng.integers(0, x_shape[1], index_shape).astype(index_type)
    check_op("index_sample", {"X": x, "Index": index},
             reference=lambda X, Index: np.take_along_axis(X, Index, 1))
    check_grad("index_sample", {"X": x, "Index": index})


def test_index_select_and_sample_errors(rng):
    with pytest.raises(ShapeError, match=r"index_select dim 3 is out of range for X \[2, 3\]"):
        traced_types("index_select", {"X": ((2, 3), "float32"), "Index": ((2,), "int64")},
                     {"dim": 3})
    with pytest.raises(IndexError, match=r"index_select: index 3 .* \[0, 3\)"):
        check_op("index_select", {"X": rng.random((2, 3)), "Index": np.array([3])},
                 {"dim": 1})
    with pytest.raises(ShapeError, match=r"X \[4, 3\] and Index \[5, 2\] must have the same "
                                         r"first dim"):
        traced_types("index_sample", {"X": ((4, 3), "float32"), "Index": ((5, 2), "int64")})
    with pytest.raises(IndexError, match=r"index_sample: index -1"):
        check_op("index_sample", {"X": rng.random((2, 3)), "Index": np.array([[0], [-1]])})
