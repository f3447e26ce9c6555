"""Forward, shape-rule and gradient checks of softmax, log_softmax, the classification losses
(cross_entropy, softmax_with_cross_entropy, sigmoid_cross_entropy_with_logits) and the
metric ops (argmax, accuracy)."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op, run_forward

from fluid_interactive.errors import DTypeError, ShapeError
from fluid_interactive.ir.records import OpDesc
from fluid_interactive.ops import get_spec, infer_op
from fluid_interactive.ops.spec import GradContext, TensorType

f32 = np.float32


def r(rng, *shape):
    return rng.standard_normal(shape).astype(f32)


def np_softmax(x, axis=-1):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis=-1):
    x = np.asarray(x, np.float64)
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def hard_labels(rng, n, c, ignore=None, ignore_index=-100):
    lab = rng.integers(0, c, (n, 1)).astype(np.int64)
    if ignore is not None:
        lab[ignore, 0] = ignore_index
    return lab


def infer_with_batch(op_type, types, attrs=None, outputs=None):
    """Run the shape rule on types whose batch dim is unknown (-1), as while tracing."""
    spec = get_spec(op_type)
    ins = {slot: [f"{slot}_0"] for slot in types}
    outs = {s.name: [f"out_{s.name}"] for s in spec.outputs} if outputs is None else outputs
    env = {f"{slot}_0": TensorType(shape, dtype) for slot, (shape, dtype) in types.items()}
    return infer_op(OpDesc(op_type, ins, outs, dict(attrs or {})), env.__getitem__)


# --- softmax -------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((1, 5), -1), ((4, 7), -1), ((4, 7), 0), ((3,), 0),
                                        ((2, 3, 5), 1), ((2, 3, 5), -1), ((2, 3, 5), 0)])
def test_softmax(rng, shape, axis):
    x = r(rng, *shape)
    got = check_op("softmax", {"X": x}, {"axis": axis},
                   reference=lambda X, axis: np_softmax(X, axis))
    np.testing.assert_allclose(got["Out"][0].sum(axis=axis), 1.0, rtol=1e-6)
    check_grad("softmax", {"X": x}, {"axis": axis})


def test_softmax_is_stable_for_large_inputs(rng):
    x = (r(rng, 3, 5) * 1000).astype(f32)
    got = check_op("softmax", {"X": x}, reference=lambda X, axis: np_softmax(X, axis))
    assert np.isfinite(got["Out"][0]).all()
    x64 = np.array([[1e300, 0.0, -1e300]])
    check_op("softmax", {"X": x64}, reference=lambda X, axis: np.array([[1.0, 0.0, 0.0]]))


def test_softmax_rejects_bad_axis_and_dtype(rng):
    with pytest.raises(ShapeError, match="axis=2 is out of range"):
        check_op("softmax", {"X": r(rng, 3, 4)}, {"axis": 2})
    with pytest.raises(DTypeError, match="float"):
        check_op("softmax", {"X": np.ones((3, 4), np.int64)})


def test_softmax_shape_rule_with_unknown_batch():
    types = infer_with_batch("softmax", {"X": ((-1, 5), "float32")})
    assert types["Out"][0] == TensorType((-1, 5), "float32")


# --- log_softmax -------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((3, 5), -1), ((2, 4, 3), 1), ((1, 6), 1), ((4,), 0)])
def test_log_softmax(rng, shape, axis):
    x = r(rng, *shape) * 3
    check_op("log_softmax", {"X": x}, {"axis": axis},
             reference=lambda X, axis: np_log_softmax(X, axis))
    check_grad("log_softmax", {"X": x}, {"axis": axis})


def test_log_softmax_is_stable():
    x = np.array([[1000.0, 0.0, -1000.0]], f32)
    got = run_forward("log_softmax", {"X": x})["Out"][0]
    assert np.isfinite(got).all() and abs(got[0, 0]) < 1e-6


def test_log_softmax_rejects_bad_axis_and_dtype(rng):
    with pytest.raises(ShapeError, match="axis=2 is out of range"):
        check_op("log_softmax", {"X": r(rng, 3, 4)}, {"axis": 2})
    with pytest.raises(DTypeError, match="log_softmax input X must be float"):
        check_op("log_softmax", {"X": np.ones((3, 4), np.int64)})


# --- cross_entropy -------------------------------------------------------------------------------

def ref_ce_hard(X, Label, ignore_index, **a):
    X = np.asarray(X, np.float64)
    lab = Label[..., 0]
    valid = lab != ignore_index
    p = np.take_along_axis(X, np.where(valid, lab, 0)[..., None], axis=-1)[..., 0]
    with np.errstate(divide="ignore"):
        y = np.minimum(-np.log(p), 1e20)
    return (np.where(valid, y, 0.0))[..., None]


def ref_ce_soft(X, Label, **a):
    return -(Label * np.log(np.asarray(X, np.float64))).sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("n,c", [(1, 3), (4, 5), (6, 1), (3, 7)])
def test_cross_entropy_hard(rng, n, c):
    x = np_softmax(r(rng, n, c)).astype(f32)
    lab = hard_labels(rng, n, c)
    got = check_op("cross_entropy", {"X": x, "Label": lab}, reference=ref_ce_hard)
    assert got["Y"][0].shape == (n, 1)
    check_grad("cross_entropy", {"X": x, "Label": lab})


def test_cross_entropy_hard_ignore_index(rng):
    x = np_softmax(r(rng, 5, 3)).astype(f32)
    lab = hard_labels(rng, 5, 3, ignore=[1, 3])
    got = check_op("cross_entropy", {"X": x, "Label": lab}, reference=ref_ce_hard)
    assert got["Y"][0][[1, 3]].tolist() == [[0.0], [0.0]]
    check_grad("cross_entropy", {"X": x, "Label": lab})
    # an ignore_index that is also a class index ignores that class
    lab = np.array([[0], [2], [1]])
    got = check_op("cross_entropy", {"X": x[:3], "Label": lab}, {"ignore_index": 2},
                   reference=ref_ce_hard)
    assert got["Y"][0][1, 0] == 0.0


def test_cross_entropy_hard_leading_dims(rng):
    x = np_softmax(r(rng, 2, 3, 5)).astype(f32)
    lab = rng.integers(0, 5, (2, 3, 1))
    got = check_op("cross_entropy", {"X": x, "Label": lab}, reference=ref_ce_hard)
    assert got["Y"][0].shape == (2, 3, 1)
    check_grad("cross_entropy", {"X": x, "Label": lab})


@pytest.mark.parametrize("n,c", [(1, 3), (4, 5)])
def test_cross_entropy_soft(rng, n, c):
    x = np_softmax(r(rng, n, c)).astype(f32)
    lab = np_softmax(r(rng, n, c)).astype(f32)
    attrs = {"soft_label": True}
    check_op("cross_entropy", {"X": x, "Label": lab}, attrs, reference=ref_ce_soft)
    check_grad("cross_entropy", {"X": x, "Label": lab}, attrs)


def test_cross_entropy_clamps_log_of_zero_like_paddle():
    x = np.array([[0.0, 1.0, 0.0], [0.5, 0.5, 0.0]], f32)
    got = check_op("cross_entropy", {"X": x, "Label": np.array([[0], [1]])},
                   reference=ref_ce_hard)
    assert got["Y"][0][0, 0] == f32(1e20)
    soft = np.array([[0.0, 1.0, 0.0], [0.5, 0.5, 0.0]], f32)   # 0 * log(0) counts as 0
    got = check_op("cross_entropy", {"X": x, "Label": soft}, {"soft_label": True},
                   reference=lambda X, Label, **a: np.array([[0.0], [np.log(2)]]))
    from ops.harness import analytic_grads, build_op
    op, env = build_op("cross_entropy", {"X": x, "Label": np.array([[0], [1]])})
    from fluid_interactive.ops.interpret import run_ops
    run_ops([op], env)
    g = analytic_grads(op, env, {"out_Y_0": np.ones((2, 1), f32)}, ["X"])["X"][0]
    assert np.isfinite(g).all() and g[0, 0] < -1e19 and g[1, 1] == -2.0


def test_cross_entropy_rejects_out_of_range_labels(rng):
    x = np_softmax(r(rng, 3, 4)).astype(f32)
    with pytest.raises(ValueError, match=r"label 4 is out of range.*\[0, 4\)"):
        run_forward("cross_entropy", {"X": x, "Label": np.array([[0], [4], [1]])})
    with pytest.raises(ValueError, match="label -1 is out of range"):
        run_forward("cross_entropy", {"X": x, "Label": np.array([[0], [-1], [1]])})


def test_cross_entropy_shape_rule_errors(rng):
    x = np_softmax(r(rng, 3, 4)).astype(f32)
    with pytest.raises(DTypeError, match="integer dtype"):
        check_op("cross_entropy", {"X": x, "Label": np.zeros((3, 1), f32)})
    with pytest.raises(ShapeError, match=r"needs \[3, 1\]"):
        check_op("cross_entropy", {"X": x, "Label": np.zeros((3,), np.int64)})
    with pytest.raises(ShapeError, match="shapes must match"):
        check_op("cross_entropy", {"X": x, "Label": np.zeros((3, 5), f32)},
                 {"soft_label": True})
    with pytest.raises(DTypeError, match="float"):
        check_op("cross_entropy", {"X": x, "Label": np.zeros((3, 4), np.int64)},
                 {"soft_label": True})


def test_cross_entropy_shape_rule_with_unknown_batch():
    types = infer_with_batch("cross_entropy", {"X": ((-1, 5), "float32"),
                                               "Label": ((-1, 1), "int64")})
    assert types["Y"][0] == TensorType((-1, 1), "float32")
    with pytest.raises(ShapeError):
        infer_with_batch("cross_entropy", {"X": ((-1, 5), "float32"),
                                           "Label": ((-1,), "int64")})


# --- softmax_with_cross_entropy ------------------------------------------------------------------

def ref_swce(Logits, Label, soft_label, ignore_index, axis, **a):
    logp = np_log_softmax(Logits, axis)
    if soft_label:
        loss = -(Label * logp).sum(axis=axis, keepdims=True)
    else:
        valid = Label != ignore_index
        picked = np.take_along_axis(logp, np.where(valid, Label, 0), axis=axis)
        loss = np.where(valid, -picked, 0.0)
    return {"Softmax": np.exp(logp), "Loss": loss}


@pytest.mark.parametrize("n,c", [(1, 3), (5, 4), (4, 7), (3, 1)])
def test_softmax_with_cross_entropy_hard(rng, n, c):
    x = r(rng, n, c) * 3
    lab = hard_labels(rng, n, c)
    got = check_op("softmax_with_cross_entropy", {"Logits": x, "Label": lab}, reference=ref_swce)
    assert got["Loss"][0].shape == (n, 1) and got["Softmax"][0].shape == (n, c)
    check_grad("softmax_with_cross_entropy", {"Logits": x, "Label": lab}, wrt=["Logits"])


def test_softmax_with_cross_entropy_ignore_index(rng):
    x = r(rng, 6, 5)
    lab = hard_labels(rng, 6, 5, ignore=[0, 4], ignore_index=-1)
    attrs = {"ignore_index": -1}
    got = check_op("softmax_with_cross_entropy", {"Logits": x, "Label": lab}, attrs,
                   reference=ref_swce)
    assert (got["Loss"][0][[0, 4]] == 0).all()
    check_grad("softmax_with_cross_entropy", {"Logits": x, "Label": lab}, attrs,
               wrt=["Logits"])


@pytest.mark.parametrize("n,c", [(1, 3), (4, 5)])
def test_softmax_with_cross_entropy_soft(rng, n, c):
    x = r(rng, n, c)
    lab = np_softmax(r(rng, n, c)).astype(f32)
    attrs = {"soft_label": True}
    check_op("softmax_with_cross_entropy", {"Logits": x, "Label": lab}, attrs,
             reference=ref_swce)
    check_grad("softmax_with_cross_entropy", {"Logits": x, "Label": lab}, attrs,
               wrt=["Logits"])
    # labels that do not sum to one still get the exact gradient
    check_grad("softmax_with_cross_entropy", {"Logits": x, "Label": lab * 1.7}, attrs,
               wrt=["Logits"])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_with_cross_entropy_axis(rng, axis):
    x = r(rng, 2, 3, 5)
    shape = list(x.shape)
    shape[axis] = 1
    lab = rng.integers(0, x.shape[axis], shape)
    attrs = {"axis": axis}
    got = check_op("softmax_with_cross_entropy", {"Logits": x, "Label": lab}, attrs,
                   reference=ref_swce)
    assert got["Loss"][0].shape == tuple(shape)
    check_grad("softmax_with_cross_entropy", {"Logits": x, "Label": lab}, attrs,
               wrt=["Logits"])
    soft = np_softmax(r(rng, 2, 3, 5), axis).astype(f32)
    attrs = {"axis": axis, "soft_label": True}
    check_op("softmax_with_cross_entropy", {"Logits": x, "Label": soft}, attrs,
             reference=ref_swce)
    check_grad("softmax_with_cross_entropy", {"Logits": x, "Label": soft}, attrs,
               wrt=["Logits"])


def test_softmax_with_cross_entropy_is_stable(rng):
    x = np.array([[1000.0, 0.0, -1000.0], [-5e4, 5e4, 0.0], [3e4, 3e4, 3e4]], f32)
    lab = np.array([[2], [1], [0]])
    got = check_op("softmax_with_cross_entropy", {"Logits": x, "Label": lab},
                   reference=ref_swce, rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(got["Loss"][0][:, 0], [2000.0, 0.0, np.log(3)], rtol=1e-5)


def test_softmax_with_cross_entropy_grad_is_softmax_minus_onehot(rng):
    """With only the Loss used, the backward pass feeds the Softmax output a zero-filled
    gradient (``@GRAD@ZERO``); the maker drops it and the kernel gives (S - onehot) * dL."""
    from fluid_interactive.ops.interpret import run_ops
    x, lab = r(rng, 4, 3), np.array([[0], [2], [1], [2]])
    op = OpDesc("softmax_with_cross_entropy", {"Logits": ["x"], "Label": ["y"]},
                {"Softmax": ["s"], "Loss": ["l"]}, {})
    emitted = []
    spec = get_spec(op.type)
    spec.grad(GradContext(op, spec.full_attrs({}), {"Softmax": ["s@GRAD@ZERO"],
                                                    "Loss": ["l@GRAD"]},
                          {"Logits": ["x@GRAD"], "Label": [None]},
                          lambda t, i, o, a: emitted.append(OpDesc(t, i, o, a)), str,
                          zeros=frozenset({"s@GRAD@ZERO"})))
    assert len(emitted) == 1 and "Softmax@GRAD" not in emitted[0].inputs
    dl = rng.standard_normal((4, 1)).astype(f32)
    env = run_ops([op] + emitted, {"x": x, "y": lab, "l@GRAD": dl})
    expected = (np_softmax(x) - np.eye(3)[lab[:, 0]]) * dl
    np.testing.assert_allclose(env["x@GRAD"], expected, rtol=1e-5, atol=1e-6)
    # any memory layout of the Softmax input gives the same result
    env = run_ops(emitted, {"y": lab, "l@GRAD": dl, "s": np.asfortranarray(env["s"])})
    np.testing.assert_allclose(env["x@GRAD"], expected, rtol=1e-5, atol=1e-6)


def test_softmax_with_cross_entropy_shape_rule(rng):
    types = infer_with_batch("softmax_with_cross_entropy",
                             {"Logits": ((-1, 7), "float32"), "Label": ((-1, 1), "int64")})
    assert types["Loss"][0] == TensorType((-1, 1), "float32")
    assert types["Softmax"][0] == TensorType((-1, 7), "float32")
    with pytest.raises(DTypeError, match="integer dtype"):
        check_op("softmax_with_cross_entropy", {"Logits": r(rng, 3, 4),
                                                "Label": np.zeros((3, 1), f32)})
    with pytest.raises(ShapeError, match=r"needs \[3, 1\]"):
        check_op("softmax_with_cross_entropy", {"Logits": r(rng, 3, 4),
                                                "Label": np.zeros((3, 4), np.int64)})
    with pytest.raises(ShapeError, match="must match"):
        check_op("softmax_with_cross_entropy", {"Logits": r(rng, 3, 4),
                                                "Label": np.zeros((3, 1), f32)},
                 {"soft_label": True})


# --- sigmoid_cross_entropy_with_logits -----------------------------------------------------------

def ref_sce(X, Label, ignore_index, normalize, **a):
    X = np.asarray(X, np.float64)
    p = 1 / (1 + np.exp(-X))
    out = -(Label * np.log(p) + (1 - Label) * np.log(1 - p))
    keep = Label != ignore_index
    out = np.where(keep, out, 0.0)
    return out / max(keep.sum(), 1) if normalize else out


@pytest.mark.parametrize("shape", [(1, 1), (4, 5), (3,), (2, 3, 4)])
def test_sigmoid_cross_entropy_with_logits(rng, shape):
    x = r(rng, *shape) * 2
    z = rng.uniform(0, 1, shape).astype(f32)
    check_op("sigmoid_cross_entropy_with_logits", {"X": x, "Label": z}, reference=ref_sce)
    check_grad("sigmoid_cross_entropy_with_logits", {"X": x, "Label": z})


@pytest.mark.parametrize("normalize", [False, True])
def test_sigmoid_cross_entropy_ignore_index(rng, normalize):
    x = r(rng, 4, 3)
    z = rng.integers(0, 2, (4, 3)).astype(f32)
    z[0, 1] = z[2, 2] = -1
    attrs = {"ignore_index": -1, "normalize": normalize}
    got = check_op("sigmoid_cross_entropy_with_logits", {"X": x, "Label": z}, attrs,
                   reference=ref_sce)
    assert got["Out"][0][0, 1] == 0 and got["Out"][0][2, 2] == 0
    check_grad("sigmoid_cross_entropy_with_logits", {"X": x, "Label": z}, attrs)


def test_sigmoid_cross_entropy_is_stable():
    x = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], f32)
    z = np.array([0.0, 1.0, 0.5, 0.0, 1.0], f32)
    got = check_op("sigmoid_cross_entropy_with_logits", {"X": x, "Label": z},
                   reference=lambda X, Label, **a: np.array([0.0, 50.0, np.log(2), 50.0, 0.0]))
    assert np.isfinite(got["Out"][0]).all()
    check_grad("sigmoid_cross_entropy_with_logits", {"X": x, "Label": z})


def test_sigmoid_cross_entropy_rejects_mismatch(rng):
    with pytest.raises(ShapeError, match="must match"):
        check_op("sigmoid_cross_entropy_with_logits", {"X": r(rng, 3, 4), "Label": r(rng, 3, 1)})
    with pytest.raises(DTypeError, match="int64"):
        check_op("sigmoid_cross_entropy_with_logits",
                 {"X": r(rng, 3, 4), "Label": np.zeros((3, 4), np.int64)})


# --- argmax --------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((4, 5), 1), ((4, 5), 0), ((4, 5), -1), ((7,), 0),
                                        ((2, 3, 4), 1)])
def test_argmax(rng, shape, axis):
    x = r(rng, *shape)
    got = check_op("argmax", {"X": x}, {"axis": axis},
                   reference=lambda X, axis: np.argmax(X, axis=axis))
    assert got["Out"][0].dtype == np.int64
    assert get_spec("argmax").grad is None


def test_argmax_ties_go_to_the_first_index_and_ints_work():
    x = np.array([[1, 3, 3], [2, 2, 2]], np.int64)
    got = check_op("argmax", {"X": x}, {"axis": 1})
    assert got["Out"][0].tolist() == [1, 0]
    with pytest.raises(ShapeError, match="axis=2"):
        check_op("argmax", {"X": x}, {"axis": 2})


# --- accuracy ------------------------------------------------------------------------------------

def ref_topk_accuracy(Out, Label, k, **a):
    X = Out
    order = np.argsort(-X, axis=1, kind="stable")[:, :k]     # ties: lower index first
    correct = int((order == Label).any(axis=1).sum())
    n = X.shape[0]
    return {"Accuracy": np.float32(correct / n), "Correct": correct, "Total": n}


@pytest.mark.parametrize("n,c,k", [(1, 3, 1), (8, 5, 1), (8, 5, 2), (9, 7, 3), (5, 3, 5)])
def test_accuracy(rng, n, c, k):
    x = np.round(r(rng, n, c), 1)                 # rounding makes ties
    lab = hard_labels(rng, n, c)
    got = check_op("accuracy", {"Out": x, "Label": lab}, {"k": k},
                   reference=ref_topk_accuracy)
    acc, correct, total = (got[s][0] for s in ("Accuracy", "Correct", "Total"))
    assert acc.shape == () and acc.dtype == np.float32
    assert correct.dtype == np.int64 and total.dtype == np.int64
    assert get_spec("accuracy").grad is None


def test_accuracy_ties_and_out_of_range_labels():
    x = np.array([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.1, 0.2, 0.7], [0.1, 0.2, 0.7]], f32)
    lab = np.array([[0], [1], [3], [-1]])
    got = check_op("accuracy", {"Out": x, "Label": lab})
    assert got["Correct"][0] == 1 and got["Total"][0] == 4 and got["Accuracy"][0] == 0.25
    got = check_op("accuracy", {"Out": x, "Label": lab}, {"k": 2})
    assert got["Correct"][0] == 2


def test_accuracy_from_indices(rng):
    idx = np.array([[2, 0], [1, 3], [0, 1]])
    lab = np.array([[0], [2], [0]])
    got = check_op("accuracy", {"Indices": idx, "Label": lab},
                   reference=lambda **a: {"Accuracy": np.float32(2 / 3), "Correct": 2,
                                          "Total": 3})
    assert got["Accuracy"][0].shape == ()


def test_accuracy_shape_rule(rng):
    types = infer_with_batch("accuracy", {"Out": ((-1, 10), "float32"),
                                          "Label": ((-1, 1), "int64")})
    assert types["Accuracy"][0] == TensorType((), "float32")
    with pytest.raises(ShapeError, match=r"needs \[4, 1\]"):
        check_op("accuracy", {"Out": r(rng, 4, 3), "Label": np.zeros((4,), np.int64)})
    with pytest.raises(DTypeError, match="int64"):
        check_op("accuracy", {"Out": r(rng, 4, 3), "Label": np.zeros((4, 1), f32)})
    with pytest.raises(ShapeError, match="positive int"):
        check_op("accuracy", {"Out": r(rng, 4, 3), "Label": np.zeros((4, 1), np.int64)},
                 {"k": 0})
