"""The vision and normalisation layers inside compiled programs: each group's layers
checked plan against reference interpreter against finite differences (check_block),
a small CNN with group_norm that trains, the state of data_norm and spectral_norm,
fluid.nets' image blocks, the Bilinear initializer, and the layers' errors."""
import numpy as np
import pytest
from ops.harness import check_block

import fluid
from fluid_interactive.errors import OpArgumentError, ShapeError

L = fluid.layers


def _data(name, shape, dtype="float64", grad=True):
    return L.data(name=name, shape=shape, dtype=dtype, append_batch_size=False,
                  stop_gradient=not grad)


# --- each group in a compiled program --------------------------------------------------------

def test_convolution_and_pooling_layers_in_a_program(rng):
    def build():
        v = _data("v", [2, 2, 5, 6, 6])
        x = _data("x", [2, 7, 6, 3])                         # NHWC
        a = L.conv3d(v, 3, [2, 3, 3], padding="SAME", act="tanh",
                     param_attr=fluid.ParamAttr(initializer=fluid.initializer.Normal(0, 0.3)))
        b = L.pool3d(a, 2, "avg", 2, ceil_mode=True)
        c = L.conv3d_transpose(b, 2, filter_size=2, stride=2, data_format="NCDHW")
        d = L.conv2d(x, 4, 3, padding=[[0, 0], [1, 1], [0, 1], [0, 0]], data_format="NHWC")
        e = L.pool2d(d, 2, "max", 2, data_format="NHWC")
        f = L.adaptive_pool2d(L.transpose(d, [0, 3, 1, 2]), [3, 2], "avg")
        g = L.adaptive_pool3d(v, [2, 3, 2], "max")
        return [c, e, f, g]
    feeds = {"v": rng.standard_normal((2, 2, 5, 6, 6)), "x": rng.standard_normal((2, 7, 6, 3))}
    c, e, f, g = check_block(build, feeds, wrt=["v", "x"])
    assert c.shape == (2, 2, 6, 6, 6) and e.shape == (2, 3, 2, 4)
    assert f.shape == (2, 4, 3, 2) and g.shape == (2, 2, 2, 3, 2)


def test_normalisation_layers_in_a_program(rng):
    def build():
        x = _data("x", [3, 6, 4, 5])
        scale, bias = _data("scale", [6]), _data("bias", [6])
        a = L.group_norm(x, 3, param_attr=fluid.ParamAttr(), bias_attr=fluid.ParamAttr())
        b = L.instance_norm(x)
        c = L.lrn(x, n=3, alpha=0.1)
        d = L.affine_channel(x, scale=scale, bias=bias, act="tanh")
        w = L.spectral_norm(_data("w", [4, 6]), dim=0, power_iters=3)
        return [a, b, c, d, w]
    feeds = {"x": rng.standard_normal((3, 6, 4, 5)), "scale": rng.standard_normal(6),
             "bias": rng.standard_normal(6), "w": rng.standard_normal((4, 6))}
    check_block(build, feeds, wrt=["x", "scale", "bias"])


def test_resize_layers_in_a_program(rng):
    def build():
        x = _data("x", [2, 3, 5, 4])
        v = _data("v", [1, 2, 3, 4, 3])
        return [L.resize_bilinear(x, out_shape=[8, 7]), L.resize_nearest(x, scale=1.5),
                L.interpolate(x, out_shape=[3, 9], align_corners=False, align_mode=0),
                L.resize_trilinear(v, out_shape=[4, 3, 5]), L.image_resize_short(x, 6)]
    feeds = {"x": rng.standard_normal((2, 3, 5, 4)), "v": rng.standard_normal((1, 2, 3, 4, 3))}
    outs = check_block(build, feeds, wrt=["x", "v"])
    assert [o.shape for o in outs] == [(2, 3, 8, 7), (2, 3, 7, 6), (2, 3, 3, 9),
                                       (1, 2, 4, 3, 5), (2, 3, 8, 6)]


def test_sampling_layers_in_a_program(rng):
    def build():
        x = _data("x", [2, 3, 6, 5])
        theta = _data("theta", [2, 2, 3])
        grid = L.affine_grid(theta, [2, 3, 4, 4])
        return [L.unfold(x, [2, 3], strides=[1, 2], paddings=1), L.im2sequence(x, [3, 2], 2),
                L.grid_sampler(x, grid)]
    feeds = {"x": rng.standard_normal((2, 3, 6, 5)),
             "theta": np.array([[[0.9, 0.1, 0.05], [-0.1, 0.8, 0.1]]] * 2)
             + rng.standard_normal((2, 2, 3)) * 0.05}
    cols, seq, sampled = check_block(build, feeds, wrt=["x", "theta"])
    assert cols.shape == (2, 18, 21) and seq.shape == (2, 9, 18)
    assert sampled.shape == (2, 3, 4, 4)


def test_resize_to_a_size_given_by_a_tensor():
    class Resize(fluid.Program):
        @fluid.network("x", "size")
        def f(self, x, size):
            x = fluid.layers.data(name="x", shape=[2, 4, 4])
            size = fluid.layers.data(name="size", shape=[2], dtype="int32",
                                     append_batch_size=False)
            out = L.resize_nearest(x, out_shape=size)
            assert tuple(out.shape) == (-1, 2, -1, -1)
            return out
    prog = Resize().Compile()
    x = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)
    got = prog.f(x, np.array([2, 8], np.int32))
    # align_corners: rows 0 and 3 (ratio 3), columns int(3/7 * k + 0.5)
    np.testing.assert_array_equal(got, x[:, :, [0, 3]][:, :, :, [0, 0, 1, 1, 2, 2, 3, 3]])
    assert prog.f(x, np.array([3, 5], np.int32)).shape == (1, 2, 3, 5)


# --- training --------------------------------------------------------------------------------

class GroupNormNet(fluid.Program):
    @fluid.network("img", "label")
    def train(self, img, label):
        img = L.data(name="img", shape=[3, 8, 8])
        label = L.data(name="label", shape=[1], dtype="int64")
        h = L.conv2d(img, 8, 3, padding=1)
        h = L.group_norm(h, 4, param_attr=fluid.ParamAttr(), bias_attr=fluid.ParamAttr(),
                         act="relu")
        h = L.pool2d(h, 2, pool_stride=2)
        h = L.instance_norm(h)
        logits = L.fc(L.adaptive_pool2d(h, 2, "avg"), size=3)
        loss = L.mean(L.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.Adam(learning_rate=0.02).minimize(loss)
        return loss


def test_a_small_cnn_with_group_norm_trains(rng):
    labels = rng.integers(0, 3, 24)
    x = rng.normal(0, 0.3, (24, 3, 8, 8)).astype(np.float32)
    for i, c in enumerate(labels):
        x[i, c, 2 * c:2 * c + 3] += 1.5
    net = GroupNormNet().Compile(seed=3)
    assert {"group_norm_0.w_0", "group_norm_0.b_0", "instance_norm_0.w_0"} <= \
        set(net.parameters())
    losses = [net.train(x, labels.reshape(-1, 1)) for _ in range(15)]
    assert losses[-1] < 0.6 * losses[0], losses


def test_data_norm_accumulates_statistics_in_training_only(rng):
    class DataNorm(fluid.Program):
        def net(self, x):
            return L.data_norm(x, slot_dim=-1, summary_decay_rate=0.5)

        @fluid.network("x")
        def train(self, x):
            x = L.data(name="x", shape=[3])
            w = L.create_parameter([3, 1], "float32")
            loss = L.mean(L.matmul(self.net(x), w))
            fluid.optimizer.SGD(0.1).minimize(loss)
            return loss

        @fluid.network("x")
        def infer(self, x):
            return self.net(L.data(name="x", shape=[3]))
    prog = DataNorm().Compile()
    assert "dn.batch_size" not in prog.parameters()       # state, not trained
    x = rng.random((4, 3)).astype(np.float32)
    prog.infer(x)
    np.testing.assert_allclose(prog.get_var("dn.batch_size"), 1e4)
    prog.train(x)
    np.testing.assert_allclose(prog.get_var("dn.batch_size"), 0.5 * 1e4 + 4)
    np.testing.assert_allclose(prog.get_var("dn.batch_sum"), x.sum(0), rtol=1e-6)


def test_spectral_norm_keeps_u_and_v_and_trains_the_weight(rng):
    class Spectral(fluid.Program):
        @fluid.network("x")
        def train(self, x):
            x = L.data(name="x", shape=[5])
            w = L.create_parameter([5, 4], "float32", name="w")
            y = L.matmul(x, L.spectral_norm(w, power_iters=2))
            loss = L.mean(y * y)
            fluid.optimizer.SGD(0.5).minimize(loss)
            return loss
    prog = Spectral().Compile(seed=1)
    u, v = prog.get_var("spectral_norm_0.w_0"), prog.get_var("spectral_norm_0.w_1")
    assert u.shape == (5,) and v.shape == (4,)
    w0 = prog.get_var("w").copy()
    prog.train(rng.random((6, 5)).astype(np.float32))
    assert not np.allclose(prog.get_var("w"), w0)
    np.testing.assert_array_equal(prog.get_var("spectral_norm_0.w_0"), u)
    np.testing.assert_array_equal(prog.get_var("spectral_norm_0.w_1"), v)


def test_batch_norm_momentum_from_a_variable_and_inplace_abn(rng):
    class BN(fluid.Program):
        @fluid.network("x", "m")
        def train(self, x, m):
            x = L.data(name="x", shape=[3, 2, 2])
            m = L.data(name="m", shape=[1], dtype="float32", append_batch_size=False)
            a = L.batch_norm(x, momentum=m, moving_mean_name="mean_a")
            b = L.inplace_abn(x, act="leaky_relu", act_alpha=0.2, moving_mean_name="mean_b")
            c = L.leaky_relu(L.batch_norm(x, moving_mean_name="mean_c"), alpha=0.2)
            loss = L.mean(a) + L.mean(b)
            fluid.optimizer.SGD(1e-9).minimize(loss)
            return b, c
    prog = BN().Compile()
    x = rng.random((4, 3, 2, 2)).astype(np.float32)
    b, c = prog.train(x, np.array([0.25], np.float32))
    np.testing.assert_allclose(b, c, rtol=1e-6)
    np.testing.assert_allclose(prog.get_var("mean_a"), 0.75 * x.mean(axis=(0, 2, 3)), rtol=1e-5)
    np.testing.assert_allclose(prog.get_var("mean_b"), 0.1 * x.mean(axis=(0, 2, 3)), rtol=1e-5)


# --- fluid.nets, initializer -----------------------------------------------------------------

def test_nets_image_blocks():
    assert not hasattr(L, "simple_img_conv_pool") and "simple_img_conv_pool" not in L.__all__

    class VGG(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data(name="x", shape=[3, 8, 8])
            h = fluid.nets.img_conv_group(x, [4, 6], pool_size=2, conv_act="relu",
                                          conv_with_batchnorm=[True, False],
                                          conv_batchnorm_drop_rate=[0.5, 0.0], pool_stride=2)
            return fluid.nets.simple_img_conv_pool(h, 5, 3, pool_size=2, pool_stride=2,
                                                   act="relu")
    prog = VGG().Compile()
    types = [op.type for op in prog.program.block("f").ops]
    assert types.count("conv2d") == 3 and types.count("batch_norm") == 1
    assert types.count("dropout") == 1 and types.count("pool2d") == 2
    assert prog.f(np.zeros((2, 3, 8, 8), np.float32)).shape == (2, 5, 1, 1)


def test_bilinear_initializer_upsamples_by_interpolation():
    class Up(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data(name="x", shape=[1, 4, 4])
            return L.conv2d_transpose(x, 1, filter_size=4, stride=2, padding=1,
                                      param_attr=fluid.ParamAttr(
                                          initializer=fluid.initializer.Bilinear()),
                                      bias_attr=False)
    prog = Up().Compile()
    w = prog.get_var("conv2d_transpose_0.w_0")
    np.testing.assert_allclose(w[0, 0], np.outer([0.25, 0.75, 0.75, 0.25],
                                                 [0.25, 0.75, 0.75, 0.25]))
    flat = np.ones((1, 1, 4, 4), np.float32)
    np.testing.assert_allclose(prog.f(flat)[0, 0, 1:-1, 1:-1], 1.0)   # the inside stays 1

    class Bad(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data(name="x", shape=[1, 4, 4])
            return L.conv2d(x, 2, [3, 2], param_attr=fluid.ParamAttr(
                initializer=fluid.initializer.BilinearInitializer()))
    with pytest.raises(OpArgumentError, match=r"square kernels.*\[2, 1, 3, 2\]"):
        Bad().Compile()


# --- errors ----------------------------------------------------------------------------------

def _traced(body):
    class P(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data(name="x", shape=[3, 6, 6])
            return body(x)
    return P().Compile()


@pytest.mark.parametrize("body,error,match", [
    (lambda x: L.conv2d(x, 2, 3, data_format="NWHC"), OpArgumentError,
     "data_format must be 'NCHW' or 'NHWC'"),
    (lambda x: L.conv3d(x, 2, 3), ShapeError, "must be a 5-D NCDHW batch"),
    (lambda x: L.conv2d(x, 2, 3, padding="FULL"), OpArgumentError, "'SAME' or 'VALID'"),
    (lambda x: L.conv2d(x, 2, 3, padding=[[1, 1], [0, 0], [1, 1], [1, 1]]), OpArgumentError,
     r"\[0, 0\] for the batch and the channel"),
    (lambda x: L.pool2d(x, 2, pool_padding="VALID", ceil_mode=True), OpArgumentError,
     "does not go with ceil_mode"),
    (lambda x: L.adaptive_pool2d(x, 2, "avg", require_index=True), OpArgumentError,
     "require_index=True needs pool_type='max'"),
    (lambda x: L.group_norm(x, 2), OpArgumentError, "dividing the 3 channels"),
    (lambda x: L.image_resize(x), OpArgumentError, "give out_shape or scale"),
    (lambda x: L.resize_trilinear(x, [2, 2, 2]), ShapeError, "must be a 5-D NCDHW batch"),
    (lambda x: L.affine_channel(x, scale=None), OpArgumentError, "scale must be given"),
    (lambda x: L.batch_norm(x, momentum=np.array([0.9])), OpArgumentError,
     "momentum must be a float or a \\[1\\] float Variable"),
    (lambda x: L.grid_sampler(x, np.zeros((1, 2, 2, 2))), OpArgumentError,
     "must be a fluid Variable"),
    (lambda x: L.im2sequence(x, 2, input_image_size=x), OpArgumentError,
     "input_image_size .* is not supported"),
])
def test_layer_errors_name_the_problem_and_the_users_line(body, error, match):
    with pytest.raises(error, match=match) as info:
        _traced(body)
    assert "test_vision_layers.py" in str(info.value)
