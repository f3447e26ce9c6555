"""Convolution and normalisation layers inside programs: a tiny conv net trains, its
inference method uses the moving statistics, and the layers' parameters, names and errors
follow Paddle."""
import math

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import fluid
from fluid_interactive.errors import OpArgumentError, ShapeError

C_IN, SIZE, FILTERS, CLASSES = 2, 8, 4, 3


class TinyConvNet(fluid.Program):
    learning_rate = 0.05

    def net(self, img):
        with fluid.var_scope("net"):
            h = fluid.layers.conv2d(img, num_filters=FILTERS, filter_size=3, padding=1)
            h = fluid.layers.batch_norm(h, act="relu", momentum=0.9)
            h = fluid.layers.pool2d(h, pool_size=2, pool_stride=2)
            return fluid.layers.fc(h, size=CLASSES)

    @fluid.network("img", "label")
    def train(self, img, label):
        img = fluid.layers.data(name="img", shape=[C_IN, SIZE, SIZE])
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(self.net(img), label))
        fluid.optimizer.Momentum(learning_rate=self.learning_rate, momentum=0.9).minimize(loss)
        return loss

    @fluid.network("img")
    def infer(self, img):
        img = fluid.layers.data(name="img", shape=[C_IN, SIZE, SIZE])
        return self.net(img)

    @fluid.network("img")
    def infer_with_batch_stats(self, img):
        img = fluid.layers.data(name="img", shape=[C_IN, SIZE, SIZE])
        with fluid.var_scope("net"):
            h = fluid.layers.conv2d(img, num_filters=FILTERS, filter_size=3, padding=1)
            h = fluid.layers.batch_norm(h, act="relu", is_test=False)
            h = fluid.layers.pool2d(h, pool_size=2, pool_stride=2)
            return fluid.layers.fc(h, size=CLASSES)


def make_data(seed, n=32):
    """Three classes told apart by where a bright blob sits."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, n)
    x = rng.normal(0, 0.3, (n, C_IN, SIZE, SIZE)).astype(np.float32)
    for i, c in enumerate(labels):
        x[i, :, 2 * c:2 * c + 3, 2 * c:2 * c + 3] += 2.0
    return x, labels.reshape(n, 1).astype(np.int64)


# --- NumPy forward of the same model ---------------------------------------------------------

P = "net/"


def np_conv(x, w, b, pad):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = sliding_window_view(xp, w.shape[2:], axis=(2, 3))      # N C OH OW kh kw
    return np.einsum("nchwij,ocij->nohw", win, w) + b.reshape(1, -1, 1, 1)


def np_forward(p, x, mean, var, eps=1e-5):
    h = np_conv(x.astype(np.float64), p[P + "conv2d_0.w_0"], p[P + "conv2d_0.b_0"], 1)
    shape = (1, -1, 1, 1)
    h = (h - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    h = h * p[P + "batch_norm_0.w_0"].reshape(shape) + p[P + "batch_norm_0.b_0"].reshape(shape)
    h = np.maximum(h, 0)
    n, c, hh, ww = h.shape
    h = h.reshape(n, c, hh // 2, 2, ww // 2, 2).max(axis=(3, 5))
    return h.reshape(n, -1) @ p[P + "fc_0.w_0"] + p[P + "fc_0.b_0"]


def conv_out(p, x):
    return np_conv(x.astype(np.float64), p[P + "conv2d_0.w_0"], p[P + "conv2d_0.b_0"], 1)


@pytest.fixture(scope="module")
def trained():
    prog = TinyConvNet().Compile(seed=11)
    losses = []
    for step in range(30):
        x, y = make_data(step % 5)
        losses.append(prog.train(x, y))
    return prog, losses


def test_parameters_and_state_follow_paddle_names(trained):
    prog, _ = trained
    assert sorted(prog.parameters()) == sorted(
        P + n for n in ("conv2d_0.w_0", "conv2d_0.b_0", "batch_norm_0.w_0", "batch_norm_0.b_0",
                        "fc_0.w_0", "fc_0.b_0"))
    # The moving statistics are persistable state, not parameters.
    names = prog.var_names()
    assert P + "batch_norm_0.w_1" in names and P + "batch_norm_0.w_2" in names
    assert prog.parameters()[P + "conv2d_0.w_0"].shape == (FILTERS, C_IN, 3, 3)


def test_tiny_conv_net_learns(trained):
    _, losses = trained
    assert all(np.isfinite(losses))
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])


def test_training_step_updates_the_moving_statistics():
    prog = TinyConvNet().Compile(seed=3)
    assert np.all(prog.get_var(P + "batch_norm_0.w_1") == 0)
    assert np.all(prog.get_var(P + "batch_norm_0.w_2") == 1)
    x, y = make_data(0)
    p = {k: v.astype(np.float64) for k, v in prog.parameters().items()}
    h = conv_out(p, x)
    mu, var = h.mean(axis=(0, 2, 3)), h.var(axis=(0, 2, 3))
    prog.train(x, y)
    np.testing.assert_allclose(prog.get_var(P + "batch_norm_0.w_1"), 0.1 * mu, rtol=1e-4,
                               atol=1e-6)
    np.testing.assert_allclose(prog.get_var(P + "batch_norm_0.w_2"), 0.9 + 0.1 * var,
                               rtol=1e-4)


def test_infer_uses_the_moving_statistics(trained):
    prog, _ = trained
    x, _ = make_data(99, n=8)
    before = {n: prog.get_var(P + f"batch_norm_0.{n}") for n in ("w_1", "w_2")}
    out = prog.infer(x)
    p = {k: v.astype(np.float64) for k, v in prog.parameters().items()}
    expected = np_forward(p, x, before["w_1"], before["w_2"])
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    # ... and not the batch's statistics, which give something else.
    h = conv_out(p, x)
    batch = np_forward(p, x, h.mean(axis=(0, 2, 3)), h.var(axis=(0, 2, 3)))
    assert not np.allclose(out, batch, rtol=1e-3, atol=1e-3)
    # Inference leaves the moving statistics alone.
    for n, v in before.items():
        np.testing.assert_array_equal(prog.get_var(P + f"batch_norm_0.{n}"), v)
    # is_test=False forces the batch statistics (and their update) even without an optimizer.
    np.testing.assert_allclose(prog.infer_with_batch_stats(x), batch, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(prog.get_var(P + "batch_norm_0.w_1"),
                               0.9 * before["w_1"] + 0.1 * h.mean(axis=(0, 2, 3)), rtol=1e-4,
                               atol=1e-6)


def test_batch_of_one_infers(trained):
    prog, _ = trained
    x, _ = make_data(7, n=1)
    assert prog.infer(x).shape == (1, CLASSES)


# --- layer details ----------------------------------------------------------------------------

def _global_ops(prog, op_type):
    return [op for op in prog.program.global_block().ops if op.type == op_type]


def test_conv2d_default_filter_init_is_paddles_normal():
    class P1(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name="x", shape=[3, 10, 10])
            return fluid.layers.conv2d(x, num_filters=6, filter_size=[5, 3], bias_attr=False)
    prog = P1().Compile(seed=1)
    (init,) = _global_ops(prog, "gaussian_random")
    assert init.outputs["Out"] == ["conv2d_0.w_0"]
    # Paddle 1.8: 2 / (kh * kw * C)
    assert init.attrs["std"] == pytest.approx(math.sqrt(2.0 / (5 * 3 * 3)))
    assert prog.parameters()["conv2d_0.w_0"].shape == (6, 3, 5, 3)
    assert prog.f(np.zeros((2, 3, 10, 10), np.float32)).shape == (2, 6, 6, 8)


def test_conv_layers_with_groups_stride_dilation_and_act():
    class P2(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name="x", shape=[4, 9, 9])
            h = fluid.layers.conv2d(x, num_filters=6, filter_size=3, stride=2, padding=1,
                                    groups=2, act="relu")
            h = fluid.layers.conv2d(h, num_filters=2, filter_size=2, dilation=2)
            return fluid.layers.pool2d(h, pool_type="avg", global_pooling=True)
    prog = P2().Compile(seed=2)
    p = {k: v.astype(np.float64) for k, v in prog.parameters().items()}
    x = np.random.default_rng(0).standard_normal((3, 4, 9, 9)).astype(np.float32)
    from ops.test_conv_ops import ref_conv2d
    h = ref_conv2d(x, p["conv2d_0.w_0"], [2, 2], [1, 1], [1, 1], 2) + \
        p["conv2d_0.b_0"].reshape(1, -1, 1, 1)
    h = np.maximum(h, 0)
    h = ref_conv2d(h, p["conv2d_1.w_0"], [1, 1], [0, 0], [2, 2], 1) + \
        p["conv2d_1.b_0"].reshape(1, -1, 1, 1)
    np.testing.assert_allclose(prog.f(x), h.mean(axis=(2, 3), keepdims=True), rtol=1e-4,
                               atol=1e-5)


def test_conv2d_transpose_generator_upsamples_and_trains():
    class Gen(fluid.Program):
        def gen(self, z):
            with fluid.var_scope("g"):
                h = fluid.layers.fc(z, size=4 * 4 * 4, act="relu")
                h = fluid.layers.reshape(h, [-1, 4, 4, 4])
                h = fluid.layers.conv2d_transpose(h, num_filters=2, filter_size=4, stride=2,
                                                  padding=1, act="relu")
                return fluid.layers.conv2d_transpose(h, num_filters=1, output_size=16,
                                                     stride=2, padding=1, act="tanh")

        @fluid.network("z", "target")
        def train(self, z, target):
            z = fluid.layers.data(name="z", shape=[5])
            target = fluid.layers.data(name="target", shape=[1, 16, 16])
            loss = fluid.layers.mean(fluid.layers.square_error_cost(self.gen(z), target))
            fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
            return loss

        @fluid.network("z")
        def sample(self, z):
            z = fluid.layers.data(name="z", shape=[5])
            return self.gen(z)

    prog = Gen().Compile(seed=5)
    params = prog.parameters()
    assert params["g/conv2d_transpose_0.w_0"].shape == (4, 2, 4, 4)
    assert params["g/conv2d_transpose_1.w_0"].shape == (2, 1, 4, 4)   # derived filter size
    rng = np.random.default_rng(1)
    z = rng.standard_normal((8, 5)).astype(np.float32)
    target = np.tile(np.linspace(-0.5, 0.5, 16, dtype=np.float32), (8, 1, 16, 1))
    assert prog.sample(z).shape == (8, 1, 16, 16)
    losses = [prog.train(z, target) for _ in range(40)]
    assert losses[-1] < 0.3 * losses[0]


def test_text_layers_train_and_infer():
    class Text(fluid.Program):
        def body(self, ids):
            with fluid.var_scope("t"):
                e = fluid.layers.embedding(ids, size=[20, 8], padding_idx=0)
                e = fluid.layers.flatten(e, axis=1)
                h = fluid.layers.layer_norm(e, act="gelu")
                h = fluid.layers.dropout(h, dropout_prob=0.2,
                                         dropout_implementation="upscale_in_train")
                h = fluid.layers.fc(h, size=16, act="swish")
                return fluid.layers.log_softmax(fluid.layers.fc(h, size=2))

        @fluid.network("ids", "label")
        def train(self, ids, label):
            ids = fluid.layers.data(name="ids", shape=[3, 1], dtype="int64")
            label = fluid.layers.data(name="label", shape=[2])
            loss = -fluid.layers.mean(fluid.layers.reduce_sum(self.body(ids) * label, dim=1))
            fluid.optimizer.Adam(learning_rate=0.02).minimize(loss)
            return loss

        @fluid.network("ids")
        def infer(self, ids):
            ids = fluid.layers.data(name="ids", shape=[3, 1], dtype="int64")
            return self.body(ids)

    prog = Text().Compile(seed=9)
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 20, (64, 3, 1)).astype(np.int64)
    cls = (ids[:, 0, 0] >= 10).astype(np.int64)
    label = np.eye(2, dtype=np.float32)[cls]
    losses = [prog.train(ids, label) for _ in range(60)]
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])
    out = prog.infer(ids)
    np.testing.assert_array_equal(prog.infer(ids), out)     # inference: no dropout noise
    assert (out.argmax(axis=1) == cls).mean() > 0.9


def test_embedding_padding_row_gets_no_gradient():
    class Emb(fluid.Program):
        @fluid.network("ids")
        def train(self, ids):
            ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
            e = fluid.layers.embedding(ids, size=[4, 3], padding_idx=-1)
            loss = fluid.layers.mean(e)
            fluid.optimizer.SGD(learning_rate=1.0).minimize(loss)
            return loss
    prog = Emb().Compile(seed=1)
    before = prog.parameters()["embedding_0.w_0"]
    prog.train(np.array([[0], [3], [3], [1]], np.int64))
    after = prog.parameters()["embedding_0.w_0"]
    np.testing.assert_array_equal(after[3], before[3])     # padding row (-1 -> 3)
    np.testing.assert_array_equal(after[2], before[2])     # unused row
    np.testing.assert_allclose(after[0], before[0] - 1.0 / 12, rtol=1e-6)


def test_pad_one_hot_and_simple_img_conv_pool():
    class Misc(fluid.Program):
        @fluid.network("x", "ids")
        def f(self, x, ids):
            x = fluid.layers.data(name="x", shape=[1, 12, 12])
            ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
            h = fluid.nets.simple_img_conv_pool(x, num_filters=3, filter_size=5, pool_size=2,
                                                  pool_stride=2, act="elu")
            return (fluid.layers.pad(h, [0, 0, 0, 1, 1, 0, 2, 2], pad_value=-1.0),
                    fluid.layers.one_hot(ids, depth=4))
    prog = Misc().Compile(seed=1)
    padded, hot = prog.f(np.ones((2, 1, 12, 12), np.float32), np.array([[2], [0]], np.int64))
    assert padded.shape == (2, 4, 5, 8)
    assert np.all(padded[:, 3] == -1.0) and np.all(padded[:, :, 0] == -1.0)
    np.testing.assert_array_equal(hot, [[0, 0, 1, 0], [1, 0, 0, 0]])


def test_layer_errors_point_at_the_users_line():
    class Bad(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name="x", shape=[12])
            return fluid.layers.conv2d(x, num_filters=2, filter_size=3)
    with pytest.raises(ShapeError, match=r"4-D NCHW(.|\n)*test_conv_layers.py"):
        Bad().Compile()

    class TooBig(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name="x", shape=[1, 4, 4])
            return fluid.layers.conv2d(x, num_filters=2, filter_size=5)
    with pytest.raises(ShapeError, match=r"larger than the padded Input(.|\n)*"
                                         r"test_conv_layers.py"):
        TooBig().Compile()

    class BadGroups(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name="x", shape=[3, 8, 8])
            return fluid.layers.conv2d(x, num_filters=4, filter_size=3, groups=2)
    with pytest.raises(ShapeError, match="groups=2 must divide"):
        BadGroups().Compile()

    class NoPoolSize(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.layers.data(name="x", shape=[3, 8, 8])
            return fluid.layers.pool2d(x)
    with pytest.raises(OpArgumentError, match="pool_size is required"):
        NoPoolSize().Compile()


def test_conv_net_trains_identically_to_its_reference_interpreter():
    """The compiled plan (buffers, code generation) agrees with the op interpreter."""
    from fluid_interactive.ops.interpret import run_ops
    prog = TinyConvNet().Compile(seed=4)
    x, y = make_data(1, n=4)
    block = prog.program.block("train")
    env = {n: prog.get_var(n) for n in prog.var_names()}
    env.update(img=x, label=y)
    run_ops(block.ops, env)
    loss = prog.train(x, y)
    np.testing.assert_allclose(loss, float(env[block.returns]), rtol=1e-5)
    for name in prog.var_names():
        np.testing.assert_allclose(prog.get_var(name), env[name], rtol=1e-4, atol=1e-6,
                                   err_msg=name)


def test_network_is_test_flag_decides_the_mode():
    class Modes(TinyConvNet):
        @fluid.network("img", is_test=False)
        def forward_training_mode(self, img):
            img = fluid.layers.data(name="img", shape=[C_IN, SIZE, SIZE])
            return self.net(img)

    prog = Modes().Compile(seed=6)
    x, y = make_data(2, n=8)
    for _ in range(3):
        prog.train(x, y)
    p = {k: v.astype(np.float64) for k, v in prog.parameters().items()}
    h = conv_out(p, x)
    mean, var = (prog.get_var(P + f"batch_norm_0.w_{k}") for k in (1, 2))
    np.testing.assert_allclose(prog.infer(x), np_forward(p, x, mean, var), rtol=1e-4,
                               atol=1e-4)
    np.testing.assert_allclose(prog.forward_training_mode(x),
                               np_forward(p, x, h.mean(axis=(0, 2, 3)), h.var(axis=(0, 2, 3))),
                               rtol=1e-4, atol=1e-4)


def test_saved_program_keeps_the_moving_statistics(trained, tmp_path):
    prog, _ = trained
    x, _ = make_data(5, n=4)
    expected = prog.infer(x)
    prog.save(str(tmp_path / "convnet"))
    loaded = fluid.load(str(tmp_path / "convnet"))
    for k in ("w_1", "w_2"):
        np.testing.assert_array_equal(loaded.get_var(P + f"batch_norm_0.{k}"),
                                      prog.get_var(P + f"batch_norm_0.{k}"))
    np.testing.assert_allclose(loaded.infer(x), expected, rtol=1e-6)


@pytest.mark.parametrize("act,pool_padding", [("relu", 0), (None, 1)])
def test_simple_img_conv_pool_pools_before_bias_and_relu_with_the_same_results(rng, act,
                                                                               pool_padding):
    def make(fused):
        class Block(fluid.Program):
            @fluid.network("x", "y")
            def train(self, x, y):
                x = fluid.layers.data(name="x", shape=[2, 10, 10])
                y = fluid.layers.data(name="y", shape=[1], dtype="int64")
                kw = {"pool_size": 2, "pool_stride": 2, "pool_padding": pool_padding}
                if fused:
                    h = fluid.nets.simple_img_conv_pool(x, num_filters=4, filter_size=3,
                                                          act=act, **kw)
                else:
                    h = fluid.layers.pool2d(fluid.layers.conv2d(x, 4, 3, act=act),
                                            pool_type="max", **kw)
                logits = fluid.layers.fc(h, size=3)
                loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
                fluid.optimizer.SGD(learning_rate=0.2).minimize(loss)
                return loss
        return Block().Compile(seed=4)

    fused, plain = make(True), make(False)
    ops = [op.type for op in fused.program.block("train").ops[:4]]
    assert ops[:3] == ["conv2d", "pool2d", "elementwise_add"]
    assert set(fused.parameters()) == set(plain.parameters())
    plain.set_parameters({k: v + 0.3 * (k.endswith("b_0") and "conv" in k)   # biases matter
                          for k, v in fused.parameters().items()})
    fused.set_parameters(plain.parameters())
    for _ in range(5):
        x = rng.standard_normal((8, 2, 10, 10)).astype(np.float32)
        y = rng.integers(0, 3, (8, 1))
        assert fused.train(x, y) == pytest.approx(plain.train(x, y), rel=1e-6)
    for name, value in fused.parameters().items():
        np.testing.assert_allclose(value, plain.parameters()[name], rtol=1e-5, atol=1e-6)
