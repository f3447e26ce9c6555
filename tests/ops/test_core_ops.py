"""Forward and gradient checks of the core op families (linalg, elementwise, unary,
reduce, accumulate)."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op

f32 = np.float32


def r(rng, *shape):
    return rng.standard_normal(shape).astype(f32)


def test_mul_flattens_and_multiplies(rng):
    x, y = r(rng, 2, 3, 4), r(rng, 12, 5)
    check_op("mul", {"X": x, "Y": y}, {"x_num_col_dims": 1},
             reference=lambda X, Y, **a: X.reshape(2, 12) @ Y)
    check_grad("mul", {"X": x, "Y": y}, {"x_num_col_dims": 1}, wrt=["X", "Y"])


def test_mul_keeps_leading_dims(rng):
    x, y = r(rng, 2, 3, 4), r(rng, 4, 5)
    got = check_op("mul", {"X": x, "Y": y}, {"x_num_col_dims": 2},
                   reference=lambda X, Y, **a: (X.reshape(6, 4) @ Y).reshape(2, 3, 5))
    assert got["Out"][0].shape == (2, 3, 5)
    check_grad("mul", {"X": x, "Y": y}, {"x_num_col_dims": 2}, wrt=["X", "Y"])


@pytest.mark.parametrize("tx,ty", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_transposes(rng, tx, ty):
    x = r(rng, 3, 4) if not tx else r(rng, 4, 3)
    y = r(rng, 4, 2) if not ty else r(rng, 2, 4)
    ref = lambda X, Y, **a: (X.T if tx else X) @ (Y.T if ty else Y)  # noqa: E731
    check_op("matmul", {"X": x, "Y": y}, {"transpose_X": tx, "transpose_Y": ty}, reference=ref)
    check_grad("matmul", {"X": x, "Y": y}, {"transpose_X": tx, "transpose_Y": ty},
               wrt=["X", "Y"])


def test_matmul_batched_broadcast_and_alpha(rng):
    x, y = r(rng, 2, 3, 4), r(rng, 4, 5)
    check_op("matmul", {"X": x, "Y": y}, {"alpha": 0.5},
             reference=lambda X, Y, **a: 0.5 * (X @ Y))
    check_grad("matmul", {"X": x, "Y": y}, {"alpha": 0.5}, wrt=["X", "Y"])


def test_matmul_vectors(rng):
    x, y = r(rng, 4), r(rng, 4, 3)
    check_op("matmul", {"X": x, "Y": y}, reference=lambda X, Y, **a: X @ Y)
    check_grad("matmul", {"X": x, "Y": y}, wrt=["X", "Y"])


_BINARY = {
    "elementwise_add": np.add, "elementwise_sub": np.subtract,
    "elementwise_mul": np.multiply, "elementwise_div": np.divide,
    "elementwise_max": np.maximum, "elementwise_min": np.minimum,
}


@pytest.mark.parametrize("op", sorted(_BINARY))
@pytest.mark.parametrize("xs,ys,axis", [((3, 4), (3, 4), -1), ((3, 4), (4,), -1),
                                        ((2, 3, 4), (3,), 1), ((2, 3, 4), (3, 4), 1),
                                        ((1, 4), (3, 1), -1), ((5, 1), (1,), 1)])
def test_binary_elementwise(rng, op, xs, ys, axis):
    x, y = r(rng, *xs), r(rng, *ys)
    if op == "elementwise_div":
        y = np.where(np.abs(y) < 0.3, 1.0, y).astype(f32)

    def ref(X, Y, axis, **a):
        if axis >= 0 and Y.ndim < X.ndim:
            Y = Y.reshape((1,) * axis + Y.shape + (1,) * (X.ndim - axis - Y.ndim))
        return _BINARY[op](X, Y)

    check_op(op, {"X": x, "Y": y}, {"axis": axis}, reference=ref)
    check_grad(op, {"X": x, "Y": y}, {"axis": axis}, wrt=["X", "Y"])


def test_elementwise_pow(rng):
    x = rng.uniform(0.5, 2.0, (3, 4)).astype(f32)
    y = rng.uniform(-1, 2, (3, 4)).astype(f32)
    check_op("elementwise_pow", {"X": x, "Y": y}, reference=lambda X, Y, **a: X ** Y, rtol=1e-5)
    check_grad("elementwise_pow", {"X": x, "Y": y}, wrt=["X", "Y"])


def test_elementwise_rejects_bad_shapes(rng):
    from fluid_interactive.errors import ShapeError
    with pytest.raises(ShapeError, match="do not broadcast"):
        check_op("elementwise_add", {"X": r(rng, 3, 4), "Y": r(rng, 5)})


_UNARY = {
    "square": (lambda x, **a: x * x, None),
    "relu": (lambda x, **a: np.maximum(x, 0), None),
    "sigmoid": (lambda x, **a: 1 / (1 + np.exp(-x)), None),
    "tanh": (lambda x, **a: np.tanh(x), None),
    "exp": (lambda x, **a: np.exp(x), None),
    "log": (lambda x, **a: np.log(x), "positive"),
    "sqrt": (lambda x, **a: np.sqrt(x), "positive"),
    "abs": (lambda x, **a: np.abs(x), None),
    "leaky_relu": (lambda x, alpha, **a: np.where(x > 0, x, alpha * x), None),
    "scale": (lambda x, scale, bias, **a: x * scale + bias, None),
    "clip": (lambda x, min, max, **a: np.clip(x, min, max), None),
    "pow": (lambda x, factor, **a: x ** factor, "positive"),
}
_UNARY_ATTRS = {"leaky_relu": {"alpha": 0.1}, "scale": {"scale": 2.5, "bias": -1.0},
                "clip": {"min": -0.5, "max": 0.7}, "pow": {"factor": 3.0}}


@pytest.mark.parametrize("op", sorted(_UNARY))
def test_unary(rng, op):
    ref, domain = _UNARY[op]
    x = r(rng, 4, 5)
    if domain == "positive":
        x = np.abs(x) + 0.5
    else:
        x = np.where(np.abs(x) < 0.05, 0.3, x).astype(f32)  # keep away from kinks
        if op == "clip":
            x = np.where(np.abs(np.abs(x) - 0.6) < 0.1, 0.0, x).astype(f32)
    attrs = _UNARY_ATTRS.get(op, {})
    check_op(op, {"X": x}, attrs, reference=lambda X, **a: ref(X, **a), rtol=1e-5)
    check_grad(op, {"X": x}, attrs)


def test_scale_bias_before_scale(rng):
    x = r(rng, 3)
    check_op("scale", {"X": x}, {"scale": 2.0, "bias": 1.0, "bias_after_scale": False},
             reference=lambda X, **a: (X + 1.0) * 2.0)


def test_mean_is_zero_dimensional(rng):
    x = r(rng, 4, 3)
    got = check_op("mean", {"X": x}, reference=lambda X, **a: np.mean(X))
    assert got["Out"][0].shape == ()
    check_grad("mean", {"X": x})


def test_sum_of_many(rng):
    xs = [r(rng, 2, 3) for _ in range(3)]
    check_op("sum", {"X": xs}, reference=lambda X, **a: X[0] + X[1] + X[2])
    check_grad("sum", {"X": xs})


def test_fill_constant_and_assign(rng):
    check_op("fill_constant", {}, {"shape": [2, 3], "dtype": "int64", "value": 7},
             reference=lambda **a: np.full((2, 3), 7, np.int64))
    x = r(rng, 3)
    got = check_op("assign", {"X": x}, reference=lambda X, **a: X)
    assert got["Out"][0] is not x
    check_grad("assign", {"X": x})


def test_value_makers(rng):
    x = r(rng, 2, 3)
    check_op("fill_zeros_like", {"X": x}, reference=lambda X, **a: np.zeros_like(X))
    check_op("fill_ones_like", {"X": x}, reference=lambda X, **a: np.ones_like(X))
    check_op("assign_value", {}, {"shape": [2, 2], "dtype": "float32",
                                  "values": [1.0, -2.0, 3.5, 0.0]},
             reference=lambda **a: np.array([[1.0, -2.0], [3.5, 0.0]], np.float32),
             batch_unknown=False)
    check_op("sign", {"X": np.array([-2.0, 0.0, 3.0], f32)},
             reference=lambda X, **a: np.sign(X))


def test_random_initialisers_respect_bounds():
    rng = np.random.default_rng(0)
    u = check_op("uniform_random", {}, {"shape": [1000], "min": -0.25, "max": 0.5}, rng=rng)
    assert u["Out"][0].min() >= -0.25 and u["Out"][0].max() < 0.5
    t = check_op("truncated_gaussian_random", {}, {"shape": [5000], "std": 2.0}, rng=rng)
    assert np.abs(t["Out"][0]).max() <= 4.0
    g = check_op("gaussian_random", {}, {"shape": [20000], "mean": 1.0, "std": 0.5}, rng=rng)
    assert abs(g["Out"][0].mean() - 1.0) < 0.02 and abs(g["Out"][0].std() - 0.5) < 0.02
