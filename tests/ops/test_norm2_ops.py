"""group_norm, instance_norm, lrn, affine_channel, data_norm, spectral_norm and batch_norm's
momentum tensor: forwards against NumPy references written from Paddle 1.8's unit tests
(test_group_norm_op, test_instance_norm_op, test_lrn_op, test_affine_channel_op,
test_data_norm_op, test_spectral_norm_op) on their inputs, gradients against finite
differences, and PyTorch's group_norm, instance_norm and local_response_norm."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from ops.harness import check_grad, check_op, run_forward

from fluid_interactive.errors import ShapeError

# --- references ----------------------------------------------------------------------------------


def ref_group_norm(X, Scale, Bias, epsilon, groups, data_layout, **_):
    x = X.transpose(0, 3, 1, 2) if data_layout == "NHWC" else X
    n, c = x.shape[:2]
    flat = x.reshape(n * groups, -1).astype(np.float64)
    mean, var = flat.mean(axis=1, keepdims=True), flat.var(axis=1, keepdims=True)
    y = ((flat - mean) / np.sqrt(var + epsilon)).reshape(x.shape)
    y = y * Scale.reshape(1, c, *[1] * (x.ndim - 2)) + Bias.reshape(1, c, *[1] * (x.ndim - 2))
    if data_layout == "NHWC":
        y = y.transpose(0, 2, 3, 1)
    return {"Y": y, "Mean": mean.reshape(n, groups), "Variance": var.reshape(n, groups)}


def ref_instance_norm(X, Scale, Bias, epsilon, **_):
    n, c = X.shape[:2]
    flat = X.reshape(n, c, -1).astype(np.float64)
    mean, var = flat.mean(axis=2, keepdims=True), flat.var(axis=2, keepdims=True)
    y = (flat - mean) / np.sqrt(var + epsilon) * Scale.reshape(1, c, 1) + Bias.reshape(1, c, 1)
    return {"Y": y.reshape(X.shape), "SavedMean": mean.reshape(-1),
            "SavedVariance": (1 / np.sqrt(var + epsilon)).reshape(-1)}


def ref_lrn(X, n, k, alpha, beta, data_format, **_):
    x = X.transpose(0, 3, 1, 2) if data_format == "NHWC" else X
    start = -((n - 1) // 2)
    mid = np.full(x.shape, k, np.float64)
    for ch in range(x.shape[1]):
        for o in range(start, start + n):
            if 0 <= ch + o < x.shape[1]:
                mid[:, ch] += alpha * np.square(x[:, ch + o])
    out = x * mid ** -beta
    if data_format == "NHWC":
        out, mid = out.transpose(0, 2, 3, 1), mid.transpose(0, 2, 3, 1)
    return {"Out": out, "MidOut": mid}


def ref_affine_channel(X, Scale, Bias, data_layout, **_):
    c = X.shape[1] if data_layout == "NCHW" else X.shape[-1]
    shape = (1, c) + (1,) * (X.ndim - 2) if data_layout == "NCHW" or X.ndim == 2 else \
        (1,) * (X.ndim - 1) + (c,)
    return X * Scale.reshape(shape) + Bias.reshape(shape)


def ref_spectral_norm(Weight, U, V, dim, power_iters, eps, **_):
    h = Weight.shape[dim]
    m = np.moveaxis(Weight, dim, 0).reshape(h, -1)
    u, v = U.reshape(-1, 1), V.reshape(-1, 1)
    for _ in range(power_iters):
        v = m.T @ u
        v = v / (np.sqrt((v * v).sum()) + eps)
        u = m @ v
        u = u / (np.sqrt((u * u).sum()) + eps)
    return Weight / (u * (m @ v)).sum()


def ref_data_norm(X, BatchSize, BatchSum, BatchSquareSum, slot_dim, **_):
    means, scales = BatchSum / BatchSize, np.sqrt(BatchSize / BatchSquareSum)
    y = (X - means) * scales
    if slot_dim > 0:
        shown = np.abs(X.reshape(len(X), -1, slot_dim)[:, :, :1]) >= 1e-7
        y = y * np.repeat(shown, slot_dim, axis=2).reshape(X.shape)
    return {"Y": y, "Means": means, "Scales": scales}


# --- group_norm, instance_norm -------------------------------------------------------------

@pytest.mark.parametrize("shape,groups,eps,layout", [
    ((2, 100, 3, 5), 2, 1e-5, "NCHW"), ((2, 100, 3, 5), 1, 1e-5, "NCHW"),
    ((2, 100, 3, 5), 4, 0.5, "NCHW"), ((2, 100, 3, 5), 4, 1e-5, "NHWC"),
    ((2, 100, 3, 5), 1, 0.5, "NHWC"), ((3, 6, 5), 3, 1e-5, "NCHW"),
])
def test_group_norm_forward_and_grads(rng, shape, groups, eps, layout):
    x = rng.random(shape)
    c = shape[1]
    if layout == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    scale, bias = rng.random(c), rng.random(c)
    attrs = {"epsilon": eps, "groups": groups, "data_layout": layout}
    inputs = {"X": x, "Scale": scale, "Bias": bias}
    check_op("group_norm", inputs, attrs, reference=ref_group_norm, rtol=1e-10, atol=1e-10)
    small = {"X": x[:1, :4] if layout == "NCHW" else x[:1, ..., :4], "Scale": scale[:4],
             "Bias": bias[:4]}
    check_grad("group_norm", small, dict(attrs, groups=min(groups, 2)),
               wrt=["X", "Scale", "Bias"], through=["Y"], max_elements=24)


def test_group_norm_without_scale_or_bias(rng):
    x = rng.random((2, 4, 3, 3))
    got = run_forward("group_norm", {"X": x}, {"groups": 2})["Y"][0]
    want = ref_group_norm(x, np.ones(4), np.zeros(4), 1e-5, 2, "NCHW")["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-10)
    check_grad("group_norm", {"X": x[:1]}, {"groups": 2}, through=["Y"])


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 3, 6), (3, 4)])
def test_instance_norm_forward_and_grads(rng, shape):
    x = rng.random(shape)
    scale, bias = rng.random(shape[1]), rng.random(shape[1])
    inputs = {"X": x, "Scale": scale, "Bias": bias}
    check_op("instance_norm", inputs, {"epsilon": 1e-5}, reference=ref_instance_norm,
             rtol=1e-10, atol=1e-10)
    if len(shape) > 2:
        check_grad("instance_norm", inputs, {"epsilon": 1e-5}, wrt=["X", "Scale", "Bias"],
                   through=["Y"], max_elements=24)


def test_group_and_instance_norm_match_torch(rng):
    x = rng.standard_normal((3, 6, 4, 5))
    w, b = rng.standard_normal(6), rng.standard_normal(6)
    got = run_forward("group_norm", {"X": x, "Scale": w, "Bias": b},
                      {"groups": 3, "epsilon": 1e-5})["Y"][0]
    want = F.group_norm(torch.tensor(x), 3, torch.tensor(w), torch.tensor(b), 1e-5)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-10, atol=1e-12)
    got = run_forward("instance_norm", {"X": x, "Scale": w, "Bias": b}, {})["Y"][0]
    want = F.instance_norm(torch.tensor(x), weight=torch.tensor(w), bias=torch.tensor(b))
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-10, atol=1e-12)


# --- lrn, affine_channel ------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("n", [5, 4])
def test_lrn_forward_and_grad(rng, layout, n):
    x = rng.random((2, 3, 5, 5)).astype(np.float32) + 1
    if layout == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    attrs = {"n": n, "k": 2.0, "alpha": 1e-4, "beta": 0.75, "data_format": layout}
    check_op("lrn", {"X": x}, attrs, reference=ref_lrn, rtol=1e-5)
    big = dict(attrs, alpha=0.3)     # a large alpha makes the window's terms count
    check_grad("lrn", {"X": rng.random((1, 6, 2, 3)) + 0.5}, dict(big, data_format="NCHW"),
               through=["Out"], max_elements=36)


def test_lrn_matches_torch(rng):
    x = rng.random((2, 7, 4, 3)) + 0.5
    got = run_forward("lrn", {"X": x}, {"n": 5, "k": 1.0, "alpha": 0.2, "beta": 0.75})
    # torch averages the window: its alpha is Paddle's times n
    want = F.local_response_norm(torch.tensor(x), 5, alpha=0.2 * 5, beta=0.75, k=1.0)
    np.testing.assert_allclose(got["Out"][0], want.numpy(), rtol=1e-12)


@pytest.mark.parametrize("shape,layout", [((2, 100, 3, 4), "NCHW"), ((2, 3, 4, 100), "NHWC"),
                                          ((8, 100), "NCHW")])
def test_affine_channel_forward_and_grads(rng, shape, layout):
    c = shape[1] if layout == "NCHW" else shape[-1]
    inputs = {"X": rng.random(shape), "Scale": rng.random(c), "Bias": rng.random(c)}
    check_op("affine_channel", inputs, {"data_layout": layout}, reference=ref_affine_channel,
             rtol=1e-12)
    check_grad("affine_channel", inputs, {"data_layout": layout}, wrt=["X", "Scale", "Bias"],
               max_elements=20)


# --- data_norm ----------------------------------------------------------------------------------

def _data_norm_inputs(rng, c, scaled=False):
    x = rng.random((4, c)) - 0.5
    x[0][1] = x[1][1] = 0.0
    inputs = {"X": x, "BatchSize": np.full(c, 1e4), "BatchSum": np.zeros(c),
              "BatchSquareSum": np.full(c, 1e4)}
    if scaled:
        inputs.update(scale_w=rng.random(c) + 0.5, bias=rng.random(c))
    return inputs


@pytest.mark.parametrize("slot_dim", [-1, 2, 3])
def test_data_norm_forward_and_grad(rng, slot_dim):
    inputs = _data_norm_inputs(rng, 6)
    attrs = {"slot_dim": slot_dim, "is_test": True}
    check_op("data_norm", inputs, attrs, reference=ref_data_norm, rtol=1e-10,
             batch_unknown=False)
    check_grad("data_norm", inputs, {"slot_dim": slot_dim}, through=["Y"])


def test_data_norm_scale_and_shift(rng):
    inputs = _data_norm_inputs(rng, 4, scaled=True)
    attrs = {"enable_scale_and_shift": True, "is_test": True}

    def ref(scale_w, bias, **a):
        got = ref_data_norm(**a)
        return dict(got, Y=got["Y"] * scale_w + bias)
    check_op("data_norm", inputs, attrs, reference=ref, rtol=1e-10)
    check_grad("data_norm", inputs, {"enable_scale_and_shift": True},
               wrt=["X", "scale_w", "bias"], through=["Y"])


def test_data_norm_training_adds_the_batch_statistics(rng):
    inputs = _data_norm_inputs(rng, 3)
    inputs["BatchSum"] = rng.random(3)
    x, decay, eps = inputs["X"], 0.9, 1e-5
    got = run_forward("data_norm", inputs, {"summary_decay_rate": decay, "is_test": False})
    means = inputs["BatchSum"] / inputs["BatchSize"]
    np.testing.assert_allclose(got["BatchSizeOut"][0], decay * 1e4 + len(x))
    np.testing.assert_allclose(got["BatchSumOut"][0], decay * inputs["BatchSum"] + x.sum(0))
    np.testing.assert_allclose(got["BatchSquareSumOut"][0],
                               decay * 1e4 + ((x - means) ** 2).sum(0) + len(x) * eps)
    frozen = run_forward("data_norm", inputs, {"is_test": True})
    np.testing.assert_array_equal(frozen["BatchSumOut"][0], inputs["BatchSum"])


def test_data_norm_slots_count_only_shown_rows(rng):
    inputs = _data_norm_inputs(rng, 4)
    inputs["X"][2:, 2] = 0.0     # slot 1 (columns 2, 3) shown in rows 0 and 1 only
    got = run_forward("data_norm", inputs, {"slot_dim": 2, "summary_decay_rate": 1.0,
                                            "is_test": False})
    np.testing.assert_allclose(got["BatchSizeOut"][0][2:], 1e4 + 1)
    np.testing.assert_allclose(got["BatchSumOut"][0][2:], inputs["X"][:2, 2:].mean(0))


# --- spectral_norm ----------------------------------------------------------------------------

@pytest.mark.parametrize("shape,dim,iters", [((10, 12), 0, 5), ((2, 3, 3, 3), 1, 10),
                                             ((10, 12), 0, 0), ((2, 3, 3, 3), 1, 0)])
def test_spectral_norm_forward(rng, shape, dim, iters):
    w = rng.random(shape)
    h = shape[dim]
    inputs = {"Weight": w, "U": rng.standard_normal(h),
              "V": rng.standard_normal(w.size // h)}
    check_op("spectral_norm", inputs, {"dim": dim, "power_iters": iters, "eps": 1e-12},
             reference=ref_spectral_norm, rtol=1e-10, batch_unknown=False)


@pytest.mark.parametrize("shape,dim", [((4, 5), 0), ((2, 3, 2, 2), 1), ((3, 2, 4), 2)])
def test_spectral_norm_grad_once_converged(rng, shape, dim):
    # the gradient holds u and v fixed, which is exact once the iteration converged
    w = rng.random(shape)
    h = shape[dim]
    inputs = {"Weight": w, "U": rng.standard_normal(h), "V": rng.standard_normal(w.size // h)}
    attrs = {"dim": dim, "power_iters": 200, "eps": 1e-12}
    got = run_forward("spectral_norm", inputs, attrs)["Out"][0]
    np.testing.assert_allclose(np.linalg.norm(np.moveaxis(got, dim, 0).reshape(h, -1), 2), 1.0,
                               rtol=1e-10)
    check_grad("spectral_norm", inputs, attrs, wrt=["Weight"], rtol=1e-5, atol=1e-6)


# --- batch_norm's momentum tensor ----------------------------------------------------------

def test_batch_norm_takes_its_momentum_from_a_tensor(rng):
    x = rng.random((4, 3, 2, 2))
    inputs = {"X": x, "Scale": np.ones(3), "Bias": np.zeros(3), "Mean": np.zeros(3),
              "Variance": np.ones(3)}
    by_attr = run_forward("batch_norm", inputs, {"momentum": 0.7, "is_test": False})
    by_tensor = run_forward("batch_norm", dict(inputs, MomentumTensor=np.array([0.7])),
                            {"momentum": 0.1, "is_test": False})
    for slot in ("Y", "MeanOut", "VarianceOut"):
        np.testing.assert_allclose(by_tensor[slot][0], by_attr[slot][0], rtol=1e-12)
    with pytest.raises(ShapeError, match=r"MomentumTensor must be a float \[1\]"):
        run_forward("batch_norm", dict(inputs, MomentumTensor=np.array([0.7, 0.1])), {})


# --- errors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,inputs,attrs,match", [
    ("group_norm", {"X": np.zeros((2, 6, 3))}, {"groups": 4}, "groups=4 must divide the 6"),
    ("lrn", {"X": np.zeros((2, 6, 3))}, {}, r"X must be a 4-D image batch, got \[2, 6, 3\]"),
    ("affine_channel", {"X": np.zeros((2, 6, 3)), "Scale": np.zeros(5), "Bias": np.zeros(6)},
     {}, r"Scale \[5\] must be \[C\] = \[6\]"),
    ("data_norm", {"X": np.zeros((2, 6, 3)), "BatchSize": np.zeros(6), "BatchSum": np.zeros(6),
                   "BatchSquareSum": np.zeros(6)}, {}, r"X must be 2-D \[N, C\]"),
    ("spectral_norm", {"Weight": np.zeros((4, 5)), "U": np.zeros(4), "V": np.zeros(4)}, {},
     r"V \[4\] must be \[5\]"),
])
def test_norm_errors_name_the_shapes(op, inputs, attrs, match):
    with pytest.raises(ShapeError, match=match):
        run_forward(op, inputs, attrs)
