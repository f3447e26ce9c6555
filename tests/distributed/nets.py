"""Programs and data shared by the transpiler and distributed-runtime tests."""
import numpy as np

import fluid
from fluid_interactive.ir.records import OpDesc, OpRole, VarDesc
from fluid_interactive.runtime.live.compiled import CompiledProgram


class FitALine(fluid.Program):
    """The single-process reference of the issue, fed by arguments."""
    learning_rate = 0.01

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name='x', shape=[13], dtype='float32')
        y = fluid.layers.data(name='y', shape=[1], dtype='float32')
        with fluid.var_scope('prediction'):
            y_predict = fluid.layers.fc(input=x, size=1, act=None)
        avg_cost = fluid.layers.mean(fluid.layers.square_error_cost(input=y_predict, label=y),
                                     name='avg_cost')
        fluid.optimizer.SGD(learning_rate=self.learning_rate).minimize(avg_cost)
        return avg_cost

    @fluid.network("x")
    def infer(self, x):
        x = fluid.layers.data(name='x', shape=[13], dtype='float32')
        with fluid.var_scope('prediction'):
            return fluid.layers.fc(input=x, size=1, act=None)


class MLP(fluid.Program):
    """Two layers, Adam with weight decay (or another optimizer)."""
    optimizer = "adam"

    def make_optimizer(self):
        if self.optimizer == "adam":
            return fluid.optimizer.Adam(learning_rate=0.01,
                                        regularization=fluid.regularizer.L2Decay(1e-3))
        if self.optimizer == "momentum":
            return fluid.optimizer.Momentum(learning_rate=0.01, momentum=0.9,
                                            regularization=fluid.regularizer.L1Decay(1e-3))
        return fluid.optimizer.SGD(learning_rate=0.05)

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name='x', shape=[13], dtype='float32')
        y = fluid.layers.data(name='y', shape=[1], dtype='float32')
        with fluid.var_scope("mlp"):
            h = fluid.layers.fc(input=x, size=16, act='relu',
                                param_attr=fluid.ParamAttr(learning_rate=0.5))
            p = fluid.layers.fc(input=h, size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(input=p, label=y))
        self.make_optimizer().minimize(loss)
        return loss

    @fluid.network("x")
    def predict(self, x):
        x = fluid.layers.data(name='x', shape=[13], dtype='float32')
        with fluid.var_scope("mlp"):
            h = fluid.layers.fc(input=x, size=16, act='relu')
            return fluid.layers.fc(input=h, size=1)


class TwoHeads(fluid.Program):
    """Two optimizers in one method, each updating its own head."""

    @fluid.network("x", "y")
    def train_step(self, x, y):
        x = fluid.layers.data(name='x', shape=[13], dtype='float32')
        y = fluid.layers.data(name='y', shape=[1], dtype='float32')
        with fluid.var_scope("a"):
            loss_a = fluid.layers.mean(fluid.layers.square_error_cost(
                fluid.layers.fc(input=x, size=1), y))
        with fluid.var_scope("b"):
            loss_b = fluid.layers.mean(fluid.layers.square_error_cost(
                fluid.layers.fc(input=x, size=1), y))
        fluid.optimizer.Adam(learning_rate=0.02).minimize(
            loss_a, parameter_list=fluid.parameters("a"))
        fluid.optimizer.Momentum(learning_rate=0.01, momentum=0.5).minimize(
            loss_b, parameter_list=fluid.parameters("b"))
        return loss_a, loss_b


class FedRate(fluid.Program):
    """The learning rate is an argument of the method (a fed var without batch dim)."""

    @fluid.network("x", "y", "lr")
    def train(self, x, y, lr):
        x = fluid.layers.data(name="x", shape=[13])
        y = fluid.layers.data(name="y", shape=[1])
        lr = fluid.layers.data(name="lr", shape=[1], append_batch_size=False)
        h = fluid.layers.fc(input=x, size=4, act="tanh")
        pred = fluid.layers.fc(input=h, size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fluid.optimizer.Momentum(learning_rate=lr, momentum=0.5).minimize(loss)
        return {"loss": loss, "pred": pred}


def with_lr_schedule(compiled, decay=0.9, factor=2.0):
    """fit_a_line's program with two learning-rate schedule ops (role LRSched) before the
    updates: ``lr *= decay`` (persistable, each step) and ``lr_eff = factor * lr``, which
    the sgd ops then use."""
    desc = compiled.program.clone()
    block = desc.block("train_step")
    first = next(i for i, op in enumerate(block.ops) if op.role & OpRole.OPTIMIZE)
    block.vars["lr_eff"] = VarDesc("lr_eff", (1,), "float32")
    block.ops[first:first] = [
        OpDesc("scale", {"X": ["learning_rate_0"]}, {"Out": ["learning_rate_0"]},
               {"scale": decay}, role=OpRole.LRSCHED),
        OpDesc("scale", {"X": ["learning_rate_0"]}, {"Out": ["lr_eff"]},
               {"scale": factor}, role=OpRole.LRSCHED)]
    for op in block.ops:
        if op.type == "sgd":
            op.inputs["LearningRate"] = ["lr_eff"]
    return CompiledProgram(desc, seed=compiled.seed)


def linear_data(n=256, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 13)).astype(np.float32)
    w = rng.standard_normal((13, 1)).astype(np.float32)
    y = (x @ w + 0.5 + 0.01 * rng.standard_normal((n, 1))).astype(np.float32)
    return x, y


def batches(x, y, size, steps):
    n = len(x)
    for s in range(steps):
        start = (s * size) % n
        yield x[start:start + size], y[start:start + size]


def max_diff(a, b):
    assert sorted(a) == sorted(b)
    return max(float(np.max(np.abs(np.asarray(a[k], np.float64) - b[k]))) for k in a)
