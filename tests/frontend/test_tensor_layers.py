"""The tensor layers (reshape, transpose, concat, split, slice, squeeze, unsqueeze, cast,
reduce_*, fill_constant, assign) traced into compiled methods, and gradients through them."""
import numpy as np
import pytest

import fluid

f32 = np.float32
L = fluid.layers


def compile_one(body, shape=(2, 3), dtype="float32", stop_gradient=True, **data_kw):
    """A compiled program whose method ``f(x)`` declares ``x`` and returns body(x)."""
    class P(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data(name="x", shape=list(shape), dtype=dtype, stop_gradient=stop_gradient,
                       **data_kw)
            return body(x)
    return P().Compile(seed=0)


def test_reshape_keeps_the_batch_dim():
    p = compile_one(lambda x: L.reshape(x, [0, 6]))
    x = np.arange(24, dtype=f32).reshape(4, 2, 3)
    out = p.f(x)
    assert out.shape == (4, 6)
    np.testing.assert_array_equal(out, x.reshape(4, 6))
    assert p.f(x[:1]).shape == (1, 6)


def test_reshape_infers_minus_one_and_returns_fresh_arrays():
    p = compile_one(lambda x: L.reshape(x, [-1, 3, 2]))
    x = np.ones((5, 2, 3), f32)
    out = p.f(x)
    assert out.shape == (5, 3, 2)
    out[...] = 7  # what a call returns is the caller's to keep
    assert (x == 1).all()


def test_reshape_reports_bad_shapes_at_the_calling_line():
    with pytest.raises(fluid.ShapeError,
                       match=r"(?s)reshape X \[5\] to shape \[4, -1\].*test_tensor_layers.py"):
        compile_one(lambda x: L.reshape(x, [4, -1]), shape=(5,), append_batch_size=False)


def test_transpose_and_unsqueeze_squeeze_round_trip():
    def body(x):
        t = L.transpose(x, [0, 2, 1])
        u = L.unsqueeze(t, [1])
        return t, u, L.squeeze(u, [1]), L.squeeze(u, [])
    p = compile_one(body)
    x = np.arange(12, dtype=f32).reshape(2, 2, 3)
    t, u, s, s_all = p.f(x)
    np.testing.assert_array_equal(t, x.transpose(0, 2, 1))
    assert u.shape == (2, 1, 3, 2) and s.shape == (2, 3, 2) and s_all.shape == (2, 3, 2)
    # A batch of 1 keeps its dim: squeeze(axes=[]) only removes dims known while tracing.
    assert p.f(x[:1])[3].shape == (1, 3, 2)


def test_squeeze_without_size_one_dims_is_an_error():
    with pytest.raises(fluid.ShapeError, match="no size-1 dim"):
        compile_one(lambda x: L.squeeze(x, []))


def test_concat_and_split():
    def body(x):
        a, b, c = L.split(x, [1, -1, 1], dim=1)
        return L.concat([c, b, a], axis=1), L.split(x, 3, dim=-1), a
    p = compile_one(body, shape=(4, 3))
    x = np.arange(24, dtype=f32).reshape(2, 4, 3)
    joined, parts, a = p.f(x)
    np.testing.assert_array_equal(joined, np.concatenate([x[:, 3:], x[:, 1:3], x[:, :1]], 1))
    assert isinstance(parts, tuple) and len(parts) == 3
    for k, part in enumerate(parts):
        np.testing.assert_array_equal(part, x[..., k:k + 1])
    assert a.shape == (2, 1, 3)


def test_split_returns_a_list_of_variables():
    seen = {}

    def body(x):
        parts = L.split(x, 2, dim=1)
        seen["types"] = type(parts), [type(v) for v in parts], [v.shape for v in parts]
        return parts[0]
    compile_one(body, shape=(4,))
    assert seen["types"] == (list, [fluid.Variable] * 2, [(-1, 2), (-1, 2)])


def test_split_into_unequal_parts_is_an_error():
    with pytest.raises(fluid.ShapeError, match=r"into 2 equal parts"):
        compile_one(lambda x: L.split(x, 2, dim=1), shape=(5,))


def test_concat_mismatch_names_both_shapes():
    def body(x):
        y = L.reshape(x, [0, 3, 2])
        return L.concat([x, y], axis=1)
    with pytest.raises(fluid.ShapeError, match=r"input 0 is \[\?, 2, 3\] but input 1 is "
                                               r"\[\?, 3, 2\]"):
        compile_one(body)


def test_slice_clamps_like_python():
    p = compile_one(lambda x: (L.slice(x, axes=[1], starts=[-2], ends=[10 ** 9]),
                               L.slice(x, axes=[1, 2], starts=[0, 1], ends=[1, -1])), shape=(3, 4))
    x = np.arange(24, dtype=f32).reshape(2, 3, 4)
    a, b = p.f(x)
    np.testing.assert_array_equal(a, x[:, -2:])
    np.testing.assert_array_equal(b, x[:, 0:1, 1:-1])


def test_cast_changes_dtype():
    p = compile_one(lambda x: (L.cast(x, "int64"), L.cast(x, np.float64)))
    x = np.array([[[1.7, -1.7, 0.2], [3, 4, 5]]], f32)
    i, d = p.f(x)
    assert i.dtype == np.int64 and d.dtype == np.float64
    np.testing.assert_array_equal(i, [[[1, -1, 0], [3, 4, 5]]])


def test_cast_rejects_unknown_dtypes():
    with pytest.raises(fluid.OpArgumentError, match="unknown dtype"):
        compile_one(lambda x: L.cast(x, "float128x"))


@pytest.mark.parametrize("layer,ref", [(L.reduce_sum, np.sum), (L.reduce_mean, np.mean),
                                       (L.reduce_max, np.max), (L.reduce_min, np.min)])
def test_reductions(layer, ref):
    p = compile_one(lambda x: (layer(x), layer(x, dim=1), layer(x, dim=[-1, 1], keep_dim=True),
                               layer(x, dim=0)))
    x = np.random.default_rng(0).standard_normal((4, 2, 3)).astype(f32)
    everything, d1, kept, batch = p.f(x)
    assert isinstance(everything, float)
    np.testing.assert_allclose(everything, ref(x), rtol=1e-5)
    np.testing.assert_allclose(d1, ref(x, axis=1), rtol=1e-5)
    np.testing.assert_allclose(kept, ref(x, axis=(1, 2), keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(batch, ref(x, axis=0), rtol=1e-5)


def test_reduce_bad_dim_is_reported():
    with pytest.raises(fluid.ShapeError, match=r"dim 3 is out of range for X \[\?, 2, 3\]"):
        compile_one(lambda x: L.reduce_sum(x, dim=3))


def test_fill_constant_and_assign():
    seen = {}

    def body(x):
        c = L.fill_constant([2, 3], "float32", 1.5)
        k = L.fill_constant([1], "int64", 7)
        seen["types"] = c.shape, c.dtype, c.stop_gradient, k.dtype
        return x + c, L.assign(x), L.assign(np.array([[1, 2], [3, 4]], f32)), k
    p = compile_one(body)
    assert seen["types"] == ((2, 3), "float32", True, "int64")
    x = np.ones((3, 2, 3), f32)
    shifted, copy, const, k = p.f(x)
    np.testing.assert_array_equal(shifted, x + 1.5)
    np.testing.assert_array_equal(copy, x)
    assert not np.shares_memory(copy, x)
    np.testing.assert_array_equal(const, [[1, 2], [3, 4]])
    assert const.dtype == np.float32 and k == 7


def test_fill_constant_needs_a_known_shape():
    with pytest.raises(fluid.OpArgumentError, match=r"shape \[-1, 3\] must be fully known"):
        compile_one(lambda x: L.fill_constant([-1, 3], "float32", 0.0))


def test_assign_into_an_existing_var():
    class P(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data(name="x", shape=[3])
            return L.fc(x, 2, bias_attr=False)

        @fluid.network("v")
        def set_weight(self, v):
            v = L.data(name="v", shape=[3, 2], append_batch_size=False)
            w, = fluid.parameters()
            assert L.assign(L.scale(v, 2.0), output=w).name == w.name
    p = P().Compile()
    p.set_weight(np.ones((3, 2), f32))
    np.testing.assert_array_equal(p.f(np.ones((1, 3), f32)), [[6, 6]])


def test_assign_output_shape_mismatch():
    def body(x):
        return L.assign(x, output=L.reshape(x, [0, 6]))
    with pytest.raises(fluid.ShapeError, match=r"assign: input is float32\[\?, 2, 3\] but output"):
        compile_one(body)


def test_gradient_through_the_layers():
    """d/dx of sum(reshape/transpose/slice/concat of x squared) against the analytic value."""
    def body(x):
        y = L.reshape(x, [-1, 6])                       # [?, 6]
        a, b = L.split(y, [2, 4], dim=1)
        t = L.transpose(L.unsqueeze(b, [2]), [0, 2, 1])  # [?, 1, 4]
        s = L.slice(L.squeeze(t, [1]), axes=[1], starts=[1], ends=[100])  # b[:, 1:]
        z = L.concat([a * a, s * 3.0], axis=1)
        loss = L.reduce_sum(z) + L.reduce_mean(L.reduce_max(y, dim=1))
        gx, = fluid.gradients(loss, x)
        return loss, gx
    p = compile_one(body, stop_gradient=False)
    x = np.random.default_rng(1).standard_normal((4, 2, 3)).astype(f32)
    loss, gx = p.f(x)
    y = x.reshape(4, 6)
    expected_loss = (y[:, :2] ** 2).sum() + 3 * y[:, 3:].sum() + y.max(axis=1).mean()
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-5)
    g = np.zeros((4, 6), f32)
    g[:, :2] = 2 * y[:, :2]
    g[:, 3:] = 3.0
    g[np.arange(4), y.argmax(axis=1)] += 0.25
    np.testing.assert_allclose(gx, g.reshape(4, 2, 3), rtol=1e-5, atol=1e-6)


def test_gradient_through_cast_reaches_float_inputs_only():
    def body(x):
        loss = L.reduce_sum(L.cast(x, "float64") * 2.0)
        gx, = fluid.gradients(loss, x)
        return gx
    gx = compile_one(body, stop_gradient=False).f(np.ones((2, 2, 3), f32))
    assert gx.dtype == np.float32
    np.testing.assert_array_equal(gx, np.full((2, 2, 3), 2.0, f32))


def test_layers_are_exported():
    for name in ["reshape", "transpose", "concat", "split", "slice", "squeeze", "unsqueeze",
                 "cast", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                 "fill_constant", "assign"]:
        assert name in L.__all__
        assert getattr(L, name).__doc__


def test_views_stay_valid_while_buffers_are_reused():
    """Views (reshape, transpose, split, slice) feed later ops whose outputs reuse buffers
    of the same shape; results must match NumPy on every call and batch size."""
    def body(x):
        t = L.transpose(x, [0, 2, 1])                     # [?, 3, 3] view
        a, b, c = L.split(t, 3, dim=2)                    # views
        u = L.exp(a) + b                                  # buffers of [?, 3, 1]
        v = L.tanh(u) * c
        w = L.reshape(L.concat([v, u, a], axis=2), [0, 9])
        return L.slice(w, [1], [2], [7]) + L.reduce_sum(w, dim=1, keep_dim=True)
    p = compile_one(body, shape=(3, 3))
    rng = np.random.default_rng(3)
    for n in (5, 1, 5, 2):
        x = rng.standard_normal((n, 3, 3)).astype(f32)
        t = x.transpose(0, 2, 1)
        a, b, c = t[..., :1], t[..., 1:2], t[..., 2:]
        u = np.exp(a) + b
        v = np.tanh(u) * c
        w = np.concatenate([v, u, a], axis=2).reshape(n, 9)
        np.testing.assert_allclose(p.f(x), w[:, 2:7] + w.sum(1, keepdims=True), rtol=1e-5)


def test_gradient_of_an_input_used_twice_in_concat():
    def body(x):
        loss = L.reduce_sum(L.concat([x, x * 2.0, x], axis=1))
        return fluid.gradients(loss, x)[0]
    gx = compile_one(body, stop_gradient=False).f(np.ones((2, 2, 3), f32))
    np.testing.assert_array_equal(gx, np.full((2, 2, 3), 4.0, f32))


@pytest.mark.parametrize("call,match", [
    (lambda x: L.split(x, 0), "must be positive"),
    (lambda x: L.split(x, []), "empty list"),
    (lambda x: L.concat(x), "non-empty list"),
    (lambda x: L.reshape(x, [0, 2.5]), "shape must be a list of ints"),
    (lambda x: L.reduce_sum(x, dim="1"), "dim must be a list of ints"),
    (lambda x: L.transpose(x, None), "perm must be a list of ints"),
])
def test_layer_argument_errors(call, match):
    with pytest.raises(fluid.OpArgumentError, match=match):
        compile_one(call)
