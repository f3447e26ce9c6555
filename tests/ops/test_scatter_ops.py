"""Forward, shape-rule and gradient checks of scatter and scatter_nd_add on the inputs of
Paddle 1.8's unit tests, repeated indices included."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op
from ops.traced import traced_types

from fluid_interactive.errors import DTypeError, ShapeError


def _scatter_reference(X, Ids, Updates, overwrite, **_):
    """Paddle's test reference: overwrite assigns in order; otherwise the listed rows are
    zeroed and each update added."""
    out = X.copy()
    if overwrite:
        for i, row in enumerate(Ids):
            out[row] = Updates[i]
        return out
    out[Ids] = 0
    for i, row in enumerate(Ids):
        out[row] += Updates[i]
    return out


@pytest.mark.parametrize("x_shape,ids,ids_type,overwrite", [
    ((3, 50), [1, 2], "int32", True), ((3, 3), [1, 2], "int32", True),
    ((3, 3), [1, 1], "int32", False), ((3, 3), [1, 2], "int64", True),
    ((5, 2), [3, 0, 3, 3], "int64", True), ((5, 2), [3, 0, 3, 4], "int64", False),
])
def test_scatter_matches_paddle_cases(rng, x_shape, ids, ids_type, overwrite):
    x = np.ones(x_shape, "float32") + rng.random(x_shape).astype("float32")
    ids = np.array(ids, ids_type)
    updates = rng.random((len(ids),) + x_shape[1:]).astype("float32")
    inputs = {"X": x, "Ids": ids, "Updates": updates}
    check_op("scatter", inputs, {"overwrite": overwrite}, reference=_scatter_reference,
             batch_unknown=False)
    check_grad("scatter", inputs, {"overwrite": overwrite}, wrt=["X", "Updates"])


def test_scatter_errors(rng):
    x = rng.random((4, 3))
    with pytest.raises(IndexError, match=r"scatter: id 4 .* \[0, 4\)"):
        check_op("scatter", {"X": x, "Ids": np.array([4]), "Updates": x[:1]})
    with pytest.raises(ShapeError, match=r"Updates \[2, 4\] must be \[N\] \+ X.shape\[1:\] "
                                         r"for X \[4, 3\] and N = 2 ids"):
        traced_types("scatter", {"X": ((4, 3), "float32"), "Ids": ((2,), "int64"),
                                 "Updates": ((2, 4), "float32")})
    with pytest.raises(DTypeError, match=r"Updates \(float64\) must have X's dtype"):
        traced_types("scatter", {"X": ((4, 3), "float32"), "Ids": ((2,), "int64"),
                                 "Updates": ((2, 3), "float64")})


# --- scatter_nd_add ----------------------------------------------------------------------------

def _scatter_nd_add_reference(X, Index, Updates, **_):
    """Paddle's test reference: one index row at a time, added to a copy."""
    k = Index.shape[-1]
    out = X.copy().reshape(X.shape[:k] + (-1,))
    rows = Index.reshape(int(np.prod(Index.shape[:-1])), k)
    flat = Updates.reshape(len(rows), -1)
    for i, at in enumerate(rows):
        out[tuple(at)] += flat[i]
    return out.reshape(X.shape)


def _nd_case(rng, shape, index_shape, dtype):
    """Random in-range index rows [..., k] into ``shape`` (repeats likely)."""
    rows = int(np.prod(index_shape[:-1]))
    k = index_shape[-1]
    index = np.stack([rng.integers(0, s, rows) for s in shape[:k]], -1) if k else \
        np.zeros((rows, 0), int)
    return index.reshape(index_shape).astype(dtype)


@pytest.mark.parametrize("shape,index_shape,dtype", [
    ((100,), (100, 1), "int32"), ((10, 10), (2, 0), "int32"),
    ((10, 9, 8, 1, 15), (150, 5), "int32"), ((10, 9, 8, 1, 15), (10, 5, 10, 5), "int64"),
    ((6, 4, 3), (7, 2), "int64"),
])
def test_scatter_nd_add_matches_paddle_cases(rng, shape, index_shape, dtype):
    x = rng.random(shape)
    index = _nd_case(rng, shape, index_shape, dtype)
    updates = rng.random(index_shape[:-1] + shape[index_shape[-1]:])
    inputs = {"X": x, "Index": index, "Updates": updates}
    check_op("scatter_nd_add", inputs, reference=_scatter_nd_add_reference,
             batch_unknown=False)
    check_grad("scatter_nd_add", inputs, wrt=["X", "Updates"])


def test_scatter_nd_add_errors(rng):
    with pytest.raises(ShapeError, match=r"Updates \[3, 4\] must be Index.shape\[:-1\] \+ "
                                         r"X.shape\[1:\] = \[3, 5\]"):
        traced_types("scatter_nd_add", {"X": ((4, 5), "float32"), "Index": ((3, 1), "int64"),
                                        "Updates": ((3, 4), "float32")})
    with pytest.raises(IndexError, match=r"scatter_nd_add: index 5 at position \[0, 1\]"):
        check_op("scatter_nd_add", {"X": rng.random((4, 5)), "Index": np.array([[0, 5]]),
                                    "Updates": rng.random(1)})
