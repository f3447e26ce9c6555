"""Every exportable op, one small program each: the exported file passes onnx.checker, runs
in onnxruntime with the outputs of ``infer`` on batches of 1 and 7, and imports back to a
program with the same outputs (and, for the ops a round trip keeps, the same ops)."""
from __future__ import annotations

import numpy as np
import pytest

import fluid
from fluid_interactive.onnx import EXPORT_RULES
from tests.onnx_io.helpers import canonical_ops, check_export, one_method, ort_run

L = fluid.layers
F32 = "float32"

#: The ops the exporter must handle (the issue's list, spelled as op types).
REQUIRED = {
    "mul", "matmul", "elementwise_add", "elementwise_sub", "elementwise_mul",
    "elementwise_div", "elementwise_max", "elementwise_min", "elementwise_pow", "relu",
    "sigmoid", "tanh", "leaky_relu", "exp", "log", "sqrt", "square", "abs", "gelu", "elu",
    "swish", "softmax", "log_softmax", "conv2d", "conv2d_transpose", "pool2d", "batch_norm",
    "layer_norm", "dropout", "lookup_table", "reshape", "transpose", "concat", "split",
    "slice", "flatten", "squeeze", "unsqueeze", "reduce_sum", "reduce_mean", "reduce_max",
    "reduce_min", "mean", "cast", "scale", "clip", "pow", "sum", "assign", "argmax"}


def test_every_required_op_has_an_export_rule():
    assert REQUIRED - set(EXPORT_RULES) == set()


def _image(shape=(3, 6, 6)):
    return {"x": (shape, F32)}


def _conv_stack(x):
    h = L.conv2d(x, num_filters=4, filter_size=3, stride=2, padding=[1, 2], dilation=1,
                 groups=1, act="relu")
    h = L.conv2d(h, num_filters=4, filter_size=2, dilation=2, groups=2, padding=1)
    return L.conv2d_transpose(h, num_filters=3, filter_size=3, stride=2, padding=1,
                              output_size=[6, 10])


def _pools(x):
    return (L.pool2d(x, pool_size=3, pool_stride=2, pool_padding=1, ceil_mode=True),
            L.pool2d(x, pool_size=2, pool_type="avg", pool_stride=2, pool_padding=[0, 1],
                     exclusive=True, ceil_mode=True),
            L.pool2d(x, pool_size=3, pool_type="avg", pool_stride=2, pool_padding=1,
                     exclusive=False, ceil_mode=True),
            L.pool2d(x, pool_size=2, pool_type="avg", pool_stride=2, exclusive=False),
            L.pool2d(x, pool_type="avg", global_pooling=True),
            L.pool2d(x, pool_type="max", global_pooling=True))


def _broadcasting(x):
    y = L.reduce_mean(x, dim=[0, 3])                       # [3, 6]: lined up at axis 1
    z = L.reduce_sum(x, dim=[0, 2, 3])                     # [3]
    a = L.abs(x) + 1.0
    return (L.elementwise_add(x, y, axis=1), L.elementwise_sub(x, z, axis=1),
            L.elementwise_mul(x, y, axis=1), L.elementwise_div(x, L.abs(z) + 1.0, axis=1),
            L.elementwise_max(x, y, axis=1), L.elementwise_min(x, x * 0.5),
            L.elementwise_pow(a, L.reduce_mean(a, dim=[0, 2, 3]), axis=1))


def _activations(x):
    a = L.abs(x) + 0.5
    return (L.relu(x), L.sigmoid(x), L.tanh(x), L.leaky_relu(x, alpha=0.1), L.exp(x),
            L.log(a), L.sqrt(a), L.square(x), L.abs(x), L.elu(x, alpha=0.7),
            L.swish(x, beta=1.5), L.softmax(x, axis=1), L.log_softmax(x),
            L.pow(a, factor=1.7), L.scale(x, scale=2.0, bias=0.5),
            L.scale(x, scale=3.0, bias=1.0, bias_after_scale=False), L.scale(x, bias=-1.0),
            L.clip(x, min=-0.3, max=0.4), L.cast(L.cast(x, "float64"), "float32"),
            L.sums([x, a, x]), L.assign(x), L.mean(x), L.argmax(x, axis=1))


def _norms(x):
    h = L.batch_norm(x, act="relu")
    h = L.layer_norm(h, begin_norm_axis=1)
    h = L.layer_norm(h, begin_norm_axis=3, scale=False)
    h = L.dropout(h, 0.3)                                   # downgrade_in_infer
    return L.dropout(h, 0.2, dropout_implementation="upscale_in_train")


def _fc_stack(x):
    h = L.fc(x, size=5, act="tanh")                         # mul on a 4-D input
    h3 = L.reshape(h, [-1, 1, 5])
    h3 = L.fc(h3, size=4, num_flatten_dims=2)               # mul on a 3-D input
    m = L.matmul(h, h, transpose_y=True, alpha=0.5)         # [?, ?]
    b = L.matmul(h3, L.transpose(h3, [0, 2, 1]))            # batched
    return h3, L.reduce_sum(m, dim=[1]), b


def _shapes(x):
    r = L.reshape(x, [0, -1, 6])                            # [?, 18, 6]
    t = L.transpose(r, [0, 2, 1])
    parts = L.split(t, [2, 4], dim=1)
    c = L.concat([parts[1], parts[0]], axis=1)
    s = L.slice(c, axes=[1, 2], starts=[1, 2], ends=[100, -1])
    f = L.flatten(x, axis=2)
    u = L.unsqueeze(s, [0, 3])
    q = L.squeeze(u, [3])
    return (c, s, f, q, L.reduce_max(x, dim=[1, 2], keep_dim=True),
            L.reduce_min(x, dim=-1), L.reduce_mean(x), L.reduce_sum(x, dim=[2]))


def _embedding(ids):
    return (L.embedding(ids, size=[11, 4], padding_idx=3),
            L.embedding(ids, size=[11, 2]))


CASES = {
    "conv": (_conv_stack, _image((3, 6, 8))),
    "pool": (_pools, _image((2, 7, 6))),
    "broadcast": (_broadcasting, _image((3, 6, 5))),
    "activations": (_activations, {"x": ((4, 5), F32)}),
    "norms": (_norms, _image((3, 4, 5))),
    "fc": (_fc_stack, _image((2, 3, 3))),
    "shapes": (_shapes, _image((3, 6, 6))),
    "embedding": (_embedding, {"ids": ((3, 1), "int64")}),
}

#: Cases whose ops all come back as themselves after export and import.
EXACT_ROUND_TRIP = {"conv", "broadcast", "shapes", "embedding"}


def _feeds(spec: dict, batch: int, rng) -> dict:
    out = {}
    for name, (shape, dtype) in spec.items():
        if dtype == "int64":
            out[name] = rng.integers(0, 11, size=(batch,) + tuple(shape)).astype("int64")
        else:
            out[name] = rng.standard_normal((batch,) + tuple(shape)).astype(dtype)
    return out


def _as_list(result):
    return list(result) if isinstance(result, tuple) else [result]


def _compiled(case):
    build, spec = CASES[case]
    net = one_method(build, spec, name=case.title())().Compile(seed=3)
    rng = np.random.default_rng(0)
    for name in net.var_names():   # moving statistics that are not 0 and 1
        if "batch_norm" in name and not net.program.global_block().vars[name].is_parameter:
            value = net.get_var(name)
            net.set_var(name, np.abs(rng.standard_normal(value.shape)).astype(value.dtype) + 0.5)
    return net, spec


@pytest.mark.parametrize("case", sorted(CASES))
def test_export_matches_onnxruntime_and_imports_back(case, tmp_path):
    net, spec = _compiled(case)
    rng = np.random.default_rng(1)
    back = check_export(net, str(tmp_path / f"{case}.onnx"), lambda b: _feeds(spec, b, rng),
                        (1, 7), opset=20 if case == "activations" else 17)
    if case in EXACT_ROUND_TRIP:
        assert canonical_ops(back) == canonical_ops(net)


def test_opsets_13_to_21(tmp_path):
    net, spec = _compiled("shapes")
    feeds = _feeds(spec, 2, np.random.default_rng(0))
    want = _as_list(net.infer(**feeds))
    for opset in (13, 18, 21):
        model = fluid.export_onnx(net, None, opset=opset)
        assert model.opset_import[0].version == opset
        for w, g in zip(want, ort_run(model, feeds)):
            np.testing.assert_allclose(g, np.asarray(w, dtype=g.dtype), rtol=1e-5, atol=1e-6)
