"""Paddle 1.8's test_recurrent_op.py, ported: `StaticRNN` forward against its NumPy step
and every gradient against central differences (step 0.005, rtol 0.01). Paddle feeds the
parameters W and U as it feeds data; here they are set in the compiled program's state."""
import numpy as np
from paddle.common import compile_fetches

import fluid
from fluid import ParamAttr

layers = fluid.layers


class PyRNNBase:
    def __init__(self, input_shape, output_shape):
        self.x = np.ones(shape=input_shape).astype("float32")
        self.y = np.zeros(shape=output_shape).astype("float32")

    def forward(self):
        for step_id in range(self.x.shape[0]):
            self.step(step_id, self.x[step_id])
        return np.array([np.mean(self.y)])


class PySimpleRNN1(PyRNNBase):
    def __init__(self, input_shape, output_shape, rng):
        super().__init__(input_shape, output_shape)
        seq_len, batch_size, input_dim = input_shape
        self.h_boot = rng.normal(size=(batch_size, input_dim)).astype("float32")
        self.scale = 1.0 / 2.0
        self.mems = np.zeros(shape=(seq_len, batch_size, input_dim)).astype("float32")

    def step(self, step_id, x):
        pre_mem = self.h_boot if step_id == 0 else self.mems[step_id - 1]
        self.mems[step_id] = (pre_mem + x) * self.scale
        self.y[step_id] = self.mems[step_id]


class PySimpleRNN2(PyRNNBase):
    def __init__(self, input_shape, output_shape, rng):
        super().__init__(input_shape, output_shape)
        seq_len, batch_size, input_dim = input_shape
        self.W = np.ones(shape=(input_dim, input_dim)).astype("float32")
        self.U = np.zeros(shape=(input_dim, input_dim)).astype("float32")
        self.h_boot = np.ones(shape=(batch_size, input_dim)).astype("float32")
        self.mems = np.zeros(shape=(seq_len, batch_size, input_dim)).astype("float32")

    def step(self, step_id, x):
        pre_mem = self.mems[step_id - 1] if step_id > 0 else self.h_boot
        xW = np.matmul(x, self.W).astype("float32")
        hU = np.matmul(pre_mem, self.U).astype("float32")
        self.mems[step_id] = 1. / (1. + np.exp(-(xW + hU)))
        self.y[step_id] = self.mems[step_id]


class PySimpleRNN3(PyRNNBase):
    def __init__(self, input_shape, output_shape, rng):
        super().__init__(input_shape, output_shape)
        seq_len, batch_size, input_dim = input_shape
        self.h_boot1 = rng.normal(size=(batch_size, input_dim)).astype("float32")
        self.h_boot2 = rng.normal(size=(batch_size, input_dim)).astype("float32")
        self.mems1 = np.zeros(shape=(seq_len, batch_size, input_dim)).astype("float32")
        self.mems2 = np.zeros(shape=(seq_len, batch_size, input_dim)).astype("float32")

    def step(self, step_id, x):
        pre_mem1 = self.h_boot1 if step_id == 0 else self.mems1[step_id - 1]
        pre_mem2 = self.h_boot2 if step_id == 0 else self.mems2[step_id - 1]
        self.mems1[step_id] = pre_mem1
        self.mems2[step_id] = pre_mem2
        self.y[step_id] = self.mems1[step_id] + self.mems2[step_id] + x


class PySimpleRNN4(PyRNNBase):
    def __init__(self, input_shape, output_shape, rng):
        super().__init__(input_shape, output_shape)
        self.mems = np.zeros(shape=input_shape).astype("float32")

    def step(self, step_id, x):
        pre_mem = np.zeros_like(x) if step_id == 0 else self.mems[step_id - 1]
        self.mems[step_id] = pre_mem + x
        self.y[step_id] = self.mems[step_id]


class PySimpleRNN5(PyRNNBase):
    def __init__(self, input_shape, output_shape, rng):
        super().__init__(input_shape, output_shape)
        seq_len, batch_size, input_dim = input_shape
        self.w1 = rng.uniform(-0.1, 0.1, size=(input_dim, input_dim)).astype("float32")
        self.w2 = rng.uniform(-0.1, 0.1, size=(input_dim * 2, input_dim)).astype("float32")
        self.emb = rng.uniform(-0.1, 0.1, size=(seq_len, batch_size,
                                                input_dim)).astype("float32")
        self.mems = np.zeros(shape=(seq_len, batch_size, input_dim)).astype("float32")
        self.oy = np.matmul(self.emb, self.w1)

    def step(self, step_id, x):
        def softmax(x):   # Paddle's reference: over the first axis (Python's sum)
            return np.exp(x) / sum(np.exp(x))
        pre_mem = np.zeros_like(x) if step_id == 0 else self.mems[step_id - 1]
        new_mem = np.matmul(np.concatenate([x, pre_mem], 1), self.w2)
        new_mem = np.expand_dims(new_mem, 1)
        weight = softmax(np.matmul(new_mem, self.oy.transpose((0, 2, 1))))
        new_mem = np.squeeze(np.matmul(weight, self.oy), 1)
        self.mems[step_id] = new_mem
        self.y[step_id] = self.mems[step_id]


def data(name, shape, append_batch_size=False):
    var = layers.data(shape=shape, dtype='float32', name=name,
                      append_batch_size=append_batch_size)
    var.stop_gradient = False
    return var


def sigmoid_step(x, h_boot, sizes):
    """RecurrentOpTest2's step: h = sigmoid(fc_W(x_t) + fc_U(h)), W starting at 1, U at 0."""
    rnn = layers.StaticRNN()
    with rnn.step():
        h_pre = rnn.memory(init=h_boot)
        x_t = rnn.step_input(x)
        temp_l = layers.fc(input=x_t, size=sizes, bias_attr=False, param_attr=ParamAttr(
            name='W', initializer=fluid.initializer.ConstantInitializer(1.0)))
        temp_r = layers.fc(input=h_pre, size=sizes, bias_attr=False, param_attr=ParamAttr(
            name='U', initializer=fluid.initializer.ConstantInitializer(0.0)))
        h = layers.sigmoid(x=layers.elementwise_add(x=temp_l, y=temp_r))
        rnn.update_memory(h_pre, h)
        rnn.output(h)
    return rnn()


def check_backward(py_class, create_rnn_op, shape, feeds, grads, params=(), rtol=0.01,
                   seed=123):
    """Paddle's test_backward: the forward (the mean of the outputs) against the NumPy
    step, then the gradient with respect to each of ``grads`` against central differences.
    ``create_rnn_op(shape)`` declares the data vars ``feeds`` and returns the RNN's output
    and those vars by name; ``params`` are parameters, set in the program's state."""
    py_rnn = py_class(shape, shape, np.random.RandomState(seed))

    def build():
        output, data_vars = create_rnn_op(shape)
        out = layers.mean(output)
        targets = [data_vars[n] if n in data_vars else layers.create_parameter(
            list(getattr(py_rnn, n).shape), 'float32', name=n) for n in grads]
        return [out, *fluid.gradients(out, targets)]
    run = compile_fetches(build, feeds)

    def forward():
        for p in params:
            run.program.set_var(p, getattr(py_rnn, p))
        return run(**{n: getattr(py_rnn, n) for n in feeds})
    outs = forward()
    py_output = py_rnn.forward()
    assert outs[0].shape == py_output.shape
    assert np.isclose(outs[0], py_output, rtol=0.01).all()
    delta = 0.005
    for name, ana_grad in zip(grads, outs[1:]):
        feed = getattr(py_rnn, name)
        num_grad = np.zeros_like(feed)
        for f, g in np.nditer([feed, num_grad], op_flags=['readwrite']):
            o = float(f)
            f[...] = o + delta
            y_pos = forward()[0]
            f[...] = o - delta
            y_neg = forward()[0]
            f[...] = o
            g[...] = ((y_pos - y_neg) / (delta * 2))[0]
        assert num_grad.shape == ana_grad.shape, name
        assert np.isclose(num_grad, ana_grad, rtol=rtol).all(), (name, num_grad, ana_grad)


# --- the cases ----------------------------------------------------------------------------------

def test_recurrent_op_1():   # RecurrentOpTest1: h_t = (x_t + h_{t-1}) / 2
    def create_rnn_op(shape):
        sent_len, batch_size, input_dim = shape
        x = data('x', [sent_len, batch_size, input_dim])
        h_boot = data('h_boot', [input_dim], append_batch_size=True)
        rnn = layers.StaticRNN()
        with rnn.step():
            h_pre = rnn.memory(init=h_boot)
            x_t = rnn.step_input(x)
            h = layers.scale(x=layers.elementwise_add(x=h_pre, y=x_t), scale=1.0 / 2.0)
            rnn.update_memory(h_pre, h)
            rnn.output(h)
        return rnn(), {"x": x, "h_boot": h_boot}
    check_backward(PySimpleRNN1, create_rnn_op, (1, 1, 2), ["h_boot", "x"], ["h_boot", "x"])


def sigmoid_rnn(shape, h_boot_stops=False):
    sent_len, batch_size, input_dim = shape
    x = data('x', [sent_len, batch_size, input_dim])
    h_boot = data('h_boot', [input_dim], append_batch_size=True)
    h_boot.stop_gradient = h_boot_stops
    return sigmoid_step(x, h_boot, input_dim), {"x": x, "h_boot": h_boot}


def test_recurrent_op_2():   # RecurrentOpTest2: h_t = sigmoid(W x_t + U h_{t-1})
    check_backward(PySimpleRNN2, sigmoid_rnn, (2, 10, 2), ["h_boot", "x"],
                   ["U", "W", "h_boot", "x"], params=("U", "W"))


def test_multiple_memory():   # RecurrentOpMultipleMemoryTest: y = h_1 + h_2 + x_t
    def create_rnn_op(shape):
        sent_len, batch_size, input_dim = shape
        x = data('x', [sent_len, batch_size, input_dim])
        h_boot1 = data('h_boot1', [batch_size, input_dim])
        h_boot2 = data('h_boot2', [batch_size, input_dim])
        rnn = layers.StaticRNN()
        with rnn.step():
            h_pre1 = rnn.memory(init=h_boot1)
            h_pre2 = rnn.memory(init=h_boot2)
            x_t = rnn.step_input(x)
            mem1 = layers.scale(x=h_pre1, scale=1.0)
            mem2 = layers.scale(x=h_pre2, scale=1.0)
            out = layers.sums(input=[mem1, x_t, mem2])
            rnn.update_memory(h_pre1, mem1)
            rnn.update_memory(h_pre2, mem2)
            rnn.output(out)
        return rnn(), {"x": x, "h_boot1": h_boot1, "h_boot2": h_boot2}
    names = ["h_boot1", "h_boot2", "x"]
    check_backward(PySimpleRNN3, create_rnn_op, (2, 1, 1), names, names)


def test_no_mem_boot():   # RecurrentOpNoMemBootTest: mem = x_t + mem_pre, from zeros
    def create_rnn_op(shape):
        sent_len, batch_size, input_dim = shape
        x = data('x', [sent_len, batch_size, input_dim])
        rnn = layers.StaticRNN()
        with rnn.step():
            mem_pre = rnn.memory(shape=[-1, input_dim], batch_ref=x)
            x_t = rnn.step_input(x)
            mem = layers.elementwise_add(x=mem_pre, y=x_t)
            rnn.update_memory(mem_pre, mem)
            rnn.output(mem)
        return rnn(), {"x": x}
    check_backward(PySimpleRNN4, create_rnn_op, (2, 1, 1), ["x"], ["x"])


def test_sub_block():   # RecurrentOpSubBlockTest: attention over a sequence in each step
    def dot_attention(query, memory):
        attn = layers.matmul(query, memory, transpose_y=True)
        weight = layers.softmax(attn)
        return layers.matmul(weight, memory), weight

    def create_rnn_op(shape):
        sent_len, batch_size, input_dim = shape
        x = data('x', [sent_len, batch_size, input_dim])
        emb = data('emb', [sent_len, batch_size, input_dim])
        w1 = data('w1', [input_dim, input_dim])
        w2 = data('w2', [input_dim * 2, input_dim])
        y = layers.matmul(emb, w1)
        rnn = layers.StaticRNN()
        with rnn.step():
            pre_h = rnn.memory(shape=(sent_len, input_dim), batch_ref=x, init_value=0.0)
            step_in = rnn.step_input(x)
            concat_in = layers.concat([step_in, pre_h], 1)
            new_h = layers.matmul(concat_in, w2)
            new_h = layers.unsqueeze(new_h, [1])
            new_h, _ = dot_attention(new_h, y)
            new_h = layers.squeeze(new_h, [1])
            rnn.update_memory(pre_h, new_h)
            rnn.step_output(new_h)
        return rnn(), {"x": x, "emb": emb, "w1": w1, "w2": w2}
    names = ["emb", "w1", "w2", "x"]
    check_backward(PySimpleRNN5, create_rnn_op, (3, 3, 2), names, names)


def test_stop_gradient():   # RecurrentOpStopGradientTest: no gradient through h_boot
    check_backward(PySimpleRNN2, lambda shape: sigmoid_rnn(shape, h_boot_stops=True),
                   (2, 10, 2), ["h_boot", "x"], ["U", "W", "x"], params=("U", "W"))
