"""stack, unstack, expand, expand_as, t, flip, roll, multiplex and the image
rearrangements traced into compiled methods, their gradients, and the layers' errors."""
import numpy as np
import pytest
from frontend.test_index_layers import compile_one

import fluid

L = fluid.layers


def test_stack_unstack_round_trip_with_gradients():
    def body(a, b):
        s = L.stack([a, b], axis=1)
        parts = L.unstack(s, axis=1)
        assert s.shape == (-1, 2, 3) and len(parts) == 2
        loss = L.reduce_sum(parts[0] * 2.0) + L.reduce_sum(s * s)
        return s, parts[1], fluid.gradients(loss, [a, b])
    p = compile_one(body, {"a": ([-1, 3], "float64", False), "b": ([-1, 3], "float64", False)})
    a, b = np.arange(6.0).reshape(2, 3), -np.arange(6.0).reshape(2, 3)
    s, second, (da, db) = p.f(a, b)
    np.testing.assert_array_equal(s, np.stack([a, b], 1))
    np.testing.assert_array_equal(second, b)
    np.testing.assert_array_equal(da, 2 + 2 * a)
    np.testing.assert_array_equal(db, 2 * b)


def test_stack_of_a_tensor_array():
    def body(x):
        arr = L.create_array("float32")
        for i in range(3):
            L.array_write(x * float(i), L.fill_constant([1], "int64", i), array=arr)
        return L.stack(arr, axis=0)
    p = compile_one(body, {"x": ([2], "float32", True)})
    out = p.f(np.array([1.0, 2.0], "float32"))
    np.testing.assert_array_equal(out, [[0, 0], [1, 2], [2, 4]])


def test_expand_with_times_as_ints_and_variables():
    def body(x, n):
        a = L.expand(x, [1, 3])
        b = L.expand(x, [n, 2])
        c = L.expand_as(x, a)
        assert a.shape == (-1, 6) and b.shape == (-1, 4)
        return a, b, c, fluid.gradients(L.reduce_sum(b), [x])[0]
    p = compile_one(body, {"x": ([-1, 2], "float64", False), "n": ([1], "int32", True)})
    x = np.array([[1.0, 2.0]])
    a, b, c, grad = p.f(x, np.array([3], "int32"))
    np.testing.assert_array_equal(a, np.tile(x, (1, 3)))
    np.testing.assert_array_equal(b, np.tile(x, (3, 2)))
    np.testing.assert_array_equal(c, np.tile(x, (1, 3)))
    np.testing.assert_array_equal(grad, [[6.0, 6.0]])


def test_t_flip_roll():
    def body(x, v):
        return L.t(x), L.t(v), L.flip(x, [0, 1]), L.roll(x, 1), L.roll(x, shifts=[1], dims=0)
    p = compile_one(body, {"x": ([3, 2], "float32", True), "v": ([4], "float32", True)})
    x, v = np.arange(6, dtype="float32").reshape(3, 2), np.arange(4, dtype="float32")
    tx, tv, flipped, rolled, rolled0 = p.f(x, v)
    np.testing.assert_array_equal(tx, x.T)
    np.testing.assert_array_equal(tv, v)
    np.testing.assert_array_equal(flipped, x[::-1, ::-1])
    np.testing.assert_array_equal(rolled, np.roll(x, 1))
    np.testing.assert_array_equal(rolled0, np.roll(x, 1, 0))


def test_multiplex_picks_rows():
    def body(a, b, ids):
        out = L.multiplex([a, b], ids)
        return out, fluid.gradients(L.reduce_sum(out), [a])[0]
    p = compile_one(body, {"a": ([-1, 2], "float64", False), "b": ([-1, 2], "float64", True),
                           "ids": ([-1, 1], "int32", True)})
    a, b = np.zeros((3, 2)), np.ones((3, 2))
    out, da = p.f(a, b, np.array([[1], [0], [1]], "int32"))
    np.testing.assert_array_equal(out[:, 0], [1, 0, 1])
    np.testing.assert_array_equal(da[:, 0], [0, 1, 0])


def test_image_rearrangements_round_trip():
    def body(x):
        up = L.pixel_shuffle(x, upscale_factor=2)             # [?, 2, 8, 4]
        down = L.space_to_depth(x, blocksize=2)               # [?, 32, 2, 1]
        return up, down, L.shuffle_channel(x, group=2), L.temporal_shift(x, seg_num=2)
    p = compile_one(body, {"x": ([-1, 8, 4, 2], "float32", True)})
    x = np.arange(2 * 8 * 4 * 2, dtype="float32").reshape(2, 8, 4, 2)
    up, down, shuffled, shifted = p.f(x)
    assert up.shape == (2, 2, 8, 4) and down.shape == (2, 32, 2, 1)
    np.testing.assert_array_equal(up[0, 0, :2, :2], [[0, 8], [16, 24]])
    np.testing.assert_array_equal(shuffled[0, :, 0, 0], x[0, [0, 4, 1, 5, 2, 6, 3, 7], 0, 0])
    np.testing.assert_array_equal(shifted[1, :2], x[0, :2])
    assert not shifted[0, :2].any()


@pytest.mark.parametrize("call,error,match", [
    (lambda x: L.stack([]), fluid.OpArgumentError, "stack: x must hold at least one"),
    (lambda x: L.unstack(L.reshape(x, [-1, 2, 2])), fluid.OpArgumentError,
     r"unstack: x \[-1, 2, 2\] has no known size along axis 0; give num"),
    (lambda x: L.expand(x, [1, 0]), fluid.OpArgumentError, "expand_times .* must be positive"),
    (lambda x: L.expand(x, 2), fluid.OpArgumentError, "expand: expand_times must be a list"),
    (lambda x: L.t(L.reshape(x, [-1, 2, 2])), fluid.OpArgumentError,
     "t: input .* has rank 3; t takes rank <= 2"),
    (lambda x: L.flip(x, 1), fluid.OpArgumentError, "flip: dims must be a non-empty list"),
    (lambda x: L.roll(x, shifts=[1, 2], dims=[0]), fluid.ShapeError,
     "shifts .* must be non-empty and have one entry per dim"),
    (lambda x: L.multiplex(x, x), fluid.OpArgumentError, "multiplex: inputs must be a list"),
    (lambda x: L.multiplex([x], x), fluid.OpArgumentError, "at least 2 Variables"),
    (lambda x: L.pixel_shuffle(L.reshape(x, [-1, 4, 1, 1]), 3), fluid.ShapeError,
     r"must divide by upscale_factor\*\*2 = 9"),
    (lambda x: L.space_to_depth(L.reshape(x, [-1, 4, 1, 1]), 1), fluid.OpArgumentError,
     "blocksize=1 must be at least 2"),
    (lambda x: L.temporal_shift(L.reshape(x, [-1, 4, 1, 1]), seg_num=2, shift_ratio=0.7),
     fluid.ShapeError, r"shift_ratio=0.7 must lie in \[0, 0.5\]"),
])
def test_layer_errors_name_the_problem_and_the_line(call, error, match):
    with pytest.raises(error, match=match) as info:
        compile_one(call, {"x": ([-1, 4], "float32", True)})
    assert "test_rearrange_layers.py" in str(info.value)
