"""The indexing and rearranging ops exported to ONNX: each small program's file passes
onnx.checker, runs in onnxruntime with the outputs of ``infer`` (batches of 1 and 5), and
imports back to a program with the same outputs."""
from __future__ import annotations

import numpy as np
import pytest

import fluid
from tests.onnx_io.helpers import check_export, check_exported, one_method, onnx

L = fluid.layers
F32, I64 = "float32", "int64"


def _gathering(x, ids, cols):
    flat = L.reshape(ids, [-1])
    rows = L.gather(L.transpose(x, [1, 0]), flat)                  # Gather, axis 0
    picked = L.index_select(x, flat, dim=1)                         # Gather, axis 1
    sampled = L.index_sample(x, cols)                               # GatherElements
    nd = L.gather_nd(x, L.stack([cols[:, 0] * 0, cols[:, 1]], axis=1))   # GatherND
    values, indices = L.topk(x, k=3)                                # TopK
    return rows, picked, sampled, nd, values, indices


def _scattering(x, ids, cols):
    updates = L.transpose(x, [1, 0])[:3]                            # [3, B]
    rows = L.reshape(ids, [-1])[:3]
    replaced = L.scatter(L.transpose(x, [1, 0]), rows, updates)     # ScatterND
    added = L.scatter(L.transpose(x, [1, 0]), rows, updates, overwrite=False)
    nd = L.scatter_nd_add(x, L.unsqueeze(cols[:, 0], [1]) * 0, x[:, :1] * 0 + x)
    chosen = L.multiplex([x, x * 2.0, x * 3.0], cols[:, :1])         # Where
    return replaced, added, nd, chosen


def _selecting(x, ids, cols):
    coords = L.where(x > 0.5)                                       # NonZero + Transpose
    out, index, count = L.unique_with_counts(L.reshape(ids, [-1]), dtype="int64")
    return coords, out, index, count


def _slicing(x, ids, cols):
    a = L.strided_slice(x, axes=[1], starts=[-1], ends=[-100], strides=[-2])
    b = L.slice(x, axes=[1], starts=[1], ends=[5])
    c = L.crop_tensor(x, shape=[-1, 3], offsets=[0, 2])
    d = L.flip(x, [1])
    e = L.roll(x, shifts=[2], dims=[1])
    f = L.crop(x, shape=[-1, 2], offsets=[0, 1])
    return a, b, c, d, e, f


def _tiling(x, ids, cols):
    s = L.stack([x, x * 2.0], axis=1)                               # Unsqueeze + Concat
    parts = L.unstack(s, axis=1)                                    # Split + Squeeze
    t = L.expand(x, [1, 2])                                         # Tile
    column = L.reduce_sum(x, dim=[0])                               # [6]: no batch dim
    padded = L.pad_constant_like(column, column[:4], pad_value=1.5)  # Pad
    return s, parts[1], t, L.expand_as(column[:3], column), padded


def _images(img):
    shuffled = L.pixel_shuffle(img, 2)                              # DepthToSpace
    reorg = L.space_to_depth(img, 2)                                # Reshape/Transpose
    channels = L.shuffle_channel(img, 2)
    shifted = L.temporal_shift(img, seg_num=1)                      # Pad + Slices
    padded = L.pad2d(img, [1, 0, 2, 1], mode="reflect")             # Pad
    edged = L.pad2d(img, [0, 1, 1, 0], mode="edge")
    constant = L.pad2d(img, [1, 1, 0, 2], pad_value=0.5)
    return shuffled, reorg, channels, shifted, padded, edged, constant


_TABLE = {"x": ((6,), F32), "ids": ((3,), I64), "cols": ((2,), I64)}
CASES = {
    "gathering": (_gathering, _TABLE),
    "scattering": (_scattering, _TABLE),
    "selecting": (_selecting, _TABLE),
    "slicing": (_slicing, _TABLE),
    "tiling": (_tiling, _TABLE),
    "images": (_images, {"img": ((8, 4, 6), F32)}),
}


def _feeds(spec: dict, batch: int, rng) -> dict:
    out = {}
    for name, (shape, dtype) in spec.items():
        if dtype == I64:   # indices into the 6 columns (and rows of a batch of 3 or more)
            out[name] = rng.integers(0, min(6, 3), size=(batch,) + shape).astype(I64)
        else:
            out[name] = rng.random((batch,) + shape).astype(dtype)
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_export_matches_onnxruntime_and_imports_back(case, tmp_path):
    build, spec = CASES[case]
    net = one_method(build, spec, name=case.title())().Compile(seed=3)
    rng = np.random.default_rng(1)
    check_export(net, str(tmp_path / f"{case}.onnx"), lambda b: _feeds(spec, b, rng), (3, 5),
                 rtol=1e-6, atol=1e-6)


def test_lists_given_as_tensors_export(tmp_path):
    """reshape, slice, expand and crop_tensor with sizes from a data var (0-d: one value
    for the call): the file computes them when it runs."""
    def build(x, n):
        r = L.reshape(x, [0, n, -1])
        s = L.slice(x, axes=[1], starts=[n], ends=[100])
        e = L.expand(x, [1, n])
        c = L.crop_tensor(x, shape=[-1, n], offsets=[0, n])
        return r, s, e, c
    cls = type("Lists", (fluid.Program,), {"infer": fluid.network("x", "n")(
        lambda self, x, n: build(L.data("x", shape=[6], dtype=F32),
                                 L.data("n", shape=[], dtype="int32",
                                        append_batch_size=False)))})
    net = cls().Compile()
    x = np.random.default_rng(0).random((4, 6)).astype(F32)
    check_exported(net, str(tmp_path / "lists.onnx"),
                   [{"x": x[:rows], "n": np.array(k, "int32")} for rows in (2, 4) for k in (1, 2)])


def test_sizes_known_only_when_the_graph_runs_export(tmp_path):
    """expand_as and pad_constant_like between tensors with a batch dim: the file computes
    the repeats and pads from their Shapes, and imports back."""
    cls = one_method(lambda x: (L.expand_as(x[:, :3], x), L.pad_constant_like(x, x[:, :2])),
                     {"x": ((6,), F32)})
    rng = np.random.default_rng(0)
    check_export(cls().Compile(), str(tmp_path / "shapes.onnx"),
                 lambda rows: {"x": rng.random((rows, 6)).astype(F32)}, (1, 3))


def test_gather_tree_exports_as_a_loop(tmp_path):
    """Beam paths traced back through the parents: a Loop over the steps, T, B and beam
    read when the graph runs."""
    def build(ids, parents):
        return L.gather_tree(L.transpose(ids, [1, 0, 2]), L.transpose(parents, [1, 0, 2]))
    cls = one_method(build, {"ids": ((-1, -1, 3), I64), "parents": ((-1, -1, 3), I64)})
    rng = np.random.default_rng(0)
    feeds = [{"ids": rng.integers(0, 20, (b, t, 3)).astype(I64),
              "parents": rng.integers(0, 3, (b, t, 3)).astype(I64)}
             for b, t in ((2, 5), (4, 1), (1, 3))]
    path = str(tmp_path / "tree.onnx")
    check_exported(cls().Compile(), path, feeds)
    assert "Loop" in {node.op_type for node in onnx.load(path).graph.node}
