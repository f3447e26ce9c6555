"""The tensor-building and querying ops in ONNX (`onnx/export_build.py`,
`onnx/export_query.py`): assign_value, pad, one_hot, fill_zeros_like / fill_ones_like,
diag, diag_embed, kron, meshgrid, cross; isinf, isnan, isfinite, allclose, is_empty,
shard_index, accuracy. Each program's file passes onnx.checker, runs in onnxruntime with
the outputs of ``infer`` (batches of 2 and 5), and imports back giving them too."""
from __future__ import annotations

import numpy as np
import pytest

import fluid
from tests.onnx_io.helpers import check_export, one_method

L = fluid.layers
F32, I64 = "float32", "int64"


def _built(x, ids):
    column = L.reduce_sum(x, dim=[0])                                  # [4]: no batch dim
    grid = L.meshgrid([column, column[:3]])
    return (L.assign(np.arange(6, dtype=np.float32).reshape(2, 3)),
            L.assign(np.array([[1, -2]], np.int64)),
            L.pad(x, [0, 0, 1, 2], pad_value=-1.5),
            L.one_hot(ids, 5), L.one_hot(ids - 2, 4, allow_out_of_range=True),
            L.zeros_like(x) + x, L.ones_like(ids),
            L.diag(column), L.diag_embed(x), L.diag_embed(x, offset=2),
            L.diag_embed(L.reshape(x, [0, 2, 2]), offset=-1, dim1=0, dim2=2),
            L.kron(x, L.reshape(column[:2], [2, 1])), grid[0], grid[1],
            L.cross(L.reshape(x[:, :3], [-1, 3]), L.reshape(x[:, 1:], [-1, 3])),
            L.trace(L.reshape(x, [0, 2, 2])), L.trace(L.reshape(x, [0, 2, 2]), 1, 0, 2),
            L.trace(L.kron(x, x), offset=-2, dim1=1, dim2=0), _routed(x), *_compared(x, ids))


def _compared(x, ids):
    """Comparisons, unique, a 3-D max pooling with its (unread) index, and the zeros and
    ones shaped like a value (ops the layers add only to gradients: appended directly)."""
    from fluid_interactive.frontend.layers.helpers import LayerHelper
    half = x * 0.5
    cube = L.reshape(x, [-1, 1, 2, 2, 1])
    flat = L.reshape(ids, [-1])
    return (L.greater_equal(x, half), L.less_equal(x, half), L.not_equal(x, half),
            L.logical_xor(x > 0.0, half > 0.2), *L.unique(flat, dtype="int64"),
            L.adaptive_pool3d(cube, [2, 1, 1], "max", require_index=True)[0],
            LayerHelper("fill_zeros_like").append_one("fill_zeros_like", {"X": x}),
            LayerHelper("fill_ones_like").append_one("fill_ones_like", {"X": ids}))


def _routed(x):
    """IfElse: each row through the block its mask picks (split_lod_tensor and
    merge_lod_tensor)."""
    ie = L.IfElse(L.less_than(L.reduce_sum(x, dim=1, keep_dim=True),
                              L.fill_constant([1], F32, 0.0)))
    with ie.true_block():
        ie.output(L.scale(ie.input(x), 2.0))
    with ie.false_block():
        ie.output(L.exp(ie.input(x)))
    return ie()[0]


def _queried(x, ids, wild):
    scores = L.softmax(x)
    label = L.elementwise_mod(ids, L.fill_constant([1], I64, 4))
    return (L.has_inf(wild), L.has_nan(wild), L.isfinite(x), L.isfinite(wild),
            L.has_inf(L.cast(ids, I64)), L.allclose(x, x + 1e-7), L.allclose(x, x * 1.1),
            L.allclose(wild, wild, equal_nan=True), L.is_empty(x),
            L.shard_index(ids, 10, 3, 1), L.accuracy(scores, label),
            L.accuracy(scores, label, k=2), L.accuracy(L.round(scores * 2), label, k=2),
            *L.mean_iou(L.argmax(x, axis=1), L.reshape(label, [-1]), 4))


CASES = {"built": _built, "queried": _queried}
SPEC = {"x": ((4,), F32), "ids": ((1,), I64)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_export_matches_onnxruntime_and_imports_back(case, tmp_path):
    spec = dict(SPEC, **({"wild": ((4,), F32)} if case == "queried" else {}))
    net = one_method(CASES[case], spec, name=case.title())().Compile(seed=0)
    rng = np.random.default_rng(0)

    def feeds(batch):
        x = rng.standard_normal((batch, 4)).astype(np.float32)
        wild = x.copy()
        wild[0, 1:3] = [np.inf, -np.inf] if batch > 2 else [np.nan, 1.0]
        return {"x": x, "ids": rng.integers(0, 5, (batch, 1)).astype(np.int64),
                **({"wild": wild} if case == "queried" else {})}
    check_export(net, str(tmp_path / f"{case}.onnx"), feeds, (2, 5), rtol=1e-6, atol=1e-6)
