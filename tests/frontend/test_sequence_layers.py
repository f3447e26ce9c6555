"""Sequence layers inside programs: DESIGN §1's LSTM classifier runs as written and
learns, dynamic_lstm / dynamic_gru / lstm_unit / gru_unit / the sequence_* layers give what
a NumPy model of the same parameters gives, plans do not grow with T, and a Transformer
encoder block written with fluid.nets.scaled_dot_product_attention ignores padded keys."""
import numpy as np
import pytest
from ops.test_rnn_ops import ref_gru, ref_lstm
from ops.test_sequence_ops import ref_pool, ref_reverse, ref_softmax

import fluid
from fluid_interactive.errors import OpArgumentError, ShapeError

H = 8


class Classifier(fluid.Program):
    """DESIGN §1, as written there (plus the classifier head)."""

    @fluid.network("x", "lengths", "label")
    def train_step(self, x, lengths, label):
        x = fluid.layers.data(name='x', shape=[-1, -1, 12], dtype='float32',
                              append_batch_size=False)
        lengths = fluid.layers.data(name='lengths', shape=[-1], dtype='int64',
                                    append_batch_size=False)
        label = fluid.layers.data(name='label', shape=[1], dtype='int64')
        proj = fluid.layers.fc(input=x, size=4 * 64, num_flatten_dims=2)     # [B, T, 4H]
        hidden, cell = fluid.layers.dynamic_lstm(input=proj, size=4 * 64, lengths=lengths)
        last = fluid.layers.sequence_last_step(hidden, lengths=lengths)       # [B, H]
        logits = fluid.layers.fc(input=last, size=3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
        return loss


def classes_by_sign(rng, b, t):
    """The class is which of three features has the largest sum over the valid steps."""
    x = rng.standard_normal((b, t, 12)).astype(np.float32)
    n = rng.integers(1, t + 1, b).astype(np.int64)
    valid = np.arange(t)[None, :, None] < n[:, None, None]
    y = (x[..., :3] * valid).sum(1).argmax(1)
    return x, n, y.reshape(b, 1).astype(np.int64)


def test_the_design_example_runs_as_written_and_learns(rng):
    prog = Classifier().Compile(seed=0)
    first = [prog.train_step(*classes_by_sign(rng, 16, t)) for t in (9, 5, 13)]  # any B, T
    assert all(isinstance(v, float) and np.isfinite(v) for v in first)
    x, n, y = classes_by_sign(np.random.default_rng(7), 64, 10)
    losses = [prog.train_step(x, n, y) for _ in range(60)]
    assert losses[-1] < 0.5 * losses[0]


def test_plans_do_not_grow_with_the_sequence_length(rng):
    """One fused op per recurrence: the generated code for T = 1000 is the code for
    T = 10, line for line, except for the shapes in its comments."""
    prog = Classifier().Compile(seed=0)
    sources = []
    for t in (10, 1000):
        prog.train_step(*classes_by_sign(rng, 4, t))
        sources.append(prog.train_step.source)
    short, long = (s.replace("1000", "10") for s in sources)
    assert short == long


def lstm_net(x, lengths, reverse=False, peep=True):
    proj = fluid.layers.fc(input=x, size=4 * H, num_flatten_dims=2)
    return fluid.layers.dynamic_lstm(input=proj, size=4 * H, lengths=lengths,
                                     use_peepholes=peep, is_reverse=reverse)


class Layers(fluid.Program):
    reverse = False

    def inputs(self):
        x = fluid.layers.data(name='x', shape=[-1, -1, 5], dtype='float64',
                              append_batch_size=False)
        n = fluid.layers.data(name='lengths', shape=[-1], dtype='int64',
                              append_batch_size=False)
        return x, n

    @fluid.network("x", "lengths")
    def lstm(self, x, lengths):
        x, n = self.inputs()
        with fluid.var_scope("net"):
            proj = fluid.layers.fc(input=x, size=4 * H, num_flatten_dims=2)
            return proj, *fluid.layers.dynamic_lstm(input=proj, size=4 * H, lengths=n,
                                                    is_reverse=self.reverse)

    @fluid.network("x", "lengths")
    def gru(self, x, lengths):
        x, n = self.inputs()
        with fluid.var_scope("gru_net"):
            proj = fluid.layers.fc(input=x, size=3 * H, num_flatten_dims=2)
            return proj, fluid.layers.dynamic_gru(input=proj, size=H, lengths=n,
                                                  is_reverse=self.reverse, origin_mode=True)

    @fluid.network("x", "lengths")
    def pools(self, x, lengths):
        x, n = self.inputs()
        out = {k: fluid.layers.sequence_pool(x, k, lengths=n)
               for k in ("sum", "average", "sqrt", "max", "first", "last")}
        out["last_step"] = fluid.layers.sequence_last_step(x, lengths=n)
        out["first_step"] = fluid.layers.sequence_first_step(x, lengths=n)
        out["reverse"] = fluid.layers.sequence_reverse(x, lengths=n)
        scores = fluid.layers.reduce_sum(x, dim=2)
        out["softmax"] = fluid.layers.sequence_softmax(scores, lengths=n)
        out["mask"] = fluid.layers.sequence_mask(n, maxlen=7, dtype='float32')
        out["longest"] = fluid.layers.sequence_mask(n)
        return out


@pytest.mark.parametrize("reverse", [False, True])
def test_dynamic_lstm_and_gru_match_numpy(rng, reverse):
    prog = Layers(reverse=reverse).Compile(seed=0)
    x = rng.standard_normal((4, 7, 5))
    n = np.array([7, 3, 0, 5], np.int64)
    p = prog.parameters()
    proj, hidden, cell = prog.lstm(x, n)
    want = ref_lstm(proj, p["net/lstm_0.w_0"], p["net/lstm_0.b_0"], Lengths=n,
                    is_reverse=reverse)
    np.testing.assert_allclose(hidden, want["Hidden"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(cell, want["Cell"], rtol=1e-10, atol=1e-12)
    assert p["net/lstm_0.w_0"].shape == (H, 4 * H) and p["net/lstm_0.b_0"].shape == (1, 7 * H)
    proj, hidden = prog.gru(x, n)
    want = ref_gru(proj, p["gru_net/gru_0.w_0"], p["gru_net/gru_0.b_0"], Lengths=n,
                   is_reverse=reverse, origin_mode=True)["Hidden"]
    np.testing.assert_allclose(hidden, want, rtol=1e-10, atol=1e-12)


def test_sequence_layers_match_numpy(rng):
    prog = Layers().Compile(seed=0)
    x = rng.standard_normal((4, 7, 5))
    n = np.array([7, 3, 0, 5], np.int64)
    out = prog.pools(x, n)
    for kind in ("sum", "average", "sqrt", "max", "first", "last"):
        np.testing.assert_allclose(out[kind], ref_pool(x, n, kind.upper())["Out"], rtol=1e-12)
    np.testing.assert_array_equal(out["last_step"], out["last"])
    np.testing.assert_array_equal(out["first_step"], out["first"])
    np.testing.assert_array_equal(out["reverse"], ref_reverse(x, n))
    np.testing.assert_allclose(out["softmax"], ref_softmax(x.sum(2), n), rtol=1e-12)
    mask = np.arange(7)[None, :] < n[:, None]
    np.testing.assert_array_equal(out["mask"], mask.astype(np.float32))
    np.testing.assert_array_equal(out["longest"], mask.astype(np.int64))


class Cells(fluid.Program):
    """gru_unit unrolled by hand over three steps shares dynamic_gru's parameters by name,
    and so gives dynamic_gru's outputs."""

    @fluid.network("x")
    def fused(self, x):
        x = fluid.layers.data(name='x', shape=[3, 3 * H], dtype='float64')
        return fluid.layers.dynamic_gru(x, size=H, param_attr=fluid.ParamAttr(name="w"),
                                        bias_attr=fluid.ParamAttr(name="b"))

    @fluid.network("x")
    def unrolled(self, x):
        x = fluid.layers.data(name='x', shape=[3, 3 * H], dtype='float64')
        h = fluid.layers.fill_constant(shape=[2, H], dtype='float64', value=0.0)
        steps = []
        for t in range(3):
            h, _, _ = fluid.layers.gru_unit(x[:, t], h, size=3 * H,
                                            param_attr=fluid.ParamAttr(name="w"),
                                            bias_attr=fluid.ParamAttr(name="b"))
            steps.append(h)
        return steps

    @fluid.network("x", "h", "c")
    def lstm_step(self, x, h, c):
        x = fluid.layers.data(name='x', shape=[5], dtype='float64')
        h = fluid.layers.data(name='h', shape=[H], dtype='float64')
        c = fluid.layers.data(name='c', shape=[H], dtype='float64')
        return fluid.layers.lstm_unit(x, h, c, forget_bias=1.0)


def test_gru_unit_unrolled_equals_dynamic_gru(rng):
    prog = Cells().Compile(seed=0)
    x = rng.standard_normal((2, 3, 3 * H))
    fused = prog.fused(x)
    for t, h in enumerate(prog.unrolled(x)):
        np.testing.assert_allclose(h, fused[:, t], rtol=1e-12, atol=1e-12)


def test_lstm_unit_layer(rng):
    prog = Cells().Compile(seed=0)
    x, h, c = (rng.standard_normal(s) for s in ((2, 5), (2, H), (2, H)))
    h1, c1 = prog.lstm_step(x, h, c)
    p = prog.parameters()
    z = np.concatenate([x, h], 1) @ p["fc_0.w_0"] + p["fc_0.b_0"]
    i, f, o, g = np.split(z, 4, axis=1)
    s = 1 / (1 + np.exp(-np.array([i, f + 1.0, o])))
    want_c = s[1] * c + s[0] * np.tanh(g)
    np.testing.assert_allclose(c1, want_c, rtol=1e-12)
    np.testing.assert_allclose(h1, s[2] * np.tanh(want_c), rtol=1e-12)


def test_layer_errors_say_what_to_fix():
    def build(body):
        class Bad(fluid.Program):
            @fluid.network("x")
            def f(self, x):
                x = fluid.layers.data(name='x', shape=[-1, -1, 12], dtype='float32',
                                      append_batch_size=False)
                return body(x)
        Bad().Compile()

    with pytest.raises(OpArgumentError, match="size .* must be a positive multiple of 4"):
        build(lambda x: fluid.layers.dynamic_lstm(x, size=10))
    with pytest.raises(ShapeError, match=r"has 12 columns but size=16 needs 16"):
        build(lambda x: fluid.layers.dynamic_lstm(x, size=16))
    with pytest.raises(ShapeError, match=r"fc\(input=x, size=24, num_flatten_dims=2\)"):
        build(lambda x: fluid.layers.dynamic_gru(fluid.layers.reduce_sum(x, dim=2), size=8))
    with pytest.raises(OpArgumentError, match="bias_attr=False needs use_peepholes=False"):
        build(lambda x: fluid.layers.dynamic_lstm(x, size=12, bias_attr=False))
    with pytest.raises(OpArgumentError, match="pool_type must be one of"):
        build(lambda x: fluid.layers.sequence_pool(x, "median"))
    with pytest.raises(ShapeError, match="gate_activation='softmax' is not one of"):
        build(lambda x: fluid.layers.dynamic_gru(x, size=4, gate_activation="softmax"))


# --- attention --------------------------------------------------------------------------------

D, HEADS, T = 16, 4, 6


def encoder_block(x, mask):
    a = fluid.nets.scaled_dot_product_attention(x, x, x, num_heads=HEADS, mask=mask)
    a = fluid.layers.fc(a, size=D, num_flatten_dims=2)
    x = fluid.layers.layer_norm(x + a, begin_norm_axis=2)
    f = fluid.layers.fc(x, size=4 * D, num_flatten_dims=2, act="relu")
    f = fluid.layers.fc(f, size=D, num_flatten_dims=2)
    return fluid.layers.layer_norm(x + f, begin_norm_axis=2)


class Encoder(fluid.Program):
    @fluid.network("x", "lengths", "y")
    def train_step(self, x, lengths, y):
        x = fluid.layers.data(name='x', shape=[T, D], dtype='float64')
        n = fluid.layers.data(name='lengths', shape=[-1], dtype='int64',
                              append_batch_size=False)
        y = fluid.layers.data(name='y', shape=[1], dtype='float64')
        with fluid.var_scope("enc"):
            h = encoder_block(x, fluid.layers.sequence_mask(n, maxlen=T, dtype='float64'))
        pred = fluid.layers.fc(fluid.layers.sequence_pool(h, "average", lengths=n), size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
        return loss

    @fluid.network("x", "lengths")
    def attend(self, x, lengths):
        x = fluid.layers.data(name='x', shape=[T, D], dtype='float64')
        n = fluid.layers.data(name='lengths', shape=[-1], dtype='int64',
                              append_batch_size=False)
        with fluid.var_scope("enc"):
            mask = fluid.layers.sequence_mask(n, maxlen=T, dtype='float64')
            return fluid.nets.scaled_dot_product_attention(x, x, x, num_heads=HEADS,
                                                           mask=mask)


def numpy_attention(p, x, n):
    def fc(v, k):
        return v @ p[f"enc/fc_{k}.w_0"] + p[f"enc/fc_{k}.b_0"]
    b = x.shape[0]
    q, k, v = (fc(x, i).reshape(b, T, HEADS, D // HEADS).transpose(0, 2, 1, 3)
               for i in range(3))
    logits = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D // HEADS)
    logits = np.where(np.arange(T)[None, None, None, :] < n[:, None, None, None], logits,
                      -np.inf)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return (w @ v).transpose(0, 2, 1, 3).reshape(b, T, D)


def test_attention_matches_numpy_and_ignores_padded_keys(rng):
    prog = Encoder().Compile(seed=0)
    x = rng.standard_normal((3, T, D))
    n = np.array([6, 2, 4], np.int64)
    got = prog.attend(x, n)
    np.testing.assert_allclose(got, numpy_attention(prog.parameters(), x, n), rtol=1e-10,
                               atol=1e-12)
    noisy = x.copy()
    noisy[np.arange(T)[None, :] >= n[:, None]] = 1e3
    again = prog.attend(noisy, n)
    valid = np.arange(T)[None, :] < n[:, None]
    np.testing.assert_allclose(again[valid], got[valid], rtol=1e-10, atol=1e-12)


def test_a_transformer_encoder_block_trains(rng):
    prog = Encoder().Compile(seed=0)
    x = rng.standard_normal((32, T, D))
    n = rng.integers(1, T + 1, 32).astype(np.int64)
    valid = np.arange(T)[None, :, None] < n[:, None, None]
    y = ((x[..., :1] * valid).sum(1) / n[:, None]).astype(np.float64)
    losses = [prog.train_step(x, n, y) for _ in range(80)]
    assert losses[-1] < 0.2 * losses[0]
