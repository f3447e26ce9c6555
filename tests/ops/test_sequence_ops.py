"""Sequence ops over a padded batch plus lengths: each against a NumPy reference written
row by row, gradients against finite differences, and padding that never matters."""
import numpy as np
import pytest
from ops.harness import analytic_grads, build_op, check_grad, check_op, run_forward

from fluid_interactive.errors import DTypeError, OpArgumentError, ShapeError
from fluid_interactive.ops.interpret import run_ops

LENGTHS = np.array([4, 1, 0, 3], np.int64)


def ref_pool(X, Lengths=None, pooltype="AVERAGE", pad_value=0.0, **_):
    out = np.empty((X.shape[0],) + X.shape[2:])
    for b, row in enumerate(X):
        n = X.shape[1] if Lengths is None else int(Lengths[b])
        seq = row[:n]
        if n == 0:
            out[b] = pad_value
        elif pooltype == "SUM":
            out[b] = seq.sum(0)
        elif pooltype == "AVERAGE":
            out[b] = seq.mean(0)
        elif pooltype == "SQRT":
            out[b] = seq.sum(0) / np.sqrt(n)
        elif pooltype == "MAX":
            out[b] = seq.max(0)
        elif pooltype == "FIRST":
            out[b] = seq[0]
        else:
            out[b] = seq[-1]
    return {"Out": out}


def ref_softmax(X, Lengths=None, **_):
    out = np.zeros_like(X, dtype=np.float64)
    for b, row in enumerate(X):
        n = X.shape[1] if Lengths is None else int(Lengths[b])
        if n:
            e = np.exp(row[:n] - row[:n].max())
            out[b, :n] = e / e.sum()
    return out


def ref_reverse(X, Lengths=None, **_):
    out = X.copy()
    for b in range(X.shape[0]):
        n = X.shape[1] if Lengths is None else int(Lengths[b])
        out[b, :n] = X[b, :n][::-1]
    return out


def with_padding(x, lengths, value):
    x = x.copy()
    x[np.arange(x.shape[1])[None, :] >= lengths[:, None]] = value
    return x


@pytest.mark.parametrize("maxlen", [6, 4])
def test_sequence_mask(maxlen):
    n = np.array([2, 0, 4], np.int64)
    want = (np.arange(maxlen)[None, :] < n[:, None])
    got = check_op("sequence_mask", {"X": n}, {"maxlen": maxlen, "out_dtype": "float32"},
                   reference=lambda **a: want.astype(np.float32), batch_unknown=False)
    assert got["Y"][0].dtype == np.float32


def test_sequence_mask_without_maxlen_is_as_wide_as_the_longest_length():
    """Its width depends on the values, so the shape rule leaves it unknown (-1)."""
    n = np.array([2, 0, 3], np.int64)
    got = run_forward("sequence_mask", {"X": n}, {"out_dtype": "int64"})["Y"][0]
    np.testing.assert_array_equal(got, [[1, 1, 0], [0, 0, 0], [1, 1, 1]])
    assert got.dtype == np.int64


POOLS = ["SUM", "AVERAGE", "SQRT", "MAX", "FIRST", "LAST"]


@pytest.mark.parametrize("pooltype", POOLS)
@pytest.mark.parametrize("shape", [(4, 5), (4, 5, 3), (4, 5, 2, 2)])
def test_sequence_pool(rng, pooltype, shape):
    x = rng.standard_normal(shape)
    attrs = {"pooltype": pooltype, "pad_value": 0.5}
    counts = {"MaxIndex": 1} if pooltype == "MAX" else None
    check_op("sequence_pool", {"X": x}, attrs, reference=ref_pool, output_counts=counts,
             rtol=1e-12, atol=1e-12)
    inputs = {"X": x, "Lengths": LENGTHS}
    check_op("sequence_pool", inputs, attrs, reference=ref_pool, output_counts=counts,
             rtol=1e-12, atol=1e-12)
    check_grad("sequence_pool", inputs, attrs, wrt=["X"], output_counts=counts,
               through=["Out"])
    check_grad("sequence_pool", {"X": x}, attrs, wrt=["X"], output_counts=counts,
               through=["Out"])


@pytest.mark.parametrize("pooltype", POOLS)
def test_pooled_values_ignore_padding(rng, pooltype):
    x = rng.standard_normal((4, 5, 3))
    attrs = {"pooltype": pooltype}
    counts = {"MaxIndex": 1} if pooltype == "MAX" else None
    clean = _out_and_grad("sequence_pool", {"X": x, "Lengths": LENGTHS}, attrs, counts)
    dirty = _out_and_grad("sequence_pool", {"X": with_padding(x, LENGTHS, 1e30),
                                            "Lengths": LENGTHS}, attrs, counts)
    np.testing.assert_array_equal(clean[0], dirty[0])
    np.testing.assert_array_equal(clean[1], dirty[1])
    assert not clean[1][np.arange(5)[None, :] >= LENGTHS[:, None]].any()


def _out_and_grad(op_type, inputs, attrs, counts=None, seed=0):
    op, env = build_op(op_type, inputs, attrs, counts)
    run_ops([op], env)
    out = env[op.output_names()[0]]
    cot = {n: np.zeros(np.shape(env[n])) for n in op.output_names()}
    cot[op.output_names()[0]] = np.random.default_rng(seed).standard_normal(out.shape)
    return out, analytic_grads(op, env, cot, ["X"])["X"][0]


@pytest.mark.parametrize("shape", [(4, 5), (4, 5, 1)])
def test_sequence_softmax(rng, shape):
    x = rng.standard_normal(shape)
    check_op("sequence_softmax", {"X": x}, reference=ref_softmax, rtol=1e-12, atol=1e-12)
    inputs = {"X": x, "Lengths": LENGTHS}
    got = check_op("sequence_softmax", inputs, reference=ref_softmax, rtol=1e-12, atol=1e-12)
    sums = got["Out"][0].reshape(4, 5).sum(1)
    np.testing.assert_allclose(sums, [1, 1, 0, 1])
    check_grad("sequence_softmax", inputs, wrt=["X"])
    check_grad("sequence_softmax", {"X": x}, wrt=["X"])
    clean = _out_and_grad("sequence_softmax", inputs, {})
    dirty = _out_and_grad("sequence_softmax", {"X": with_padding(x, LENGTHS, 1e30),
                                               "Lengths": LENGTHS}, {})
    np.testing.assert_array_equal(clean[0], dirty[0])
    np.testing.assert_array_equal(clean[1], dirty[1])


@pytest.mark.parametrize("shape", [(4, 5), (4, 5, 3)])
def test_sequence_reverse(rng, shape):
    x = rng.standard_normal(shape)
    check_op("sequence_reverse", {"X": x}, reference=ref_reverse)
    inputs = {"X": x, "Lengths": LENGTHS}
    got = check_op("sequence_reverse", inputs, reference=ref_reverse)
    twice = check_op("sequence_reverse", {"X": got["Y"][0], "Lengths": LENGTHS})
    np.testing.assert_array_equal(twice["Y"][0], x)
    check_grad("sequence_reverse", inputs, wrt=["X"])
    check_grad("sequence_reverse", {"X": x}, wrt=["X"])


def test_errors_name_what_to_fix(rng):
    x = rng.standard_normal((4, 5, 3))
    with pytest.raises(ShapeError, match="pooltype 'MEDIAN' is not one of"):
        check_op("sequence_pool", {"X": x}, {"pooltype": "MEDIAN"})
    with pytest.raises(DTypeError, match="Lengths must be int64"):
        check_op("sequence_pool", {"X": x, "Lengths": LENGTHS.astype(np.float32)})
    with pytest.raises(ShapeError, match=r"Lengths must be \[B\].*B = 4"):
        check_op("sequence_reverse", {"X": x, "Lengths": LENGTHS[:3]})
    with pytest.raises(ShapeError, match=r"one score per position"):
        check_op("sequence_softmax", {"X": x})
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 5\]"):
        check_op("sequence_pool", {"X": x, "Lengths": np.array([6, 1, 1, 1])})


def test_a_max_pools_gradient_needs_its_max_index():
    op, env = build_op("sequence_pool", {"X": np.ones((2, 3, 4))}, {"pooltype": "MAX"})
    with pytest.raises(OpArgumentError, match="MAX pool's gradient needs its MaxIndex"):
        analytic_grads(op, env, {"out_Out_0": np.ones((2, 4))}, ["X"])
