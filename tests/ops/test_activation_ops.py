"""The elementwise activations and math functions of Paddle 1.8 (ops/activation.py,
ops/unary_math.py, ops/activation_param.py): each forward against a NumPy reference
written from Paddle's unit tests (test_activation_op.py, test_prelu_op.py,
test_maxout_op.py, test_selu_op.py, test_mish_op.py, test_erf_op.py) on their inputs and
attrs, each gradient against float64 central differences (inputs kept away from kinks),
and against PyTorch where it has the function."""
import math

import numpy as np
import pytest
from ops.harness import check_grad, check_op, run_forward

f32 = np.float32


def uniform(lo, hi, shape):
    return lambda rng: rng.uniform(lo, hi, shape).astype(f32)


def _softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


def _round(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _mish(x, t):
    sp = np.where(x > t, x, np.log1p(np.exp(np.minimum(x, t))))
    return x * np.tanh(sp)


_SELU = (1.0507009873554805, 1.6732632423543772)

#: op -> (attrs, input as Paddle's test draws it, reference(X, **attrs), kinks): the
#: gradient check moves inputs at least 0.05 away from each kink.
CASES = {
    "logsigmoid": ({}, uniform(-1, 1, [11, 17]), lambda X, **a: np.log(1 / (1 + np.exp(-X))),
                   ()),
    "tanh_shrink": ({}, uniform(0.1, 1, [10, 17]), lambda X, **a: X - np.tanh(X), ()),
    "softplus": ({}, uniform(-1, 1, [11, 17]), lambda X, **a: np.log(1 + np.exp(X)), ()),
    "softsign": ({}, uniform(-1, 1, [11, 17]), lambda X, **a: X / (1 + np.abs(X)), (0,)),
    "softshrink": ({"lambda": 0.1}, uniform(0.25, 10, [10, 12]),
                   lambda X, **a: np.less(X, -a["lambda"]) * (X + a["lambda"]) +
                   np.greater(X, a["lambda"]) * (X - a["lambda"]), (-0.1, 0.1)),
    "hard_shrink": ({"threshold": 0.5},
                    lambda rng: rng.uniform(-1, 1, [10, 12]).astype(f32) * 10,
                    lambda X, **a: np.where(np.abs(X) > a["threshold"], X, 0), (-0.5, 0.5)),
    "thresholded_relu": ({"threshold": 0.25}, uniform(-1, 1, [11, 17]),
                         lambda X, **a: np.greater(X, a["threshold"]) * X, (0.25,)),
    "relu6": ({"threshold": 6.0}, uniform(-1, 10, [10, 12]),
              lambda X, **a: np.minimum(np.maximum(X, 0), a["threshold"]), (0, 6)),
    "brelu": ({"t_min": 1.0, "t_max": 4.0}, uniform(-5, 10, [10, 12]),
              lambda X, **a: np.clip(X, a["t_min"], a["t_max"]), (1, 4)),
    "hard_sigmoid": ({"slope": 0.2, "offset": 0.5}, uniform(-5, 5, [10, 12]),
                     lambda X, **a: np.maximum(0, np.minimum(1, X * a["slope"] + a["offset"])),
                     (-2.5, 2.5)),
    "hard_swish": ({"threshold": 6.0, "scale": 6.0, "offset": 3.0}, uniform(-6, 6, [10, 12]),
                   lambda X, **a: X * np.minimum(np.maximum(X + a["offset"], 0),
                                                 a["threshold"]) / a["scale"], (-3, 3)),
    "selu": ({"scale": _SELU[0], "alpha": _SELU[1]}, uniform(-3, 3, [3, 5, 5, 10]),
             lambda X, **a: np.where(X > 0, X, a["alpha"] * np.exp(X) - a["alpha"]) * a["scale"],
             (0,)),
    "soft_relu": ({"threshold": 2.0}, uniform(-3, 3, [4, 4]),
                  lambda X, **a: np.log(np.exp(np.clip(X, -a["threshold"], a["threshold"])) + 1),
                  (-2, 2)),
    "stanh": ({"scale_a": 2.0 / 3.0, "scale_b": 1.7159}, uniform(0.1, 1, [11, 17]),
              lambda X, **a: a["scale_b"] * np.tanh(X * a["scale_a"]), ()),
    "mish": ({"threshold": 20.0}, uniform(-10, 10, [10, 12]),
             lambda X, **a: _mish(X.astype(np.float64), a["threshold"]), ()),
    "sin": ({}, uniform(-1, 1, [10, 12]), lambda X, **a: np.sin(X), ()),
    "cos": ({}, uniform(-1, 1, [10, 12]), lambda X, **a: np.cos(X), ()),
    "atan": ({}, uniform(-1, 1, [10, 12]), lambda X, **a: np.arctan(X), ()),
    "asin": ({}, uniform(-0.95, 0.95, [10, 12]), lambda X, **a: np.arcsin(X), ()),
    "acos": ({}, uniform(-0.95, 0.95, [10, 12]), lambda X, **a: np.arccos(X), ()),
    "ceil": ({}, uniform(-1, 1, [10, 12]), lambda X, **a: np.ceil(X), None),
    "floor": ({}, uniform(-1, 1, [10, 12]), lambda X, **a: np.floor(X), None),
    "round": ({}, uniform(-1, 1, [10, 12]), lambda X, **a: np.round(X), None),
    "reciprocal": ({}, uniform(1, 2, [11, 17]), lambda X, **a: np.reciprocal(X), ()),
    "rsqrt": ({}, lambda rng: rng.uniform(0.1, 1, [10, 12]).astype(f32) * 10,
              lambda X, **a: 1.0 / np.sqrt(X), ()),
    "log1p": ({}, uniform(0.1, 1, [11, 17]), lambda X, **a: np.log1p(X), ()),
    "erf": ({}, lambda rng: rng.standard_normal([11, 17]).astype(f32),
            lambda X, **a: np.vectorize(math.erf)(X.astype(np.float64)), ()),
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_forward_matches_paddles_reference(rng, op):
    attrs, make, reference, _ = CASES[op]
    x = make(rng)
    check_op(op, {"X": x}, attrs, reference=reference, rtol=1e-5, atol=1e-6)


def away_from(x, kinks, gap=0.05):
    x = x.astype(np.float64)
    for k in kinks:
        near = np.abs(x - k) < gap
        x[near] = k + np.where(x[near] < k, -gap, gap)
    return x


@pytest.mark.parametrize("op", sorted(CASES))
def test_gradient_matches_finite_differences(rng, op):
    attrs, make, _, kinks = CASES[op]
    x = make(rng)
    if kinks is None:   # piecewise constant: a zero gradient, not none
        check_grad(op, {"X": away_from(x, np.arange(-3, 4) * 0.5)}, attrs)
        return
    check_grad(op, {"X": away_from(x, kinks)}, attrs, rtol=1e-5, atol=1e-7)


def test_round_takes_halves_away_from_zero_as_paddle_does():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.4, 8388609.0, -0.0], f32)
    got = run_forward("round", {"X": x})["Out"][0]
    np.testing.assert_array_equal(got, [1, 2, 3, -1, -2, -3, 0, -0.0, 8388609, -0.0])
    assert np.signbit(got[-3]) and np.signbit(got[-1])


def test_erf_is_exact_to_float64_in_both_tails_and_near_zero():
    x = np.concatenate([np.linspace(-7, 7, 2001), [1e-300, -1e-12, 0.999999, 1.0, 5.9, 6.0,
                                                   np.inf, -np.inf]])
    got = run_forward("erf", {"X": x})["Out"][0]
    want = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)
    assert np.isnan(run_forward("erf", {"X": np.array([np.nan])})["Out"][0][0])


def test_activations_with_default_attrs_keep_float32_and_shape(rng):
    x = rng.uniform(0.1, 0.9, (4, 5)).astype(f32)   # inside every function's domain
    for op in CASES:
        out = run_forward(op, {"X": x})["Out"][0]
        assert out.dtype == f32 and out.shape == (4, 5), op


def test_mish_passes_large_inputs_through_and_stays_finite():
    x = np.array([-1000.0, -30.0, 0.0, 25.0, 1000.0])
    got = run_forward("mish", {"X": x}, {"threshold": 20.0})["Out"][0]
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got[3:], x[3:])


# --- prelu and maxout --------------------------------------------------------------------

def _prelu_case(rng, mode, shape):
    x = rng.uniform(-1, 1, shape)
    x[np.abs(x) < 0.005] = 0.02
    alpha = {"all": lambda: rng.uniform(-1, -0.5, (1,)),
             "channel": lambda: rng.uniform(-1, -0.5, [1, shape[1], 1, 1]),
             "element": lambda: rng.uniform(-1, -0.5, [1] + list(shape[1:]))}[mode]()
    return x.astype(f32), alpha.astype(f32)


def _prelu_ref(X, Alpha, mode, **a):
    aligned = Alpha.reshape([1, X.shape[1]] + [1] * (X.ndim - 2)) if mode == "channel" else Alpha
    return np.maximum(X, 0) + np.minimum(X, 0) * aligned


@pytest.mark.parametrize("mode,shape", [("all", [2, 100, 3, 4]), ("channel", [2, 100, 3, 4]),
                                        ("element", [2, 100, 3, 4]),
                                        ("channel", [2, 3, 2, 2, 2]), ("element", [3, 5])])
def test_prelu_matches_paddles_reference_and_differences(rng, mode, shape):
    x, alpha = _prelu_case(rng, mode, shape)
    check_op("prelu", {"X": x, "Alpha": alpha}, {"mode": mode}, reference=_prelu_ref)
    small = [2, 3, 2, 2, 2] if len(shape) == 5 else [2, 3, 2, 2] if len(shape) == 4 else shape
    x, alpha = _prelu_case(rng, mode, small)
    check_grad("prelu", {"X": x, "Alpha": alpha}, {"mode": mode}, wrt=["X", "Alpha"])


def _maxout_ref(X, groups, axis, **a):
    s0, s1, s2, s3 = X.shape
    if axis == 3:
        return X.reshape(s0, s1, s2, s3 // groups, groups).max(axis=4)
    return X.reshape(s0, s1 // groups, groups, s2, s3).max(axis=2)


@pytest.mark.parametrize("shape,groups,axis", [([100, 6, 2, 2], 2, 1), ([100, 2, 2, 6], 2, 3),
                                               ([2, 6, 3, 3], 3, 1)])
def test_maxout_matches_paddles_reference_and_differences(rng, shape, groups, axis):
    x = rng.random(shape).astype(f32)
    check_op("maxout", {"X": x}, {"groups": groups, "axis": axis}, reference=_maxout_ref)
    check_grad("maxout", {"X": x[:2]}, {"groups": groups, "axis": axis})


def test_maxout_sends_the_gradient_to_the_first_maximum_of_a_tie():
    from ops.harness import analytic_grads, build_op
    x = np.array([[[[1.0]], [[1.0]], [[0.0]], [[2.0]]]])   # [1, 4, 1, 1], two groups of 2
    op, env = build_op("maxout", {"X": x}, {"groups": 2, "axis": 1})
    from fluid_interactive.ops.interpret import run_ops
    run_ops([op], env)
    g = analytic_grads(op, env, {"out_Out_0": np.ones((1, 2, 1, 1))}, ["X"])["X"][0]
    np.testing.assert_array_equal(g.reshape(-1), [1, 0, 0, 1])


# --- against PyTorch -----------------------------------------------------------------------

torch = pytest.importorskip("torch")
F = torch.nn.functional

#: op -> (attrs, torch function, input range)
TORCH = {
    "logsigmoid": ({}, F.logsigmoid, 4), "tanh_shrink": ({}, F.tanhshrink, 4),
    "softplus": ({}, F.softplus, 4), "softsign": ({}, F.softsign, 4),
    "softshrink": ({"lambda": 0.3}, lambda t: F.softshrink(t, 0.3), 4),
    "hard_shrink": ({"threshold": 0.4}, lambda t: F.hardshrink(t, 0.4), 4),
    "thresholded_relu": ({"threshold": 0.25}, lambda t: F.threshold(t, 0.25, 0.0), 4),
    "relu6": ({}, F.relu6, 8), "brelu": ({"t_min": -1.0, "t_max": 2.0},
                                         lambda t: F.hardtanh(t, -1.0, 2.0), 4),
    "hard_sigmoid": ({"slope": 1 / 6, "offset": 0.5}, F.hardsigmoid, 6),
    "hard_swish": ({}, F.hardswish, 6), "selu": ({}, F.selu, 4), "mish": ({}, F.mish, 4),
    "stanh": ({}, lambda t: 1.7159 * torch.tanh(0.67 * t), 4),
    "sin": ({}, torch.sin, 4), "cos": ({}, torch.cos, 4), "atan": ({}, torch.atan, 4),
    "asin": ({}, torch.asin, 0.9), "acos": ({}, torch.acos, 0.9),
    "reciprocal": ({}, torch.reciprocal, 4), "rsqrt": ({}, torch.rsqrt, 4),
    "log1p": ({}, torch.log1p, 4), "erf": ({}, torch.erf, 3), "ceil": ({}, torch.ceil, 4),
    "floor": ({}, torch.floor, 4),
}


@pytest.mark.parametrize("op", sorted(TORCH))
def test_forward_and_gradient_match_torch(rng, op):
    from ops.test_against_torch import close, ours, t
    attrs, fn, width = TORCH[op]
    x = rng.uniform(-width, width, (6, 7))
    if op in ("rsqrt", "log1p", "reciprocal"):
        x = np.abs(x) + 0.1
    x = away_from(x, (0, -0.3, 0.3, -0.4, 0.4, 0.25, -1, 2, 6, -3, 3))
    got, grads, cot = ours(op, {"X": x}, attrs, ["X"], "Out")
    tx = t(x)
    y = fn(tx)
    close(got["Out"], y, rtol=1e-12, atol=1e-13)
    (y * torch.tensor(cot)).sum().backward()
    # torch's hardsigmoid backward multiplies by 1/6 rounded to float32
    close(grads["X"], tx.grad, rtol=1e-7 if op == "hard_sigmoid" else 1e-12, atol=1e-13)


@pytest.mark.parametrize("mode", ["all", "channel"])
def test_prelu_matches_torch(rng, mode):
    from ops.test_against_torch import close, ours, t
    x, alpha = _prelu_case(rng, mode, [2, 3, 4, 5])
    x, alpha = x.astype(np.float64), alpha.astype(np.float64)
    got, grads, cot = ours("prelu", {"X": x, "Alpha": alpha}, {"mode": mode}, ["X", "Alpha"],
                           "Out")
    tx, ta = t(x), t(alpha.reshape(-1))
    y = F.prelu(tx, ta)
    close(got["Out"], y)
    (y * torch.tensor(cot)).sum().backward()
    close(grads["X"], tx.grad)
    close(grads["Alpha"].reshape(-1), ta.grad)
