"""Cases of the creation, random and utility ops (Paddle 1.8's tensor.py and nn.py names).

Random ops run with a fixed ``seed``, with which they draw from a generator seeded afresh
each call, as NumPy's expression does, so both compute the same values. Ops whose values
are known when the method is planned (range, linspace, eye, shape, size) are constants
there; their cases time a call returning one. The learning-rate schedules compute one
value, where a call's fixed cost is all there is to time, and have no case.
"""
from __future__ import annotations

import numpy as np

import fluid
from fluid_interactive.ops.hashing import xxh64

from . import OpCase, f32, i64

L = fluid.layers
SEED = 7


def _rng():
    return np.random.default_rng(SEED)


def _diag_embed(x):
    out = np.zeros(x.shape + (x.shape[-1],), x.dtype)
    i = np.arange(x.shape[-1])
    out[..., i, i] = x
    return out


def _hash(x, num_hash=2, mod=100000):
    rows = x.view(np.uint8).reshape(x.shape[0], -1)
    seeds = np.arange(num_hash, dtype=np.uint64)
    return (xxh64(np, rows, seeds) % np.uint64(mod)).astype(x.dtype).reshape(-1, num_hash, 1)


def _sampling_id(p):
    r = _rng().uniform(0.0, 1.0, size=(p.shape[0], 1)).astype(p.dtype)
    return np.minimum((np.cumsum(p, axis=1) <= r).sum(axis=1), p.shape[1] - 1)


def _random_crop(x, window=(3, 24, 24)):
    gen = np.random.default_rng(SEED)
    n = x.shape[0]
    offsets = [gen.integers(0, d - w + 1, size=n) for d, w in zip(x.shape[1:], window)]
    index = [np.arange(n).reshape(n, 1, 1, 1)]
    for k, (off, w) in enumerate(zip(offsets, window)):
        spread = [1, 1, 1, 1]
        spread[k + 1] = w
        index.append(off.reshape(n, 1, 1, 1) + np.arange(w).reshape(spread))
    return x[tuple(index)]


def _probabilities():
    p = f32(4096, 64, low=0.0, high=1.0)
    return p / p.sum(axis=1, keepdims=True)


CASES = [
    # Views and plan-time constants are timed as a program uses them, summed: returning
    # one would time the copy a method returns instead of a view (NumPy's is free).
    OpCase("fill_any_like", {"x": f32(512, 512)},
           lambda x: L.reduce_sum(L.full_like(x, 2.0) * x),
           lambda x: np.sum(np.full_like(x, 2.0) * x), rtol=1e-4),
    OpCase("range", {}, lambda: L.arange(0, 262144, 1, "int64"),
           lambda: np.arange(0, 262144, 1, dtype=np.int64)),
    OpCase("linspace", {}, lambda: L.linspace(0.0, 1.0, 262144, "float32"),
           lambda: np.linspace(0.0, 1.0, 262144, dtype=np.float32)),
    OpCase("eye", {"x": f32(512, 512)}, lambda x: L.reduce_sum(L.eye(512) * x),
           lambda x: np.sum(np.eye(512, dtype=np.float32) * x), rtol=1e-4),
    OpCase("diag", {"d": f32(512)}, lambda d: L.diag(d), np.diag),
    OpCase("diag_embed", {"x": f32(64, 64)}, lambda x: L.diag_embed(x), _diag_embed),
    OpCase("trace", {"x": f32(64, 64, 64)}, lambda x: L.trace(x, dim1=1, dim2=2),
           lambda x: np.trace(x, axis1=1, axis2=2), rtol=1e-4),
    OpCase("tril_triu", {"x": f32(512, 512)}, lambda x: L.tril(x, 1), lambda x: np.tril(x, 1)),
    OpCase("kron", {"x": f32(64, 64), "y": f32(8, 8, seed=1)}, lambda x, y: L.kron(x, y),
           np.kron),
    OpCase("meshgrid", {"a": f32(512), "b": f32(512, seed=1)},
           lambda a, b: L.reduce_sum(L.elementwise_mul(*L.meshgrid([a, b]))),
           lambda a, b: np.sum(np.multiply(*np.meshgrid(a, b, indexing="ij", copy=False))),
           rtol=1e-4),
    OpCase("reverse", {"x": f32(512, 512), "y": f32(512, 512, seed=1)},
           lambda x, y: L.reduce_sum(L.reverse(x, [0, 1]) * y),
           lambda x, y: np.sum(np.flip(x, (0, 1)) * y), rtol=1e-4),
    OpCase("argsort", {"x": f32(512, 512)}, lambda x: L.argsort(x, axis=-1),
           lambda x: (np.take_along_axis(x, i := np.argsort(x, -1, kind="stable"), -1), i)),
    OpCase("argmin", {"x": f32(512, 512)}, lambda x: L.argmin(x, axis=1),
           lambda x: np.argmin(x, axis=1)),
    OpCase("isinf", {"x": f32(512, 512)}, lambda x: L.has_inf(x),
           lambda x: np.isinf(x).any().reshape(1).astype(x.dtype)),
    OpCase("isnan", {"x": f32(512, 512)}, lambda x: L.has_nan(x),
           lambda x: np.isnan(x).any().reshape(1).astype(x.dtype)),
    OpCase("isfinite", {"x": f32(512, 512)}, lambda x: L.isfinite(x),
           lambda x: np.isfinite(x).all().reshape(1)),
    OpCase("allclose", {"x": f32(512, 512), "y": f32(512, 512)},
           lambda x, y: L.allclose(x, y), lambda x, y: np.array([np.allclose(x, y)])),
    OpCase("shape", {"x": f32(512, 512)}, lambda x: L.shape(x),
           lambda x: np.array(x.shape, np.int32)),
    OpCase("size", {"x": f32(512, 512)}, lambda x: L.size(x),
           lambda x: np.array([x.size], np.int64)),
    OpCase("hash", {"x": i64(16384, 4, high=1000)}, lambda x: L.hash(x, 100000, 2), _hash),
    OpCase("shard_index", {"x": i64(262144, 1, high=1000)},
           lambda x: L.shard_index(x, 1000, 4, 1),
           lambda x: np.where(x // 250 == 1, x % 250, -1)),
    OpCase("uniform_random", {}, lambda: L.uniform_random([512, 512], seed=SEED),
           lambda: _rng().uniform(-1.0, 1.0, (512, 512)).astype(np.float32)),
    OpCase("gaussian_random", {}, lambda: L.gaussian_random([512, 512], seed=SEED),
           lambda: _rng().normal(0.0, 1.0, (512, 512)).astype(np.float32)),
    OpCase("uniform_random_batch_size_like", {"x": f32(512, 4)},
           lambda x: L.uniform_random_batch_size_like(x, [-1, 512], seed=SEED),
           lambda x: _rng().uniform(-1.0, 1.0, (512, 512)).astype(np.float32)),
    OpCase("gaussian_random_batch_size_like", {"x": f32(512, 4)},
           lambda x: L.gaussian_random_batch_size_like(x, [-1, 512], seed=SEED),
           lambda x: _rng().normal(0.0, 1.0, (512, 512)).astype(np.float32)),
    OpCase("randint", {}, lambda: L.randint(0, 100, [512, 512], seed=SEED),
           lambda: _rng().integers(0, 100, (512, 512))),
    OpCase("randperm", {}, lambda: L.randperm(262144, seed=SEED),
           lambda: _rng().permutation(262144)),
    OpCase("sampling_id", {"p": _probabilities()}, lambda p: L.sampling_id(p, seed=SEED),
           _sampling_id),
    OpCase("random_crop", {"x": f32(256, 3, 32, 32)},
           lambda x: L.random_crop(x, [3, 24, 24], seed=SEED), _random_crop),
    OpCase("py_func", {"x": f32(512, 512)},
           lambda x: L.py_func(np.tanh, x, L.create_tensor("float32", shape=[512, 512])),
           np.tanh),
]
