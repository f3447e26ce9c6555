"""Cross-checks against PyTorch (the test extra installs it; skipped only where it is
missing): conv2d, conv2d_transpose, pool2d, batch_norm and a few activations, forward and
backward, in float64 so differences are the algorithms' and not rounding."""
import numpy as np
import pytest
from ops.harness import analytic_grads, build_op

from fluid_interactive.ops.interpret import run_ops

torch = pytest.importorskip("torch")
F = torch.nn.functional


def ours(op_type, inputs, attrs, wrt, cot_slot, seed=0, is_test=False):
    """Our op's outputs, and the gradients of sum(out[cot_slot] * cot) w.r.t. ``wrt``."""
    op, env = build_op(op_type, inputs, attrs)
    run_ops([op], env, is_test=is_test)
    rng = np.random.default_rng(seed)
    cot = {}
    for slot, names in op.outputs.items():
        for n in names:
            cot[n] = (rng.standard_normal(np.shape(env[n])) if slot == cot_slot
                      else np.zeros(np.shape(env[n])))
    outs = {slot: env[names[0]] for slot, names in op.outputs.items()}
    if is_test:
        return outs, None, cot[op.outputs[cot_slot][0]]
    grads = analytic_grads(op, env, cot, wrt)
    return outs, {s: grads[s][0] for s in wrt}, cot[op.outputs[cot_slot][0]]


def t(a, grad=True):
    return torch.tensor(np.asarray(a), dtype=torch.float64, requires_grad=grad)


def close(a, b, rtol=1e-9, atol=1e-10):
    np.testing.assert_allclose(np.asarray(a), b.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("layout", [False, True], ids=["batch_outer", "batch_inner"])
@pytest.mark.parametrize("xs,fs,stride,pad,dil,groups", [
    ((2, 3, 9, 8), (4, 3, 3, 3), 1, 1, 1, 1),
    ((1, 4, 10, 7), (6, 2, 3, 2), 2, 1, 1, 2),
    ((3, 2, 11, 11), (5, 2, 3, 3), 1, 2, 2, 1),
    ((64, 1, 28, 28), (20, 1, 5, 5), 1, 0, 1, 1),     # LeNet
    ((8, 20, 12, 12), (50, 20, 5, 5), 1, 0, 1, 1),
])
def test_conv2d_matches_torch(rng, monkeypatch, layout, xs, fs, stride, pad, dil, groups):
    from fluid_interactive.ops import conv
    monkeypatch.setattr(conv, "BATCH_INNER", layout)
    x, w = rng.standard_normal(xs), rng.standard_normal(fs)
    attrs = {"strides": [stride, stride], "paddings": [pad, pad], "dilations": [dil, dil],
             "groups": groups}
    got, grads, cot = ours("conv2d", {"Input": x, "Filter": w}, attrs, ["Input", "Filter"],
                           "Output")
    tx, tw = t(x), t(w)
    y = F.conv2d(tx, tw, stride=stride, padding=pad, dilation=dil, groups=groups)
    close(got["Output"], y)
    (y * torch.tensor(cot)).sum().backward()
    close(grads["Input"], tx.grad)
    close(grads["Filter"], tw.grad)


@pytest.mark.parametrize("xs,fs,stride,pad,dil,groups,extra", [
    ((2, 3, 4, 5), (3, 2, 3, 3), 1, 0, 1, 1, 0),
    ((2, 4, 4, 4), (4, 3, 4, 4), 2, 1, 1, 1, 0),
    ((1, 4, 3, 3), (4, 1, 3, 3), 2, 1, 1, 2, 1),
    ((2, 2, 3, 4), (2, 2, 3, 2), 1, 1, 2, 1, 0),
])
def test_conv2d_transpose_matches_torch(rng, xs, fs, stride, pad, dil, groups, extra):
    x, w = rng.standard_normal(xs), rng.standard_normal(fs)
    attrs = {"strides": [stride, stride], "paddings": [pad, pad], "dilations": [dil, dil],
             "groups": groups}
    if extra:
        h = (xs[2] - 1) * stride - 2 * pad + dil * (fs[2] - 1) + 1 + extra
        w_ = (xs[3] - 1) * stride - 2 * pad + dil * (fs[3] - 1) + 1 + extra
        attrs["output_size"] = [h, w_]
    got, grads, cot = ours("conv2d_transpose", {"Input": x, "Filter": w}, attrs,
                           ["Input", "Filter"], "Output")
    tx, tw = t(x), t(w)
    y = F.conv_transpose2d(tx, tw, stride=stride, padding=pad, dilation=dil, groups=groups,
                           output_padding=extra)
    close(got["Output"], y)
    (y * torch.tensor(cot)).sum().backward()
    close(grads["Input"], tx.grad)
    close(grads["Filter"], tw.grad)


@pytest.mark.parametrize("ptype", ["max", "avg"])
@pytest.mark.parametrize("xs,k,s,p,ceil,exclusive", [
    ((2, 3, 8, 8), 2, 2, 0, False, True),
    ((64, 20, 24, 24), 2, 2, 0, False, True),            # LeNet
    ((2, 2, 7, 7), 3, 2, 1, False, True),
    ((2, 2, 7, 7), 3, 2, 1, False, False),
    ((1, 2, 6, 5), 3, 1, 0, False, True),
    ((2, 2, 7, 6), 2, 2, 0, True, True),
    ((1, 3, 9, 9), 3, 2, 1, True, True),
])
def test_pool2d_matches_torch(rng, ptype, xs, k, s, p, ceil, exclusive):
    x = rng.standard_normal(xs)
    attrs = {"pooling_type": ptype, "ksize": [k, k], "strides": [s, s], "paddings": [p, p],
             "ceil_mode": ceil, "exclusive": exclusive}
    got, grads, cot = ours("pool2d", {"X": x}, attrs, ["X"], "Out")
    tx = t(x)
    if ptype == "max":
        y = F.max_pool2d(tx, k, s, p, ceil_mode=ceil)
    else:
        y = F.avg_pool2d(tx, k, s, p, ceil_mode=ceil, count_include_pad=not exclusive)
    close(got["Out"], y)
    (y * torch.tensor(cot)).sum().backward()
    close(grads["X"], tx.grad)


def test_max_pool_ties_match_torch():
    x = np.zeros((1, 2, 6, 6))
    x[0, 1, ::2, ::3] = 1.0
    got, grads, cot = ours("pool2d", {"X": x}, {"ksize": [2, 2], "strides": [2, 2]}, ["X"],
                           "Out")
    tx = t(x)
    y = F.max_pool2d(tx, 2, 2)
    (y * torch.tensor(cot)).sum().backward()
    close(grads["X"], tx.grad)


@pytest.mark.parametrize("shape", [(8, 3, 5, 5), (1, 4, 3, 2), (16, 6)])
def test_batch_norm_training_matches_torch(rng, shape):
    c = shape[1]
    x = rng.standard_normal(shape) * 3 + 1
    scale, bias = rng.standard_normal(c), rng.standard_normal(c)
    mean, var = rng.standard_normal(c) * 0.1, np.abs(rng.standard_normal(c)) + 0.5
    got, grads, cot = ours("batch_norm", {"X": x, "Scale": scale, "Bias": bias, "Mean": mean,
                                          "Variance": var},
                           {"momentum": 0.9, "epsilon": 1e-5}, ["X", "Scale", "Bias"], "Y")
    tx, ts, tb = t(x), t(scale), t(bias)
    rm, rv = torch.tensor(mean), torch.tensor(var)
    # torch's momentum weighs the new value: ours 0.9 keeps 90% of the old.
    y = F.batch_norm(tx, rm, rv, ts, tb, training=True, momentum=0.1, eps=1e-5)
    close(got["Y"], y, rtol=1e-8, atol=1e-9)
    close(got["MeanOut"], rm)
    # torch updates the moving variance with the unbiased batch variance, Paddle (and we)
    # with the biased one.
    m = x.size // c
    batch_var = x.swapaxes(0, 1).reshape(c, -1).var(axis=1)
    np.testing.assert_allclose(got["VarianceOut"], 0.9 * var + 0.1 * batch_var, rtol=1e-10)
    np.testing.assert_allclose(rv.numpy(), 0.9 * var + 0.1 * batch_var * m / (m - 1),
                               rtol=1e-10)
    (y * torch.tensor(cot)).sum().backward()
    close(grads["X"], tx.grad, rtol=1e-7, atol=1e-9)
    close(grads["Scale"], ts.grad, rtol=1e-8)
    close(grads["Bias"], tb.grad, rtol=1e-8)


def test_batch_norm_inference_matches_torch(rng):
    x = rng.standard_normal((4, 3, 5, 5))
    scale, bias = rng.standard_normal(3), rng.standard_normal(3)
    mean, var = rng.standard_normal(3), np.abs(rng.standard_normal(3)) + 0.5
    got, _, _ = ours("batch_norm", {"X": x, "Scale": scale, "Bias": bias, "Mean": mean,
                                    "Variance": var}, {}, [], "Y", is_test=True)
    y = F.batch_norm(t(x), torch.tensor(mean), torch.tensor(var), t(scale), t(bias),
                     training=False, eps=1e-5)
    close(got["Y"], y)


@pytest.mark.parametrize("op_type,attrs,fn", [
    ("gelu", {}, lambda x: F.gelu(x)),
    ("gelu", {"approximate": True}, lambda x: F.gelu(x, approximate="tanh")),
    ("elu", {"alpha": 0.5}, lambda x: F.elu(x, alpha=0.5)),
    ("log_softmax", {"axis": 1}, lambda x: F.log_softmax(x, dim=1)),
])
def test_activations_match_torch(rng, op_type, attrs, fn):
    x = rng.standard_normal((4, 5)) * 2
    got, grads, cot = ours(op_type, {"X": x}, attrs, ["X"], "Out")
    tx = t(x)
    y = fn(tx)
    rtol = 1e-6 if op_type == "gelu" and not attrs else 1e-9
    close(got["Out"], y, rtol=rtol, atol=1e-7 if rtol > 1e-9 else 1e-10)
    (y * torch.tensor(cot)).sum().backward()
    close(grads["X"], tx.grad, rtol=rtol, atol=1e-7 if rtol > 1e-9 else 1e-10)


def test_layer_norm_matches_torch(rng):
    x = rng.standard_normal((3, 4, 5))
    scale, bias = rng.standard_normal(20), rng.standard_normal(20)
    got, grads, cot = ours("layer_norm", {"X": x, "Scale": scale, "Bias": bias},
                           {"begin_norm_axis": 1}, ["X", "Scale", "Bias"], "Y")
    tx, ts, tb = t(x), t(scale), t(bias)
    y = F.layer_norm(tx, (4, 5), ts.reshape(4, 5), tb.reshape(4, 5), eps=1e-5)
    close(got["Y"], y, rtol=1e-8, atol=1e-9)
    (y * torch.tensor(cot)).sum().backward()
    close(grads["X"], tx.grad, rtol=1e-7, atol=1e-9)
    close(grads["Scale"], ts.grad.reshape(-1), rtol=1e-8)
    close(grads["Bias"], tb.grad.reshape(-1), rtol=1e-8)
