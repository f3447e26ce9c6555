"""Paddle 1.8's test_cond.py, ported: `fluid.layers.cond` with its data, shapes, expected
values and tolerances. ParallelExecutor runs (``use_parallel_exe=True``) are out of scope
(docs/paddle_tests.md)."""
import numpy as np
import pytest
from paddle.common import compile_fetches, run_fetches

import fluid

layers = fluid.layers


# --- TestCondInputOutput ---------------------------------------------------------------------

def test_return_single_var():
    # branches of different shapes: the result's shape is known when the method runs
    def build():
        x = layers.fill_constant(shape=[1], dtype='float32', value=0.1)
        y = layers.fill_constant(shape=[1], dtype='float32', value=0.23)
        pred = layers.less_than(y, x)
        return [layers.cond(pred,
                            lambda: layers.fill_constant(shape=[2, 3], dtype='int32', value=2),
                            lambda: layers.fill_constant(shape=[3, 2], dtype='int32', value=-1))]
    ret, = run_fetches(build)
    assert np.allclose(np.asarray(ret), np.full((3, 2), -1, np.int32))


def test_return_var_tuple():
    # branches of different shapes and dtypes: the result has the false branch's dtype
    def true_func():
        return layers.fill_constant(shape=[1, 2], dtype='int32', value=1), \
            layers.fill_constant(shape=[2, 3], dtype='bool', value=True)

    def false_func():
        return layers.fill_constant(shape=[3, 4], dtype='float32', value=3), \
            layers.fill_constant(shape=[4, 5], dtype='int64', value=2)

    def build():
        pred = layers.fill_constant(shape=[1], dtype='bool', value=True)
        return list(layers.cond(pred, true_func, false_func))
    ret = run_fetches(build)
    assert np.allclose(np.asarray(ret[0]), np.full((1, 2), 1, np.int32))
    assert np.allclose(np.asarray(ret[1]), np.full((2, 3), True, bool))


def test_pass_and_modify_var():
    def build():
        a = layers.fill_constant(shape=[3, 2, 1], dtype='int32', value=7)
        i = fluid.data(name="i", shape=[1], dtype='int32')
        pred = ((i % 2) == 0)
        a = layers.cond(pred, lambda: a * (i + 1), lambda: a - (i - 1))
        return [a]
    run = compile_fetches(build, ["i"])
    for feed_i in range(5):
        expected_a = 7 * (feed_i + 1) if feed_i % 2 == 0 else 8 - feed_i
        ret, = run(i=np.full((1), feed_i, np.int32))
        assert np.allclose(np.asarray(ret), np.full((3, 2, 1), expected_a, np.int32))


def test_return_none():
    outs = {}

    def true_func():
        pass

    def false_func():
        return None

    def build():
        i = fluid.data(name="i", shape=[1], dtype='int32')
        pred = ((i % 2) == 0)
        outs["out"] = [layers.cond(pred, true_func, false_func),
                       layers.cond(pred, None, false_func),
                       layers.cond(pred, true_func, None)]
        return [i]
    run = compile_fetches(build, ["i"])
    for feed_i in range(5):
        run(i=np.full((1), feed_i, np.int32))   # a program whose conds give None runs
        assert outs["out"] == [None, None, None]


def test_wrong_structure_exception():
    def func_return_none():
        return None

    def func_return_one_tensor():
        return layers.fill_constant(shape=[2, 7], dtype='int32', value=3)

    def func_return_two_tensors():
        return layers.fill_constant(shape=[3, 1], dtype='int32', value=7), \
            layers.fill_constant(shape=[3, 1], dtype='int32', value=8)

    def build():
        i = fluid.data(name="i", shape=[1], dtype='int32')
        pred = ((i % 2) == 0)
        with pytest.raises(TypeError):
            layers.cond(pred, i, func_return_one_tensor)
        with pytest.raises(TypeError):
            layers.cond(pred, func_return_one_tensor, np.asarray([3]))
        for fns in ((func_return_none, func_return_one_tensor),
                    (func_return_two_tensors, func_return_none),
                    (func_return_one_tensor, func_return_two_tensors)):
            with pytest.raises(Exception) as e:
                layers.cond(pred, *fns)
            assert "Incompatible return values of true_fn and false_fn in cond" in \
                str(e.value)
        return [i]
    run_fetches(build, i=np.zeros(1, np.int32))


def differentiable_constants(*values):
    """float32 [1] constants with stop_gradient=False, as the tests set it."""
    out = []
    for v in values:
        out.append(fluid.layers.fill_constant(shape=[1], dtype='float32', value=v))
        out[-1].stop_gradient = False
    return out


def test_extremely_simple_net_with_op_in_condition():
    def build():
        a, b = differentiable_constants(1.23, 1.25)
        out = layers.cond(a - b < -1.0, lambda: a, lambda: b)
        fluid.backward.append_backward(out)
        return [out, *fluid.gradients(out, [a, b])]
    ret = run_fetches(build)
    assert ret[0][0] == np.float32(1.25)
    assert ret[1][0] == 0.0
    assert ret[2][0] == 1.0


# --- TestCondNestedControlFlow -----------------------------------------------------------------

def test_cond_inside_cond():
    def less_than_branch(i, a):
        return layers.cond(i >= 3.0, lambda: layers.elementwise_add(a, a),
                           lambda: layers.elementwise_sub(a, a))

    def greater_equal_branch(i, a):
        return layers.cond(i < 8.0, lambda: layers.elementwise_mul(a, a),
                           lambda: layers.elementwise_div(a, a))

    def build():
        i = fluid.data(name="i", shape=[1], dtype='float32')
        a = 2.0 * i
        out = layers.cond(i < 5.0, lambda: less_than_branch(i, a),
                          lambda: greater_equal_branch(i, a))
        mean = layers.mean(out)
        return [out, fluid.gradients(mean, [a])[0]]
    run = compile_fetches(build, ["i"])
    for feed_i in range(0, 10):
        expected_a = 2.0 * feed_i
        if feed_i < 5:
            expected_ret = expected_a + expected_a if feed_i >= 3 else 0.0
            expected_a_grad = 2.0 if feed_i >= 3 else 0.0
        else:
            expected_ret = expected_a * expected_a if feed_i < 8 else 1.0
            expected_a_grad = 2.0 * expected_a if feed_i < 8 else 0.0
        ret = run(i=np.full((1), feed_i, np.float32))
        assert ret[0][0] == expected_ret
        assert ret[1][0] == expected_a_grad


def test_cond_op_in_condition():
    def build():
        a, b = differentiable_constants(1.23, 1.24)
        out = fluid.layers.cond(
            a < b,
            lambda: fluid.layers.cond(a - b < -1.0,
                                      lambda: fluid.layers.elementwise_add(a, b),
                                      lambda: fluid.layers.elementwise_mul(a, b)),
            lambda: fluid.layers.cond(a == b,
                                      lambda: fluid.layers.elementwise_sub(a, b),
                                      lambda: fluid.layers.elementwise_pow(a, b)))
        return [out, *fluid.gradients(out, [a, b])]
    ret = run_fetches(build)
    assert ret[0][0] == pytest.approx(1.5252, abs=5e-7)   # assertAlmostEqual: 7 places
    assert ret[1][0] == pytest.approx(1.24, abs=5e-7)
    assert ret[2][0] == pytest.approx(1.23, abs=5e-7)


# --- TestCondBackward ----------------------------------------------------------------------

OVERFLOW_IGNORED = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def fc_net(img, label, depth, batch_norm, class_num=10):
    """Paddle's simple_nets: ``depth`` fc layers of 200 relu (bias 1.0), each followed by a
    batch_norm when ``batch_norm``, then a softmax classifier's mean cross-entropy."""
    hidden = img
    for _ in range(depth):
        hidden = fluid.layers.fc(
            hidden, size=200, act='relu',
            bias_attr=fluid.ParamAttr(initializer=fluid.initializer.Constant(value=1.0)))
        if batch_norm:
            hidden = fluid.layers.batch_norm(input=hidden)
    prediction = fluid.layers.fc(hidden, size=class_num, act='softmax')
    loss = fluid.layers.cross_entropy(input=prediction, label=label)
    return fluid.layers.mean(loss)


def simple_fc_net_with_inputs(img, label, class_num=10):
    return fc_net(img, label, 4, False, class_num)


def batchnorm_fc_with_inputs(img, label, class_num=10):
    return fc_net(img, label, 2, True, class_num)


def backward_value_helper(cond_func, rng):
    """The gradient of the loss with respect to the image, against one-sided differences
    of step 0.005, within atol 0.05 and rtol 0.05, at i = 0 .. 9."""
    def build():
        img = fluid.data(name='image', shape=[-1, 9], dtype='float32')
        img.stop_gradient = False
        label = fluid.data(name='label', shape=[-1, 1], dtype='int64')
        i = fluid.data(name="i", shape=[1], dtype='int32')
        loss = cond_func(i, img, label)
        return [fluid.gradients(loss, [img])[0], loss]
    run = compile_fetches(build, ["image", "label", "i"], seed=123)
    delta = 0.005
    for feed_i in range(0, 10):
        feed_img = rng.random_sample(size=[1, 9]).astype(np.float32)
        feed_label = rng.randint(low=0, high=10, size=[1, 1]).astype(np.int64)
        i = np.full((1), feed_i, np.int32)
        img_grad, loss_value = run(image=feed_img, label=feed_label, i=i)
        numerical_grad = np.zeros(shape=[1, 9], dtype=np.float32)
        feed_img_delta = np.copy(feed_img)
        for j in range(9):
            feed_img_delta[0][j] = feed_img[0][j] + delta
            loss_delta = run(image=feed_img_delta, label=feed_label, i=i)[1]
            numerical_grad[0][j] = (loss_delta[0] - loss_value[0]) / delta
            feed_img_delta[0][j] = feed_img[0][j]
        assert np.isclose(img_grad, numerical_grad, atol=0.05, rtol=0.05).all()


def add_optimizer_helper(cond_func, rng):
    """The program trains (SGD) through the branches. As in Paddle, the test checks that it
    runs: SGD at 0.1 on these feeds drives some softmax probabilities to 0, whose
    cross-entropy gradient overflows (NumPy's warnings, which pytest makes errors here,
    are ignored by the tests that call this)."""
    def build():
        img = fluid.data(name='image', shape=[-1, 784], dtype='float32')
        label = fluid.data(name='label', shape=[-1, 1], dtype='int64')
        i = fluid.data(name="i", shape=[1], dtype='int32')
        loss = cond_func(i, img, label)
        fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
        return [loss]
    run = compile_fetches(build, ["image", "label", "i"])
    for feed_i in range(0, 10):
        feed_img = rng.random_sample(size=[16, 784]).astype(np.float32)
        feed_label = rng.randint(low=0, high=10, size=[16, 1]).astype(np.int64)
        run(image=feed_img, label=feed_label, i=np.full((1), feed_i, np.int32))


@OVERFLOW_IGNORED
def test_cond_backward():
    def cond_func(i, img, label):
        predicate = ((i % 2) == 0)
        return layers.cond(predicate,
                           lambda: simple_fc_net_with_inputs(img, label, class_num=10),
                           lambda: batchnorm_fc_with_inputs(img, label, class_num=10))
    rng = np.random.RandomState(123)
    backward_value_helper(cond_func, rng)
    add_optimizer_helper(cond_func, rng)


@OVERFLOW_IGNORED
def test_half_nested_cond_backward():
    def branch(i, img, label):
        return layers.cond((i % 2) == 0,
                           lambda: simple_fc_net_with_inputs(img, label, class_num=10),
                           lambda: batchnorm_fc_with_inputs(img, label, class_num=10))

    def cond_func_simple_net_at_true(i, img, label):
        return layers.cond(i < 5, lambda: branch(i, img, label), lambda: layers.mean(img))

    def cond_func_simple_net_at_false(i, img, label):
        return layers.cond(i < 5, lambda: layers.mean(img), lambda: branch(i, img, label))
    rng = np.random.RandomState(123)
    backward_value_helper(cond_func_simple_net_at_true, rng)
    add_optimizer_helper(cond_func_simple_net_at_true, rng)
    backward_value_helper(cond_func_simple_net_at_false, rng)
    add_optimizer_helper(cond_func_simple_net_at_false, rng)


@OVERFLOW_IGNORED
def test_nested_cond_backward():
    def branch(i, img, label, mod_two):
        predicate = ((i % 2) == 0) if mod_two else ((i % 2) != 0)
        return layers.cond(predicate,
                           lambda: simple_fc_net_with_inputs(img, label, class_num=10),
                           lambda: batchnorm_fc_with_inputs(img, label, class_num=10))

    def cond_func(i, img, label):
        return layers.cond(i < 5, lambda: branch(i, img, label, True),
                           lambda: branch(i, img, label, False))
    rng = np.random.RandomState(123)
    backward_value_helper(cond_func, rng)
    add_optimizer_helper(cond_func, rng)


# --- TestCondWithError -----------------------------------------------------------------------

def test_input_type_error():
    def build():
        pred = fluid.data(name='y', shape=[1], dtype='bool')

        def func():
            return pred
        with pytest.raises(TypeError):
            layers.cond(None, func, func)
        with pytest.raises(TypeError):
            layers.cond(pred, func, set())
        with pytest.raises(TypeError):
            layers.cond(pred, set(), func)
        with pytest.raises(TypeError):
            layers.cond(pred, func, func, set())
        return [pred]
    run_fetches(build, y=np.ones(1, bool))
