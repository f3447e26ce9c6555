"""Paddle 1.8's math ops (ops/reductions.py, ops/products.py, ops/vector_norms.py,
ops/segmentation.py, elementwise_floordiv, and the tensor forms of scale, pow and clip):
each forward against a NumPy reference written from Paddle's unit tests (test_cumsum_op,
test_reduce_op, test_cos_sim_op, test_norm_op, test_dist_op, test_cross_op, test_dot_op,
test_bmm_op, test_addmm_op, test_fsp_op, test_bilinear_tensor_product_op, test_mean_iou,
test_similarity_focus_op, test_clip_by_norm_op, test_elementwise_floordiv_op) on their
inputs and attrs, each gradient against float64 central differences, and PyTorch where it
has the op."""
import numpy as np
import pytest
from ops.harness import check_grad, check_op, run_forward

from fluid_interactive.errors import FluidError

f32 = np.float32


def rnd(rng, *shape):
    return rng.random(shape)


# --- cumsum --------------------------------------------------------------------------------

def _cumsum_ref(X, axis, exclusive, reverse, **a):
    x = np.flip(X, axis) if reverse else X
    out = np.cumsum(x, axis=axis)
    if exclusive:
        out = np.concatenate([np.zeros_like(np.take(out, [0], axis)),
                              np.take(out, range(out.shape[axis] - 1), axis)], axis)
    return np.flip(out, axis) if reverse else out


@pytest.mark.parametrize("shape,attrs", [
    ((5, 6, 10), {"axis": 2}), ((5, 6, 10), {"axis": -1, "reverse": True}),
    ((5, 6, 10), {"axis": 1}), ((5, 6, 10), {"axis": 0}), ((5, 20), {}), ((100,), {"axis": 0}),
    ((5, 6, 4), {"axis": 1, "exclusive": True}),
    ((5, 6, 4), {"axis": 2, "exclusive": True, "reverse": True}),
])
def test_cumsum_matches_paddle_and_differences(rng, shape, attrs):
    x = rnd(rng, *shape)
    full = {"axis": -1, "exclusive": False, "reverse": False, **attrs}
    check_op("cumsum", {"X": x}, attrs, reference=lambda X, **a: _cumsum_ref(X, **full),
             rtol=1e-12)
    check_grad("cumsum", {"X": x[:3] if x.ndim > 1 else x}, attrs)


# --- reduce_prod / reduce_all / reduce_any / logsumexp ----------------------------------------

@pytest.mark.parametrize("attrs,axes", [({"dim": [0]}, (0,)), ({"dim": [1, 2]}, (1, 2)),
                                        ({"dim": [-1], "keep_dim": True}, (-1,)),
                                        ({"reduce_all": True}, None)])
def test_reduce_prod_matches_paddle_and_differences(rng, attrs, axes):
    x = rnd(rng, 5, 6, 10)
    keep = attrs.get("keep_dim", False)
    check_op("reduce_prod", {"X": x}, attrs,
             reference=lambda X, **a: np.prod(X, axis=axes, keepdims=keep), rtol=1e-12)
    check_grad("reduce_prod", {"X": rnd(rng, 3, 4, 2) + 0.5}, attrs)


def test_reduce_prod_gradient_is_right_where_x_holds_zeros(rng):
    x = rnd(rng, 4, 3) + 0.5
    x[0, 1] = 0.0                 # one zero: the others' product goes to it
    x[2, 0] = x[2, 2] = 0.0       # two zeros: nothing flows
    check_grad("reduce_prod", {"X": x}, {"dim": [1]})


@pytest.mark.parametrize("op,fn", [("reduce_all", np.all), ("reduce_any", np.any)])
@pytest.mark.parametrize("attrs,axes", [({"reduce_all": True}, None), ({"dim": [1]}, (1,)),
                                        ({"dim": [-1], "keep_dim": True}, (-1,))])
def test_reduce_all_and_any_match_paddle(rng, op, fn, attrs, axes):
    x = rng.integers(0, 2, (5, 6, 10)).astype(bool)
    keep = attrs.get("keep_dim", False)
    got = check_op(op, {"X": x}, attrs, reference=lambda X, **a: fn(X, axis=axes,
                                                                     keepdims=keep))
    assert got["Out"][0].dtype == bool


def test_reduce_all_refuses_a_float_input(rng):
    with pytest.raises(FluidError, match="reduce_all needs a bool input"):
        run_forward("reduce_all", {"X": rnd(rng, 2, 3)}, {"reduce_all": True})


@pytest.mark.parametrize("shape,attrs,axes", [((123,), {"reduce_all": True}, None),
                                              ((2, 3, 4), {"dim": [1, 2]}, (1, 2)),
                                              ((2, 3, 4), {"dim": [2], "keep_dim": True}, (2,))])
def test_logsumexp_matches_paddle_and_differences(rng, shape, attrs, axes):
    x = rng.uniform(0.1, 1, shape).astype(f32)
    keep = attrs.get("keep_dim", False)
    check_op("logsumexp", {"X": x}, attrs,
             reference=lambda X, **a: np.log(np.sum(np.exp(X), axis=axes, keepdims=keep)))
    check_grad("logsumexp", {"X": rng.uniform(-2, 2, shape[-3:])}, attrs)


def test_logsumexp_does_not_overflow():
    x = np.array([[1000.0, 1000.0], [-1000.0, -np.inf]], f32)
    got = run_forward("logsumexp", {"X": x}, {"dim": [1]})["Out"][0]
    np.testing.assert_allclose(got, [1000 + np.log(2), -1000], rtol=1e-6)


# --- dot, bmm, addmm, cross, fsp, bilinear_tensor_product ------------------------------------

def test_dot_matches_paddle_and_differences(rng):
    x, y = rng.uniform(0.1, 1, [121]), rng.uniform(1, 3, [121])
    check_op("dot", {"X": x, "Y": y}, reference=lambda X, Y: np.dot(X, Y).reshape(1),
             batch_unknown=False)
    x, y = rng.uniform(0.1, 1, [11, 12]), rng.uniform(1, 3, [11, 12])
    check_op("dot", {"X": x, "Y": y}, reference=lambda X, Y: np.sum(X * Y, 1).reshape(11, 1))
    check_grad("dot", {"X": x, "Y": y}, wrt=["X", "Y"])
    ints = rng.integers(-5, 5, (3, 4))
    check_op("dot", {"X": ints, "Y": ints}, reference=lambda X, Y: (X * Y).sum(1, keepdims=True))


def test_bmm_matches_paddle_and_differences(rng):
    x, y = rnd(rng, 10, 3, 4), rnd(rng, 10, 4, 5)
    check_op("bmm", {"X": x, "Y": y}, reference=lambda X, Y: np.matmul(X, Y))
    check_grad("bmm", {"X": x[:2], "Y": y[:2]}, wrt=["X", "Y"])


@pytest.mark.parametrize("shapes,alpha,beta", [(((100, 1), (100, 10), (10, 20)), 1.0, 1.0),
                                               (((20, 30), (20, 6), (6, 30)), 0.1, 1.0),
                                               (((1, 30), (20, 6), (6, 30)), 1.0, 0.5),
                                               (((1, 1), (4, 6), (6, 3)), -2.0, 3.0)])
def test_addmm_matches_paddle_and_differences(rng, shapes, alpha, beta):
    i, x, y = (rnd(rng, *s) for s in shapes)
    attrs = {"Alpha": alpha, "Beta": beta}
    check_op("addmm", {"Input": i, "X": x, "Y": y}, attrs,
             reference=lambda Input, X, Y, **a: beta * Input + alpha * X @ Y,
             batch_unknown=False)
    small = (i[:4] if i.shape[0] > 1 else i, x[:4], y)
    check_grad("addmm", dict(zip(("Input", "X", "Y"), small)), attrs, wrt=["Input", "X", "Y"])


@pytest.mark.parametrize("shape,dim", [((1024, 3, 1), -2), ((2048, 3), None), ((3, 4), 0)])
def test_cross_matches_paddle_and_differences(rng, shape, dim):
    x, y = rnd(rng, *shape), rnd(rng, *shape)
    attrs = {} if dim is None else {"dim": dim}
    axis = 1 if dim is None else dim
    check_op("cross", {"X": x, "Y": y}, attrs,
             reference=lambda X, Y, **a: np.cross(X, Y, axis=axis), batch_unknown=False)
    small = tuple(min(d, 4) if i != (axis % len(shape)) else d for i, d in enumerate(shape))
    sl = tuple(slice(0, d) for d in small)
    check_grad("cross", {"X": x[sl], "Y": y[sl]}, attrs, wrt=["X", "Y"])


def _fsp_ref(X, Y):
    n, c1, h, w = X.shape
    return np.einsum("nahw,nbhw->nab", X, Y) / (h * w)


def test_fsp_matches_paddle_and_differences(rng):
    x, y = rng.uniform(0, 10, (2, 3, 5, 6)), rng.uniform(0, 10, (2, 4, 5, 6))
    check_op("fsp", {"X": x, "Y": y}, reference=_fsp_ref)
    check_grad("fsp", {"X": x, "Y": y}, wrt=["X", "Y"])


def _btp_ref(X, Y, Weight, Bias=None):
    out = np.stack([np.sum((X @ w) * Y, axis=1) for w in Weight], axis=1)
    return out if Bias is None else out + Bias


def test_bilinear_tensor_product_matches_paddle_and_differences(rng):
    x, y, w, b = rnd(rng, 6, 5), rnd(rng, 6, 4), rnd(rng, 7, 5, 4), rnd(rng, 1, 7)
    check_op("bilinear_tensor_product", {"X": x, "Y": y, "Weight": w, "Bias": b},
             reference=_btp_ref)
    check_op("bilinear_tensor_product", {"X": x, "Y": y, "Weight": w}, reference=_btp_ref)
    check_grad("bilinear_tensor_product", {"X": x[:3], "Y": y[:3], "Weight": w[:3], "Bias": b[:,
               :3]}, wrt=["X", "Y", "Weight", "Bias"])


# --- norm, cos_sim, dist, clip_by_norm -------------------------------------------------------

@pytest.mark.parametrize("shape,axis,eps", [([2, 3, 4, 5], 1, 1e-8), ([5, 3, 9, 7], 0, 1e-8),
                                            ([5, 3, 2, 7], -1, 1e-8), ([4, 6], 1, 1e-12)])
def test_norm_matches_paddle_and_differences(rng, shape, axis, eps):
    x = rnd(rng, *shape)

    def ref(X, **a):
        n = np.sqrt(np.sum(X * X, axis=axis, keepdims=True) + eps)
        return {"Out": X / n, "Norm": n}
    check_op("norm", {"X": x}, {"axis": axis, "epsilon": eps}, reference=ref,
             batch_unknown=axis != 0)
    check_grad("norm", {"X": x[:2, :3]}, {"axis": axis, "epsilon": eps}, through=["Out"])


def _cos_ref(X, Y):
    a, b = X.reshape(len(X), -1), Y.reshape(len(Y), -1)
    xn, yn = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    return {"Out": ((a * b).sum(1) / (xn * yn)).reshape(-1, 1), "XNorm": xn.reshape(-1, 1),
            "YNorm": yn.reshape(-1, 1)}


@pytest.mark.parametrize("xs,ys", [((6, 20), (6, 20)), ((6, 100), (1, 100)),
                                   ((6, 5, 4), (6, 5, 4)), ((6, 5, 20), (1, 5, 20))])
def test_cos_sim_matches_paddle_and_differences(rng, xs, ys):
    x, y = rnd(rng, *xs).astype(f32), rnd(rng, *ys).astype(f32)
    check_op("cos_sim", {"X": x, "Y": y}, reference=_cos_ref, batch_unknown=ys[0] != 1)
    small = (3,) + xs[1:3] if len(xs) == 3 else (3, 5)
    xg = rnd(rng, *small)
    yg = rnd(rng, *((1,) + small[1:] if ys[0] == 1 else small))
    check_grad("cos_sim", {"X": xg, "Y": yg}, wrt=["X", "Y"], through=["Out"])


def _dist_ref(X, Y, p):
    d = np.abs(X - Y)
    if p == 0:
        return np.array([np.count_nonzero(d)], X.dtype)
    if p == np.inf:
        return np.array([d.max()])
    if p == -np.inf:
        return np.array([d.min()])
    return np.array([np.sum(d ** p) ** (1.0 / p)])


@pytest.mark.parametrize("xs,ys,p", [((120,), (120,), 0.0), ((3, 5, 5, 6), (5, 5, 6), 2.0),
                                     ((10, 10), (4, 10, 10), 1.0), ((15, 10), (15, 10), np.inf),
                                     ((2, 3, 4, 5, 8), (3, 1, 5, 8), -np.inf),
                                     ((4, 1, 4, 8), (4, 2, 4, 8), 1.5)])
def test_dist_matches_paddle_and_differences(rng, xs, ys, p):
    x, y = rnd(rng, *xs), rnd(rng, *ys)
    check_op("dist", {"X": x, "Y": y}, {"p": p}, reference=lambda X, Y, **a: _dist_ref(X, Y, p),
             rtol=1e-10, batch_unknown=False)
    if p != 0:
        check_grad("dist", {"X": x, "Y": y}, {"p": p}, wrt=["X", "Y"])


@pytest.mark.parametrize("shape,max_norm", [((100,), 1.0), ((100,), 100.0), ((16, 16), 1.0),
                                            ((4, 8, 16), 1.0)])
def test_clip_by_norm_matches_paddle(rng, shape, max_norm):
    x = rng.random(shape).astype(f32)
    x[np.abs(x) < 0.1] = 0.5

    def ref(X, **a):
        norm = np.sqrt(np.sum(np.square(X)))
        return X * max_norm / norm if norm > max_norm else X
    check_op("clip_by_norm", {"X": x}, {"max_norm": max_norm}, reference=ref,
             batch_unknown=False)


# --- mean_iou, similarity_focus ----------------------------------------------------------------

def _iou_ref(predictions, labels, n, wrongs, corrects, means):
    wrong, correct = np.zeros(n, np.int32), np.zeros(n, np.int32)
    for w in wrongs:
        wrong += w
    for c in corrects:
        correct += c
    for p, t in zip(predictions.reshape(-1), labels.reshape(-1)):
        if p == t:
            correct[p] += 1
        else:
            wrong[p] += 1
            wrong[t] += 1
    total = wrong + correct
    mean = (correct / np.where(total > 0, total, 1)).sum() / (total != 0).sum()
    return mean + sum(float(m[0]) for m in means), wrong, correct


@pytest.mark.parametrize("size,carried", [([128, 128], (0, 0, 0)), ([100, 128], (2, 2, 3))])
def test_mean_iou_matches_paddle(rng, size, carried):
    n = 10
    pred = rng.integers(0, n, size).astype(np.int32)
    label = rng.integers(0, n, size).astype(np.int32)
    wrongs = [rng.integers(0, 10, [n]).astype(np.int32) for _ in range(carried[0])]
    corrects = [rng.integers(0, 10, [n]).astype(np.int32) for _ in range(carried[1])]
    means = [rng.uniform(0, 1, [1]).astype(f32) for _ in range(carried[2])]
    inputs = {"Predictions": pred, "Labels": label, "InWrongs": wrongs, "InCorrects": corrects,
              "InMeanIou": means}
    counts = {"InWrongs": carried[0], "InCorrects": carried[1], "InMeanIou": carried[2]}
    mean, wrong, correct = _iou_ref(pred, label, n, wrongs, corrects, means)
    got = check_op("mean_iou", {k: v for k, v in inputs.items() if counts.get(k, 1)},
                   {"num_classes": n}, batch_unknown=False,
                   reference=lambda **a: {"OutMeanIou": np.array([mean]), "OutWrong": wrong,
                                          "OutCorrect": correct})
    assert got["OutMeanIou"][0].dtype == f32 and got["OutWrong"][0].dtype == np.int32


def test_mean_iou_refuses_class_ids_out_of_range():
    with pytest.raises((FluidError, IndexError), match=r"class ids must lie in \[0, 3\)"):
        run_forward("mean_iou", {"Predictions": np.array([0, 3]), "Labels": np.array([0, 1])},
                    {"num_classes": 3})


def _focus_ref(X, axis, indexes):
    out = np.zeros_like(X)
    for b in range(X.shape[0]):
        for index in indexes:
            table = np.take(X[b], index, axis=axis - 1).copy()
            rows, cols = table.shape
            used_r, used_c = set(), set()
            for flat in np.argsort(-table, axis=None, kind="stable"):
                r, c = divmod(int(flat), cols)
                if r in used_r or c in used_c:
                    continue
                used_r.add(r)
                used_c.add(c)
                where = [b, slice(None), slice(None), slice(None)]
                others = [d for d in (1, 2, 3) if d != axis]
                where[others[0]], where[others[1]] = r, c
                out[tuple(where)] = 1
                if len(used_r) == min(rows, cols):
                    break
    return out


def test_similarity_focus_matches_paddles_example():
    x = np.array([[[[0.8, 0.1], [0.4, 0.5]], [[0.9, 0.7], [0.9, 0.9]], [[0.8, 0.9], [0.1, 0.2]]],
                  [[[0.2, 0.5], [0.3, 0.4]], [[0.9, 0.7], [0.8, 0.4]], [[0.0, 0.2], [0.4, 0.7]]]])
    want = np.zeros_like(x)
    want[0, :, 0, 0] = want[0, :, 1, 1] = 1
    want[1, :, 0, 1] = want[1, :, 1, 0] = 1
    check_op("similarity_focus", {"X": x}, {"axis": 1, "indexes": [0]},
             reference=lambda X, **a: want)


@pytest.mark.parametrize("shape,axis,indexes", [((3, 2, 3, 4), 1, [0, 1]), ((2, 3, 4, 5), 2, [2]),
                                                ((2, 4, 3, 5), 3, [0, 3, 4])])
def test_similarity_focus_matches_paddle_on_random_input(rng, shape, axis, indexes):
    x = rnd(rng, *shape)
    check_op("similarity_focus", {"X": x}, {"axis": axis, "indexes": indexes},
             reference=lambda X, **a: _focus_ref(X, axis, indexes))


# --- elementwise_floordiv; the tensor forms of scale, pow and clip -----------------------------

def test_elementwise_floordiv_matches_paddle(rng):
    x = rng.uniform(0, 10000, [10, 10]).astype(np.int32)
    y = rng.uniform(1, 1000, [10, 10]).astype(np.int32)
    check_op("elementwise_floordiv", {"X": x, "Y": y}, reference=lambda X, Y, **a: X // Y)
    x = (rng.random((2, 3, 4)) * 1e7).astype(np.int64)
    y = (rng.random(1) * 1e6 + 1).astype(np.int64)
    check_op("elementwise_floordiv", {"X": x, "Y": y}, reference=lambda X, Y, **a: X // Y)
    check_op("elementwise_floordiv", {"X": np.array([-7, 7]), "Y": np.array([2, -2])},
             reference=lambda X, Y, **a: np.array([-4, -4]))


def test_scale_takes_its_scale_from_a_tensor(rng):
    x = rng.standard_normal((3, 4)).astype(f32)
    s = np.array([2.5], f32)
    attrs = {"bias": 1.0, "bias_after_scale": False}
    check_op("scale", {"X": x, "ScaleTensor": s}, attrs, reference=lambda X, **a: (X + 1) * 2.5)
    check_grad("scale", {"X": x, "ScaleTensor": s}, attrs)
    ints = np.arange(6).reshape(2, 3)
    check_op("scale", {"X": ints, "ScaleTensor": s}, reference=lambda X, **a: (X * 2.5).astype(
        X.dtype))


def test_pow_takes_its_factor_from_a_tensor(rng):
    x = rng.uniform(1, 2, [11, 17]).astype(f32)
    f = np.array([3.0], f32)
    check_op("pow", {"X": x, "FactorTensor": f}, reference=lambda X, **a: np.power(X, 3))
    check_grad("pow", {"X": x, "FactorTensor": f})


def test_clip_takes_bounds_from_tensors_and_passes_the_gradient_strictly_inside(rng):
    x = rng.uniform(-1, 1, (4, 5))
    lo, hi = np.array([-0.3]), np.array([0.4])
    check_op("clip", {"X": x, "Min": lo, "Max": hi}, reference=lambda X, **a: np.clip(X, -.3, .4))
    x[np.abs(x + 0.3) < 0.02] += 0.05
    x[np.abs(x - 0.4) < 0.02] += 0.05
    check_grad("clip", {"X": x, "Min": lo}, {"max": 0.4})
    from ops.harness import analytic_grads, build_op
    edge = np.array([-0.3, 0.0, 0.4])
    op, env = build_op("clip", {"X": edge}, {"min": -0.3, "max": 0.4})
    grads = analytic_grads(op, env, {"out_Out_0": np.ones(3)}, ["X"])
    np.testing.assert_array_equal(grads["X"][0], [0, 1, 0])   # Paddle's: 0 at the bounds


def test_a_bound_tensor_must_hold_one_number(rng):
    with pytest.raises(FluidError, match="must hold one number"):
        run_forward("clip", {"X": rng.random((2, 3)), "Min": np.zeros(3)})


# --- against PyTorch -----------------------------------------------------------------------

torch = pytest.importorskip("torch")


def _vs_torch(op, inputs, attrs, wrt, fn, out="Out", **tol):
    from ops.test_against_torch import close, ours, t
    got, grads, cot = ours(op, inputs, attrs, wrt, out)
    ts = {k: t(v) for k, v in inputs.items()}
    y = fn(*ts.values())
    close(got[out], y, **tol)
    (y * torch.tensor(cot)).sum().backward()
    for k in wrt:
        close(grads[k], ts[k].grad, **tol)


def test_cumsum_matches_torch(rng):
    _vs_torch("cumsum", {"X": rnd(rng, 4, 5)}, {"axis": 1}, ["X"],
              lambda x: torch.cumsum(x, 1))
    _vs_torch("cumsum", {"X": rnd(rng, 4, 5)}, {"axis": 0, "reverse": True}, ["X"],
              lambda x: torch.flip(torch.cumsum(torch.flip(x, [0]), 0), [0]))


def test_reductions_match_torch(rng):
    _vs_torch("reduce_prod", {"X": rnd(rng, 3, 4) + 0.5}, {"dim": [1]}, ["X"],
              lambda x: torch.prod(x, 1))
    _vs_torch("logsumexp", {"X": rng.standard_normal((3, 4, 5))}, {"dim": [0, 2]}, ["X"],
              lambda x: torch.logsumexp(x, (0, 2)))


def test_products_match_torch(rng):
    _vs_torch("dot", {"X": rnd(rng, 7), "Y": rnd(rng, 7)}, {}, ["X", "Y"],
              lambda x, y: torch.dot(x, y).reshape(1))
    _vs_torch("bmm", {"X": rnd(rng, 2, 3, 4), "Y": rnd(rng, 2, 4, 5)}, {}, ["X", "Y"], torch.bmm)
    _vs_torch("addmm", {"Input": rnd(rng, 1, 5), "X": rnd(rng, 3, 4), "Y": rnd(rng, 4, 5)},
              {"Alpha": 0.5, "Beta": 2.0}, ["Input", "X", "Y"],
              lambda i, x, y: torch.addmm(i, x, y, beta=2.0, alpha=0.5))
    _vs_torch("cross", {"X": rnd(rng, 4, 3), "Y": rnd(rng, 4, 3)}, {"dim": 1}, ["X", "Y"],
              lambda x, y: torch.cross(x, y, dim=1))
    _vs_torch("bilinear_tensor_product", {"X": rnd(rng, 3, 4), "Y": rnd(rng, 3, 5),
                                          "Weight": rnd(rng, 2, 4, 5), "Bias": rnd(rng, 1, 2)},
              {}, ["X", "Y", "Weight", "Bias"],
              lambda x, y, w, b: torch.nn.functional.bilinear(x, y, w, b.reshape(-1)))


@pytest.mark.parametrize("p", [1.0, 2.0, 3.5, float("inf")])
def test_dist_matches_torch(rng, p):
    _vs_torch("dist", {"X": rnd(rng, 3, 4), "Y": rnd(rng, 4)}, {"p": p}, ["X", "Y"],
              lambda x, y: torch.dist(x, y, p).reshape(1))


def test_norms_match_torch(rng):
    _vs_torch("norm", {"X": rnd(rng, 3, 4)}, {"axis": 1, "epsilon": 0.0}, ["X"],
              lambda x: torch.nn.functional.normalize(x, dim=1, eps=0.0))
    _vs_torch("cos_sim", {"X": rnd(rng, 3, 4), "Y": rnd(rng, 3, 4)}, {}, ["X", "Y"],
              lambda x, y: torch.nn.functional.cosine_similarity(x, y).reshape(3, 1))
