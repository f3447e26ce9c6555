"""Programs with embedding tables kept on parameter servers, and their data."""
import numpy as np

import fluid


class Wide(fluid.Program):
    """Two slots of ids through one table (summed), a dense feature, a linear head."""
    vocab = 60
    dim = 4
    distributed = True     # id % shards; False: row ranges (is_sparse only)
    served = True          # False: a dense table (is_sparse and is_distributed off)
    optimizer = "sgd"
    padding_idx = None

    def make_optimizer(self):
        if self.optimizer == "adam":
            return fluid.optimizer.Adam(learning_rate=0.05)
        if self.optimizer == "momentum":
            return fluid.optimizer.Momentum(learning_rate=0.1, momentum=0.9)
        if self.optimizer == "adagrad":
            return fluid.optimizer.Adagrad(learning_rate=0.2)
        return fluid.optimizer.SGD(learning_rate=0.5)

    def net(self, ids, x):
        e = fluid.layers.embedding(ids, size=[self.vocab, self.dim], is_sparse=self.served,
                                   is_distributed=self.served and self.distributed,
                                   padding_idx=self.padding_idx,
                                   param_attr=fluid.ParamAttr(name="emb"))
        h = fluid.layers.concat([fluid.layers.reduce_sum(e, dim=1), x], axis=1)
        with fluid.var_scope("head"):
            return fluid.layers.fc(h, size=1)

    @fluid.network("ids", "x", "y")
    def train_step(self, ids, x, y):
        ids = fluid.layers.data(name='ids', shape=[2, 1], dtype='int64')
        x = fluid.layers.data(name='x', shape=[3], dtype='float32')
        y = fluid.layers.data(name='y', shape=[1], dtype='float32')
        loss = fluid.layers.mean(fluid.layers.square_error_cost(self.net(ids, x), y))
        self.make_optimizer().minimize(loss)
        return loss

    @fluid.network("ids", "x")
    def infer(self, ids, x):
        ids = fluid.layers.data(name='ids', shape=[2, 1], dtype='int64')
        x = fluid.layers.data(name='x', shape=[3], dtype='float32')
        return self.net(ids, x)


def table_batches(steps, size=8, vocab=60, seed=0, ids=None):
    """(ids [size, 2, 1], x [size, 3], y [size, 1]) batches; ids drawn from ``ids`` (any
    int64 values) when given, else from [0, vocab)."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        i = rng.choice(ids, size=(size, 2, 1)) if ids is not None else \
            rng.integers(0, vocab, size=(size, 2, 1))
        x = rng.normal(size=(size, 3)).astype(np.float32)
        y = (np.sin(i.sum(axis=(1, 2)) * 0.37)[:, None] + x[:, :1]).astype(np.float32)
        yield i.astype(np.int64), x, y
