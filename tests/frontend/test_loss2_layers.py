"""The losses added for Paddle 1.8 as layers: each built in a compiled method and checked
against NumPy, gradients through a whole program against finite differences where the
layer is a composition of ops (mse_loss, dice_loss, npair_loss), centre updates of
center_loss in training calls only, and the trace-time errors."""
import numpy as np
import pytest
from ops.harness import check_block

import fluid
from fluid_interactive.errors import DTypeError, OpArgumentError, ShapeError

L = fluid.layers


def run(build, feeds, seed=0, **data_kwargs):
    """Compile a one-method program whose data vars have the feeds' exact shapes and
    return what ``build(*vars)`` returns."""
    names = list(feeds)

    class One(fluid.Program):
        @fluid.network(*names)
        def f(self, *args):
            vs = [L.data(n, shape=list(np.shape(a)), dtype=np.asarray(a).dtype.name,
                         append_batch_size=False) for n, a in feeds.items()]
            return build(*vs)
    return One().Compile(seed=seed).f(**feeds)


def data(name, value):
    return L.data(name, shape=list(value.shape), dtype=value.dtype.name,
                  append_batch_size=False, stop_gradient=False)


# --- values through compiled methods ------------------------------------------------------------

def test_huber_smooth_l1_mse_values(rng):
    x, y = rng.standard_normal((4, 3)).astype("float32"), rng.standard_normal((4, 3)).astype(
        "float32")
    iw, ow = rng.random((4, 3)).astype("float32"), rng.random((4, 3)).astype("float32")
    hub, sl1, sl1w, mse = run(lambda a, b, c, d: (
        L.huber_loss(a, b, delta=0.5), L.smooth_l1(a, b), L.smooth_l1(a, b, c, d, sigma=2.0),
        L.mse_loss(a, b)), {"x": x, "y": y, "iw": iw, "ow": ow})
    r = y - x
    np.testing.assert_allclose(hub, np.where(abs(r) <= 0.5, 0.5 * r * r, 0.5 * (abs(r) - 0.25)),
                               rtol=1e-6)
    d = x - y
    np.testing.assert_allclose(sl1, np.where(abs(d) < 1, 0.5 * d * d, abs(d) - 0.5).sum(
        1, keepdims=True), rtol=1e-6)
    dw = d * iw
    np.testing.assert_allclose(sl1w, (ow * np.where(abs(dw) < 0.25, 2 * dw * dw,
                                                    abs(dw) - 0.125)).sum(1, keepdims=True),
                               rtol=1e-5)
    assert isinstance(mse, float)
    np.testing.assert_allclose(mse, ((x - y) ** 2).mean(), rtol=1e-6)


def test_kldiv_log_loss_teacher_student_label_smooth(rng):
    x = np.log(rng.dirichlet(np.ones(4), 3)).astype("float32")
    t = rng.dirichlet(np.ones(4), 3).astype("float32")
    p = rng.uniform(0.1, 0.9, (3, 1)).astype("float32")
    lab = np.array([[0.0], [1.0], [1.0]], "float32")
    onehot = np.eye(4, dtype="float32")[[0, 2, 3]]
    prior = np.full((1, 4), 0.25, "float32")
    kl, kl_none, ll, ts, sm, smp = run(lambda a, b, c, d, e, f: (
        L.kldiv_loss(a, b), L.kldiv_loss(a, b, reduction="none"), L.log_loss(c, d),
        L.teacher_student_sigmoid_loss(c, d), L.label_smooth(e, epsilon=0.2),
        L.label_smooth(e, prior_dist=f, epsilon=0.2, dtype="float64")),
        {"x": x, "t": t, "p": p, "lab": lab, "onehot": onehot, "prior": prior})
    np.testing.assert_allclose(kl_none, t * (np.log(t) - x), rtol=1e-5)
    np.testing.assert_allclose(kl, (t * (np.log(t) - x)).mean(), rtol=1e-5)
    np.testing.assert_allclose(ll, -lab * np.log(p + 1e-4) - (1 - lab) * np.log(1 - p + 1e-4),
                               rtol=1e-5)
    sp = np.log1p(np.exp(p))
    np.testing.assert_allclose(ts, 2 * sp - p * lab, rtol=1e-5)
    np.testing.assert_allclose(sm, 0.8 * onehot + 0.05, rtol=1e-6)
    assert smp.dtype == np.float64


def test_rank_margin_bpr_values(rng):
    lab = rng.integers(0, 2, (5, 1)).astype("float32")
    a, b = rng.standard_normal((5, 1)).astype("float32"), rng.standard_normal((5, 1)).astype(
        "float32")
    scores = rng.standard_normal((5, 4)).astype("float32")
    item = rng.integers(0, 4, (5, 1))
    rk, mr, bpr = run(lambda l_, x1, x2, s, i: (
        L.rank_loss(l_, x1, x2), L.margin_rank_loss(l_ * 2 - 1, x1, x2, margin=0.2),
        L.bpr_loss(s, i)), {"lab": lab, "a": a, "b": b, "scores": scores, "item": item})
    np.testing.assert_allclose(rk, np.log1p(np.exp(a - b)) - lab * (a - b), rtol=1e-5)
    np.testing.assert_allclose(mr, np.maximum(0, -(lab * 2 - 1) * (a - b) + 0.2), rtol=1e-6)
    pos = np.take_along_axis(scores, item, 1)
    terms = np.log1p(np.exp(scores - pos))
    np.testing.assert_allclose(bpr, (terms.sum(1, keepdims=True) - np.log(2)) / 3, rtol=1e-5)


# --- the composed layers: values and gradients --------------------------------------------------

def test_mse_loss_gradient(rng):
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    check_block(lambda: L.mse_loss(data("x", x), data("y", y)), {"x": x, "y": y},
                wrt=["x", "y"])


def ref_dice(x, label, eps):
    onehot = np.eye(x.shape[-1])[label[..., 0]]
    axes = tuple(range(1, x.ndim))
    inse = (x * onehot).sum(axes)
    return (1 - 2 * inse / (x.sum(axes) + onehot.sum(axes) + eps)).mean()


def test_dice_loss(rng):
    x = rng.dirichlet(np.ones(3), (2, 4, 5))
    label = rng.integers(0, 3, (2, 4, 5, 1))
    got = check_block(lambda: L.dice_loss(data("x", x), data("label", label)),
                      {"x": x, "label": label}, wrt=["x"])
    np.testing.assert_allclose(got[0], ref_dice(x, label, 1e-5), rtol=1e-9)


def ref_npair(anchor, positive, labels, l2_reg):
    n = len(labels)
    lab = labels.reshape(n, 1)
    t = (lab == lab.T).astype(np.float64)
    t /= t.sum(1, keepdims=True)
    l2 = ((anchor ** 2).sum(1).mean() + (positive ** 2).sum(1).mean()) * 0.25 * l2_reg
    sim = anchor @ positive.T
    z = sim - sim.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    ce = -(t * logp).sum(1, keepdims=True)
    return l2 + (t * ce).sum(0).mean()


@pytest.mark.parametrize("label_dtype", ["float64", "int64"])
def test_npair_loss(rng, label_dtype):
    anchor, positive = rng.standard_normal((6, 3)), rng.standard_normal((6, 3))
    labels = rng.integers(0, 3, 6).astype(label_dtype)
    got = check_block(lambda: L.npair_loss(data("a", anchor), data("p", positive),
                                           data("labels", labels)),
                      {"a": anchor, "p": positive, "labels": labels}, wrt=["a", "p"])
    np.testing.assert_allclose(got[0], ref_npair(anchor, positive, labels, 0.002), rtol=1e-9)


# --- center_loss: the centres move in training calls only ---------------------------------------

class CenterNet(fluid.Program):
    def model(self, x, y):
        feat = L.fc(x, size=3, param_attr=fluid.ParamAttr(name="w"), bias_attr=False)
        return L.center_loss(feat, y, num_classes=2, alpha=0.5,
                             param_attr=fluid.ParamAttr(name="centers"))

    @fluid.network("x", "y")
    def train(self, x, y):
        x = L.data("x", shape=[4], dtype="float64")
        y = L.data("y", shape=[1], dtype="int64")
        loss = L.mean(self.model(x, y))
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
        return loss

    @fluid.network("x", "y")
    def evaluate(self, x, y):
        x = L.data("x", shape=[4], dtype="float64")
        y = L.data("y", shape=[1], dtype="int64")
        return L.mean(self.model(x, y))


def test_center_loss_updates_centres_as_paddle_does(rng):
    prog = CenterNet().Compile(seed=0)
    x = rng.standard_normal((6, 4))
    y = np.array([[0], [1], [1], [0], [1], [1]])
    centers, w = prog.get_var("centers").copy(), prog.get_var("w").copy()
    prog.evaluate(x, y)
    np.testing.assert_array_equal(prog.get_var("centers"), centers)   # inference: no move
    loss = prog.train(x, y)
    feat = x @ w
    diff = feat - centers[y[:, 0]]
    np.testing.assert_allclose(loss, (0.5 * (diff ** 2).sum(1)).mean(), rtol=1e-9)
    want = centers.copy()
    for k in range(2):
        rows = y[:, 0] == k
        want[k] += 0.5 * diff[rows].sum(0) / (rows.sum() + 1)
    np.testing.assert_allclose(prog.get_var("centers"), want, rtol=1e-9)
    assert not np.allclose(prog.get_var("w"), w)       # the features still train


# --- errors at the user's line ------------------------------------------------------------------

def _raises(build, feeds, error, match):
    with pytest.raises(error, match=match) as info:
        run(build, feeds)
    assert "test_loss2_layers.py" in str(info.value)


F32 = np.ones((3, 2), "float32")


@pytest.mark.parametrize("build,error,match", [
    (lambda a, i: L.huber_loss(a, np.ones((3, 2)), 1.0), OpArgumentError,
     "label must be a fluid Variable"),
    (lambda a, i: L.huber_loss(i, i, 1.0), DTypeError, "input .* must be float"),
    (lambda a, i: L.huber_loss(a, a, delta="big"), OpArgumentError, "delta must be a number"),
    (lambda a, i: L.smooth_l1(a, a, inside_weight=a), ShapeError, "give both inside_weight"),
    (lambda a, i: L.kldiv_loss(a, a, reduction="avg"), OpArgumentError,
     "reduction must be one of"),
    (lambda a, i: L.log_loss(a, a), ShapeError, r"must be \[N, 1\]"),
    (lambda a, i: L.label_smooth(a, epsilon=2.0), OpArgumentError, r"epsilon must lie in"),
    (lambda a, i: L.rank_loss(a, a, a), ShapeError, r"\[N\] or \[N, 1\]"),
    (lambda a, i: L.bpr_loss(a, L.cast(i, "int64")), ShapeError, "one id per row"),
    (lambda a, i: L.dice_loss(a, a), DTypeError, "label .* must be integer"),
    (lambda a, i: L.npair_loss(a, L.transpose(a, [1, 0]), L.cast(i, "int64")), ShapeError,
     "positive .* has shape"),
    (lambda a, i: L.center_loss(a, L.cast(i, "int64"), 0, 0.1, None), OpArgumentError,
     "num_classes must be an int >= 1"),
    (lambda a, i: L.teacher_student_sigmoid_loss([512, 1], a), OpArgumentError,
     "input must be a fluid Variable"),
])
def test_layer_errors(build, error, match):
    _raises(build, {"a": F32, "i": np.ones((3, 2), "int32")}, error, match)


# --- CTC, greedy decoding, edit distance ----------------------------------------------------------

def test_warpctc_layer_gradient_through_a_program(rng):
    logits = rng.standard_normal((3, 5, 4))
    labels = np.array([[1, 2, 0], [3, 0, 0], [2, 2, 1]])
    n, m = np.array([5, 2, 5]), np.array([2, 1, 3])

    def build():
        x = data("x", logits)
        return L.warpctc(x, data("labels", labels), input_length=data("n", n),
                         label_length=data("m", m))
    check_block(build, {"x": logits, "labels": labels, "n": n, "m": m}, wrt=["x"])


class Recognizer(fluid.Program):
    """fc over frames -> CTC; greedy decoding and the edit distance to the labels."""

    def scores(self, frames):
        with fluid.var_scope("am"):
            return L.fc(frames, size=5, num_flatten_dims=2)

    @staticmethod
    def inputs(label_dtype):
        return (L.data("frames", shape=[-1, -1, 6], dtype="float32", append_batch_size=False),
                L.data("labels", shape=[-1, -1], dtype=label_dtype, append_batch_size=False),
                L.data("n", shape=[-1], dtype="int64", append_batch_size=False),
                L.data("m", shape=[-1], dtype="int64", append_batch_size=False))

    @fluid.network("frames", "labels", "n", "m")
    def train(self, *feeds):
        frames, labels, n, m = self.inputs("int32")
        loss = L.mean(L.warpctc(self.scores(frames), labels, blank=0, input_length=n,
                                label_length=m))
        fluid.optimizer.Adam(learning_rate=0.1).minimize(loss)
        return loss

    @fluid.network("frames", "labels", "n", "m")
    def decode(self, *feeds):
        frames, labels, n, m = self.inputs("int64")
        best, lengths = L.ctc_greedy_decoder(L.softmax(self.scores(frames)), blank=0,
                                             input_length=n)
        dist, count = L.edit_distance(best, labels, normalized=False,
                                      input_length=L.reshape(lengths, [-1]), label_length=m)
        return best, lengths, dist, count


def test_ctc_recognizer_trains_decodes_and_scores():
    """Each frame's features name its symbol (or the blank): a linear model learns it."""
    rng = np.random.default_rng(0)
    b, t = 8, 7
    labels = rng.integers(1, 5, (b, 3))
    m = np.array([3, 2, 3, 1, 3, 2, 3, 3])
    path = np.zeros((b, t), "int64")
    for i in range(b):                      # label symbols at frames 1, 3, 5; blanks between
        path[i, 1:2 * m[i]:2] = labels[i, :m[i]]
    n = 2 * m + 1
    frames = (np.eye(6)[path] * 3 + rng.normal(0, 0.3, (b, t, 6))).astype("float32")
    prog = Recognizer().Compile(seed=0)
    losses = [prog.train(frames, labels.astype("int32"), n, m) for _ in range(40)]
    assert losses[-1] < 0.1 * losses[0]
    best, lengths, dist, count = prog.decode(frames, labels, n, m)
    assert lengths[:, 0].tolist() == m.tolist() and count == b
    for i in range(b):
        assert best[i, :m[i]].tolist() == labels[i, :m[i]].tolist()
        assert (best[i, m[i]:] == 0).all()
    assert (dist == 0).all()


def test_ctc_greedy_decoder_and_edit_distance_values():
    probs = np.eye(4, dtype="float32")[[[0, 1, 1, 0, 2, 2, 3], [3, 3, 0, 3, 0, 0, 0]]]
    best, dist = run(lambda p: (L.ctc_greedy_decoder(p, blank=0),
                                L.edit_distance(L.ctc_greedy_decoder(p, blank=0),
                                                L.cast(L.argmax(p, axis=2), "int64"))[0]),
                     {"p": probs})
    assert best.tolist() == [[1, 2, 3, 0, 0, 0, 0], [3, 3, 0, 0, 0, 0, 0]]
    # [1,2,3,0,0,0,0] vs [0,1,1,0,2,2,3]: 6 edits of 7; [3,3,0,...] vs [3,3,0,3,0,0,0]: 1
    np.testing.assert_allclose(dist[:, 0], [6 / 7, 1 / 7], rtol=1e-6)


@pytest.mark.parametrize("build,error,match", [
    (lambda x, i: L.warpctc(x, i, input_length=L.reshape(i, [-1])), ShapeError,
     "give both input_length and label_length"),
    (lambda x, i: L.warpctc(L.reshape(x, [-1, 4]), i), ShapeError, r"padded batch \[B, T, C\]"),
    (lambda x, i: L.warpctc(x, i, blank=-1), OpArgumentError, "blank must be an int >= 0"),
    (lambda x, i: L.edit_distance(i, i), DTypeError, "input .* must be integer"),
    (lambda x, i: L.ctc_greedy_decoder(x, blank=0, padding_value=0.5), OpArgumentError,
     "padding_value must be an int"),
])
def test_ctc_layer_errors(build, error, match):
    _raises(build, {"x": np.ones((2, 3, 4), "float32"), "i": np.ones((2, 3), "int32")},
            error, match)


# --- nce, hsigmoid, sampled softmax -------------------------------------------------------------

def sampled_program(loss_fn, classes=20):
    """Embeddings of one word predict the next one; ``loss_fn(emb, label)`` is the loss."""
    class Model(fluid.Program):
        @fluid.network("word", "next_word")
        def train(self, word, next_word):
            word = L.data("word", shape=[1], dtype="int64")
            next_word = L.data("next_word", shape=[1], dtype="int64")
            emb = L.reshape(L.embedding(word, size=[classes, 8]), [-1, 8])
            loss = L.mean(loss_fn(emb, next_word))
            fluid.optimizer.Adam(learning_rate=0.05).minimize(loss)
            return loss
    return Model().Compile(seed=0)


@pytest.mark.parametrize("loss_fn", [
    lambda e, y: L.nce(e, y, num_total_classes=20, num_neg_samples=5),
    lambda e, y: L.nce(e, y, num_total_classes=20, sampler="log_uniform", seed=3),
    lambda e, y: L.nce(e, y, num_total_classes=20, sampler="custom_dist",
                       custom_dist=np.full(20, 0.05), bias_attr=False),
    lambda e, y: L.hsigmoid(e, y, num_classes=20),
    lambda e, y: L.sampled_softmax_with_cross_entropy(
        L.fc(e, size=20), y, num_samples=6),
], ids=["nce_uniform", "nce_log_uniform", "nce_custom", "hsigmoid", "sampled_softmax"])
def test_sampled_losses_train(loss_fn):
    rng = np.random.default_rng(0)
    word = rng.integers(0, 20, (64, 1))
    nxt = (word * 7 + 3) % 20
    prog = sampled_program(loss_fn)
    losses = [prog.train(word, nxt) for _ in range(40)]
    assert all(np.isfinite(losses))
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5])


def test_hsigmoid_custom_tree_and_nce_values(rng):
    x = rng.standard_normal((4, 3)).astype("float32")
    table = np.array([[0, 2, -1], [0, 1, 3], [0, 1, 4], [0, 2, -1]])
    code = np.array([[0, 0, -1], [1, 1, 1], [1, 0, 0], [0, 1, -1]])
    label = np.array([[0], [1], [4], [5]])
    out = run(lambda a, t, c, y: L.hsigmoid(a, y, num_classes=5, path_table=t, path_code=c,
                                            is_custom=True, bias_attr=False,
                                            param_attr=fluid.ParamAttr(name="hw")),
              {"x": x, "t": table, "c": code, "y": label})
    assert out.shape == (4, 1) and np.isfinite(out).all() and (out > 0).all()


@pytest.mark.parametrize("build,error,match", [
    (lambda a, y: L.nce(a, y, num_total_classes=1), OpArgumentError,
     "num_total_classes must be an int >= 2"),
    (lambda a, y: L.nce(a, y, 10, sampler="zipf"), OpArgumentError, "sampler must be one of"),
    (lambda a, y: L.nce(a, y, 10, sampler="custom_dist", custom_dist=[0.5, 0.5]),
     OpArgumentError, "10 probabilities"),
    (lambda a, y: L.hsigmoid(a, y, num_classes=1), OpArgumentError, "num_classes must be"),
    (lambda a, y: L.hsigmoid(a, y, 5, path_table=y), OpArgumentError, "need is_custom=True"),
    (lambda a, y: L.hsigmoid(a, y, 5, is_custom=True), OpArgumentError,
     "needs both path_table and path_code"),
    (lambda a, y: L.sampled_softmax_with_cross_entropy(a, y, 2, use_customized_samples=True),
     OpArgumentError, "needs customized_samples"),
    (lambda a, y: L.sampled_softmax_with_cross_entropy(a, y, 2, num_true=2), ShapeError,
     r"\[N, num_true\]"),
])
def test_sampled_layer_errors(build, error, match):
    _raises(build, {"a": np.ones((3, 4), "float32"), "y": np.ones((3, 1), "int64")}, error,
            match)


# --- the existing loss layers against Paddle 1.8's signatures -------------------------------------

def test_softmax_with_cross_entropy_takes_paddles_positional_arguments(rng):
    logits = rng.standard_normal((4, 3)).astype("float32")
    label = np.array([[0], [2], [1], [2]])
    # Paddle 1.8: (logits, label, soft_label, ignore_index, numeric_stable_mode,
    #              return_softmax, axis)
    loss, softmax = run(lambda x, y: L.softmax_with_cross_entropy(x, y, False, -100, True, True,
                                                                  -1),
                        {"x": logits, "y": label})
    z = logits - logits.max(1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    np.testing.assert_allclose(softmax, p, rtol=1e-6)
    np.testing.assert_allclose(loss[:, 0], -np.log(p[np.arange(4), label[:, 0]]), rtol=1e-5)
    again = run(lambda x, y: L.softmax_with_cross_entropy(x, y, numeric_stable_mode=False),
                {"x": logits, "y": label})
    np.testing.assert_allclose(again, loss, rtol=1e-6)


def test_sigmoid_cross_entropy_ignores_labels_whose_integer_part_is_ignore_index(rng):
    x = rng.standard_normal((1, 4)).astype("float32")
    label = np.array([[0.0, 1.0, -1.5, -1.0]], "float32")
    out = run(lambda a, b: L.sigmoid_cross_entropy_with_logits(a, b, ignore_index=-1),
              {"x": x, "label": label})
    assert out[0, 2] == 0 and out[0, 3] == 0 and (out[0, :2] > 0).all()


@pytest.mark.parametrize("build,error,match", [
    (lambda x, i: L.square_error_cost(i, i), DTypeError, "input .* must be float"),
    (lambda x, i: L.square_error_cost(x, np.ones((3, 4))), OpArgumentError,
     "label must be a fluid Variable"),
    (lambda x, i: L.softmax_with_cross_entropy(x, L.cast(i, "int64"), numeric_stable_mode=False,
                                               axis=0), OpArgumentError,
     "numeric_stable_mode=False needs the last axis"),
    (lambda x, i: L.softmax_with_cross_entropy(x, L.cast(i, "int64"), numeric_stable_mode=1),
     OpArgumentError, "numeric_stable_mode must be True or False"),
])
def test_fixed_loss_layer_errors(build, error, match):
    _raises(build, {"x": np.ones((3, 4), "float32"), "i": np.ones((3, 1), "int32")}, error,
            match)


def test_mse_loss_matches_torch(rng):
    import torch
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))

    class Mse(fluid.Program):
        @fluid.network("x", "y")
        def f(self, *feeds):
            xv, yv = data("x", x), data("y", y)
            loss = L.mse_loss(xv, yv)
            return (loss,) + tuple(fluid.gradients(loss, [xv, yv]))
    loss, gx, gy = Mse().Compile().f(x, y)
    tx, ty = (torch.tensor(v, requires_grad=True) for v in (x, y))
    want = torch.nn.functional.mse_loss(tx, ty)
    want.backward()
    np.testing.assert_allclose(loss, want.item(), rtol=1e-12)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gy, ty.grad.numpy(), rtol=1e-12)
