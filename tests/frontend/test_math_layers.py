"""Paddle 1.8's math, unary and activation layers in compiled programs: values against
NumPy, gradients through fluid.gradients, parameters (prelu, bilinear_tensor_product)
trained by an optimizer, the signature fixes (softmax, log_softmax, scale, pow, clip,
sums, logical_* out=), act= with the new activations, a NumPy array or a number where a
Variable belongs, and each trace-time error the layers raise."""
import math

import numpy as np
import pytest

import fluid
from fluid_interactive.errors import FluidError, OpArgumentError

L = fluid.layers
f32 = np.float32


def run(build, feeds, seed=0, **kw):
    """Compile a one-method program returning ``build(*data vars)`` and call it."""
    names = list(feeds)

    def f(self, *args):
        xs = [L.data(n, shape=list(v.shape), dtype=str(v.dtype), append_batch_size=False)
              for n, v in feeds.items()]
        return build(*xs)
    cls = type("Net", (fluid.Program,), {"f": fluid.network(*names)(f)})
    return cls().Compile(seed=seed, **kw).f(**feeds)


def test_unary_and_activation_layers_compute_in_a_compiled_program(rng):
    x = rng.uniform(-0.9, 0.9, (3, 4)).astype(f32)
    got = run(lambda v: (L.sin(v), L.acos(v), L.atan(v), L.ceil(v), L.floor(v), L.round(v * 4),
                         L.reciprocal(v), L.rsqrt(L.abs(v)), L.log1p(L.abs(v)), L.erf(v),
                         L.softplus(v), L.softsign(v), L.logsigmoid(v), L.tanh_shrink(v),
                         L.softshrink(v, alpha=0.3), L.hard_shrink(v, threshold=0.2),
                         L.thresholded_relu(v, threshold=0.1), L.relu6(v * 10),
                         L.hard_sigmoid(v), L.hard_swish(v * 5), L.selu(v), L.brelu(v, 0, 0.5),
                         L.soft_relu(v), L.stanh(v), L.mish(v), L.sign(v)), {"x": x})
    want = (np.sin(x), np.arccos(x), np.arctan(x), np.ceil(x), np.floor(x),
            np.sign(x * 4) * np.floor(np.abs(x * 4) + 0.5), 1 / x, 1 / np.sqrt(np.abs(x)),
            np.log1p(np.abs(x)), np.vectorize(math.erf)(x), np.log1p(np.exp(x)),
            x / (1 + np.abs(x)), -np.log1p(np.exp(-x)), x - np.tanh(x),
            np.where(np.abs(x) > 0.3, x - 0.3 * np.sign(x), 0),
            np.where(np.abs(x) > 0.2, x, 0), np.where(x > 0.1, x, 0), np.clip(x * 10, 0, 6),
            np.clip(0.2 * x + 0.5, 0, 1), 5 * x * np.clip(5 * x + 3, 0, 6) / 6,
            1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)),
            np.clip(x, 0, 0.5), np.log1p(np.exp(x)), 1.7159 * np.tanh(0.67 * x),
            x * np.tanh(np.log1p(np.exp(x))), np.sign(x))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_math_layers_compute_in_a_compiled_program(rng):
    x, y = rng.random((4, 3)).astype(f32), rng.random((4, 3)).astype(f32)
    got = run(lambda a, b: (L.cumsum(a, axis=0, exclusive=True), L.reduce_prod(a, dim=1),
                            L.reduce_all(a > 0.5, dim=[1]), L.reduce_any(a > 0.5),
                            L.logsumexp(a, dim=[1], keepdim=True), L.clamp(a, min=0.2, max=0.7),
                            L.clip_by_norm(a, max_norm=1.0), L.l2_normalize(a, axis=1),
                            L.cos_sim(a, b), L.dot(a, b), L.cross(a, b), L.dist(a, b, p=1),
                            L.addcmul(a, a, b, value=0.5), L.sum([a, b]),
                            L.elementwise_floordiv(L.cast(a * 10, "int64"),
                                                   L.fill_constant([1], "int64", 3))),
              {"a": x, "b": y})
    norm = np.sqrt((x * x).sum())
    want = (np.concatenate([np.zeros((1, 3)), np.cumsum(x, 0)[:-1]]), x.prod(1),
            (x > 0.5).all(1), (x > 0.5).any(), np.log(np.exp(x).sum(1, keepdims=True)),
            np.clip(x, 0.2, 0.7), x * min(1.0, 1.0 / norm),
            x / np.linalg.norm(x, axis=1, keepdims=True),
            ((x * y).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(y, axis=1))[:, None],
            (x * y).sum(1, keepdims=True), np.cross(x, y), np.abs(x - y).sum(), x + 0.5 * x * y,
            x + y, (x * 10).astype(np.int64) // 3)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6)


def test_products_compute_in_a_compiled_program(rng):
    a, b = rng.random((2, 3, 4)).astype(f32), rng.random((2, 4, 5)).astype(f32)
    i, m = rng.random((1, 5)).astype(f32), rng.random((3, 4)).astype(f32)
    img = rng.random((2, 3, 2, 2)).astype(f32)
    got = run(lambda a_, b_, i_, m_, im: (
        L.bmm(a_, b_), L.addmm(i_, m_, L.slice(L.reshape(b_, [8, 5]), [0], [0], [4]),
                               alpha=2.0, beta=0.5),
        L.fsp_matrix(im, im), L.maxout(L.concat([im, im], axis=1), groups=2),
        L.similarity_focus(im, axis=1, indexes=[0])), {"a": a, "b": b, "i": i, "m": m, "im": img})
    np.testing.assert_allclose(got[0], a @ b, rtol=1e-5)
    np.testing.assert_allclose(got[1], 0.5 * i + 2.0 * m @ b.reshape(8, 5)[:4], rtol=1e-5)
    np.testing.assert_allclose(got[2], np.einsum("nahw,nbhw->nab", img, img) / 4, rtol=1e-5)
    both = np.concatenate([img, img], axis=1)     # channels 0 1 2 0 1 2, in pairs
    np.testing.assert_allclose(got[3], both.reshape(2, 3, 2, 2, 2).max(axis=2))
    assert set(np.unique(got[4])) <= {0.0, 1.0}


def test_gradients_flow_through_the_new_layers(rng):
    x = rng.uniform(0.2, 0.8, (3, 4))
    feeds = {"x": x}

    class Grad(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data("x", shape=[3, 4], dtype="float64", append_batch_size=False)
            x.stop_gradient = False
            terms = [L.softplus(x), L.selu(x), L.mish(x), L.cumsum(x, axis=1, reverse=True),
                     L.logsumexp(x, dim=[1]), L.l2_normalize(x, axis=1), L.floor(x),
                     L.clamp(x, min=0.3, max=0.7), L.erf(x), L.reduce_prod(x, dim=[0])]
            loss = L.sums([L.reduce_sum(t) for t in terms])
            return loss, fluid.gradients(loss, [x])[0]
    loss, grad = Grad().Compile().f(**feeds)
    d = (1 / (1 + np.exp(-x)) + 1.0507009873554805 + _mish_grad(x) + np.arange(1, 5)
         + np.exp(x) / np.exp(x).sum(1, keepdims=True) + 0 + ((x > 0.3) & (x < 0.7))
         + 2 / np.sqrt(np.pi) * np.exp(-x * x) + x.prod(0) / x)
    # the gradient of l2_normalize's sum is (1 - y * sum(y)) / |x| per row
    n = np.linalg.norm(x, axis=1, keepdims=True)
    y = x / n
    d = d + (1 - y * y.sum(1, keepdims=True)) / n
    np.testing.assert_allclose(grad, d, rtol=1e-6)


def _mish_grad(x):
    sp = np.log1p(np.exp(x))
    t = np.tanh(sp)
    return t + x * (1 - t * t) / (1 + np.exp(-x))


def test_prelu_and_bilinear_tensor_product_train_their_parameters(rng):
    x = rng.standard_normal((16, 3, 2, 2)).astype(f32)
    target = np.where(x > 0, x, 0.1 * x).reshape(16, 12)

    class Net(fluid.Program):
        @fluid.network("x", "t")
        def train(self, x, t):
            x = L.data("x", shape=[3, 2, 2], dtype="float32")
            t = L.data("t", shape=[12], dtype="float32")
            h = L.reshape(L.prelu(x, mode="channel", param_attr="alpha"), [-1, 12])
            b = L.bilinear_tensor_product(h, h, size=2, act="tanh")
            loss = L.mean(L.square(h - t)) + 0.0 * L.mean(b)
            fluid.optimizer.SGD(learning_rate=1.0).minimize(loss)
            return loss
    prog = Net().Compile(seed=0)
    losses = [prog.train(x, target) for _ in range(60)]
    assert losses[-1] < 0.05 * losses[0]
    np.testing.assert_allclose(prog.get_var("alpha").reshape(-1), [0.1] * 3, atol=0.02)
    assert prog.get_var("alpha").shape == (1, 3, 1, 1)


def test_signature_fixes_follow_paddle(rng):
    x = rng.standard_normal((2, 5)).astype(f32)
    p = rng.uniform(1, 2, (2, 5)).astype(f32)
    got = run(lambda v, q: (
        L.softmax(input=v, use_cudnn=True, axis=0), L.log_softmax(input=v, axis=0),
        L.log_softmax(v, dtype="float64"),
        L.scale(v, scale=L.fill_constant([1], "float32", 3.0), bias=1.0),
        L.pow(q, factor=L.fill_constant([1], "float32", 2.0)),
        L.clamp(v, max=L.fill_constant([1], "float32", 0.5))), {"v": x, "q": p})
    e = np.exp(x - x.max(0))
    np.testing.assert_allclose(got[0], e / e.sum(0), rtol=1e-5)
    np.testing.assert_allclose(got[1], np.log(e / e.sum(0)), rtol=1e-5, atol=1e-6)
    assert got[2].dtype == np.float64
    np.testing.assert_allclose(got[3], 3 * x + 1, rtol=1e-6)
    np.testing.assert_allclose(got[4], p ** 2, rtol=1e-6)
    np.testing.assert_allclose(got[5], np.minimum(x, 0.5))


def test_out_writes_into_state_and_into_a_loops_outer_var(rng):
    x = rng.standard_normal((2, 5)).astype(f32)

    class Net(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data("x", shape=[2, 5], dtype="float32", append_batch_size=False)
            total = L.create_parameter([2, 5], "float32", name="total")
            mask = L.create_parameter([2, 5], "bool", name="mask",
                                      default_initializer=fluid.initializer.Constant(0))
            L.sums([x, x], out=total)
            L.logical_and(x > 0, x < 1, out=mask)
            return L.log1p(L.abs(x), out=L.create_parameter([2, 5], "float32", name="lp"))
    prog = Net().Compile()
    lp = prog.f(x)
    np.testing.assert_allclose(prog.get_var("total"), 2 * x)
    np.testing.assert_array_equal(prog.get_var("mask"), (x > 0) & (x < 1))
    np.testing.assert_allclose(lp, np.log1p(np.abs(x)), rtol=1e-6)


def test_paddles_positional_calls_still_work(rng):
    x = rng.standard_normal((2, 3, 4, 4)).astype(f32)
    got = run(lambda v: (L.softmax(v, False, None, 1), L.maxout(L.concat([v, v], axis=1), 2),
                         L.cumsum(v, 1, True, True), L.selu(v, 1.0, 2.0), L.stanh(v, 0.5, 2.0),
                         L.hard_swish(v, 6.0, 6.0, 3.0)), {"x": x})
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(got[0], e / e.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(got[4], 2 * np.tanh(0.5 * x), rtol=1e-5)


@pytest.mark.parametrize("act", ["relu6", "hard_swish", "selu", "mish", "softplus", "erf",
                                 "hard_sigmoid", "softsign"])
def test_act_takes_the_new_activations(rng, act):
    x = rng.standard_normal((3, 4)).astype(f32)
    got = run(lambda v: L.fc(v, size=2, act=act, param_attr=fluid.initializer.Constant(0.5)),
              {"x": x})
    plain = run(lambda v: L.fc(v, size=2, param_attr=fluid.initializer.Constant(0.5)),
                {"x": x})
    want = run(lambda v: getattr(L, act)(v), {"x": plain.astype(f32)})
    np.testing.assert_allclose(got, want, rtol=1e-6)


# --- a NumPy array or a number where a Variable belongs ------------------------------------

A = np.ones((2, 3, 4, 4), f32)

def _on_array(layer):
    return lambda v: getattr(L, layer)(A)


def _array_second(layer):
    return lambda v: getattr(L, layer)(v, A)


#: every layer of this change, and the math layers around it, with an array where the
#: first Variable belongs (Paddle raises TypeError; OpArgumentError is one)
CALLS = {
    **{n: _on_array(n) for n in (
        "logsigmoid", "atan", "tanh_shrink", "rsqrt", "ceil", "floor", "cos", "acos",
        "asin", "sin", "round", "reciprocal", "softplus", "softsign", "softshrink",
        "hard_shrink", "thresholded_relu", "erf", "relu6", "hard_sigmoid", "hard_swish",
        "selu", "brelu", "soft_relu", "stanh", "mish", "relu", "sigmoid", "tanh", "exp",
        "log", "sqrt", "square", "abs", "softmax", "log_softmax", "mean", "log1p",
        "cumsum", "reduce_prod", "reduce_all", "reduce_any", "logsumexp", "gelu", "elu",
        "swish", "leaky_relu", "scale")},
    "prelu": lambda v: L.prelu(A, "all"), "maxout": lambda v: L.maxout(A, 2),
    "clamp": lambda v: L.clamp(A, 0.0, 1.0), "clip": lambda v: L.clip(A, 0.0, 1.0),
    "clip_by_norm": lambda v: L.clip_by_norm(A, 1.0), "pow": lambda v: L.pow(A, 2.0),
    "l2_normalize": lambda v: L.l2_normalize(A, 1), "cos_sim": lambda v: L.cos_sim(A, v),
    "dot": lambda v: L.dot(A, v), "bmm": lambda v: L.bmm(v, A),
    "addmm": lambda v: L.addmm(A, v, v), "addcmul": lambda v: L.addcmul(v, A, v),
    "dist": lambda v: L.dist(v, A), "cross": lambda v: L.cross(A, v),
    "mean_iou": lambda v: L.mean_iou(A, v, 2), "fsp_matrix": lambda v: L.fsp_matrix(v, A),
    "bilinear_tensor_product": lambda v: L.bilinear_tensor_product(A, v, 2),
    "similarity_focus": lambda v: L.similarity_focus(A, 1, [0]),
    "sum": lambda v: L.sum([v, A]), "sums": lambda v: L.sums([v, A]),
    "mul": lambda v: L.mul(A, v), "matmul": lambda v: L.matmul(v, A),
    "logical_and": lambda v: L.logical_and(A, v > 0),
    "logical_not": lambda v: L.logical_not(A),
    **{n: _array_second(n) for n in (
        "elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
        "elementwise_max", "elementwise_min", "elementwise_pow", "elementwise_mod",
        "elementwise_floordiv")},
    "operator +": lambda v: v + A, "operator + (reflected)": lambda v: A + v,
    "operator *": lambda v: A * v, "operator -": lambda v: A - v,
    "operator /": lambda v: v / A, "operator **": lambda v: v ** A,
    "operator @": lambda v: v @ A, "number as x": lambda v: L.relu(3.0),
    "list as x": lambda v: L.sin([1.0, 2.0]),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_an_array_where_a_variable_belongs_is_a_type_error_at_the_users_line(name):
    seen = []

    class Net(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data("x", shape=[3, 4, 4], dtype="float32")
            with pytest.raises(TypeError) as info:
                CALLS[name](x)   # the line the message must name
            seen.append(info.value)
            return x
    Net().Compile()
    err = seen[0]
    assert isinstance(err, OpArgumentError), (name, type(err), err)
    assert "test_math_layers.py" in str(err), str(err)


# --- trace-time errors --------------------------------------------------------------------

ERRORS = [
    (lambda v: L.clip(v, 1.0, 0.5), r"clip: min \(1.0\) must be below max \(0.5\)"),
    (lambda v: L.clip(v, "a", 1.0), "clip: min must be a number"),
    (lambda v: L.clamp(v), "clamp: give min, max or both"),
    (lambda v: L.clamp(v, 2.0, 1.0), r"clamp: min \(2.0\) must be below max"),
    (lambda v: L.clamp(v, min="0"), "clamp: min must be a number or a Variable"),
    (lambda v: L.clamp(v, max=L.cast(v, "int64")), "must be float32, float64 or int32"),
    (lambda v: L.brelu(v, 2.0, 1.0), r"brelu: t_min \(2.0\) must be below t_max"),
    (lambda v: L.softshrink(v, -0.5), "softshrink: alpha must be >= 0"),
    (lambda v: L.hard_shrink(v, "big"), "hard_shrink: threshold must be a number"),
    (lambda v: L.mish(v, threshold=0), "mish: threshold must be a number > 0"),
    (lambda v: L.sin(L.cast(v, "int32")), "sin: x .* must be float16, float32 or float64"),
    (lambda v: L.prelu(v, "row"), "prelu: mode must be one of 'all', 'channel', 'element'"),
    (lambda v: L.prelu(L.reshape(v, [-1]), "channel"), "prelu: mode 'channel' needs x of rank"),
    (lambda v: L.maxout(v, 2, axis=2), r"maxout: axis must be 1 \(NCHW\)"),
    (lambda v: L.maxout(v, 2), "maxout: x .* must be a 4-D image"),
    (lambda v: L.maxout(v, 2.5), "maxout: groups must be an int"),
    (lambda v: L.cumsum(v, axis=3), "cumsum: axis=3 does not fit x"),
    (lambda v: L.clip_by_norm(v, 0.0), "clip_by_norm: max_norm must be a number > 0"),
    (lambda v: L.l2_normalize(v, axis=5), "l2_normalize: axis must be an int that fits"),
    (lambda v: L.similarity_focus(v, 0, [0]), "similarity_focus: axis must be 1, 2 or 3"),
    (lambda v: L.similarity_focus(v, 1, []), "similarity_focus: indexes must be a non-empty"),
    (lambda v: L.bilinear_tensor_product(v, v, 0), "size must be a positive int"),
    (lambda v: L.bilinear_tensor_product(L.reshape(v, [-1]), v, 2), "x and y must be 2-D"),
    (lambda v: L.cross(v, v, dim=1.5), "cross: dim must be an int"),
    (lambda v: L.addmm(v, v, v, alpha="2"), "addmm: alpha must be a number"),
    (lambda v: L.scale(v, scale="2"), "scale: scale must be a number or a 1-element Variable"),
    (lambda v: L.softmax(v, axis=1.0), "softmax: axis must be an int"),
    (lambda v: L.mean_iou(v, v, 2.0), "mean_iou: num_classes must be an int"),
    (lambda v: L.sums([v, v], out=L.abs(v)), "sums: out=.* already holds a value"),
    # shape rules
    (lambda v: L.dot(v, L.reshape(v, [-1, 2, 3])), "must have one shape, 1-D"),
    (lambda v: L.bmm(v, v), r"bmm multiplies X \[B, M, K\] by Y \[B, K, N\]"),
    (lambda v: L.addmm(v, v, L.reshape(v, [-1, 2, 3])), "addmm needs X"),
    (lambda v: L.cross(v, v), "has no dim of size 3"),
    (lambda v: L.cross(v, v, dim=1), "must have size 3"),
    (lambda v: L.fsp_matrix(v, v), "fsp_matrix takes images"),
    (lambda v: L.cos_sim(v, L.reshape(v, [-1, 2, 3])), "must have one shape of rank >= 2"),
    (lambda v: L.dist(v, L.reshape(v, [-1, 2, 3])), "do not broadcast"),
    (lambda v: L.reduce_all(v), "reduce_all needs a bool input"),
    (lambda v: L.reduce_prod(v > 0), "reduce_prod needs a numeric"),
    (lambda v: L.logsumexp(L.cast(v, "int32")), "logsumexp: x .* must be float16"),
    (lambda v: L.cumsum(v > 0), "cumsum needs a numeric input"),
    (lambda v: L.mean_iou(v, v, 2), "Predictions and Labels must be int32 or int64"),
    (lambda v: L.similarity_focus(v, 1, [0]), "similarity_focus takes X of rank 4"),
    (lambda v: L.scale(v, scale=L.fill_constant([2], "float32", 1.0)), "must hold one number"),
    (lambda v: L.elementwise_floordiv(v, L.cast(v, "int32")), "X and Y must have the same dtype"),
]


@pytest.mark.parametrize("build,message", ERRORS, ids=[m[:40] for _, m in ERRORS])
def test_each_trace_time_error_says_what_is_wrong(build, message):

    class Net(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = L.data("x", shape=[6], dtype="float32")
            return build(x)
    with pytest.raises(FluidError, match=message):
        Net().Compile()


def test_comparisons_take_cond_where_paddle_puts_it():
    """less_than(x, y, force_cpu, cond) and the others' (x, y, cond), positionally."""
    class Count(fluid.Program):
        @fluid.network("n")
        def f(self, n):
            n = L.data("n", shape=[1], dtype="int64", append_batch_size=False)
            i = L.fill_constant([1], "int64", 0)
            j = L.fill_constant([1], "int64", 0)
            cond = L.less_than(i, n, None)
            loop = L.While(cond)
            with loop.block():
                L.increment(i, in_place=True)
                L.less_than(i, n, None, cond)
            cond2 = L.greater_than(n, j)
            loop2 = L.While(cond2)
            with loop2.block():
                L.increment(j, value=2, in_place=True)
                L.greater_than(n, j, cond2)
            return i, j
    i, j = Count().Compile().f(np.array([5]))
    assert int(np.asarray(i).reshape(())) == 5 and int(np.asarray(j).reshape(())) == 6
