"""Comparison ops: forward against NumPy (with Paddle's axis broadcasting), the shape rule
against the kernel, bool results, and no gradient."""
import numpy as np
import pytest

from fluid_interactive.errors import DTypeError, ShapeError
from fluid_interactive.ops import get_spec
from fluid_interactive.ops.interpret import run_ops
from tests.ops.harness import build_op, check_op, check_shape_rule

OPS = {"less_than": np.less, "less_equal": np.less_equal, "greater_than": np.greater,
       "greater_equal": np.greater_equal, "equal": np.equal, "not_equal": np.not_equal}


@pytest.mark.parametrize("op_type", sorted(OPS))
@pytest.mark.parametrize("xs, ys, axis", [((4, 3), (4, 3), -1), ((4, 3), (3,), -1),
                                          ((4, 3), (1,), -1), ((2, 3, 5), (3,), 1),
                                          ((2, 3, 5), (3, 5), 1)])
def test_forward_matches_numpy(op_type, xs, ys, axis):
    rng = np.random.default_rng(0)
    # small integers as floats, so equal and not_equal see ties
    x = rng.integers(-2, 3, xs).astype(np.float32)
    y = rng.integers(-2, 3, ys).astype(np.float32)

    def ref(X, Y, axis):
        if axis >= 0 and Y.ndim < X.ndim:
            Y = Y.reshape(Y.shape + (1,) * (X.ndim - axis - Y.ndim))
        return OPS[op_type](X, Y)

    out = check_op(op_type, {"X": x, "Y": y}, {"axis": axis}, reference=ref)
    assert out["Out"][0].dtype == np.bool_
    assert 0 < out["Out"][0].sum() < out["Out"][0].size     # the data has both answers


@pytest.mark.parametrize("op_type", sorted(OPS))
def test_integers_compare_too(op_type):
    x = np.array([[1, 5, -3]], np.int64)
    y = np.array([[1, 2, 7]], np.int64)
    check_op(op_type, {"X": x, "Y": y}, {}, reference=lambda X, Y, **a: OPS[op_type](X, Y))


@pytest.mark.parametrize("op_type", sorted(OPS))
def test_no_gradient(op_type):
    assert get_spec(op_type).grad is None


def test_shape_rule_keeps_an_unknown_batch_and_says_bool():
    op, env = build_op("greater_than", {"X": np.zeros((5, 4), np.float32),
                                        "Y": np.zeros((4,), np.float32)}, {})
    run_ops([op], env)
    check_shape_rule(op, env, batch_unknown=True)


def test_bad_operands_are_clear_errors():
    with pytest.raises(DTypeError, match="same dtype"):
        check_op("less_than", {"X": np.zeros((2, 3), np.float32),
                               "Y": np.zeros((2, 3), np.int64)}, {})
    with pytest.raises(ShapeError, match=r"do not broadcast"):
        check_op("equal", {"X": np.zeros((2, 3), np.float32),
                           "Y": np.zeros((4,), np.float32)}, {})
