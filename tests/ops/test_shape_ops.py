"""Forward, shape-rule and gradient checks of the shape/layout ops (reshape, transpose,
concat, split, slice, squeeze, unsqueeze, cast) and the reduce_* family."""
import numpy as np
import pytest
from ops.harness import build_op, check_grad, check_op
from ops.traced import traced_types

from fluid_interactive.errors import DTypeError, ShapeError
from fluid_interactive.ir.records import OpDesc
from fluid_interactive.ops import get_spec
from fluid_interactive.ops.interpret import run_ops
from fluid_interactive.ops.spec import GradContext

f32 = np.float32


def r(rng, *shape, dtype=f32):
    return rng.standard_normal(shape).astype(dtype)


def traced(op_type, shapes, attrs=None, dtype="float32", counts=None):
    """Output shapes of the op with input types as the tracer sees them (``shapes``: slot
    -> shape, or a list of shapes for a duplicable slot; -1 for unknown dims)."""
    typed = {slot: [(s, dtype) for s in v] if isinstance(v, list) else (v, dtype)
             for slot, v in shapes.items()}
    return [shape for shape, _ in traced_types(op_type, typed, attrs, counts)]


# --- reshape -----------------------------------------------------------------------------------

@pytest.mark.parametrize("xs,shape,expected", [
    ((4, 2, 3), [0, 6], (4, 6)), ((4, 2, 3), [-1, 6], (4, 6)), ((4, 2, 3), [-1], (24,)),
    ((4, 2, 3), [0, -1], (4, 6)), ((4, 2, 3), [3, 0, 4], (3, 2, 4)), ((1, 5), [5, 1], (5, 1)),
    ((1,), [], ()), ((3, 5, 7), [7, -1, 1], (7, 15, 1)), ((2, 3), [0, 0, 1], (2, 3, 1)),
    ((3, 4), [0, 4], (3, 4)),
])
def test_reshape(rng, xs, shape, expected):
    x = r(rng, *xs)
    got = check_op("reshape", {"X": x}, {"shape": shape},
                   reference=lambda X, **a: X.reshape(expected))
    assert got["Out"][0].shape == expected
    assert np.shares_memory(got["Out"][0], x)  # a view, no copy
    check_grad("reshape", {"X": x}, {"shape": shape})


def test_reshape_with_unknown_batch():
    assert traced("reshape", {"X": (-1, 2, 3)}, {"shape": [0, 6]}) == [(-1, 6)]
    assert traced("reshape", {"X": (-1, 2, 3)}, {"shape": [-1, 6]}) == [(-1, 6)]
    assert traced("reshape", {"X": (-1, 2, 3)}, {"shape": [0, -1]}) == [(-1, 6)]
    assert traced("reshape", {"X": (-1, 2, 3)}, {"shape": [0, 3, 2]}) == [(-1, 3, 2)]
    assert traced("reshape", {"X": (-1, 2, 3)}, {"shape": [3, -1]}) == [(3, -1)]
    assert traced("reshape", {"X": (-1, 4)}, {"shape": [0, 2, 2]}) == [(-1, 2, 2)]


@pytest.mark.parametrize("xs,shape,match", [
    ((2, 3), [4, -1], r"X \[2, 3\] to shape \[4, -1\].*6 elements do not divide by 4"),
    ((2, 3), [5], r"X \[2, 3\] to shape \[5\].*6 elements but the shape holds 5"),
    ((2, 3), [0, 4], r"3 elements outside the dims copied by 0 but the shape holds 4"),
    ((2, 3), [-1, -1], "at most one dim may be -1"),
    ((2, 3), [0, 0, 0], r"0 at position 2 copies input dim 2"),
    ((2, 3), [-2, 3], "positive, 0 \\(copy\\) or -1"),
    ((-1, 2, 3), [0, 4], r"X \[\?, 2, 3\] to shape \[0, 4\]"),
])
def test_reshape_rejects(xs, shape, match):
    with pytest.raises(ShapeError, match=match):
        traced("reshape", {"X": xs}, {"shape": shape})


# --- transpose ---------------------------------------------------------------------------------

@pytest.mark.parametrize("xs,perm", [((3, 5), [1, 0]), ((2, 3, 4), [2, 0, 1]),
                                     ((1, 3, 1, 2), [3, 1, 0, 2]), ((2, 3, 4), [-1, 0, -2]),
                                     ((5,), [0])])
def test_transpose(rng, xs, perm):
    x = r(rng, *xs)
    check_op("transpose", {"X": x}, {"axis": perm},
             reference=lambda X, axis, **a: np.transpose(X, axis))
    check_grad("transpose", {"X": x}, {"axis": perm})


@pytest.mark.parametrize("perm", [[0], [0, 0, 1], [0, 1, 3], [1, 2]])
def test_transpose_rejects_non_permutations(perm):
    with pytest.raises(ShapeError, match=r"not a permutation .* X \[\?, 3, 4\]"):
        traced("transpose", {"X": (-1, 3, 4)}, {"axis": perm})


# --- concat ------------------------------------------------------------------------------------

@pytest.mark.parametrize("shapes,axis", [
    ([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 5)], 1), ([(2, 3, 4), (2, 3, 1)], -1),
    ([(1, 3), (1, 2)], -1), ([(3, 2)], 0), ([(2, 1, 3), (2, 4, 3), (2, 2, 3)], -2),
])
def test_concat(rng, shapes, axis):
    xs = [r(rng, *s) for s in shapes]
    got = check_op("concat", {"X": xs}, {"axis": axis},
                   reference=lambda X, axis, **a: np.concatenate(X, axis=axis))
    assert not any(np.shares_memory(got["Out"][0], x) for x in xs)
    check_grad("concat", {"X": xs}, {"axis": axis})


def test_concat_along_unknown_batch():
    assert traced("concat", {"X": [(-1, 3), (2, 3)]}, {"axis": 0}) == [(-1, 3)]
    assert traced("concat", {"X": [(-1, 3), (-1, 2)]}, {"axis": 1}) == [(-1, 5)]
    assert traced("concat", {"X": [(-1, 3), (4, 2)]}, {"axis": 1}) == [(4, 5)]


def run_grad_maker(op, env, out_grads, in_grads):
    """Run ``op``'s gradient maker with the given (possibly partial) gradient names and
    the ops it emits; returns the env."""
    emitted = []
    spec = get_spec(op.type)
    spec.grad(GradContext(op, spec.full_attrs(op.attrs), out_grads, in_grads,
                          lambda *a: emitted.append(OpDesc(*a)), lambda h: h + "@tmp"))
    run_ops(emitted, env)
    return env


def test_concat_gradient_of_some_inputs(rng):
    xs = [r(rng, 2, 3), r(rng, 2, 1), r(rng, 2, 2)]
    op, env = build_op("concat", {"X": xs}, {"axis": 1})
    env["g"] = rng.standard_normal((2, 6)).astype(f32)
    run_grad_maker(op, env, {"Out": ["g"]}, {"X": [None, "d1", "d2"]})
    np.testing.assert_array_equal(env["d1"], env["g"][:, 3:4])
    np.testing.assert_array_equal(env["d2"], env["g"][:, 4:])


@pytest.mark.parametrize("shapes,axis,match", [
    ([(2, 3), (3, 3)], 1, r"input 0 is \[2, 3\] but input 1 is \[3, 3\]"),
    ([(2, 3), (2, 3, 1)], 0, r"input 0 is \[2, 3\] but input 1 is \[2, 3, 1\]"),
    ([(2, 3), (2, 3)], 2, r"axis 2 is out of range for X \[2, 3\]"),
    ([(), ()], 0, "0-d"),
])
def test_concat_rejects(shapes, axis, match):
    with pytest.raises(ShapeError, match=match):
        traced("concat", {"X": shapes}, {"axis": axis})


def test_concat_rejects_mixed_dtypes():
    with pytest.raises(DTypeError, match="float32.*float64"):
        check_op("concat", {"X": [np.ones(2, f32), np.ones(2, np.float64)]})


# --- split -------------------------------------------------------------------------------------

@pytest.mark.parametrize("xs,attrs,sizes", [
    ((4, 6), {"axis": 1, "num": 3}, [2, 2, 2]),
    ((4, 6), {"axis": -1, "sections": [1, 5]}, [1, 5]),
    ((5, 3), {"axis": 0, "sections": [2, -1, 1]}, [2, 2, 1]),
    ((1, 7, 2), {"axis": 1, "sections": [3, 4]}, [3, 4]),
    ((3, 2), {"axis": 0, "num": 1}, [3]),
    ((2, 5), {"axis": 1, "sections": [0, 5]}, [0, 5]),
])
def test_split(rng, xs, attrs, sizes):
    x = r(rng, *xs)
    n = len(sizes)
    axis = attrs["axis"] % len(xs)

    def ref(X, **a):
        return {"Out": np.split(X, np.cumsum(sizes)[:-1], axis=axis)}

    got = check_op("split", {"X": x}, attrs, reference=ref, output_counts={"Out": n})
    assert [o.shape[axis] for o in got["Out"]] == sizes
    check_grad("split", {"X": x}, attrs, output_counts={"Out": n})


def test_split_along_unknown_batch():
    assert traced("split", {"X": (-1, 4)}, {"num": 2}, counts={"Out": 2}) == [(-1, 4)] * 2
    assert traced("split", {"X": (-1, 4)}, {"sections": [2, -1]},
                  counts={"Out": 2}) == [(2, 4), (-1, 4)]


def test_split_gradient_with_a_missing_part(rng):
    """A part no gradient reaches contributes zeros."""
    x = r(rng, 3, 4)
    op, env = build_op("split", {"X": x}, {"axis": 1, "num": 2}, output_counts={"Out": 2})
    run_ops([op], env)
    env["g1"] = np.ones((3, 2), f32)
    run_grad_maker(op, env, {"Out": [None, "g1"]}, {"X": ["dx"]})
    np.testing.assert_array_equal(env["dx"], [[0, 0, 1, 1]] * 3)


@pytest.mark.parametrize("attrs,count,match", [
    ({"axis": 1, "num": 4}, 4, r"split X \[2, 6\] along axis 1 \(size 6\) into 4 equal"),
    ({"axis": 1, "sections": [2, 2]}, 2, r"add up to 4; make them add up to 6"),
    ({"axis": 1, "sections": [4, 4, -1]}, 3, r"already add up to 8"),
    ({"axis": 1, "sections": [-1, -1]}, 2, "at most one -1"),
    ({"axis": 1}, 1, "num > 0 or a list of sections"),
    ({"axis": 1, "num": 2, "sections": [3, 3]}, 2, "not both"),
    ({"axis": 1, "num": 3}, 2, "makes 3 parts but the op lists 2 outputs"),
    ({"axis": 2, "num": 2}, 2, r"out of range for X \[2, 6\]"),
])
def test_split_rejects(attrs, count, match):
    with pytest.raises(ShapeError, match=match):
        traced("split", {"X": (2, 6)}, attrs, counts={"Out": count})


# --- slice -------------------------------------------------------------------------------------

@pytest.mark.parametrize("xs,axes,starts,ends", [
    ((5, 6), [1], [1], [4]), ((5, 6), [0, 1], [-3, 0], [-1, 100]),
    ((4, 3, 2), [-1, 0], [1, -100], [2, 2]), ((3, 4), [1], [2], [10 ** 9]),
    ((1, 5), [1], [3], [1]), ((2, 3, 4), [2, 1], [-2, -1], [4, 3]), ((4,), [0], [5], [9]),
    ((3, 4), [0, 1], [0, -100], [3, 100]),
])
def test_slice(rng, xs, axes, starts, ends):
    x = r(rng, *xs)

    def ref(X, **a):
        index = [slice(None)] * X.ndim
        for ax, s, e in zip(axes, starts, ends):
            index[ax] = slice(s, e)
        return X[tuple(index)]

    attrs = {"axes": axes, "starts": starts, "ends": ends}
    check_op("slice", {"X": x}, attrs, reference=ref)
    check_grad("slice", {"X": x}, attrs)


def test_slice_with_unknown_batch():
    attrs = {"axes": [0, 1], "starts": [0, 1], "ends": [2, 3]}
    assert traced("slice", {"X": (-1, 5)}, attrs) == [(-1, 2)]


@pytest.mark.parametrize("attrs,match", [
    ({"axes": [0, 1], "starts": [0], "ends": [1, 1]}, "must have the same length"),
    ({"axes": [2], "starts": [0], "ends": [1]}, r"slice axis 2 is out of range for X \[4, 5\]"),
    ({"axes": [1, -1], "starts": [0, 0], "ends": [1, 1]}, "listed twice"),
])
def test_slice_rejects(attrs, match):
    with pytest.raises(ShapeError, match=match):
        traced("slice", {"X": (4, 5)}, attrs)


# --- squeeze / unsqueeze -----------------------------------------------------------------------

@pytest.mark.parametrize("xs,axes,expected", [
    ((3, 1, 4), [1], (3, 4)), ((1, 3, 1), [], (3,)), ((1, 3, 1), [-1], (1, 3)),
    ((1, 1), [0, 1], ()), ((2, 1, 1, 5), [2, -3], (2, 5)), ((1,), [0], ()),
])
def test_squeeze(rng, xs, axes, expected):
    x = r(rng, *xs)
    got = check_op("squeeze", {"X": x}, {"axes": axes},
                   reference=lambda X, **a: X.reshape(expected))
    assert got["Out"][0].shape == expected
    check_grad("squeeze", {"X": x}, {"axes": axes})


def test_squeeze_unknown_dims():
    assert traced("squeeze", {"X": (-1, 1, 3)}, {"axes": [1]}) == [(-1, 3)]
    assert traced("squeeze", {"X": (-1, 1, 3)}, {"axes": []}) == [(-1, 3)]
    # An unknown dim named in axes is taken as 1 while tracing and checked later.
    assert traced("squeeze", {"X": (-1, 3)}, {"axes": [0]}) == [(3,)]
    with pytest.raises(ShapeError, match=r"cannot squeeze axis 0 of X \[4, 3\]"):
        traced("squeeze", {"X": (4, 3)}, {"axes": [0]})


@pytest.mark.parametrize("axes,match", [([1], r"axis 1 of X \[2, 3\]: that dim has size 3"),
                                        ([2], r"squeeze axis 2 is out of range for X \[2, 3\]")])
def test_squeeze_rejects(axes, match):
    with pytest.raises(ShapeError, match=match):
        traced("squeeze", {"X": (2, 3)}, {"axes": axes})


@pytest.mark.parametrize("xs,axes,expected", [
    ((3, 4), [0], (1, 3, 4)), ((3, 4), [0, 2], (1, 3, 1, 4)), ((3, 4), [-1], (3, 4, 1)),
    ((3,), [1, 0], (1, 3, 1)), ((2, 3), [1, -1], (2, 1, 3, 1)), ((5,), [0, 0], (1, 1, 5)),
])
def test_unsqueeze(rng, xs, axes, expected):
    x = r(rng, *xs)
    got = check_op("unsqueeze", {"X": x}, {"axes": axes},
                   reference=lambda X, **a: X.reshape(expected))
    assert got["Out"][0].shape == expected
    check_grad("unsqueeze", {"X": x}, {"axes": axes})


def test_unsqueeze_matches_numpy_for_sorted_axes(rng):
    x = r(rng, 2, 3)
    check_op("unsqueeze", {"X": x}, {"axes": [0, 2, 4]},
             reference=lambda X, **a: np.expand_dims(X, (0, 2, 4)))


@pytest.mark.parametrize("axes,match", [([3], r"axis 3 is out of range for X \[2, 3\]"),
                                        ([-4], r"axis -4 is out of range"),
                                        ([], "at least one axis")])
def test_unsqueeze_rejects(axes, match):
    with pytest.raises(ShapeError, match=match):
        traced("unsqueeze", {"X": (2, 3)}, {"axes": axes})


# --- cast --------------------------------------------------------------------------------------

@pytest.mark.parametrize("src,dst", [("float32", "float64"), ("float64", "float32"),
                                     ("float32", "int64"), ("int32", "float32"),
                                     ("float32", "float16"), ("int64", "bool"),
                                     ("float32", "float32")])
def test_cast(rng, src, dst):
    x = (rng.standard_normal((3, 4)) * 4).astype(src)
    got = check_op("cast", {"X": x}, {"out_dtype": dst},
                   reference=lambda X, **a: X.astype(dst), rtol=1e-3)
    assert got["Out"][0].dtype == np.dtype(dst)
    assert not np.shares_memory(got["Out"][0], x)


def test_cast_truncates_toward_zero():
    got = check_op("cast", {"X": np.array([-1.7, -0.2, 0.9, 2.5], f32)}, {"out_dtype": "int32"})
    np.testing.assert_array_equal(got["Out"][0], [-1, 0, 0, 2])


def test_cast_gradient_goes_back_to_the_input_dtype(rng):
    from ops.harness import analytic_grads
    x = r(rng, 2, 3)
    check_grad("cast", {"X": x}, {"out_dtype": "float64"})
    op, env = build_op("cast", {"X": x}, {"out_dtype": "float64"})
    env["out_Out_0"] = x.astype(np.float64)
    g = analytic_grads(op, env, {"out_Out_0": np.ones((2, 3))}, ["X"])["X"][0]
    assert g.dtype == np.float32


def test_cast_rejects_unknown_dtype_and_int_gradients():
    with pytest.raises(DTypeError, match="unknown dtype 'complex128'"):
        traced("cast", {"X": (2,)}, {"out_dtype": "complex128"})
    with pytest.raises(DTypeError, match="carries no gradient"):
        check_op("cast_grad", {"X": np.ones(2, np.int32), "Out@GRAD": np.ones(2, f32)})


# --- reductions --------------------------------------------------------------------------------

_REDUCE_REF = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max,
               "reduce_min": np.min}
_REDUCE_CASES = [
    ((3, 4), {"dim": [0]}), ((3, 4), {"dim": [1], "keep_dim": True}),
    ((2, 3, 5), {"dim": [0, 2]}), ((2, 3, 5), {"dim": [-1, -3], "keep_dim": True}),
    ((2, 3, 5), {"reduce_all": True}), ((2, 3), {"dim": []}), ((4, 3), {"reduce_all": True,
                                                                        "keep_dim": True}),
    ((1, 5), {"dim": [0]}), ((7,), {"dim": [-1]}), ((2, 3), {}),
]


@pytest.mark.parametrize("op", sorted(_REDUCE_REF))
@pytest.mark.parametrize("xs,attrs", _REDUCE_CASES)
def test_reduce(rng, op, xs, attrs):
    x = r(rng, *xs)

    def ref(X, dim, keep_dim, reduce_all, **a):
        axis = None if reduce_all or not dim else tuple(dim)
        return _REDUCE_REF[op](X, axis=axis, keepdims=keep_dim)

    got = check_op(op, {"X": x}, attrs, reference=ref)
    assert isinstance(got["Out"][0], np.ndarray)
    assert got["Out"][0].dtype == np.float32
    check_grad(op, {"X": x}, attrs)


@pytest.mark.parametrize("op", sorted(_REDUCE_REF))
def test_reduce_of_a_0d_input(op):
    x = np.array(2.5, f32)
    got = check_op(op, {"X": x}, {}, reference=lambda X, **a: X)
    assert got["Out"][0].shape == ()
    check_grad(op, {"X": x})


def test_reduce_with_unknown_batch():
    assert traced("reduce_sum", {"X": (-1, 3, 4)}, {"dim": [2]}) == [(-1, 3)]
    assert traced("reduce_max", {"X": (-1, 3, 4)}, {"dim": [0], "keep_dim": True}) == [(1, 3, 4)]
    assert traced("reduce_mean", {"X": (-1, 3)}, {"reduce_all": True}) == [()]


def test_reduce_integer_sum_keeps_dtype():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    got = check_op("reduce_sum", {"X": x}, {"dim": [1]},
                   reference=lambda X, **a: X.sum(axis=1))
    assert got["Out"][0].dtype == np.int32


@pytest.mark.parametrize("op,expected", [
    ("reduce_max", [[0, 0.5, 0, 0.5, 0], [0, 0, 1, 0, 0]]),
    ("reduce_min", [[1 / 3, 0, 1 / 3, 0, 1 / 3], [1, 0, 0, 0, 0]]),
])
def test_reduce_extreme_gradient_splits_ties_evenly(op, expected):
    from ops.harness import analytic_grads
    x = np.array([[1, 2, 1, 2, 1], [-1, 0, 3, 2, 2]], f32)
    op_desc, env = build_op(op, {"X": x}, {"dim": [1]})
    env["out_Out_0"] = _REDUCE_REF[op](x, axis=1)
    g = analytic_grads(op_desc, env, {"out_Out_0": np.ones(2, f32)}, ["X"])["X"][0]
    np.testing.assert_allclose(g, expected, rtol=1e-6)


@pytest.mark.parametrize("attrs,match", [
    ({"dim": [2]}, r"dim 2 is out of range for X \[\?, 3\] of rank 2"),
    ({"dim": [-3]}, r"dim -3 is out of range"),
])
def test_reduce_rejects_bad_dims(attrs, match):
    with pytest.raises(ShapeError, match=match):
        traced("reduce_sum", {"X": (-1, 3)}, attrs)


def test_reduce_dtype_rules():
    with pytest.raises(DTypeError, match="reduce_mean needs a float input, got int64"):
        traced("reduce_mean", {"X": (2, 3)}, {"dim": [0]}, dtype="int64")
    with pytest.raises(DTypeError, match="reduce_sum needs a numeric"):
        traced("reduce_sum", {"X": (2, 3)}, {"dim": [0]}, dtype="bool")


def test_mean_still_works(rng):
    x = r(rng, 2, 5)
    check_op("mean", {"X": x}, reference=lambda X, **a: X.mean())
    check_grad("mean", {"X": x})
