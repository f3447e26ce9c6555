"""Paddle 1.8's test_dynrnn_gradient_check.py, ported: `DynamicRNN` over sequences of
different lengths (a padded batch with lengths; the padding holds a non-zero value),
forward against a NumPy RNN, gradients of the parameter and of every input value
against its central differences (step 0.001)."""
import collections
import random

import numpy
from paddle.common import PAD, compile_fetches, lod_rows, padded

import fluid


class Memory:
    def __init__(self, shape, dtype='float32'):
        self.ex = numpy.zeros(shape=shape, dtype=dtype)
        self.cur = None

    def update(self, val):
        assert val.shape == self.ex.shape and val.dtype == self.ex.dtype
        self.cur = val

    def next(self):
        self.ex, self.cur = self.cur, None

    def reset(self):
        self.ex, self.cur = numpy.zeros(shape=self.ex.shape, dtype=self.ex.dtype), None


class Output:
    def __init__(self):
        self.outs = []

    def next_sequence(self):
        self.outs.append([])

    def out(self, val):
        self.outs[-1].append(val)

    def last(self):
        return self.outs[-1][-1]


class BaseRNN:
    """Paddle's NumPy RNN: ``num_seq`` sequences of 1 to ``max_seq_len - 1`` steps."""

    def __init__(self, ins, mems, params, outs, num_seq=5, max_seq_len=15):
        self.num_seq = num_seq
        self.inputs = collections.defaultdict(list)
        for _ in range(num_seq):
            seq_len = random.randint(1, max_seq_len - 1)
            for iname in ins:
                self.inputs[iname].append([numpy.random.random(size=ins[iname]['shape'])
                                           .astype('float32') for _ in range(seq_len)])
        self.mems = {m: Memory(shape=mems[m]['shape']) for m in mems}
        self.params = {p: numpy.random.random(size=params[p]['shape']).astype('float32')
                       for p in params}
        self.outputs = {o: Output() for o in outs}

    def exe(self):
        retv = {out: [] for out in self.outputs}
        for seq_id in range(self.num_seq):
            for mem in self.mems.values():
                mem.reset()
            for out in self.outputs.values():
                out.next_sequence()
            iname0 = list(self.inputs.keys())[0]
            for step_id in range(len(self.inputs[iname0][seq_id])):
                xargs = {i: self.inputs[i][seq_id][step_id] for i in self.inputs}
                xargs.update(self.mems)
                xargs.update(self.params)
                xargs.update(self.outputs)
                self.step(**xargs)
                for mem in self.mems.values():
                    mem.next()
            for out in self.outputs:
                retv[out].append(self.outputs[out].last())
        return {out: numpy.array(v) for out, v in retv.items()}

    def to_feed(self):
        """The LoD sequences as a padded batch and its lengths."""
        feed = {}
        for iname, seqs in self.inputs.items():
            feed[iname], feed["lengths"] = padded([numpy.array(s) for s in seqs], 'float32')
        return feed

    def get_numeric_gradient_of_param(self, param_name, delta=0.001):
        p = self.params[param_name]
        g = numpy.zeros(shape=p.shape, dtype=p.dtype)
        for i in range(p.shape[0]):
            for j in range(p.shape[1]):
                o = p[i][j]
                p[i][j] += delta
                pos = self._exe_mean_out_()
                p[i][j] -= 2 * delta
                neg = self._exe_mean_out_()
                p[i][j] = o
                g[i][j] = (pos - neg) / (delta * 2)
        return g

    def get_numeric_gradient_of_input(self, input_name, delta=0.001):
        """The gradient of every value of every step, the sequences one after another (as
        Paddle's LoD tensor holds them)."""
        grad = []
        for seq in self.inputs[input_name]:
            for item in seq:
                item_grad = numpy.zeros(shape=item.shape, dtype=item.dtype)
                for i in range(len(item)):
                    o = item[i]
                    item[i] += delta
                    pos = self._exe_mean_out_()
                    item[i] -= 2 * delta
                    neg = self._exe_mean_out_()
                    item[i] = o
                    item_grad[i] = (pos - neg) / (delta * 2)
                grad.append(item_grad)
        return numpy.concatenate(grad)

    def _exe_mean_out_(self):
        outs = self.exe()
        return numpy.array([o.mean() for o in outs.values()]).mean()


def check_forward_backward(py_rnn, step, data_width, hidden_width, rtol):
    """The DynamicRNN of ``step`` over X: the last output of each sequence against the
    NumPy RNN's, the gradients of W and X against central differences."""
    def build():
        dat = fluid.layers.data(name='X', shape=[-1, -1, data_width], dtype='float32',
                                append_batch_size=False)
        dat.stop_gradient = False
        lengths = fluid.layers.data(name='lengths', shape=[-1], dtype='int64',
                                    append_batch_size=False)
        rnn = fluid.layers.DynamicRNN()
        with rnn.block():
            step(rnn, rnn.step_input(dat, lengths=lengths))
        out = fluid.layers.sequence_pool(rnn(), pool_type='last', lengths=lengths)
        loss = fluid.layers.mean(out)
        fluid.backward.append_backward(loss)
        w = fluid.layers.create_parameter([data_width, hidden_width], 'float32', name='W')
        return [out, *fluid.gradients(loss, [w, dat])]
    run = compile_fetches(build, ["X", "lengths"])
    run.program.set_var('W', py_rnn.params['W'])
    feed = py_rnn.to_feed()
    assert min(feed["lengths"]) < max(feed["lengths"])   # padded: with PAD, not zeros
    assert numpy.all(feed["X"][numpy.argmin(feed["lengths"]), -1] == PAD)
    out, w_g, i_g = run(**feed)
    out_by_python, = py_rnn.exe().values()
    assert numpy.allclose(out, out_by_python)
    w_g_num = py_rnn.get_numeric_gradient_of_param('W')
    assert numpy.allclose(w_g_num, w_g, rtol=rtol)
    assert all(not numpy.any(i_g[b, n:]) for b, n in enumerate(feed["lengths"]))
    i_g_num = py_rnn.get_numeric_gradient_of_input(input_name='X')
    i_g = lod_rows(i_g, feed["lengths"]).reshape(i_g_num.shape)
    assert numpy.allclose(i_g_num, i_g, rtol=rtol)


def seeded():
    """SeedFixedTestCase: NumPy's seed 123, Python's 124."""
    numpy.random.seed(123)
    random.seed(124)


def test_simple_mul():   # TestSimpleMul.test_forward_backward
    class SimpleMul(BaseRNN):
        def step(self, X, W, Out):
            Out.out(numpy.matmul(X, W))

    def step(rnn, d):
        o = fluid.layers.fc(input=d, param_attr='W', bias_attr=False, size=10, act=None)
        rnn.output(o)
    state = numpy.random.get_state(), random.getstate()
    try:
        seeded()
        py_rnn = SimpleMul({'X': {'shape': [32]}}, {}, {'W': {'shape': [32, 10]}}, ['Out'])
        check_forward_backward(py_rnn, step, 32, 10, rtol=0.05)
    finally:
        numpy.random.set_state(state[0])
        random.setstate(state[1])


def test_simple_mul_with_memory():   # TestSimpleMulWithMemory.test_forward_backward
    class SimpleMulWithMemory(BaseRNN):
        def step(self, X, Mem, W, Out):
            o = numpy.matmul(X, W)
            o += Mem.ex
            Mem.update(o)
            Out.out(o)

    def step(rnn, d):
        mem = rnn.memory(value=0.0, shape=[20])
        hidden = fluid.layers.fc(input=d, size=20, param_attr='W', bias_attr=False, act=None)
        o = fluid.layers.elementwise_add(x=hidden, y=mem)
        rnn.update_memory(mem, o)
        rnn.output(o)
    state = numpy.random.get_state(), random.getstate()
    try:
        seeded()
        py_rnn = SimpleMulWithMemory({'X': {'shape': [32]}}, {'Mem': {'shape': [20]}},
                                     {'W': {'shape': [32, 20]}}, ['Out'])
        # many float additions: rtol 0.1, as in Paddle
        check_forward_backward(py_rnn, step, 32, 20, rtol=0.1)
    finally:
        numpy.random.set_state(state[0])
        random.setstate(state[1])
