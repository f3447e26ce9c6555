"""What the port of Paddle 1.8's test_layers.py changed in the layers, each checked: the
per-row inputs Paddle's kernels read as their first N values (hsigmoid's label, nce's
sample weight), hsigmoid's loss in its input's dtype, and affine_grid's out_shape as a
1-D int var of unknown length."""
import numpy as np
import pytest
from paddle.layers_port import run_case

import fluid
from fluid_interactive.errors import KernelError, OpArgumentError

layers = fluid.layers


def _hsigmoid(label_shape, label):
    def build(self):
        x = self.data('x', shape=[2], dtype='float32', value=[[0.1, 0.9], [0.7, -0.3]])
        y = self.data('y', shape=label_shape, dtype='int64', value=label)
        return layers.hsigmoid(input=x, label=y, num_classes=2)
    return build


def test_hsigmoid_loss_keeps_its_inputs_dtype():
    out, = run_case(_hsigmoid([1], [[0], [1]]))
    assert out.dtype == np.float32 and out.shape == (2, 1)


def test_hsigmoid_reads_the_first_n_values_of_a_wider_label_as_paddle():
    # Paddle's TestBook.make_hsigmoid feeds a label [N, 2]: its kernel uses the first N
    # values in order, here [[0, 1], [1, 1]] -> classes 0 and 1
    wide, = run_case(_hsigmoid([2], [[0, 1], [1, 1]]))
    plain, = run_case(_hsigmoid([1], [[0], [1]]))
    np.testing.assert_array_equal(wide, plain)
    assert wide[0, 0] != wide[1, 0]


def _nce(weights):
    def build(self):
        x = self.data('x', shape=[4], dtype='float32', value=np.ones((2, 4)))
        y = self.data('y', shape=[1], dtype='int64', value=[[1], [3]])
        w = layers.assign(np.asarray(weights, dtype='float32'))
        return layers.nce(input=x, label=y, num_total_classes=5, num_neg_samples=2,
                          sampler="custom_dist", custom_dist=[0.2] * 5, seed=1,
                          sample_weight=w)
    return build


def test_nce_reads_the_first_n_sample_weights_as_paddle():
    # Paddle's TestLayer.test_nce weighs a batch of 1 with fill_constant([5, 1], 1)
    longer, = run_case(_nce([[2.0], [3.0], [9.0], [9.0], [9.0]]))
    exact, = run_case(_nce([[2.0], [3.0]]))
    np.testing.assert_array_equal(longer, exact)
    unweighted, = run_case(_nce([[1.0], [1.0]]))
    np.testing.assert_allclose(exact, unweighted * [[2.0], [3.0]], rtol=1e-6)


def test_nce_with_fewer_sample_weights_than_rows_fails_clearly():
    with pytest.raises(KernelError, match="SampleWeight holds 1 values for 2 rows"):
        run_case(_nce([[2.0]]))


def _grid(shape_values):
    def build(self):
        theta = self.data("theta", shape=[2, 3], dtype="float32",
                          value=[[[1, 0, 0], [0, 1, 0]]] * len(shape_values))
        out_shape = self.data("out_shape", shape=[-1], dtype="int32", value=shape_values)
        return layers.affine_grid(theta, out_shape), layers.affine_grid(theta, [4, 3, 5, 4])
    return build


def test_affine_grid_takes_an_out_shape_var_of_unknown_length():
    by_var, by_list = run_case(_grid([4, 3, 5, 4]), batch_size=4)
    assert by_var.shape == (4, 5, 4, 2)
    np.testing.assert_array_equal(by_var, by_list)


def test_affine_grid_out_shape_var_must_hold_four_values():
    with pytest.raises(KernelError, match=r"OutputShape must hold 4 values \[N, C, H, W\], "
                                          r"got 3"):
        run_case(_grid([3, 5, 4]), batch_size=3)
    with pytest.raises(OpArgumentError, match=r"out_shape as a Variable must be an int \[4\]"):
        run_case(lambda self: layers.affine_grid(
            self.data("theta", shape=[2, 3]), self.data("s", [2, 2], "int32")))


def test_label_smooth_with_an_integer_dtype_keeps_the_smoothed_values_as_paddle():
    # Paddle's make_label_smooth asks for dtype="int32"; its kernel writes the floats
    def build(self):
        label = self.data("label", shape=[1], dtype="int32", value=[[3], [0]])
        one_hot_label = layers.one_hot(input=label, depth=10)
        return (layers.label_smooth(label=one_hot_label, epsilon=0.1, dtype="int32"),
                layers.label_smooth(label=one_hot_label, epsilon=0.1, dtype="float64"))
    smooth, wide = run_case(build)
    want = np.full((2, 10), 0.01)
    want[0, 3] = want[1, 0] = 0.91
    assert smooth.dtype == np.float32 and wide.dtype == np.float64
    np.testing.assert_allclose(smooth, want, rtol=1e-6)
    np.testing.assert_allclose(wide, want, rtol=1e-6)
