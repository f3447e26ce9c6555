"""The indexing and rearranging layers (topk, gather, scatter, where, unique, slicing,
padding, tiling, the image rearrangements, gather_tree) against their NumPy expressions.

A compiled method hands back arrays the caller keeps, so an expression that NumPy answers
with a view (a slice, a flip, a transpose) copies it here too."""
from __future__ import annotations

import numpy as np

import fluid

from . import OpCase, f32, i64

L = fluid.layers


def _np_topk(x, k):
    picked = np.argpartition(x, x.shape[1] - k, axis=1)[:, -k:]
    values = np.take_along_axis(x, picked, 1)
    order = np.argsort(-values, axis=1, kind="stable")
    return np.take_along_axis(values, order, 1), np.take_along_axis(picked, order, 1)


def _np_unique(x):
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                               return_counts=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return values[order], rank[inverse], counts[order]


def _np_scatter(x, ids, updates):
    out = x.copy()
    out[ids] = updates
    return out


def _np_scatter_nd_add(x, index, updates):
    out = x.copy()
    np.add.at(out, index[:, 0], updates)
    return out


def _np_regroup(x, split, perm, shape):
    return x.reshape(split).transpose(perm).reshape(shape)


def _np_temporal_shift(x, seg):
    n_t, c, h, w = x.shape
    a = x.reshape(n_t // seg, seg, c, h, w)
    c1, c2 = c // 4, c // 2
    out = np.zeros_like(a)
    out[:, 1:, :c1] = a[:, :-1, :c1]
    out[:, :-1, c1:c2] = a[:, 1:, c1:c2]
    out[:, :, c2:] = a[:, :, c2:]
    return out.reshape(x.shape)


def _np_gather_tree(ids, parents):
    out = np.empty_like(ids)
    out[-1] = ids[-1]
    parent = parents[-1]
    for step in range(ids.shape[0] - 2, -1, -1):
        out[step] = np.take_along_axis(ids[step], parent, 1)
        parent = np.take_along_axis(parents[step], parent, 1)
    return out


_PERM = np.random.default_rng(0).permutation(20000)
_IMG = f32(32, 16, 64, 64)
_BIG = f32(2048, 1024)

CASES = [
    OpCase("topk", {"x": f32(256, 1000)}, lambda x: L.topk(x, k=10),
           lambda x: _np_topk(x, 10)),
    OpCase("gather", {"x": f32(1000, 256), "idx": i64(2048, high=1000)},
           L.gather, lambda x, idx: np.take(x, idx, axis=0)),
    OpCase("gather_nd", {"x": f32(64, 128, 32), "idx": i64(4096, 2, high=64)},
           L.gather_nd, lambda x, idx: x[idx[:, 0], idx[:, 1]]),
    OpCase("index_select", {"x": f32(256, 1000), "idx": i64(300, high=1000)},
           lambda x, idx: L.index_select(x, idx, dim=1),
           lambda x, idx: np.take(x, idx, axis=1)),
    OpCase("index_sample", {"x": f32(512, 1000), "idx": i64(512, 200, high=1000)},
           L.index_sample, lambda x, idx: np.take_along_axis(x, idx, 1)),
    OpCase("scatter", {"x": f32(20000, 64), "ids": _PERM[:5000].astype("int64"),
                       "updates": f32(5000, 64, seed=1)},
           L.scatter, _np_scatter),
    OpCase("scatter_nd_add", {"x": f32(1000, 64), "index": i64(2000, 1, high=1000),
                              "updates": f32(2000, 64, seed=1)},
           L.scatter_nd_add, _np_scatter_nd_add),
    OpCase("multiplex", {"a": f32(4096, 256), "b": f32(4096, 256, seed=1),
                         "c": f32(4096, 256, seed=2), "ids": i64(4096, 1, high=3)},
           lambda a, b, c, ids: L.multiplex([a, b, c], ids),
           lambda a, b, c, ids: np.stack([a, b, c])[ids[:, 0], np.arange(4096)]),
    OpCase("where", {"x": f32(256, 1000)}, lambda x: L.where(x > 0.0),
           lambda x: np.argwhere(x > 0.0)),
    OpCase("nonzero", {"x": f32(256, 1000)}, L.nonzero, np.argwhere),
    OpCase("unique_with_counts", {"x": i64(100000, high=1000)},
           lambda x: L.unique_with_counts(x, dtype="int64"), _np_unique),
    OpCase("strided_slice", {"x": _BIG},
           lambda x: L.strided_slice(x, [0, 1], [0, 1], [2048, 1024], [2, 3]),
           lambda x: x[::2, 1::3].copy()),
    OpCase("crop_tensor", {"x": _BIG},
           lambda x: L.crop_tensor(x, shape=[1000, 1000], offsets=[10, 5]),
           lambda x: x[10:1010, 5:1005].copy()),
    OpCase("flip", {"x": _BIG}, lambda x: L.flip(x, [0, 1]), lambda x: x[::-1, ::-1].copy()),
    OpCase("roll", {"x": _BIG}, lambda x: L.roll(x, shifts=[3], dims=[1]),
           lambda x: np.roll(x, 3, axis=1)),
    OpCase("t", {"x": _BIG}, L.t, lambda x: np.ascontiguousarray(x.T)),
    OpCase("pad2d_constant", {"x": _IMG}, lambda x: L.pad2d(x, [1, 2, 3, 4]),
           lambda x: np.pad(x, [(0, 0), (0, 0), (1, 2), (3, 4)])),
    OpCase("pad2d_reflect", {"x": _IMG}, lambda x: L.pad2d(x, [1, 2, 3, 4], mode="reflect"),
           lambda x: np.pad(x, [(0, 0), (0, 0), (1, 2), (3, 4)], mode="reflect")),
    OpCase("pad_constant_like", {"x": _IMG, "y": f32(32, 16, 60, 60, seed=1)},
           lambda x, y: L.pad_constant_like(x, y, 1.0),
           lambda x, y: np.pad(y, [(0, 0), (0, 0), (0, 4), (0, 4)], constant_values=1.0)),
    OpCase("stack", {"a": f32(512, 512), "b": f32(512, 512, seed=1),
                     "c": f32(512, 512, seed=2), "d": f32(512, 512, seed=3)},
           lambda *xs: L.stack(list(xs), axis=1), lambda *xs: np.stack(xs, axis=1)),
    OpCase("unstack", {"x": f32(8, 512, 512)}, lambda x: tuple(L.unstack(x)),
           lambda x: tuple(a.copy() for a in x)),
    OpCase("expand", {"x": f32(256, 256)}, lambda x: L.expand(x, [4, 2]),
           lambda x: np.tile(x, (4, 2))),
    OpCase("expand_as", {"x": f32(256, 256), "y": f32(1024, 512)}, L.expand_as,
           lambda x, y: np.tile(x, (4, 2))),
    OpCase("space_to_depth", {"x": _IMG}, lambda x: L.space_to_depth(x, 2),
           lambda x: _np_regroup(x, (32, 2, 2, 4, 64, 64), (0, 3, 4, 1, 5, 2),
                                 (32, 64, 32, 32))),
    OpCase("pixel_shuffle", {"x": _IMG}, lambda x: L.pixel_shuffle(x, 2),
           lambda x: _np_regroup(x, (32, 4, 2, 2, 64, 64), (0, 1, 4, 2, 5, 3),
                                 (32, 4, 128, 128))),
    OpCase("shuffle_channel", {"x": _IMG}, lambda x: L.shuffle_channel(x, 4),
           lambda x: _np_regroup(x, (32, 4, 4, 64, 64), (0, 2, 1, 3, 4), x.shape)),
    OpCase("temporal_shift", {"x": f32(64, 16, 32, 32)},
           lambda x: L.temporal_shift(x, seg_num=8), lambda x: _np_temporal_shift(x, 8)),
    OpCase("gather_tree", {"ids": i64(50, 64, 8, high=1000), "parents": i64(50, 64, 8, high=8)},
           L.gather_tree, _np_gather_tree),
]
