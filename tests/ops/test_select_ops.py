"""Forward, shape-rule and gradient checks of the ops that select by value (top_k,
where_index), on the inputs of Paddle 1.8's unit tests of each op."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op
from ops.traced import traced_types

from fluid_interactive.errors import DTypeError, ShapeError


def _top_k_reference(X, k, **_):
    """Paddle's test: each row sorted descending, its first k values and positions."""
    order = np.argsort(X, axis=-1)[..., ::-1][..., :k]
    return {"Out": np.take_along_axis(X, order, -1), "Indices": order}


@pytest.mark.parametrize("rows,k", [(100, 1), (7, 3), (5, 20)])
def test_top_k_matches_paddle_case(rng, rows, k):
    x = rng.random((rows, max(k, 4)))   # distinct values: no ties to order
    check_op("top_k", {"X": x}, {"k": k}, reference=_top_k_reference)
    check_grad("top_k", {"X": x}, {"k": k}, through=["Out"])


def test_top_k_with_k_as_a_tensor(rng):
    """Paddle's variable_k case: k from an int32 tensor; the last dim is known only then."""
    x = rng.random((6, 9))
    k = np.array([4], "int32")
    check_op("top_k", {"X": x, "K": k}, reference=lambda X, K, **a: _top_k_reference(X, 4))
    assert traced_types("top_k", {"X": ((-1, 9), "float32"), "K": ((1,), "int32")},
                        counts={"Out": 1, "Indices": 1}) == [((-1, -1), "float32"),
                                                             ((-1, -1), "int64")]
    check_grad("top_k", {"X": x, "K": k}, through=["Out"])


@pytest.mark.parametrize("shape,k", [((3, 4, 50), 5), ((9,), 9), ((2, 40), 30)])
def test_top_k_of_higher_rank_and_both_selection_paths(rng, shape, k):
    x = rng.standard_normal(shape).astype("float32")
    check_op("top_k", {"X": x}, {"k": k}, reference=_top_k_reference, rtol=0, atol=0,
             batch_unknown=len(shape) > 1)


def test_top_k_of_equal_values():
    """A full sort (k close to the row's length) puts equal values lower index first; a
    partial one picks some of them, all holding the value (Paddle leaves ties unordered)."""
    x = np.array([[1, 3, 3, 0, 3, 2]], "float32")
    got = check_op("top_k", {"X": x}, {"k": 4})
    np.testing.assert_array_equal(got["Indices"][0], [[1, 2, 4, 5]])
    wide = np.tile(x, 10)
    got = check_op("top_k", {"X": wide}, {"k": 4})
    assert (got["Out"][0] == 3).all() and (wide[0, got["Indices"][0][0]] == 3).all()


def test_top_k_of_ints_keeps_the_extremes():
    x = np.array([[np.iinfo(np.int64).min, 5, np.iinfo(np.int64).max]], "int64")
    got = check_op("top_k", {"X": x}, {"k": 2})
    np.testing.assert_array_equal(got["Out"][0], [[np.iinfo(np.int64).max, 5]])


def test_top_k_errors(rng):
    with pytest.raises(ShapeError, match=r"k=6 is larger than the last dim of X \[\?, 5\]; "
                                         r"choose k <= 5"):
        traced_types("top_k", {"X": ((-1, 5), "float32")}, {"k": 6},
                     counts={"Out": 1, "Indices": 1})
    with pytest.raises(ShapeError, match="k=0 must be at least 1"):
        traced_types("top_k", {"X": ((5,), "float32")}, {"k": 0},
                     counts={"Out": 1, "Indices": 1})
    with pytest.raises(ShapeError, match=r"K must be one int32/int64 value \(shape \[1\]\), "
                                         r"got float32\[1\]"):
        traced_types("top_k", {"X": ((5,), "float32"), "K": ((1,), "float32")},
                     counts={"Out": 1, "Indices": 1})
    with pytest.raises(ValueError, match=r"k=7 must lie in \[1, 3\]"):
        check_op("top_k", {"X": rng.random((2, 3)), "K": np.array([7], "int32")})


# --- where_index -----------------------------------------------------------------------------

@pytest.mark.parametrize("cond,expected", [
    ([True, False, True], [[0], [2]]),
    ([[True, False], [False, True]], [[0, 0], [1, 1]]),
    ([[[True, False], [False, True]], [[False, True], [True, False]],
      [[False, False], [False, True]]],
     [[0, 0, 0], [0, 1, 1], [1, 0, 1], [1, 1, 0], [2, 1, 1]]),
])
def test_where_index_matches_paddle_cases(cond, expected):
    cond = np.array(cond)
    check_op("where_index", {"Condition": cond},
             reference=lambda Condition, **a: np.array(expected, "int64"), rtol=0, atol=0,
             batch_unknown=False)


def test_where_index_of_all_false_and_of_numbers():
    got = check_op("where_index", {"Condition": np.zeros(3, bool)})["Out"][0]
    assert got.shape == (0, 1) and got.dtype == np.int64
    x = np.array([[0.0, 2.5], [-1.0, 0.0]], "float32")
    check_op("where_index", {"Condition": x},
             reference=lambda Condition, **a: np.argwhere(Condition), rtol=0, atol=0)


def test_where_index_shape_is_known_only_when_it_runs():
    assert traced_types("where_index", {"Condition": ((4, 3), "bool")}) == [((-1, 2), "int64")]
    with pytest.raises(DTypeError, match="Condition must be bool or numeric, got uint8"):
        traced_types("where_index", {"Condition": ((4,), "uint8")})


# --- gather_tree -----------------------------------------------------------------------------

def _backtrace(Ids, Parents, **_):
    """Paddle's test reference: each beam followed back step by step."""
    out = np.zeros_like(Ids)
    steps, batch, beam = Ids.shape
    for b in range(batch):
        for k in range(beam):
            out[-1, b, k] = Ids[-1, b, k]
            parent = Parents[-1, b, k]
            for step in range(steps - 2, -1, -1):
                out[step, b, k] = Ids[step, b, parent]
                parent = Parents[step, b, parent]
    return out


@pytest.mark.parametrize("shape,dtype", [((5, 2, 2), "int64"), ((7, 3, 4), "int32"),
                                         ((1, 2, 3), "int64")])
def test_gather_tree_matches_paddle_backtrace(rng, shape, dtype):
    ids = rng.integers(0, 10, shape).astype(dtype)
    parents = rng.integers(0, shape[2], shape).astype(dtype)
    check_op("gather_tree", {"Ids": ids, "Parents": parents}, reference=_backtrace, rtol=0,
             atol=0, batch_unknown=False)


def test_gather_tree_errors(rng):
    with pytest.raises(IndexError, match=r"gather_tree: parent 2 .* \[0, 2\)"):
        check_op("gather_tree", {"Ids": np.zeros((2, 1, 2), "int64"),
                                 "Parents": np.full((2, 1, 2), 2, "int64")})
    with pytest.raises(DTypeError, match="Ids must be int32 or int64, got float32"):
        traced_types("gather_tree", {"Ids": ((5, 2, 2), "float32"),
                                     "Parents": ((5, 2, 2), "int64")})
    with pytest.raises(ShapeError, match=r"Ids \[5, 2, 2\] and Parents \[5, 2, 3\] must "):
        traced_types("gather_tree", {"Ids": ((5, 2, 2), "int64"),
                                     "Parents": ((5, 2, 3), "int64")})


# --- unique, unique_with_counts -----------------------------------------------------------------

def _first_seen(X, dtype, **_):
    """Paddle's test reference: NumPy's unique re-ordered by first appearance."""
    values, first = np.unique(X, return_index=True)
    out = values[np.argsort(first)]
    index = np.array([list(out).index(v) for v in X], dtype)
    counts = np.array([np.sum(v == X) for v in out], dtype)
    return {"Out": out, "Index": index, "Count": counts}


@pytest.mark.parametrize("x,dtype", [
    (np.array([2, 3, 3, 1, 5, 3], "int64"), "int32"), (np.array([2], "int64"), "int32"),
    ("random", "int64"), (np.array([0.5, -1.0, 0.5, 2.0], "float32"), "int64"),
])
def test_unique_matches_paddle_cases(rng, x, dtype):
    if isinstance(x, str):
        x = rng.integers(0, 100, 150).astype("int64")
    got = check_op("unique", {"X": x}, {"dtype": dtype}, rtol=0, atol=0,
                   reference=lambda **a: {k: v for k, v in _first_seen(**a).items()
                                          if k != "Count"})
    assert got["Index"][0].dtype == dtype
    check_op("unique_with_counts", {"X": x}, {"dtype": dtype}, reference=_first_seen,
             output_counts={"Out": 1, "Index": 1, "Count": 1}, rtol=0, atol=0)


def test_unique_sizes_are_known_only_when_it_runs():
    types = traced_types("unique_with_counts", {"X": ((-1,), "int64")}, {"dtype": "int64"},
                         counts={"Out": 1, "Index": 1, "Count": 1})
    assert types == [((-1,), "int64"), ((-1,), "int64"), ((-1,), "int64")]
    with pytest.raises(ShapeError, match=r"unique: X must be 1-D, got \[2, 3\]"):
        traced_types("unique", {"X": ((2, 3), "int64")}, counts={"Out": 1, "Index": 1})
    with pytest.raises(DTypeError, match="must be int32 or int64, got float32"):
        traced_types("unique", {"X": ((3,), "int64")}, {"dtype": "float32"},
                     counts={"Out": 1, "Index": 1})
    with pytest.raises(DTypeError, match="unique: X must be float32/64 or int32/64, got "
                                         "float16"):
        traced_types("unique", {"X": ((3,), "float16")}, counts={"Out": 1, "Index": 1})
