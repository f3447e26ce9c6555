"""Programs with loops and branches whose drawings must open into their bodies (besides
the loops of tests/runtime/test_loops.py): the render tests import them, and the browser
test runs this file's text as a notebook cell."""
import fluid

L = fluid.layers


class NestedLoops(fluid.Program):
    """A loop in a loop: the inner one reads the outer one's carried var."""

    @fluid.network("x", "n", "m")
    def train_step(self, x, n, m):
        x = L.data(name="x", shape=[3], dtype="float32")
        n = L.data(name="n", shape=[1], dtype="int64", append_batch_size=False)
        m = L.data(name="m", shape=[1], dtype="int64", append_batch_size=False)
        w = L.create_parameter(shape=[3, 3], dtype="float32", name="w")
        h = L.scale(x, 1.0)
        i = L.fill_constant(shape=[1], dtype="int64", value=0)
        cond = L.less_than(x=i, y=n)
        outer = L.While(cond=cond)
        with outer.block():
            g = L.scale(h, 0.5)
            j = L.fill_constant(shape=[1], dtype="int64", value=0)
            inner_cond = L.less_than(x=j, y=m)
            inner = L.While(cond=inner_cond)
            with inner.block():
                L.assign(L.tanh(L.matmul(g, w) + h), output=g)
                L.increment(x=j, value=1, in_place=True)
                L.less_than(x=j, y=m, cond=inner_cond)
            L.assign(g * h + x, output=h)
            L.increment(x=i, value=1, in_place=True)
            L.less_than(x=i, y=n, cond=cond)
        loss = L.mean(h)
        fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)
        return loss


class Branches(fluid.Program):
    """A Switch inside a While (each case a conditional_block), and a cond after it."""

    @fluid.network("x", "n")
    def step(self, x, n):
        x = L.data(name="x", shape=[3], dtype="float32")
        n = L.data(name="n", shape=[1], dtype="int64", append_batch_size=False)
        h = L.scale(x, 1.0)
        i = L.fill_constant(shape=[1], dtype="int64", value=0)
        cond = L.less_than(x=i, y=n)
        two = L.fill_constant(shape=[1], dtype="int64", value=2)
        loop = L.While(cond=cond)
        with loop.block():
            with L.Switch() as switch:
                with switch.case(L.equal(L.elementwise_mod(i, two),
                                         L.fill_constant([1], "int64", 0))):
                    L.assign(L.tanh(h) * x, output=h)
                with switch.default():
                    L.assign(L.sigmoid(h + x), output=h)
            L.increment(x=i, value=1, in_place=True)
            L.less_than(x=i, y=n, cond=cond)
        positive = L.greater_than(L.reshape(L.reduce_sum(h), [1]),
                                  L.fill_constant([1], "float32", 0.0))
        return L.cond(positive, lambda: h * 2.0, lambda: h - 1.0)


class HandLSTM(fluid.Program):
    """Notebook 07's LSTM cell written by hand in a StaticRNN (hidden 24): its step and
    the step's gradient block hold many small layers."""
    hidden = 24

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = L.data(name="x", shape=[-1, -1, 2], dtype="float32", append_batch_size=False)
        y = L.data(name="y", shape=[1], dtype="float32")
        with fluid.var_scope("lstm"):
            rnn = L.StaticRNN()
            with rnn.step():
                x_t = rnn.step_input(x)
                h_prev = rnn.memory(shape=[-1, self.hidden], batch_ref=x_t)
                c_prev = rnn.memory(shape=[-1, self.hidden], batch_ref=x_t)
                i, f, o, g = L.split(L.fc(input=[x_t, h_prev], size=4 * self.hidden), 4, dim=1)
                c = L.sigmoid(f + 1.0) * c_prev + L.sigmoid(i) * L.tanh(g)
                h = L.sigmoid(o) * L.tanh(c)
                rnn.update_memory(h_prev, h)
                rnn.update_memory(c_prev, c)
                rnn.step_output(h)
            last = L.fc(input=rnn()[-1], size=1)
        loss = L.mean(L.square_error_cost(last, y))
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
        return loss
