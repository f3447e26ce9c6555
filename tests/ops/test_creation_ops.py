"""Forward, shape-rule and gradient checks of the ops that make and rearrange tensors for
Paddle 1.8's creation and utility layers: fill_any_like, range, linspace, eye, diag,
diag_embed, trace, tril_triu, kron, meshgrid, reverse, argsort, argmin, isinf / isnan /
isfinite, allclose, shape, size, hash, shard_index, py_func. References are Paddle 1.8's unit-test
NumPy references, on those tests' inputs and attributes."""
import ctypes
import ctypes.util

import numpy as np
import pytest
from ops.harness import analytic_grads, build_op, check_grad, check_op, run_forward
from ops.test_against_torch import close, ours, t

from fluid_interactive.errors import DTypeError, OpArgumentError, ShapeError
from fluid_interactive.ops.hashing import xxh64
from fluid_interactive.ops.interpret import run_ops
from fluid_interactive.ops.py_func import register_py_func

torch = pytest.importorskip("torch")


# --- fill_any_like, range, linspace, eye ---------------------------------------------------------

@pytest.mark.parametrize("dtype,value", [(np.int32, 0.0), (np.float32, 0.0), (np.int32, 1.0),
                                         (np.int32, 1e-10), (np.float16, 0.0)])
def test_fill_any_like(rng, dtype, value):
    x = rng.random((219, 232)).astype(dtype)
    check_op("fill_any_like", {"X": x}, {"value": value},
             reference=lambda X, **a: value * np.ones_like(X))


def test_fill_any_like_takes_another_dtype(rng):
    x = rng.random((4, 5)).astype(np.int32)
    got = check_op("fill_any_like", {"X": x}, {"value": 2.0, "dtype": "float32"},
                   reference=lambda X, **a: np.full(X.shape, 2.0, np.float32))
    assert got["Out"][0].dtype == np.float32


@pytest.mark.parametrize("value", [np.array([2.5]), np.array(-3, np.int64)])
def test_fill_constant_of_a_value_tensor(value):
    attrs = {"shape": [2, 3], "dtype": "float32"}
    check_op("fill_constant", {"ValueTensor": value}, attrs, batch_unknown=False,
             reference=lambda ValueTensor, **a: np.full((2, 3), ValueTensor, np.float32))
    with pytest.raises(ShapeError, match=r"ValueTensor must hold one value, got shape \[2\]"):
        run_forward("fill_constant", {"ValueTensor": np.zeros(2)}, attrs)


def test_fill_any_like_refuses_a_value_the_dtype_cannot_hold():
    with pytest.raises(ShapeError, match=r"value=1e\+100 does not fit int32"):
        run_forward("fill_any_like", {"X": np.zeros((2, 2), np.int32)}, {"value": 1e100})


@pytest.mark.parametrize("dtype,case", [
    ("float32", (0, 1, 0.2)), ("float32", (0, 5, 1)), ("int32", (0, 5, 2)),
    ("int32", (10, 1, -2)), ("int32", (-1, -10, -2))])
def test_range_with_attrs_and_with_inputs(dtype, case):
    want = np.arange(*case).astype(dtype)
    attrs = {"start": case[0], "end": case[1], "step": case[2], "dtype": dtype}
    check_op("range", {}, attrs, reference=lambda **a: want)
    got = run_forward("range", {"Start": np.array([case[0]], dtype),
                                "End": np.array([case[1]], dtype),
                                "Step": np.array([case[2]], dtype)})
    np.testing.assert_allclose(got["Out"][0], want, rtol=1e-6)
    assert got["Out"][0].dtype == want.dtype


@pytest.mark.parametrize("case,match", [((0, 5, 0), "step must not be 0"),
                                        ((0, 5, -1), "never reaches end")])
def test_range_rejects_steps_that_never_end(case, match):
    attrs = {"start": case[0], "end": case[1], "step": case[2]}
    with pytest.raises(ShapeError, match=match):
        run_forward("range", {}, attrs)
    with pytest.raises(ValueError, match=match):
        run_forward("range", {"Start": np.array([case[0]], "f4"),
                              "End": np.array([case[1]], "f4"),
                              "Step": np.array([case[2]], "f4")})


@pytest.mark.parametrize("start,stop,num", [(0, 10, 11), (10, 0, 11), (10, 0, 1)])
def test_linspace(start, stop, num):
    want = np.linspace(start, stop, num).astype(np.float32)
    check_op("linspace", {}, {"start": start, "stop": stop, "num": num},
             reference=lambda **a: want)
    got = run_forward("linspace", {"Start": np.array([start], "f4"),
                                   "Stop": np.array([stop], "f4"),
                                   "Num": np.array([num], "int32")})
    np.testing.assert_allclose(got["Out"][0], want, rtol=1e-6)


def test_range_and_linspace_match_torch():
    close(run_forward("range", {}, {"start": -1.5, "end": 4.0, "step": 0.7,
                                    "dtype": "float64"})["Out"][0],
          torch.arange(-1.5, 4.0, 0.7, dtype=torch.float64))
    close(run_forward("linspace", {}, {"start": -2.0, "stop": 3.0, "num": 9,
                                       "dtype": "float64"})["Out"][0],
          torch.linspace(-2.0, 3.0, 9, dtype=torch.float64))


@pytest.mark.parametrize("rows,cols,dtype", [(219, 319, "int32"), (50, -1, "float32"),
                                             (99, 1, "float32"), (3, 0, "float64")])
def test_eye(rows, cols, dtype):
    want = np.eye(rows, None if cols < 0 else cols, dtype=dtype)
    check_op("eye", {}, {"num_rows": rows, "num_columns": cols, "dtype": dtype},
             reference=lambda **a: want)
    close(want.astype("f8"), torch.eye(rows, rows if cols < 0 else cols, dtype=torch.float64))


# --- diag, diag_embed, trace ---------------------------------------------------------------------

@pytest.mark.parametrize("d", [np.arange(3, 6), np.array([3], dtype="int32")])
def test_diag(d):
    check_op("diag", {"Diagonal": d}, reference=lambda Diagonal, **a: np.diag(Diagonal),
             batch_unknown=False)


def test_diag_grad_and_torch(rng):
    d = rng.standard_normal(5)
    check_grad("diag", {"Diagonal": d}, wrt=["Diagonal"])
    got, grads, cot = ours("diag", {"Diagonal": d}, {}, ["Diagonal"], "Out")
    td = t(d)
    y = torch.diag(td)
    close(got["Out"], y)
    (y * torch.tensor(cot)).sum().backward()
    close(grads["Diagonal"], td.grad)


@pytest.mark.parametrize("attrs,reference", [
    ({"offset": 0, "dim1": -2, "dim2": -1}, lambda x: np.stack([np.diag(r, 0) for r in x], 0)),
    ({"offset": -1, "dim1": 0, "dim2": 2}, lambda x: np.stack([np.diag(r, -1) for r in x], 1)),
])
def test_diag_embed(rng, attrs, reference):
    x = rng.standard_normal((2, 3)).astype("float32")
    check_op("diag_embed", {"Input": x}, attrs, reference=lambda Input, **a: reference(Input))
    check_grad("diag_embed", {"Input": x}, attrs, wrt=["Input"])


@pytest.mark.parametrize("offset,dim1,dim2", [(0, -2, -1), (1, -2, 3), (2, 0, 2), (-1, 3, 1)])
def test_diag_embed_matches_torch(rng, offset, dim1, dim2):
    x = rng.standard_normal((2, 3, 4))
    got, grads, cot = ours("diag_embed", {"Input": x},
                           {"offset": offset, "dim1": dim1, "dim2": dim2}, ["Input"], "Out")
    tx = t(x)
    y = torch.diag_embed(tx, offset, dim1, dim2)
    close(got["Out"], y)
    (y * torch.tensor(cot)).sum().backward()
    close(grads["Input"], tx.grad)


def test_diag_embed_rejects_one_dim_twice():
    with pytest.raises(ShapeError, match="dim1 and dim2 name the same output dim 2"):
        run_forward("diag_embed", {"Input": np.zeros((2, 3))}, {"dim1": 2, "dim2": -1})


@pytest.mark.parametrize("shape,attrs", [
    ((20, 6), {"offset": 0, "dim1": 0, "dim2": 1}),
    ((2, 20, 2, 3), {"offset": 1, "dim1": 0, "dim2": 2}),
    ((2, 20, 2, 3), {"offset": -5, "dim1": 1, "dim2": -1}),
    ((3, 4), {"offset": 9, "dim1": 0, "dim2": 1}),
])
def test_trace(rng, shape, attrs):
    x = rng.standard_normal(shape)
    want = np.trace(x, attrs["offset"], attrs["dim1"], attrs["dim2"])
    check_op("trace", {"Input": x}, attrs, reference=lambda Input, **a: np.reshape(want, -1)
             if np.ndim(want) == 0 else want)
    check_grad("trace", {"Input": x}, attrs, wrt=["Input"])


def test_trace_matches_torch(rng):
    x = rng.standard_normal((5, 7))
    got, grads, cot = ours("trace", {"Input": x}, {"dim1": 0, "dim2": 1}, ["Input"], "Out")
    tx = t(x)
    y = torch.trace(tx).reshape(1)
    close(got["Out"], y)
    (y * torch.tensor(cot)).sum().backward()
    close(grads["Input"], tx.grad)


def test_trace_needs_a_matrix():
    with pytest.raises(ShapeError, match=r"at least 2 dims, got shape \[3\]"):
        run_forward("trace", {"Input": np.zeros(3)}, {"dim1": 0, "dim2": 1})


# --- tril_triu, kron, meshgrid, reverse -----------------------------------------------------

@pytest.mark.parametrize("shape,diagonals", [((2, 2, 3, 4, 5), [-100, -3, -1, 0, 2, 4, 100]),
                                             ((10, 10, 1, 1), [-100, -1, 0, 1, 100])])
@pytest.mark.parametrize("lower", [True, False])
def test_tril_triu(rng, shape, diagonals, lower):
    x = rng.random(shape)
    np_op = np.tril if lower else np.triu
    for k in diagonals:
        check_op("tril_triu", {"X": x}, {"diagonal": k, "lower": lower},
                 reference=lambda X, k=k, **a: np_op(X, k))
    check_grad("tril_triu", {"X": x[0, 0]}, {"diagonal": 1, "lower": lower})


def test_tril_triu_zeroes_nan_and_matches_torch(rng):
    x = rng.standard_normal((4, 6))
    x[0, 5] = np.nan
    got = run_forward("tril_triu", {"X": x}, {"diagonal": 0, "lower": True})["Out"][0]
    assert got[0, 5] == 0   # set to zero, not multiplied by it
    got, grads, cot = ours("tril_triu", {"X": x[1:]}, {"diagonal": -1, "lower": False},
                           ["X"], "Out")
    tx = t(x[1:])
    y = torch.triu(tx, -1)
    close(got["Out"], y)
    (y * torch.tensor(cot)).sum().backward()
    close(grads["X"], tx.grad)


@pytest.mark.parametrize("xs,ys", [((10, 10), (10, 10)), ((5, 5, 4), (10, 10)),
                                   ((10, 10), (5, 5, 4))])
def test_kron(rng, xs, ys):
    x, y = rng.uniform(size=xs), rng.uniform(size=ys)
    check_op("kron", {"X": x, "Y": y}, reference=lambda X, Y, **a: np.kron(X, Y))


@pytest.mark.parametrize("xs,ys", [((2, 3), (3, 2)), ((2, 2, 1), (3, 2)), ((3,), (2, 2, 2))])
def test_kron_grad_and_torch(rng, xs, ys):
    x, y = rng.standard_normal(xs), rng.standard_normal(ys)
    check_grad("kron", {"X": x, "Y": y}, wrt=["X", "Y"])
    check_grad("kron", {"X": x, "Y": y}, wrt=["Y"])
    got, grads, cot = ours("kron", {"X": x, "Y": y}, {}, ["X", "Y"], "Out")
    tx, ty = t(x), t(y)
    z = torch.kron(tx, ty)
    close(got["Out"], z)
    (z * torch.tensor(cot)).sum().backward()
    close(grads["X"], tx.grad)
    close(grads["Y"], ty.grad)


def test_kron_needs_one_dtype():
    with pytest.raises(DTypeError, match="one numeric dtype, got float64 and int64"):
        run_forward("kron", {"X": np.zeros((2, 2)), "Y": np.zeros((2, 2), np.int64)})


@pytest.mark.parametrize("sizes", [[100, 200], [100, 300], [3, 4, 2]])
def test_meshgrid(rng, sizes):
    xs = [rng.random(n) for n in sizes]
    check_op("meshgrid", {"X": xs}, output_counts={"Out": len(sizes)}, batch_unknown=False,
             reference=lambda X, **a: {"Out": np.meshgrid(*X, indexing="ij")})


def test_meshgrid_grad_and_torch(rng):
    xs = [rng.standard_normal(n) for n in (3, 4, 2)]
    check_grad("meshgrid", {"X": xs}, output_counts={"Out": 3})
    txs = [t(x) for x in xs]
    grids = torch.meshgrid(*txs, indexing="ij")
    cots = [rng.standard_normal(g.shape) for g in grids]
    sum((g * torch.tensor(c)).sum() for g, c in zip(grids, cots)).backward()
    op, env = build_op("meshgrid", {"X": xs}, output_counts={"Out": 3})
    run_ops([op], env)
    got = analytic_grads(op, env, dict(zip(op.outputs["Out"], cots)), ["X"])["X"]
    for g, tx in zip(got, txs):
        close(g, tx.grad)


@pytest.mark.parametrize("shape,axis", [((3, 40), [0]), ((3, 40), [1]), ((3, 40), [-1]),
                                        ((3, 40), [0, 1]), ((3, 40), [0, -1]),
                                        ((3, 4, 10), [0, 2]), ((3, 4, 10), [0, -2]),
                                        ((3, 4, 10), [1, 2]), ((3, 4, 10), [-1, -2])])
def test_reverse(rng, shape, axis):
    x = rng.random(shape)

    def reference(X, **a):
        for ax in axis:
            X = np.flip(X, ax)
        return X
    check_op("reverse", {"X": x}, {"axis": axis}, reference=reference)
    check_grad("reverse", {"X": x}, {"axis": axis})


def test_reverse_matches_torch_and_rejects_bad_axes(rng):
    x = rng.standard_normal((2, 3, 4))
    got, grads, cot = ours("reverse", {"X": x}, {"axis": [0, 2]}, ["X"], "Out")
    tx = t(x)
    y = torch.flip(tx, [0, 2])
    close(got["Out"], y)
    (y * torch.tensor(cot)).sum().backward()
    close(grads["X"], tx.grad)
    with pytest.raises(ShapeError, match=r"axis 3 is out of range for X \[2, 3, 4\]"):
        run_forward("reverse", {"X": x}, {"axis": [3]})
    with pytest.raises(ShapeError, match="names a dim twice"):
        run_forward("reverse", {"X": x}, {"axis": [1, -2]})


# --- argsort, argmin -----------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((2, 3, 4), -1), ((2, 3, 4), 0), ((2, 3, 4), 1),
                                        ((5,), 0), ((5,), -1)])
@pytest.mark.parametrize("descending", [False, True])
def test_argsort(rng, shape, axis, descending):
    x = rng.random(shape)

    def reference(X, **a):
        order, values = np.argsort(X, kind="quicksort", axis=axis), np.sort(X, axis=axis)
        if descending:
            order, values = np.flip(order, axis), np.flip(values, axis)
        return {"Out": values, "Indices": order}
    check_op("argsort", {"X": x}, {"axis": axis, "descending": descending},
             reference=reference)
    check_grad("argsort", {"X": x}, {"axis": axis, "descending": descending},
               through=["Out"])


def test_argsort_matches_torch_sort(rng):
    x = rng.standard_normal((4, 6))
    got, grads, cot = ours("argsort", {"X": x}, {"axis": 1, "descending": True}, ["X"], "Out")
    tx = t(x)
    values, order = torch.sort(tx, dim=1, descending=True)
    close(got["Out"], values)
    np.testing.assert_array_equal(got["Indices"], order.numpy())
    (values * torch.tensor(cot)).sum().backward()
    close(grads["X"], tx.grad)


@pytest.mark.parametrize("shape,axis", [((3, 4, 5), 0), ((3, 4, 5), 1), ((3, 4, 5), -1),
                                        ((1,), 0)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8"])
def test_argmin(rng, shape, axis, dtype):
    x = (1000 * rng.random(shape)).astype(dtype)
    check_op("argmin", {"X": x}, {"axis": axis},
             reference=lambda X, **a: np.argmin(X, axis=axis))
    np.testing.assert_array_equal(run_forward("argmin", {"X": x}, {"axis": axis})["Out"][0],
                                  torch.argmin(torch.tensor(x.astype("f8")), axis).numpy())


# --- isinf / isnan / isfinite, allclose, shape, size ---------------------------------------

def _with_inf_and_nan(rng):
    x = rng.uniform(0.1, 1, [11, 17]).astype(np.float32)
    x[0], x[-1] = np.inf, np.nan
    return x


@pytest.mark.parametrize("op,want", [("isinf", np.array([1], "f4")),
                                     ("isnan", np.array([1], "f4")),
                                     ("isfinite", np.array([False]))])
def test_overflow_checks(rng, op, want):
    check_op(op, {"X": _with_inf_and_nan(rng)}, reference=lambda X, **a: want)
    clean = rng.uniform(0.1, 1, [4, 5]).astype(np.float64)
    got = check_op(op, {"X": clean}, reference=lambda X, **a: (~want.astype(bool)).astype(
        want.dtype))
    assert got["Out"][0].dtype == (np.bool_ if op == "isfinite" else np.float64)
    torch_op = {"isinf": lambda a: torch.isinf(a).any(), "isnan": lambda a: torch.isnan(a).any(),
                "isfinite": lambda a: torch.isfinite(a).all()}[op]
    for x in (_with_inf_and_nan(rng), clean):
        assert bool(run_forward(op, {"X": x})["Out"][0][0]) == bool(torch_op(torch.tensor(x)))


def test_integers_are_finite():
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    check_op("isfinite", {"X": x}, reference=lambda X, **a: np.array([True]))
    check_op("isinf", {"X": x}, reference=lambda X, **a: np.array([0], np.int64))


@pytest.mark.parametrize("a,b,equal_nan", [
    ([10000., 1e-07], [10000.1, 1e-08], False), ([10000., 1e-08], [10000.1, 1e-09], False),
    ([1.0, float("nan")], [1.0, float("nan")], False),
    ([1.0, float("nan")], [1.0, float("nan")], True)])
def test_allclose(a, b, equal_nan):
    a, b = np.array(a, "f4"), np.array(b, "f4")
    want = np.array([np.allclose(a, b, 1e-5, 1e-8, equal_nan)])
    check_op("allclose", {"Input": a, "Other": b}, {"equal_nan": equal_nan},
             reference=lambda Input, Other, **k: want)
    assert bool(want[0]) == torch.allclose(torch.tensor(a), torch.tensor(b), 1e-5, 1e-8,
                                           equal_nan)


@pytest.mark.parametrize("shape", [(3, 100, 1), (10,), (1, 2, 3), (1000, 20)])
def test_shape_and_size(shape):
    x = np.zeros(shape, dtype=bool)
    check_op("shape", {"Input": x}, reference=lambda Input, **a: np.array(shape, "int32"))
    check_op("size", {"Input": x}, reference=lambda Input, **a: np.array([x.size], "int64"))


# --- hash, shard_index --------------------------------------------------------------------------

def test_hash_gives_paddles_values():
    np.random.seed(1)
    x = np.random.randint(0, 10, (8, 1)).astype("int32")
    want = np.array([[[3481], [7475]], [[1719], [5986]], [[8473], [694]], [[3481], [7475]],
                     [[4372], [9456]], [[4372], [9456]], [[6897], [3218]], [[9038], [7951]]])
    check_op("hash", {"X": x}, {"num_hash": 2, "mod_by": 10000}, reference=lambda **a: want)
    x = np.array([1, 2 ** 32 + 1]).reshape((2, 1)).astype("int64")
    check_op("hash", {"X": x}, {"num_hash": 2, "mod_by": 10000},
             reference=lambda **a: np.array([1269, 9609, 3868, 7268]).reshape((2, 2, 1)))
    x = np.array([10, 5]).reshape((2, 1)).astype("int64")
    want = np.array([1204014882, 393011615, 3586283837, 2814821595]).reshape((2, 2, 1))
    check_op("hash", {"X": x}, {"num_hash": 2, "mod_by": 2 ** 32}, reference=lambda **a: want)


@pytest.mark.skipif(ctypes.util.find_library("xxhash") is None, reason="no libxxhash")
@pytest.mark.parametrize("length", [0, 1, 3, 4, 7, 8, 12, 31, 32, 33, 40, 64, 100, 129])
def test_xxh64_matches_the_c_library(rng, length):
    lib = ctypes.CDLL(ctypes.util.find_library("xxhash"))
    lib.XXH64.restype = ctypes.c_uint64
    lib.XXH64.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
    rows = rng.integers(0, 256, (5, length)).astype(np.uint8)
    want = [[lib.XXH64(r.tobytes(), length, s) for s in (0, 1, 7)] for r in rows]
    np.testing.assert_array_equal(xxh64(np, rows, np.array([0, 1, 7], np.uint64)),
                                  np.array(want, np.uint64))


def test_hash_needs_rows_of_integers():
    with pytest.raises(ShapeError, match=r"2-D \[N, D\].*got \[4\]"):
        run_forward("hash", {"X": np.zeros(4, np.int64)})
    with pytest.raises(DTypeError, match="int32 or int64, got float32"):
        run_forward("hash", {"X": np.zeros((4, 1), np.float32)})


@pytest.mark.parametrize("index_num,nshards,shard_id,ignore", [
    (20, 2, 0, -1), (20, 2, 1, -1), (20, 2, 0, -2), (20, 3, 2, -1)])
def test_shard_index(index_num, nshards, shard_id, ignore):
    x = np.random.default_rng(0).integers(0, index_num - 1, (45, 1)).astype("int32")
    size = (index_num + nshards - 1) // nshards
    want = np.where(x // size == shard_id, x % size, ignore).astype("int32")
    check_op("shard_index", {"X": x}, {"index_num": index_num, "nshards": nshards,
                                       "shard_id": shard_id, "ignore_value": ignore},
             reference=lambda X, **a: want)


def test_shard_index_checks_its_indices():
    with pytest.raises(IndexError, match=r"index 25 is outside \[0, index_num=20\)"):
        run_forward("shard_index", {"X": np.array([[3], [25]])},
                    {"index_num": 20, "nshards": 2, "shard_id": 0})
    with pytest.raises(ShapeError, match=r"shard_id=2 must be in \[0, nshards=2\)"):
        run_forward("shard_index", {"X": np.array([[3]])},
                    {"index_num": 20, "nshards": 2, "shard_id": 2})


# --- py_func ------------------------------------------------------------------------------------

def test_py_func_op_calls_the_registered_function(rng):
    register_py_func("test_creation_ops.affine", lambda a, b: (a * 2 + b, a.sum(keepdims=True)))
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    attrs = {"func": "test_creation_ops.affine", "out_shapes": [[3, 4], [1, 1]],
             "out_dtypes": ["float64", "float32"]}
    got = check_op("py_func", {"X": [x, y]}, attrs, output_counts={"Out": 2},
                   reference=lambda X, **a: {"Out": [X[0] * 2 + X[1],
                                                     np.float32(X[0].sum()).reshape(1, 1)]})
    assert got["Out"][1].dtype == np.float32


def test_py_func_op_needs_a_registered_name():
    with pytest.raises(OpArgumentError, match="register_py_func\\('not.there', "):
        run_forward("py_func", {"X": [np.zeros(2)]}, {"func": "not.there"})
