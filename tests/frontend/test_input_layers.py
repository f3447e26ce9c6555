"""Paddle 1.8's top-level inputs (fluid.data, fluid.embedding, fluid.one_hot: ids of any
shape, a dim appended) and fluid.nets.glu / sequence_conv_pool, in compiled programs
against NumPy, with the errors they give at the user's line."""
import numpy as np
import pytest

import fluid
from fluid_interactive.errors import OpArgumentError, ShapeError


def test_fluid_data_declares_exactly_the_shape_given():
    class P(fluid.Program):
        @fluid.network("x", "y")
        def f(self, x, y):
            x = fluid.data(name="x", shape=[None, 3], dtype="float32")
            y = fluid.data(name="y", shape=[2, -1])
            assert tuple(x.shape) == (-1, 3) and tuple(y.shape) == (2, -1)
            return x * 2.0, y + 1.0
    a, b = P().Compile().f(np.ones((4, 3), np.float32), np.zeros((2, 5), np.float32))
    assert a.shape == (4, 3) and b.shape == (2, 5)


class Lookups(fluid.Program):
    @fluid.network("ids")
    def f(self, ids):
        ids = fluid.data(name="ids", shape=[None, 5], dtype="int64")
        emb = fluid.embedding(ids, size=[7, 3], padding_idx=0,
                              param_attr=fluid.ParamAttr(name="table"))
        return emb, fluid.one_hot(ids, depth=7)


def test_embedding_and_one_hot_take_ids_of_any_shape_and_append_a_dim(rng):
    prog = Lookups().Compile(seed=0)
    ids = rng.integers(0, 7, (2, 5)).astype(np.int64)
    emb, hot = prog.f(ids)
    table = prog.get_var("table")
    assert emb.shape == (2, 5, 3) and hot.shape == (2, 5, 7) and hot.dtype == np.float32
    np.testing.assert_array_equal(emb, np.where((ids == 0)[..., None], 0, table[ids]))
    np.testing.assert_array_equal(hot, np.eye(7, dtype=np.float32)[ids])


def test_glu_and_sequence_conv_pool(rng):
    class Nets(fluid.Program):
        @fluid.network("x", "lengths")
        def f(self, x, lengths):
            x = fluid.data(name="x", shape=[None, None, 4], dtype="float64")
            n = fluid.data(name="lengths", shape=[None], dtype="int64")
            pooled = fluid.nets.sequence_conv_pool(
                x, 3, 3, param_attr=fluid.ParamAttr(name="w"), bias_attr=False, act="tanh",
                pool_type="sum", lengths=n)
            return fluid.nets.glu(x, dim=2), pooled
    prog = Nets().Compile(seed=0)
    x, n = rng.standard_normal((2, 5, 4)), np.array([5, 2], np.int64)
    gated, pooled = prog.f(x, n)
    np.testing.assert_allclose(gated, x[..., :2] / (1 + np.exp(-x[..., 2:])), rtol=1e-12)
    w = prog.get_var("w")
    for b, length in enumerate(n):
        padded = np.concatenate([np.zeros((1, 4)), x[b, :length], np.zeros((1, 4))])
        cols = np.stack([padded[t:t + 3].reshape(-1) for t in range(length)])
        np.testing.assert_allclose(pooled[b], np.tanh(cols @ w).sum(0), rtol=1e-10)


@pytest.mark.parametrize("body,error,match", [
    (lambda x, i: fluid.embedding(x, size=[4, 2]), OpArgumentError, "must hold int ids"),
    (lambda x, i: fluid.one_hot(np.zeros(3), 4), OpArgumentError, "must be a fluid Variable"),
    (lambda x, i: fluid.nets.glu(x, dim=1), ShapeError, "known and even"),
    (lambda x, i: fluid.data(name="z", shape=[2, "a"]), OpArgumentError, "has the dim 'a'"),
])
def test_errors_name_the_line(body, error, match):
    class P(fluid.Program):
        @fluid.network("x", "ids")
        def f(self, x, ids):
            x = fluid.data(name="x", shape=[None, 3], dtype="float32")
            ids = fluid.data(name="ids", shape=[None], dtype="int64")
            return body(x, ids)
    with pytest.raises(error, match=match) as info:
        P().Compile()
    assert "test_input_layers.py" in str(info.value)
