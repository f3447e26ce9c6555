"""The control-flow ops through the op harness (`check_block`): while, conditional_block
(cond, Switch), select_input, recurrent (StaticRNN) and the tensor array ops, forward and
gradient, against the reference interpreter, the device module and float64 finite
differences, in every case that breaks naive loop gradients."""
import numpy as np
import pytest

import fluid

from .harness import check_block, check_grad, check_op

L = fluid.layers


def _counter(n):
    i = L.fill_constant(shape=[1], dtype="int64", value=0)
    return i, L.less_than(x=i, y=n)


def _step(i, n, cond):
    L.increment(x=i, value=1, in_place=True)
    L.less_than(x=i, y=n, cond=cond)


def _data(name, shape, dtype="float64", grad=True):
    return L.data(name=name, shape=shape, dtype=dtype, append_batch_size=False,
                  stop_gradient=not grad)


def _tanh_loop():
    """DESIGN §1: h = tanh(h @ w + x), n times."""
    x, w, h0 = _data("x", [3, 4]), _data("w", [4, 4]), _data("h0", [3, 4])
    n = _data("n", [1], "int64", grad=False)
    h = L.scale(h0, 1.0)
    i, cond = _counter(n)
    loop = L.While(cond=cond)
    with loop.block():
        L.assign(L.tanh(L.matmul(h, w) + x), output=h)
        _step(i, n, cond)
    return h


@pytest.mark.parametrize("n", [0, 1, 4])
def test_while_forward_and_gradient(n, rng):
    feeds = {"x": rng.standard_normal((3, 4)), "w": rng.standard_normal((4, 4)) * 0.5,
             "h0": rng.standard_normal((3, 4)), "n": np.array([n])}
    (h,) = check_block(_tanh_loop, feeds, wrt=["x", "w", "h0"], syncs=n + 1)
    want = feeds["h0"]
    for _ in range(n):
        want = np.tanh(want @ feeds["w"] + feeds["x"])
    np.testing.assert_allclose(h, want, rtol=1e-12)


def test_var_carried_and_read_after_the_loop(rng):
    """h is read before the loop, carried by it and read after it: each read gets the
    gradient of its own value."""
    def build():
        x = _data("x", [2, 3])
        n = _data("n", [1], "int64", grad=False)
        h = L.scale(x, 2.0)
        before = h * h
        i, cond = _counter(n)
        loop = L.While(cond=cond)
        with loop.block():
            L.assign(L.sigmoid(h) * h, output=h)
            _step(i, n, cond)
        return [before + h * x, h]
    check_block(build, {"x": rng.standard_normal((2, 3)), "n": np.array([3])}, wrt=["x"])


def test_var_from_before_the_loop_read_inside(rng):
    """a and b are computed before the loop and read in every iteration (their gradients
    are summed over the iterations), and read again after it."""
    def build():
        x, y = _data("x", [2, 3]), _data("y", [2, 3])
        n = _data("n", [1], "int64", grad=False)
        a, b = L.exp(x * 0.1), y * 3.0
        acc = L.scale(x, 0.0)
        i, cond = _counter(n)
        loop = L.While(cond=cond)
        with loop.block():
            L.assign(acc * a + b, output=acc)
            _step(i, n, cond)
        return acc + a * b
    check_block(build, {"x": rng.standard_normal((2, 3)), "y": rng.standard_normal((2, 3)),
                        "n": np.array([4])}, wrt=["x", "y"])


def test_switch_inside_while(rng):
    """Each iteration takes one of three branches by the counter's value mod 3."""
    def build():
        x = _data("x", [2, 3])
        n = _data("n", [1], "int64", grad=False)
        h = L.scale(x, 1.0)
        i, cond = _counter(n)
        three = L.fill_constant(shape=[1], dtype="int64", value=3)
        loop = L.While(cond=cond)
        with loop.block():
            phase = L.elementwise_mod(i, three)
            with L.Switch() as switch:
                with switch.case(L.equal(phase, L.fill_constant([1], "int64", 0))):
                    L.assign(L.tanh(h) * x, output=h)
                with switch.case(L.equal(phase, L.fill_constant([1], "int64", 1))):
                    L.assign(h * h * 0.5 + x, output=h)
                with switch.default():
                    L.assign(L.sigmoid(h + x), output=h)
            _step(i, n, cond)
        return h
    x = rng.standard_normal((2, 3))
    (h,) = check_block(build, {"x": x, "n": np.array([5])}, wrt=["x"])
    want = x
    for k in range(5):
        want = [np.tanh(want) * x, want * want * 0.5 + x, 1 / (1 + np.exp(-(want + x)))][k % 3]
    np.testing.assert_allclose(h, want, rtol=1e-12)


def test_nested_loops(rng):
    """An inner loop reads the outer loop's carried var, which the outer body then
    overwrites: the inner gradient reads it as the inner loop saw it."""
    def build():
        x, w = _data("x", [2, 3]), _data("w", [3, 3])
        n, m = _data("n", [1], "int64", grad=False), _data("m", [1], "int64", grad=False)
        h = L.scale(x, 1.0)
        i, cond = _counter(n)
        outer = L.While(cond=cond)
        with outer.block():
            g = L.scale(h, 0.5)
            j, inner_cond = _counter(m)
            inner = L.While(cond=inner_cond)
            with inner.block():
                L.assign(L.tanh(L.matmul(g, w) + h), output=g)
                _step(j, m, inner_cond)
            L.assign(g * h + x, output=h)
            _step(i, n, cond)
        return h
    feeds = {"x": rng.standard_normal((2, 3)), "w": rng.standard_normal((3, 3)) * 0.5,
             "n": np.array([3]), "m": np.array([2])}
    (h,) = check_block(build, feeds, wrt=["x", "w"], syncs=(3 + 1) + 3 * (2 + 1))
    want = feeds["x"]
    for _ in range(3):
        g = 0.5 * want
        for _ in range(2):
            g = np.tanh(g @ feeds["w"] + want)
        want = g * want + feeds["x"]
    np.testing.assert_allclose(h, want, rtol=1e-12)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_takes_one_branch(sign, rng):
    def build():
        x, y = _data("x", [2, 3]), _data("y", [2, 3])
        s = _data("s", [1], grad=False)
        pred = L.greater_than(s, L.fill_constant([1], "float64", 0.0))
        return L.cond(pred, lambda: L.tanh(x) * y, lambda: (x - y) * 2.0)
    feeds = {"x": rng.standard_normal((2, 3)), "y": rng.standard_normal((2, 3)),
             "s": np.array([sign])}
    (out,) = check_block(build, feeds, wrt=["x", "y"])
    x, y = feeds["x"], feeds["y"]
    np.testing.assert_allclose(out, np.tanh(x) * y if sign > 0 else (x - y) * 2)


def test_while_loop_with_a_data_dependent_trip_count(rng):
    """Halve until the norm is below 1: how often depends on the data."""
    def build():
        x = _data("x", [3])
        h = L.scale(x, 1.0)
        k = L.fill_constant([1], "int64", 0)
        one = L.fill_constant([1], "float64", 1.0)

        def cond(h, k):
            return L.greater_than(L.reshape(L.reduce_sum(h * h), [1]), one)

        def body(h, k):
            return [h * 0.5, L.increment(k, in_place=False)]
        h, k = L.while_loop(cond, body, [h, k])
        return [h, k]
    x = np.array([3.0, 4.0, 12.0])
    h, k = check_block(build, {"x": x}, wrt=["x"])
    assert k == 4 and np.linalg.norm(h) < 1 < np.linalg.norm(h * 2)


def test_tensor_arrays_through_a_loop(rng):
    """Each iteration writes an element; reading one back and stacking all of them carry
    gradients back through the writes."""
    def build():
        x = _data("x", [2, 3])
        n = _data("n", [1], "int64", grad=False)
        arr = L.create_array("float64")
        h = L.scale(x, 1.0)
        i, cond = _counter(n)
        loop = L.While(cond=cond)
        with loop.block():
            L.assign(L.tanh(h) + x * 0.5, output=h)
            L.array_write(h * h, i, array=arr)
            _step(i, n, cond)
        stacked, _ = L.tensor_array_to_tensor(arr, axis=0, use_stack=True)
        first = L.array_read(arr, L.fill_constant([1], "int64", 1))
        return [stacked, first * x, L.array_length(arr)]
    stacked, _, length = check_block(build, {"x": rng.standard_normal((2, 3)),
                                             "n": np.array([3])}, wrt=["x"])
    assert stacked.shape == (3, 2, 3) and int(length) == 3


def _lstm_step(x_t, h_prev, c_prev, hidden):
    gates = L.fc(input=[x_t, h_prev], size=4 * hidden)
    i, f, o, g = L.split(gates, 4, dim=1)
    c = L.sigmoid(f) * c_prev + L.sigmoid(i) * L.tanh(g)
    return L.sigmoid(o) * L.tanh(c), c


@pytest.mark.parametrize("steps", [1, 5])
def test_static_rnn_lstm(steps, rng):
    def build():
        x = L.data(name="x", shape=[-1, -1, 2], dtype="float64", append_batch_size=False,
                   stop_gradient=False)
        rnn = L.StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(x)
            h_prev = rnn.memory(shape=[-1, 3], batch_ref=x_t)
            c_prev = rnn.memory(shape=[-1, 3], batch_ref=x_t)
            h, c = _lstm_step(x_t, h_prev, c_prev, 3)
            rnn.update_memory(h_prev, h)
            rnn.update_memory(c_prev, c)
            rnn.step_output(h)
            rnn.step_output(c * 2.0)
        hs, cs = rnn()
        return [hs, cs, hs[-1]]
    check_block(build, {"x": rng.standard_normal((steps, 2, 2))}, wrt=["x"])


def test_static_rnn_with_a_given_initial_memory(rng):
    def build():
        x = L.data(name="x", shape=[-1, -1, 3], dtype="float64", append_batch_size=False,
                   stop_gradient=False)
        h0 = _data("h0", [2, 3])
        rnn = L.StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(x)
            h_prev = rnn.memory(init=h0)
            h = L.tanh(x_t * h_prev + h0)
            rnn.update_memory(h_prev, h)
            rnn.step_output(h)
        return rnn()
    check_block(build, {"x": rng.standard_normal((4, 2, 3)),
                        "h0": rng.standard_normal((2, 3))}, wrt=["x", "h0"])


# --- the small ops control flow uses -----------------------------------------------------

def test_logical_ops(rng):
    a, b = rng.uniform(size=(3, 4)) > 0.5, rng.uniform(size=(3, 4)) > 0.5
    check_op("logical_not", {"X": a}, reference=lambda X, **_: ~X)
    for name, fn in (("logical_and", np.logical_and), ("logical_or", np.logical_or),
                     ("logical_xor", np.logical_xor)):
        check_op(name, {"X": a, "Y": b}, reference=lambda X, Y, fn=fn, **_: fn(X, Y))


def test_elementwise_mod(rng):
    x, y = rng.uniform(-5, 5, (3, 4)), rng.uniform(1, 3, (3, 4))
    check_op("elementwise_mod", {"X": x, "Y": y}, reference=lambda X, Y, **_: np.mod(X, Y))
    check_op("elementwise_mod", {"X": np.arange(-4, 8).reshape(3, 4), "Y": np.array([3])},
             reference=lambda X, Y, **_: X % Y)
    check_grad("elementwise_mod", {"X": x, "Y": y}, wrt=["X", "Y"])


def test_fill_constant_batch_size_like(rng):
    check_op("fill_constant_batch_size_like", {"Input": rng.standard_normal((5, 2, 7))},
             {"shape": [-1, 4], "dtype": "float32", "value": 1.5, "input_dim_idx": 1},
             reference=lambda Input, **_: np.full((2, 4), 1.5, np.float32),
             batch_unknown=False)


def test_select_input(rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    for k in (0, 1):
        check_op("select_input", {"X": [a, b], "Mask": np.array([k], np.int32)},
                 reference=lambda X, Mask, k=k, **_: X[k])
        check_grad("select_input", {"X": [a, b], "Mask": np.array([k], np.int32)}, wrt=["X"])
