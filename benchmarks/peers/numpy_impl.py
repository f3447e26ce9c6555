"""The peer suite's workloads written by hand in NumPy, as fast as we know how: buffers
allocated once, every call in place (``out=``), parameters and gradients as views of flat
buffers so that an update is a few calls over one array. W3 is `numpy_lenet.NumpyLeNet`."""
from __future__ import annotations

import numpy as np
from numpy_lenet import NumpyLeNet, SoftmaxCrossEntropy

from .seq_workloads import SEQ_MODELS
from .workloads import POOL, RMSPROP_EPS, RMSPROP_RHO, Contender, Workload, batches, infer_inputs

f32 = np.float32


class Flat:
    """Parameters (and gradients, and optimizer state) as views of flat buffers."""

    def __init__(self, params: dict[str, np.ndarray], order: list[str],
                 moments: bool | int = False):
        size = sum(params[k].size for k in order)
        self.p, self.g = np.empty(size, f32), np.zeros(size, f32)
        self.views, self.grads, o = {}, {}, 0
        for k in order:
            n = params[k].size
            self.views[k] = self.p[o:o + n].reshape(params[k].shape)
            self.grads[k] = self.g[o:o + n].reshape(params[k].shape)
            self.views[k][...] = params[k]
            o += n
        self.scratch = np.empty(size, f32)
        # the optimizer's state, only where it runs (the memory table counts it): Adam's
        # two moments (moments=True or 2), RMSProp's mean square (1: m2 alone)
        moments = 2 if moments is True else int(moments)
        if moments:
            self.m2 = np.zeros(size, f32)
        if moments > 1:
            self.m1 = np.zeros(size, f32)
        self.t = 0

    def sgd(self, lr: float) -> None:
        np.multiply(self.g, f32(lr), out=self.scratch)
        np.subtract(self.p, self.scratch, out=self.p)

    def rmsprop(self, lr: float, rho: float = RMSPROP_RHO, eps: float = RMSPROP_EPS) -> None:
        """Paddle's rule: epsilon inside the square root (the mean square kept in m2)."""
        g, s, ms = self.g, self.scratch, self.m2
        np.multiply(ms, rho, out=ms)
        np.multiply(g, g, out=s)
        np.multiply(s, 1.0 - rho, out=s)
        np.add(ms, s, out=ms)
        np.add(ms, eps, out=s)
        np.sqrt(s, out=s)
        np.divide(g, s, out=s)
        np.multiply(s, lr, out=s)
        np.subtract(self.p, s, out=self.p)

    def adam(self, lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> None:
        self.t += 1
        rate = lr * (1.0 - b2 ** self.t) ** 0.5 / (1.0 - b1 ** self.t)
        g, s, m1, m2 = self.g, self.scratch, self.m1, self.m2
        np.multiply(m1, b1, out=m1)
        np.multiply(g, 1.0 - b1, out=s)
        np.add(m1, s, out=m1)
        np.multiply(m2, b2, out=m2)
        np.multiply(g, g, out=s)
        np.multiply(s, 1.0 - b2, out=s)
        np.add(m2, s, out=m2)
        np.sqrt(m2, out=s)
        np.add(s, eps, out=s)
        np.divide(m1, s, out=s)
        np.multiply(s, rate, out=s)
        np.subtract(self.p, s, out=self.p)


class W1:
    def __init__(self, params: dict[str, np.ndarray], batch: int, lr: float):
        self.flat = Flat(params, ["w0", "b0"])
        self.w, self.b = self.flat.views["w0"], self.flat.views["b0"]
        self.dw, self.db = self.flat.grads["w0"], self.flat.grads["b0"]
        self.pred = np.empty((batch, 1), f32)
        self.vec = self.pred.reshape(-1)
        self.scale, self.lr, self.n = f32(2.0 / batch), lr, batch

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        pred = self.pred
        np.matmul(x, self.w, out=pred)
        np.add(pred, self.b, out=pred)
        np.subtract(pred, y, out=pred)
        loss = float(np.dot(self.vec, self.vec)) / self.n
        np.multiply(pred, self.scale, out=pred)
        np.matmul(x.T, pred, out=self.dw)
        self.db[0] = pred.sum()
        self.flat.sgd(self.lr)
        return loss


class W2:
    ORDER = ["w0", "b0", "w1", "b1", "w2", "b2"]

    def __init__(self, params: dict[str, np.ndarray], batch: int, w: Workload):
        self.flat = Flat(params, self.ORDER,
                         moments={"adam": 2, "rmsprop": 1}.get(w.optimizer, 0))
        self.p, self.g = self.flat.views, self.flat.grads
        self.n, self.w = batch, w
        self.h1, self.h2 = np.empty((batch, 512), f32), np.empty((batch, 512), f32)
        self.dh1, self.dh2 = np.empty((batch, 512), f32), np.empty((batch, 512), f32)
        self.mask = np.empty((batch, 512), bool)
        self.z, self.dz = np.empty((batch, 10), f32), np.empty((batch, 10), f32)
        self.xent = SoftmaxCrossEntropy(batch)

    def forward(self, x: np.ndarray) -> np.ndarray:
        p = self.p
        np.matmul(x, p["w0"], out=self.h1)
        np.add(self.h1, p["b0"], out=self.h1)
        np.maximum(self.h1, 0, out=self.h1)
        np.matmul(self.h1, p["w1"], out=self.h2)
        np.add(self.h2, p["b1"], out=self.h2)
        np.maximum(self.h2, 0, out=self.h2)
        np.matmul(self.h2, p["w2"], out=self.z)
        np.add(self.z, p["b2"], out=self.z)
        return self.z

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        n, p, g = self.n, self.p, self.g
        y = y.reshape(n)
        z = self.forward(x)
        dz = self.dz
        loss = self.xent(z, y, dz)
        dz *= f32(1.0 / n)
        np.matmul(self.h2.T, dz, out=g["w2"])
        np.sum(dz, axis=0, out=g["b2"])
        np.matmul(dz, p["w2"].T, out=self.dh2)
        np.greater(self.h2, 0, out=self.mask)
        np.multiply(self.dh2, self.mask, out=self.dh2)
        np.matmul(self.h1.T, self.dh2, out=g["w1"])
        np.sum(self.dh2, axis=0, out=g["b1"])
        np.matmul(self.dh2, p["w1"].T, out=self.dh1)
        np.greater(self.h1, 0, out=self.mask)
        np.multiply(self.dh1, self.mask, out=self.dh1)
        np.matmul(x.T, self.dh1, out=g["w0"])
        np.sum(self.dh1, axis=0, out=g["b0"])
        getattr(self.flat, self.w.optimizer)(self.w.lr)
        return loss

    def gemms(self, x: np.ndarray) -> float:
        """The step's three forward and five backward GEMMs and nothing else: the floor."""
        p, g = self.p, self.g
        np.matmul(x, p["w0"], out=self.h1)
        np.matmul(self.h1, p["w1"], out=self.h2)
        np.matmul(self.h2, p["w2"], out=self.z)
        np.matmul(self.h2.T, self.dz, out=g["w2"])
        np.matmul(self.dz, p["w2"].T, out=self.dh2)
        np.matmul(self.h1.T, self.dh2, out=g["w1"])
        np.matmul(self.dh2, p["w1"].T, out=self.dh1)
        np.matmul(x.T, self.dh1, out=g["w0"])
        return 0.0


def make(w: Workload, params: dict[str, np.ndarray], device: str = "cpu") -> Contender:
    if w.model in SEQ_MODELS:
        from .seq_numpy import make as make_seq
        return make_seq(w, params, device)
    if w.kind == "infer":
        return Contender(_infer(w, params))
    xs, ys = batches(w.model, w.batch)
    if w.model == "W1":
        step = W1(params, w.batch, w.lr).step
    elif w.model == "W2":
        net = W2(params, w.batch, w)
        step = net.step if w.kind == "train" else (lambda x, y: net.gemms(x))
    else:
        step = NumpyLeNet(params, w.batch, w.lr).step

    def call(i: int) -> float:
        k = i % POOL
        return step(xs[k], ys[k])
    return Contender(call)


def _infer(w: Workload, params: dict[str, np.ndarray]):
    inputs = infer_inputs(w)
    if w.model == "W1":
        wt, b = params["w0"], params["b0"]

        def one(x):   # one sample (array or list) or a batch
            a = np.asarray(x, f32)
            return (a[None] if a.ndim == 1 else a) @ wt + b
        return lambda i: one(inputs[i % POOL])
    if w.model == "W2":
        net = W2(params, w.batch, w)
        return lambda i: net.forward(inputs[i % POOL]).copy()
    net3 = NumpyLeNet(params, w.batch)
    return lambda i: net3.forward(inputs[i % POOL]).copy()
