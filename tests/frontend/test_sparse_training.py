"""Rows-only gradients (``embedding(is_sparse=True)``) trained with every optimizer of
fluid.optimizer: several steps, ids looked up twice and padding, against the same program
with the dense gradient. Updates exact on rows (SGD, Adagrad) and every other update
(densified or computed on every row, as exact Adam) give the dense values bit for bit;
lazy Adam matches a NumPy reference of its rows-only rule. Regularization and clipping
follow Paddle 1.8."""
import warnings

import numpy as np
import pytest

import fluid
from fluid_interactive.errors import FluidWarning

V, D = 40, 4
#: every batch looks an id up twice, and pads (id 3)
BATCHES = [np.array([[1], [5], [1], [3], [7], [5]], np.int64),
           np.array([[2], [2], [3], [9], [1], [30]], np.int64),
           np.array([[7], [7], [7], [0], [3], [39]], np.int64)]
Y = np.linspace(-1, 1, 6, dtype=np.float32).reshape(6, 1)

OPTIMIZERS = {
    "sgd": lambda: fluid.optimizer.SGD(0.1),
    "momentum": lambda: fluid.optimizer.Momentum(0.1, momentum=0.9),
    "nesterov": lambda: fluid.optimizer.Momentum(0.1, momentum=0.9, use_nesterov=True),
    "adam": lambda: fluid.optimizer.Adam(0.05),
    "adagrad": lambda: fluid.optimizer.Adagrad(0.1),
    "decayed_adagrad": lambda: fluid.optimizer.DecayedAdagrad(0.1),
    "rmsprop": lambda: fluid.optimizer.RMSProp(0.01, momentum=0.5),
    "adadelta": lambda: fluid.optimizer.Adadelta(1.0),
    "adamax": lambda: fluid.optimizer.Adamax(0.05),
    "ftrl": lambda: fluid.optimizer.Ftrl(0.1, l1=0.01, l2=0.01),
    "lamb": lambda: fluid.optimizer.Lamb(0.05),
    "lars": lambda: fluid.optimizer.LarsMomentum(0.1, momentum=0.9),
    "dpsgd": lambda: fluid.optimizer.Dpsgd(0.1, clip=1.0, batch_size=6.0, sigma=0.0),
}


def make(optimizer, sparse, padding_idx=3, regularization=None, clip=None, twice=False):
    class Tagger(fluid.Program):
        @fluid.network("ids", "y")
        def train_step(self, ids, y):
            ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
            y = fluid.layers.data(name="y", shape=[1], dtype="float32")
            attr = fluid.ParamAttr(name="table", regularizer=regularization,
                                   initializer=fluid.initializer.Uniform(-0.5, 0.5, seed=3))
            e = fluid.layers.embedding(ids, size=[V, D], is_sparse=sparse,
                                       padding_idx=padding_idx, param_attr=attr)
            if twice:   # a second lookup of the same table: two gradients, summed
                e = e * fluid.layers.embedding(ids, size=[V, D], is_sparse=sparse,
                                               param_attr=attr)
            p = fluid.layers.fc(e, size=1, param_attr=fluid.ParamAttr(
                name="w", initializer=fluid.initializer.Constant(0.3)))
            loss = fluid.layers.mean(fluid.layers.square_error_cost(p, y))
            if clip is not None:
                fluid.clip.set_gradient_clip(clip)
            optimizer().minimize(loss)
            return loss
    return Tagger().Compile(seed=1)


def train(prog, steps=2):
    losses = [prog.train_step(ids, Y) for _ in range(steps) for ids in BATCHES]
    return prog.get_var("table"), losses


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_sparse_gradients_update_as_dense_ones_do(name):
    dense_table, dense_losses = train(make(OPTIMIZERS[name], sparse=False))
    table, losses = train(make(OPTIMIZERS[name], sparse=True))
    np.testing.assert_array_equal(table, dense_table)
    assert losses == dense_losses


@pytest.mark.parametrize("name", ["sgd", "adagrad", "adam_lazy"])
def test_rows_only_updates_leave_the_other_rows_and_padding_alone(name):
    opt = (lambda: fluid.optimizer.Adam(0.05, lazy_mode=True)) if name == "adam_lazy" \
        else OPTIMIZERS[name]
    prog = make(opt, sparse=True)
    before = prog.get_var("table")
    table, _ = train(prog, steps=1)
    seen = {int(i) for ids in BATCHES for i in ids[:, 0]} - {3}
    changed = {int(r) for r in np.flatnonzero((table != before).any(axis=1))}
    assert changed == seen


def lazy_adam_reference(steps=2, lr=0.05, b1=0.9, b2=0.999, eps=1e-8):
    """Lazy Adam in NumPy, from the dense program's gradients: each step updates the
    moments and the parameter of the rows its batch looked up (padding left out)."""
    prog = make(lambda: fluid.optimizer.SGD(1e-30), sparse=True)
    prog.watch("table@GRAD")
    table = prog.get_var("table").astype(np.float64)
    w, bias = prog.get_var("w").astype(np.float64), 0.0
    m1, m2 = np.zeros_like(table), np.zeros_like(table)
    wm = [np.zeros_like(w), np.zeros_like(w)]
    bm = [0.0, 0.0]
    t = 0
    for _ in range(steps):
        for ids in BATCHES:
            t += 1
            e = np.where(ids == 3, 0.0, table[ids[:, 0]])
            pred = e @ w + bias
            dpred = 2 * (pred - Y) / len(Y)
            g_table = np.zeros_like(table)
            np.add.at(g_table, ids[:, 0], dpred @ w.T)
            g_table[3] = 0
            rows = np.unique(ids[ids != 3])
            rate = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
            m1[rows] = b1 * m1[rows] + (1 - b1) * g_table[rows]
            m2[rows] = b2 * m2[rows] + (1 - b2) * g_table[rows] ** 2
            table[rows] -= rate * m1[rows] / (np.sqrt(m2[rows]) + eps)
            gw, gb = e.T @ dpred, dpred.sum()
            wm = [b1 * wm[0] + (1 - b1) * gw, b2 * wm[1] + (1 - b2) * gw ** 2]
            w = w - rate * wm[0] / (np.sqrt(wm[1]) + eps)
            bm = [b1 * bm[0] + (1 - b1) * gb, b2 * bm[1] + (1 - b2) * gb ** 2]
            bias = bias - rate * bm[0] / (np.sqrt(bm[1]) + eps)
    return table


def test_lazy_adam_updates_the_batch_rows_alone():
    table, _ = train(make(lambda: fluid.optimizer.Adam(0.05, lazy_mode=True), sparse=True))
    np.testing.assert_allclose(table, lazy_adam_reference(), rtol=2e-5, atol=2e-6)
    exact, _ = train(make(lambda: fluid.optimizer.Adam(0.05), sparse=True))
    assert not np.allclose(table, exact)   # rows off a batch kept their moments


def test_a_table_looked_up_twice_sums_its_rows_only_gradients():
    # the dense sum adds each lookup's gradient, the merged rows add every part in turn:
    # equal up to the order of float additions
    for name in ("sgd", "adam"):
        dense, _ = train(make(OPTIMIZERS[name], sparse=False, twice=True))
        sparse, _ = train(make(OPTIMIZERS[name], sparse=True, twice=True))
        np.testing.assert_allclose(sparse, dense, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("clip", [fluid.clip.GradientClipByValue(0.01),
                                  fluid.clip.GradientClipByNorm(0.05),
                                  fluid.clip.GradientClipByGlobalNorm(0.05)],
                         ids=["value", "norm", "global_norm"])
def test_clipping_a_sparse_gradient_keeps_it_rows_only_and_equals_dense(clip):
    dense, _ = train(make(OPTIMIZERS["sgd"], sparse=False, clip=clip))
    prog = make(OPTIMIZERS["sgd"], sparse=True, clip=clip)
    sparse, _ = train(prog)
    np.testing.assert_allclose(sparse, dense, rtol=1e-6, atol=1e-7)
    assert "table" in prog.scope.in_place   # the clipped gradient still updates rows only


@pytest.mark.parametrize("decay", [fluid.regularizer.L2Decay(0.1),
                                   fluid.regularizer.L1Decay(0.1)], ids=["l2", "l1"])
def test_weight_decay_of_a_sparse_gradient_decays_every_row_as_paddle(decay):
    dense, _ = train(make(OPTIMIZERS["sgd"], sparse=False, regularization=decay))
    with pytest.warns(FluidWarning, match="every row decays each step"):
        prog = make(OPTIMIZERS["sgd"], sparse=True, regularization=decay)
    sparse, _ = train(prog)
    np.testing.assert_array_equal(sparse, dense)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make(OPTIMIZERS["sgd"], sparse=True,
             regularization=fluid.regularizer.L2Decay(0.0))   # no decay: no warning
