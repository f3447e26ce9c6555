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
