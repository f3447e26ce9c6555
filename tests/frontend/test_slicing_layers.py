"""reshape and slice with Paddle 1.8's tensor arguments, strided_slice, crop, crop_tensor,
pad2d and pad_constant_like traced into compiled methods, their gradients, and the errors
the layers report."""
import numpy as np
import pytest
from frontend.test_index_layers import compile_one

import fluid

L = fluid.layers


def test_reshape_takes_paddles_arguments():
    def body(x, n, dims):
        a = L.reshape(x, [0, n, 3], act="relu")            # an entry from a Variable
        b = L.reshape(x, shape=[-1, 6], actual_shape=dims)  # the tensor decides
        c = L.reshape(x, dims, inplace=True)                # the whole shape a Variable
        assert a.shape == (-1, -1, 3) and b.shape == (-1, -1) and c.shape == (-1, -1)
        return a, b, c
    p = compile_one(body, {"x": ([-1, 2, 3], "float32", True), "n": ([1], "int32", True),
                           "dims": ([2], "int64", True)})
    x = np.arange(-12, 12, dtype="float32").reshape(4, 2, 3)
    a, b, c = p.f(x, np.array([2], "int32"), np.array([12, -1]))
    np.testing.assert_array_equal(a, np.maximum(x, 0))
    np.testing.assert_array_equal(b, x.reshape(12, 2))
    np.testing.assert_array_equal(c, x.reshape(12, 2))


def test_reshape_from_a_tensor_is_differentiable():
    def body(x, n):
        y = L.reshape(x, [n, -1])
        return fluid.gradients(L.reduce_sum(y * y), [x])[0]
    p = compile_one(body, {"x": ([-1, 4], "float64", False), "n": ([1], "int64", True)})
    x = np.arange(8.0).reshape(2, 4)
    np.testing.assert_array_equal(p.f(x, np.array([4])), 2 * x)


def test_slice_and_strided_slice_with_variable_bounds():
    def body(x, start):
        a = L.slice(x, axes=[1], starts=[start], ends=[100])
        b = L.strided_slice(x, axes=[0, 1], starts=[0, start], ends=[100, 100],
                            strides=[2, 1])
        c = L.strided_slice(x, axes=[1], starts=[-1], ends=[-100], strides=[-2])
        grad = fluid.gradients(L.reduce_sum(b) + L.reduce_sum(c), [x])[0]
        return a, b, c, grad
    p = compile_one(body, {"x": ([-1, 5], "float64", False), "start": ([1], "int32", True)})
    x = np.arange(20.0).reshape(4, 5)
    for s in (1, 3):
        a, b, c, grad = p.f(x, np.array([s], "int32"))
        np.testing.assert_array_equal(a, x[:, s:])
        np.testing.assert_array_equal(b, x[::2, s:])
        np.testing.assert_array_equal(c, x[:, ::-2])
        want = np.zeros_like(x)
        want[::2, s:] += 1
        want[:, ::-2] += 1
        np.testing.assert_array_equal(grad, want)


def test_crop_tensor_and_crop():
    def body(x, ref, off):
        a = L.crop_tensor(x, shape=[-1, 2, 3], offsets=[0, 1, off])
        b = L.crop_tensor(x, shape=L.cast(L.concat([off, off, off + 1], 0), "int32"))
        c = L.crop(x, shape=ref, offsets=[0, 1, 1])
        assert a.shape == (-1, 2, 3) and c.shape == (-1, 3, 3)
        return a, b, c, fluid.gradients(L.reduce_sum(a) + L.reduce_sum(c), [x])[0]
    p = compile_one(body, {"x": ([-1, 4, 5], "float64", False),
                           "ref": ([-1, 3, 3], "float64", True),
                           "off": ([1], "int32", True)})
    x = np.arange(40.0).reshape(2, 4, 5)
    a, b, c, grad = p.f(x, np.zeros((2, 3, 3)), np.array([2], "int32"))
    np.testing.assert_array_equal(a, x[:, 1:3, 2:5])
    np.testing.assert_array_equal(b, x[:2, :2, :3])
    np.testing.assert_array_equal(c, x[:, 1:4, 1:4])
    want = np.zeros_like(x)
    want[:, 1:3, 2:5] += 1
    want[:, 1:4, 1:4] += 1
    np.testing.assert_array_equal(grad, want)


def test_pad2d_and_pad_constant_like():
    def body(x, pads):
        a = L.pad2d(x, paddings=[1, 0, 2, 1], mode="reflect")
        b = L.pad2d(x, paddings=pads, mode="edge", data_format="NHWC")
        c = L.pad_constant_like(a, x, pad_value=-1.0)
        return a, b, c, fluid.gradients(L.reduce_sum(a * a), [x])[0]
    p = compile_one(body, {"x": ([-1, 2, 3, 3], "float64", False),
                           "pads": ([4], "int32", True)})
    x = np.arange(36.0).reshape(2, 2, 3, 3)
    a, b, c, grad = p.f(x, np.array([0, 1, 1, 0], "int32"))
    np.testing.assert_array_equal(a, np.pad(x, [(0, 0), (0, 0), (1, 0), (2, 1)], "reflect"))
    np.testing.assert_array_equal(b, np.pad(x, [(0, 0), (0, 1), (1, 0), (0, 0)], "edge"))
    np.testing.assert_array_equal(c[:, :, :3, :3], x)
    assert (c[:, :, 3:] == -1).all() and c.shape == a.shape
    assert grad.shape == x.shape


@pytest.mark.parametrize("call,error,match", [
    (lambda x: L.reshape(x, [0, "a"]), fluid.OpArgumentError,
     "reshape: shape must be a list of ints"),
    (lambda x: L.reshape(x, [0, L.cast(x, "float32")]), fluid.OpArgumentError,
     r"reshape: shape\[1\] must be an int32 or int64 Variable, got float32"),
    (lambda x: L.reshape(x, [-1], inplace="yes"), fluid.OpArgumentError,
     "inplace must be True or False"),
    (lambda x: L.slice(x, axes=[1], starts=np.array([0]), ends=[2]), fluid.OpArgumentError,
     "slice: starts must be a list of ints"),
    (lambda x: L.strided_slice(x, [1], [0], [4], [0]), fluid.ShapeError,
     "the stride for axis 1 is 0"),
    (lambda x: L.crop_tensor(x), fluid.OpArgumentError, "crop_tensor: give the shape"),
    (lambda x: L.crop_tensor(x, shape=[2, 5], offsets=[0, 1]), fluid.ShapeError,
     r"does not fit in X \[\?, 5\]"),
    (lambda x: L.crop(x, shape=[2, 2], offsets=[0, -1]), fluid.OpArgumentError,
     "crop: offsets must be >= 0"),
    (lambda x: L.pad2d(L.reshape(x, [-1, 1, 1, 5]), mode="wrap"), fluid.OpArgumentError,
     "pad2d: mode must be one of constant, reflect, edge"),
    (lambda x: L.pad2d(L.reshape(x, [-1, 1, 1, 5]), paddings=[1, 1]), fluid.OpArgumentError,
     r"paddings must be \[top, bottom, left, right\]"),
    (lambda x: L.pad_constant_like(x, L.concat([x, x], 1)), fluid.ShapeError,
     r"Y \[\?, 10\] must have X's rank and no dim larger"),
])
def test_layer_errors_name_the_problem_and_the_line(call, error, match):
    with pytest.raises(error, match=match) as info:
        compile_one(call, {"x": ([-1, 5], "float32", True)})
    assert "test_slicing_layers.py" in str(info.value)
