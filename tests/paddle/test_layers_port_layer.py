"""Paddle 1.8's test_layers.py, TestLayer's static-graph parts, ported: each ``layers.*``
program Paddle ran under ``static_graph()`` is built with the same arguments in a
`fluid.Program` method (paddle/layers_port.py), compiled and run once on Paddle's inputs
(or arrays of the declared shapes), and where Paddle compared the result with its dygraph
twin, the value is checked against NumPy here. The ``fluid.dygraph.nn`` layer classes
Paddle also ran in static mode, and the tests that run only in dygraph mode, are out of
scope (docs/paddle_tests.md).
"""
import numpy as np
import pytest
from paddle.layers_port import run_case

import fluid

layers = fluid.layers
ParamAttr, Constant = fluid.ParamAttr, fluid.initializer.Constant
ConstantInitializer = fluid.initializer.ConstantInitializer


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_dropout():
    inp = np.ones([3, 32, 32], dtype='float32')

    def build(self):
        t = self.data('data', shape=[3, 32, 32], dtype='float32', append_batch_size=False,
                      value=inp)
        return fluid.layers.dropout(t, dropout_prob=0.35, seed=1, is_test=False)
    out, = run_case(build)
    # downgrade_in_infer: kept values pass unscaled while training
    assert set(np.unique(out)) <= {0.0, 1.0} and 0.55 < out.mean() < 0.75


def test_layer_norm():
    inp = np.ones([3, 32, 32], dtype='float32')

    def build(self):
        t = self.data('data', shape=[3, 32, 32], dtype='float32', append_batch_size=False,
                      value=inp)
        return layers.layer_norm(t, bias_attr=fluid.initializer.ConstantInitializer(value=1),
                                 act='sigmoid')
    out, = run_case(build)
    np.testing.assert_allclose(out, sigmoid(1.0), rtol=1e-6)   # x - mean(x) is 0


def test_relu():
    def build(self):
        t = self.data('t', shape=[3, 3], dtype='float32', value=np.ones([2, 3, 3]))
        return layers.relu(t)
    np.testing.assert_array_equal(run_case(build)[0], np.ones([2, 3, 3]))


def test_matmul():
    def build(self):
        t = self.data('t', shape=[3, 3], dtype='float32', value=np.ones([2, 3, 3]))
        t2 = self.data('t2', shape=[3, 3], dtype='float32', value=np.ones([2, 3, 3]))
        return layers.matmul(t, t2)
    np.testing.assert_array_equal(run_case(build)[0], np.full([2, 3, 3], 3.0))


def test_conv2d():
    def build(self):
        images = self.data('pixel', shape=[3, 5, 5], dtype='float32',
                           value=np.ones([2, 3, 5, 5]))
        return layers.conv2d(input=images, num_filters=3, filter_size=[2, 2])
    out, = run_case(build)
    assert out.shape == (2, 3, 4, 4)
    np.testing.assert_allclose(out, out[:1, :, :1, :1] + 0 * out, rtol=1e-6)  # ones in


def test_gru_unit():
    lod = [[2, 4, 3]]
    D = 5
    T = sum(lod[0])
    rng = np.random.default_rng(0)
    input = rng.random((T, 3 * D)).astype('float32')
    hidden_input = rng.random((T, D)).astype('float32')

    def build(self):
        x = self.data('x', shape=[-1, D * 3], dtype='float32', value=input)
        hidden = self.data('hidden', shape=[-1, D], dtype='float32', value=hidden_input)
        return layers.gru_unit(input=x, hidden=hidden, size=D * 3)
    updated_hidden, reset_hidden_pre, gate = run_case(build)
    assert updated_hidden.shape == (T, D) and gate.shape == (T, 3 * D)


def test_elementwise_math():
    n = np.ones([3, 3], dtype='float32')
    values = [n, n * 1.1, n * 2, n * 3, n * 4, n * 5]

    def build(self):
        t, t2, t3, t4, t5, t6 = [self.data(f't{k}' if k else 't', shape=[3, 3],
                                           dtype='float32', value=v[None])
                                 for k, v in enumerate(values, 0) if k < 6]
        ret = layers.elementwise_add(t, t2)
        ret = layers.elementwise_pow(ret, t3)
        ret = layers.elementwise_div(ret, t4)
        ret = layers.elementwise_sub(ret, t5)
        ret = layers.elementwise_mul(ret, t6)
        return ret
    want = ((1 + 1.1) ** 2 / 3 - 4) * 5
    np.testing.assert_allclose(run_case(build)[0], np.full([1, 3, 3], want), rtol=1e-6)


def test_sequence_conv():
    inp_np = np.arange(12).reshape([3, 4]).astype('float32')

    def build(self):
        # Paddle's LoD [[1, 1, 1]]: three sequences of one step each
        seq, seq_len = self.sequence('seq_in', [4], lengths=[1, 1, 1], value=inp_np)
        return layers.sequence_conv(seq, 2, act='sigmoid', lengths=seq_len)
    out, = run_case(build)
    assert out.shape == (3, 1, 2) and ((out > 0) & (out < 1)).all()


def test_conv2d_transpose():
    inp_np = np.arange(0, 24).reshape([2, 3, 2, 2]).astype('float32')

    def build(self):
        img = self.data('pixel', shape=[3, 2, 2], dtype='float32', value=inp_np)
        return layers.conv2d_transpose(
            input=img, num_filters=10, filter_size=27, act='sigmoid',
            bias_attr=fluid.initializer.ConstantInitializer(value=1))
    assert run_case(build)[0].shape == (2, 10, 28, 28)


def test_bilinear_tensor_product():
    inp_np_x = np.array([[1, 2, 3]]).astype('float32')
    inp_np_y = np.array([[4, 5, 6]]).astype('float32')

    def build(self):
        data_x = self.data('x', shape=[1, 3], dtype="float32", append_batch_size=False,
                           value=inp_np_x)
        data_y = self.data('y', shape=[1, 3], dtype="float32", append_batch_size=False,
                           value=inp_np_y)
        out = layers.bilinear_tensor_product(
            data_x, data_y, 6, bias_attr=fluid.initializer.ConstantInitializer(value=1),
            act='sigmoid')
        out2 = layers.bilinear_tensor_product(data_x, data_y, 6, act='sigmoid')
        return out, out2
    out, out2 = run_case(build)
    assert out.shape == out2.shape == (1, 6)


@pytest.mark.parametrize("mode", ["channel", "element", "all"])
def test_prelu(mode):
    inp_np = np.ones([5, 200, 100, 100]).astype('float32')

    def build(self):
        data_t = self.data("input", shape=[5, 200, 100, 100], dtype="float32",
                           append_batch_size=False, value=inp_np)
        return layers.prelu(data_t, mode, param_attr=ParamAttr(initializer=Constant(1.0)))
    np.testing.assert_array_equal(run_case(build)[0], inp_np)


def test_embeding():
    inp_word = np.array([[1]]).astype('int64')
    dict_size = 20

    def build(self):
        data_t = self.data('word', shape=[1], dtype='int64', value=inp_word)
        return layers.embedding(input=data_t, size=[dict_size, 32], param_attr='emb.w',
                                is_sparse=False)
    assert run_case(build)[0].shape == (1, 32)


def test_nce():
    window_size = 5
    dict_size = 20
    label_word = int(window_size // 2) + 1
    inp_word = np.array([[1], [2], [3], [4], [5]]).astype('int64')
    nid_freq_arr = np.random.default_rng(0).dirichlet(np.ones(20) * 1000).astype('float32')
    seed = 1

    def build(self):
        words = [self.data(f'word_{i}', shape=[None], dtype='int64',
                           value=inp_word[i]) for i in range(window_size)]
        sample_weights = layers.fill_constant(shape=[5, 1], dtype='float32', value=1)
        embs = [fluid.embedding(input=words[i], size=[dict_size, 32], param_attr='emb.w',
                                is_sparse=False)
                for i in range(window_size) if i != label_word]
        embs = layers.concat(input=embs, axis=1)
        wl = fluid.layers.unsqueeze(words[label_word], axes=[0])
        return layers.nce(input=embs, label=wl, num_total_classes=dict_size,
                          num_neg_samples=2, sampler="custom_dist",
                          custom_dist=nid_freq_arr.tolist(), seed=seed, param_attr='nce.w',
                          bias_attr='nce.b', sample_weight=sample_weights)
    assert run_case(build)[0].shape == (1, 1)


def test_conv3d():
    def build(self):
        images = self.data('pixel', shape=[3, 6, 6, 6], dtype='float32',
                           value=np.ones([2, 3, 6, 6, 6]))
        return layers.conv3d(input=images, num_filters=3, filter_size=2)
    assert run_case(build)[0].shape == (2, 3, 5, 5, 5)


def test_row_conv():
    input = np.arange(15).reshape([3, 5]).astype('float32')

    def build(self):
        x, x_len = self.sequence('X', [5], lengths=[1, 1, 1], value=input)
        return layers.row_conv(input=x, future_context_size=2, lengths=x_len)
    assert run_case(build)[0].shape == (3, 1, 5)


def test_group_norm():
    shape = (2, 4, 3, 3)
    input = np.random.default_rng(0).random(shape).astype('float32')

    def build(self):
        # Paddle declares X with lod_level=1 and feeds the LoD [[1, 1]]: one sample per
        # sequence, a plain batch
        X = self.data('X', shape=shape, dtype='float32', append_batch_size=False, value=input)
        return layers.group_norm(
            input=X, groups=2, param_attr=fluid.initializer.Uniform(low=-0.5, high=0.5),
            bias_attr=fluid.initializer.ConstantInitializer(value=1))
    assert run_case(build)[0].shape == shape


def test_spectral_norm():
    shape = (2, 4, 3, 3)
    input = np.random.default_rng(0).random(shape).astype('float32')

    def build(self):
        Weight = self.data('Weight', shape=shape, dtype='float32', append_batch_size=False,
                           value=input)
        return layers.spectral_norm(weight=Weight, dim=1, power_iters=2)
    out, = run_case(build)
    # the weight divided by an estimate of its largest singular value: about 1 after
    w = out.transpose(1, 0, 2, 3).reshape(4, -1)
    assert 0.5 < np.linalg.norm(w, 2) < 1.5


def test_conv3d_transpose():
    input_array = np.arange(0, 48).reshape([2, 3, 2, 2, 2]).astype('float32')

    def build(self):
        img = self.data('pixel', shape=[3, 2, 2, 2], dtype='float32', value=input_array)
        return layers.conv3d_transpose(input=img, num_filters=12, filter_size=12,
                                       use_cudnn=False)
    assert run_case(build)[0].shape == (2, 12, 13, 13, 13)


def test_eye_op():
    # Paddle checks the values in dygraph mode and the argument errors in static mode
    def build(self):
        return (layers.eye(num_rows=3, num_columns=2),
                layers.eye(num_rows=3, num_columns=2, batch_shape=[3]),
                layers.eye(num_rows=3, num_columns=2, batch_shape=[4, 3]),
                layers.eye(20))
    eye, rlt1, rlt2, diag = run_case(build)
    np_eye = np.eye(3, 2)
    np.testing.assert_array_equal(eye, np_eye)
    np.testing.assert_array_equal(rlt1, np.stack([np_eye] * 3))
    np.testing.assert_array_equal(rlt2, np.stack([np.stack([np_eye] * 3)] * 4))
    np.testing.assert_array_equal(diag, np.eye(20))
    for bad in ({'num_rows': 3.1}, {'num_rows': 3, 'num_columns': 2.2},
                {'num_rows': 3, 'batch_shape': 2}, {'num_rows': 3, 'batch_shape': [-1]}):
        with pytest.raises(TypeError):
            run_case(lambda self, bad=bad: layers.eye(**bad))


def test_hard_swish():
    def build(self):
        t = self.data('t', shape=[3, 3], dtype='float32', value=np.ones([2, 3, 3]))
        return layers.hard_swish(t)
    np.testing.assert_allclose(run_case(build)[0], np.full([2, 3, 3], 4 / 6), rtol=1e-6)


def test_while_loop():
    def build(self):
        i = layers.fill_constant(shape=[1], dtype='int64', value=0)
        ten = layers.fill_constant(shape=[1], dtype='int64', value=10)

        def cond(i):
            return layers.less_than(i, ten)

        def body(i):
            return i + 1
        return layers.while_loop(cond, body, [i])
    np.testing.assert_array_equal(run_case(build)[0], [10])


@pytest.mark.parametrize("compare,want", [
    (layers.less_than, np.less), (layers.less_equal, np.less_equal),
    (layers.greater_than, np.greater), (layers.greater_equal, np.greater_equal),
    (layers.equal, np.equal)])
def test_compare(compare, want):
    value_a = np.arange(3).reshape(3, 1)
    value_b = np.arange(3).reshape(3, 1)

    def build(self):
        a = self.data('a', shape=[1], dtype='int64', value=value_a)
        b = self.data('b', shape=[1], dtype='int64', value=value_b)
        return compare(x=a, y=b)
    np.testing.assert_array_equal(run_case(build)[0], want(value_a, value_b))


def test_cond():
    def less_than_branch(a, b):
        return fluid.layers.elementwise_add(a, b)

    def greater_equal_branch(a, b):
        return fluid.layers.elementwise_sub(a, b)

    def build(self):
        a = fluid.layers.fill_constant(shape=[1], dtype='float32', value=0.1)
        b = fluid.layers.fill_constant(shape=[1], dtype='float32', value=0.23)
        return fluid.layers.cond(a >= b, lambda: greater_equal_branch(a, b),
                                 lambda: less_than_branch(a, b))
    np.testing.assert_allclose(run_case(build)[0], [0.33], rtol=1e-6)


def fn_1():
    return layers.fill_constant(shape=[1, 2], dtype='float32', value=1)


def fn_2():
    return layers.fill_constant(shape=[2, 2], dtype='int32', value=2)


def fn_3():
    return layers.fill_constant(shape=[3], dtype='int32', value=3)


# Paddle's case and switch_case branches return values of different shapes and dtypes:
# cond declares -1 for the dims that differ and the false branch's dtype, so these two
# check the values only (Paddle runs the chosen branch's own tensor).
def test_case():
    def build(self):
        x = layers.fill_constant(shape=[1], dtype='float32', value=0.3)
        y = layers.fill_constant(shape=[1], dtype='float32', value=0.1)
        z = layers.fill_constant(shape=[1], dtype='float32', value=0.2)
        pred_1 = layers.less_than(z, x)  # true: 0.2 < 0.3
        pred_2 = layers.less_than(x, y)  # false: 0.3 < 0.1
        pred_3 = layers.equal(x, y)  # false: 0.3 == 0.1
        out_1 = layers.case(pred_fn_pairs=[(pred_1, fn_1), (pred_2, fn_2)], default=fn_3)
        out_2 = layers.case(pred_fn_pairs=[(pred_2, fn_2), (pred_3, fn_3)])
        return out_1, out_2
    out_1, out_2 = run_case(build, check_types=False)
    np.testing.assert_array_equal(out_1, np.ones([1, 2]))
    np.testing.assert_array_equal(out_2, np.full([3], 3))     # no default: the last pair's


def test_switch_case():
    def build(self):
        index_1 = layers.fill_constant(shape=[1], dtype='int32', value=1)
        index_2 = layers.fill_constant(shape=[1], dtype='int32', value=2)
        out_1 = layers.switch_case(branch_index=index_1, branch_fns={1: fn_1, 2: fn_2},
                                   default=fn_3)
        out_2 = layers.switch_case(branch_index=index_2, branch_fns=[(1, fn_1), (2, fn_2)],
                                   default=fn_3)
        out_3 = layers.switch_case(branch_index=index_2,
                                   branch_fns=[(0, fn_1), (4, fn_2), (7, fn_3)])
        return out_1, out_2, out_3
    out_1, out_2, out_3 = run_case(build, check_types=False)
    np.testing.assert_array_equal(out_1, np.ones([1, 2]))
    np.testing.assert_array_equal(out_2, np.full([2, 2], 2))
    np.testing.assert_array_equal(out_3, np.full([3], 3))     # no default: the largest key's


def test_crop_tensor():
    x_np = np.random.default_rng(0).random((2, 6, 5, 8))

    def build(self):
        # Paddle declares dim1, dim2, crop_shape and crop_offset with data's default
        # float32, which its op cannot read as sizes; int32 (crop_tensor's type) here
        x = self.data("x1", shape=[6, 5, 8], value=x_np)
        dim1 = self.data("dim1", shape=[1], dtype="int32", append_batch_size=False, value=[1])
        dim2 = self.data("dim2", shape=[1], dtype="int32", append_batch_size=False, value=[2])
        crop_shape1 = (1, 2, 4, 4)
        crop_shape2 = self.data("crop_shape", shape=[4], dtype="int32",
                                append_batch_size=False, value=[2, 3, 4, 5])
        crop_shape3 = [-1, dim1, dim2, 4]
        crop_offsets1 = [0, 0, 1, 0]
        crop_offsets2 = self.data("crop_offset", shape=[4], dtype="int32",
                                  append_batch_size=False, value=[0, 1, 1, 2])
        crop_offsets3 = [0, dim1, dim2, 0]
        out1 = fluid.layers.crop_tensor(x, shape=crop_shape1, offsets=crop_offsets1)
        out2 = fluid.layers.crop_tensor(x, shape=crop_shape2, offsets=crop_offsets2)
        out3 = fluid.layers.crop_tensor(x, shape=crop_shape3, offsets=crop_offsets3)
        return out1, out2, out3
    out1, out2, out3 = run_case(build)
    np.testing.assert_array_equal(out1, x_np[:1, :2, 1:5, :4].astype('float32'))
    np.testing.assert_array_equal(out2, x_np[:2, 1:4, 1:5, 2:7].astype('float32'))
    np.testing.assert_array_equal(out3, x_np[:, 1:2, 2:4, :4].astype('float32'))


def test_shard_index():
    label = np.array([[[0], [5], [11], [19]], [[10], [9], [3], [18]]])

    def build(self):
        x = self.data("label", shape=[4, 1], dtype='int64', value=label)
        return fluid.layers.shard_index(input=x, index_num=20, nshards=2, shard_id=0)
    # shard 0 holds ids 0 to 9; the others become -1 (ignore_value)
    np.testing.assert_array_equal(run_case(build)[0], np.where(label < 10, label, -1))


def test_accuracy():
    x = np.random.default_rng(0).random((3, 32, 32)).astype("float32")
    y = np.array([[1], [0], [1]])

    def build(self):
        data = self.data("input", shape=[-1, 32, 32], dtype="float32", value=x)
        label = self.data("label", shape=[-1, 1], dtype="int", value=y)
        fc_out = fluid.layers.fc(input=data, size=10)
        predict = fluid.layers.softmax(input=fc_out)
        return fluid.layers.accuracy(input=predict, label=label, k=5)
    acc, = run_case(build)
    assert acc.size == 1 and 0 <= acc <= 1      # Paddle's [1]; 0-d here, as mean's


#: TestLayer's tests not ported, with the reason (docs/paddle_tests.md).
OUT_OF_SCOPE = {
    "test_custom_layer_with_kwargs": "dygraph only (a fluid.dygraph.Layer subclass)",
    "test_linear": "dygraph API: its static part runs fluid.dygraph.Linear only",
    "test_elementwise_minmax": "dygraph only",
    "test_one_hot": "dygraph only",
    "test_split": "dygraph only",
    "test_topk": "dygraph only",
    "test_tree_conv": "fluid.contrib.layers.tree_conv: fluid.contrib is outside the public "
                      "lists tools/paddle18.py tracks",
}
