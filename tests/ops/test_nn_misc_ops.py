"""dropout, lookup_table, one_hot, gelu, elu, swish, flatten, pad."""
import math

import numpy as np
import pytest
from ops.harness import build_op, check_grad, check_op, run_forward

from fluid_interactive.errors import DTypeError, ShapeError
from fluid_interactive.ir.records import OpDesc
from fluid_interactive.ops.interpret import run_ops

f32 = np.float32


def r(rng, *shape):
    return rng.standard_normal(shape).astype(f32)


# --- dropout ------------------------------------------------------------------------------------

@pytest.mark.parametrize("impl", ["downgrade_in_infer", "upscale_in_train"])
def test_dropout_training_masks_and_scales(rng, impl):
    x = np.abs(r(rng, 200, 50)) + 0.1
    attrs = {"dropout_prob": 0.3, "dropout_implementation": impl}
    got = check_op("dropout", {"X": x}, attrs, rng=np.random.default_rng(3))
    out, mask = got["Out"][0], got["Mask"][0]
    assert mask.dtype == np.uint8 and set(np.unique(mask)) <= {0, 1}
    assert abs(mask.mean() - 0.7) < 0.02
    scale = 1 / 0.7 if impl == "upscale_in_train" else 1.0
    np.testing.assert_allclose(out, x * mask * scale, rtol=1e-6)
    check_grad("dropout", {"X": r(rng, 4, 5)}, attrs)


@pytest.mark.parametrize("impl,factor", [("downgrade_in_infer", 0.7), ("upscale_in_train", 1.0)])
def test_dropout_inference(rng, impl, factor):
    x = r(rng, 6, 7)
    attrs = {"dropout_prob": 0.3, "dropout_implementation": impl}
    got = check_op("dropout", {"X": x}, dict(attrs, is_test=True),
                   reference=lambda X, **a: X * factor)
    assert got["Mask"][0].all()
    # The block's mode decides when the attr is unset.
    op, env = build_op("dropout", {"X": x}, attrs)
    run_ops([op], env, is_test=True)
    np.testing.assert_allclose(env[op.outputs["Out"][0]], x * factor, rtol=1e-6)


def test_dropout_fixed_seed_is_reproducible(rng):
    x = r(rng, 30, 30)
    attrs = {"dropout_prob": 0.5, "fix_seed": True, "seed": 7}
    a = run_forward("dropout", {"X": x}, attrs, rng=np.random.default_rng(1))["Mask"][0]
    b = run_forward("dropout", {"X": x}, attrs, rng=np.random.default_rng(2))["Mask"][0]
    np.testing.assert_array_equal(a, b)
    c = run_forward("dropout", {"X": x}, {"dropout_prob": 0.5}, rng=np.random.default_rng(1))
    assert not np.array_equal(a, c["Mask"][0])


def test_dropout_rejects_bad_probability(rng):
    with pytest.raises(ShapeError, match="dropout_prob"):
        run_forward("dropout", {"X": r(rng, 2, 2)}, {"dropout_prob": 1.5})


# --- lookup_table -------------------------------------------------------------------------------

def ref_lookup(W, Ids, padding_idx, **_):
    out = W[Ids[..., 0]].astype(np.float64)
    if padding_idx != -1:
        pad = padding_idx % W.shape[0]
        out[Ids[..., 0] == pad] = 0
    return out


@pytest.mark.parametrize("ids_shape,padding_idx", [((5, 1), -1), ((2, 3, 1), 2), ((4, 1), -2)])
def test_lookup_table(rng, ids_shape, padding_idx):
    w = r(rng, 6, 4)
    ids = rng.integers(0, 6, ids_shape).astype(np.int64)
    ids.flat[0] = ids.flat[1] = 3                          # a repeated id sums its gradients
    ids.flat[-1] = padding_idx % 6 if padding_idx != -1 else 0
    attrs = {"padding_idx": padding_idx}
    check_op("lookup_table", {"W": w, "Ids": ids}, attrs, reference=ref_lookup)
    check_grad("lookup_table", {"W": w, "Ids": ids}, attrs, wrt=["W"])


def test_lookup_table_checks_ids(rng):
    w = r(rng, 6, 4)
    with pytest.raises(IndexError, match="id 6 is outside the table of 6 rows"):
        run_forward("lookup_table", {"W": w, "Ids": np.array([[1], [6]], np.int64)})
    with pytest.raises(ShapeError, match=r"last dim of 1"):
        run_forward("lookup_table", {"W": w, "Ids": np.array([[1, 2]], np.int64)})
    with pytest.raises(DTypeError, match="integer"):
        run_forward("lookup_table", {"W": w, "Ids": np.array([[1.0]], f32)})


# --- one_hot ------------------------------------------------------------------------------------

def test_one_hot(rng):
    ids = rng.integers(0, 5, (4, 3, 1)).astype(np.int64)
    got = check_op("one_hot", {"X": ids}, {"depth": 5},
                   reference=lambda X, depth, **a: np.eye(depth)[X[..., 0]])
    assert got["Out"][0].dtype == np.float32
    with pytest.raises(IndexError, match="index 5 is outside"):
        run_forward("one_hot", {"X": np.array([[5]], np.int64)}, {"depth": 5})
    check_op("one_hot", {"X": np.array([[5], [1]], np.int64)},
             {"depth": 5, "allow_out_of_range": True},
             reference=lambda X, **a: np.array([[0, 0, 0, 0, 0], [0, 1, 0, 0, 0]]))


# --- activations -------------------------------------------------------------------------------

_erf = np.vectorize(math.erf)


def ref_gelu(X, approximate, **_):
    x = X.astype(np.float64)
    if approximate:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


@pytest.mark.parametrize("approximate", [False, True])
def test_gelu(rng, approximate):
    x = np.concatenate([r(rng, 30) * 3, np.array([-9.0, -5.0, 0.0, 5.0, 9.0], f32)])
    check_op("gelu", {"X": x}, {"approximate": approximate}, reference=ref_gelu, rtol=1e-5,
             atol=1e-6)
    check_grad("gelu", {"X": r(rng, 3, 4) * 2}, {"approximate": approximate}, rtol=1e-5,
               atol=1e-6)


def test_gelu_far_tail_is_relatively_accurate():
    x = np.array([-7.0, -6.0], np.float64)
    got = run_forward("gelu", {"X": x})["Out"][0]
    expected = 0.5 * x * np.array([math.erfc(-v / math.sqrt(2)) for v in x])
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_elu(rng):
    x = r(rng, 4, 5)
    x = np.where(np.abs(x) < 0.05, 0.3, x).astype(f32)
    check_op("elu", {"X": x}, {"alpha": 0.7},
             reference=lambda X, alpha, **a: np.where(X > 0, X, alpha * np.expm1(X)))
    check_grad("elu", {"X": x}, {"alpha": 0.7})


def test_swish(rng):
    x = np.concatenate([r(rng, 20) * 3, np.array([-100.0, 100.0], f32)])
    check_op("swish", {"X": x}, {"beta": 1.5},
             reference=lambda X, beta, **a: X / (1 + np.exp(-beta * X.astype(np.float64))))
    check_grad("swish", {"X": r(rng, 3, 4)}, {"beta": 1.5})


# --- flatten / pad -----------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis,expected", [((2, 3, 4), 1, (2, 12)), ((2, 3, 4), 2, (6, 4)),
                                                 ((2, 3, 4), 0, (1, 24)),
                                                 ((2, 3, 4), 3, (24, 1))])
def test_flatten(rng, shape, axis, expected):
    x = r(rng, *shape)
    got = check_op("flatten", {"X": x}, {"axis": axis},
                   reference=lambda X, **a: X.reshape(expected), batch_unknown=axis != 0)
    assert got["Out"][0].shape == expected
    check_grad("flatten", {"X": x}, {"axis": axis})


def test_flatten_keeps_an_unknown_batch_dim():
    from fluid_interactive.ops import infer_op
    from fluid_interactive.ops.spec import TensorType
    op = OpDesc("flatten", {"X": ["x"]}, {"Out": ["y"]}, {"axis": 1})
    out = infer_op(op, lambda n: TensorType((-1, 3, 4), "float32"))
    assert out["Out"][0].shape == (-1, 12)


def test_pad(rng):
    x = r(rng, 2, 3, 4)
    pads = [0, 1, 2, 0, 1, 3]
    check_op("pad", {"X": x}, {"paddings": pads, "pad_value": 1.5},
             reference=lambda X, **a: np.pad(X, [(0, 1), (2, 0), (1, 3)],
                                             constant_values=1.5))
    check_grad("pad", {"X": x}, {"paddings": pads})
    with pytest.raises(ShapeError, match="2 \\* rank = 6"):
        run_forward("pad", {"X": x}, {"paddings": [1, 1]})
