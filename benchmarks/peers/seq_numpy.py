"""The sequence workloads written by hand in NumPy: the LSTM's backpropagation through
time (W4, W5) and the Transformer encoder block's backward (W6) derived and written out,
parameters and gradients as views of flat buffers, Adam over the flat buffers.

The LSTM step is as fast as we know how: buffers allocated once, time-major ([T, B, ...],
one BLAS call and a few in-place ufuncs per step), sigmoid computed as
0.5 * tanh(x / 2) + 0.5 with the 1/2 folded into the weights once per step, and backward
every factor that does not depend on the recurrence computed for all steps at once before
the loop. The encoder block is written plainly: its temporaries are allocated per step.
"""
from __future__ import annotations

import numpy as np

from .numpy_impl import Flat
from .seq_workloads import ENCODER_SHAPE, LSTM_SHAPES, seq_batches
from .workloads import POOL, Contender, Workload

f32 = np.float32


def softmax_xent(z: np.ndarray, y: np.ndarray, dz: np.ndarray) -> float:
    """Mean cross-entropy of logits z [N, K] with labels y [N]; dz = dloss/dz."""
    n = z.shape[0]
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    loss = float(np.log(s).sum() - z[np.arange(n), y].sum()) / n
    np.divide(e, s * n, out=dz)
    dz[np.arange(n), y] -= 1.0 / n
    return loss


class LSTM:
    ORDER = ["wx", "bx", "wh", "bh", "wo", "bo"]

    def __init__(self, params: dict[str, np.ndarray], w: Workload):
        self.b, self.t, self.d, self.h, self.classes = LSTM_SHAPES[w.model]
        b, t, h = self.b, self.t, self.h
        self.flat = Flat(params, self.ORDER, moments=True)
        self.p, self.g, self.lr = self.flat.views, self.flat.grads, w.lr
        self.scale = np.repeat(np.array([1.0, 0.5, 0.5, 0.5], f32), h)
        self.gates = np.empty((t, b, 4 * h), f32)     # activated c~, i, f, o
        self.cells = np.empty((t + 1, b, h), f32)     # c_{-1} = 0, then c_t
        self.hids = np.empty((t + 1, b, h), f32)
        self.tanh_c = np.empty((t, b, h), f32)
        self.factors = np.empty((t, b, 4 * h), f32)
        self.k = np.empty((t, b, h), f32)
        self.dgates = np.empty((t, b, 4 * h), f32)
        self.ws = np.empty((h, 4 * h), f32)
        self.xt = np.empty((t, b, self.d), f32)
        self.hw = np.empty((b, 4 * h), f32)
        self.tmp = np.empty((b, h), f32)
        self.dh, self.dc = np.empty((b, h), f32), np.empty((b, h), f32)

    def forward(self, x: np.ndarray) -> np.ndarray:
        p, h = self.p, self.h
        np.copyto(self.xt, x.transpose(1, 0, 2))
        g = self.gates
        np.matmul(self.xt.reshape(-1, self.d), p["wx"], out=g.reshape(-1, 4 * h))
        g += p["bx"] + p["bh"]
        g *= self.scale
        np.multiply(p["wh"], self.scale, out=self.ws)
        self.cells[0].fill(0)
        self.hids[0].fill(0)
        for t in range(self.t):
            gt, c_prev, c = g[t], self.cells[t], self.cells[t + 1]
            np.matmul(self.hids[t], self.ws, out=self.hw)
            gt += self.hw
            np.tanh(gt, out=gt)
            s = gt[:, h:]
            s *= 0.5
            s += 0.5
            np.multiply(gt[:, 2 * h:3 * h], c_prev, out=c)
            np.multiply(gt[:, h:2 * h], gt[:, :h], out=self.tmp)
            c += self.tmp
            np.tanh(c, out=self.tanh_c[t])
            np.multiply(gt[:, 3 * h:], self.tanh_c[t], out=self.hids[t + 1])
        last = self.hids[self.t]
        return last @ p["wo"] + p["bo"]

    def backward(self, dlast: np.ndarray) -> None:
        h, g, p, grads = self.h, self.gates, self.p, self.g
        self._factors()
        dg, dh, dc = self.dgates, self.dh, self.dc
        np.copyto(dh, dlast)
        for t in range(self.t - 1, -1, -1):
            if t < self.t - 1:
                np.matmul(dg[t + 1], p["wh"].T, out=dh)
                dc *= g[t + 1, :, 2 * h:3 * h]
                np.multiply(dh, self.k[t], out=self.tmp)
                dc += self.tmp
            else:
                np.multiply(dh, self.k[t], out=dc)
            pt = self.factors[t]
            np.multiply(pt[:, :3 * h].reshape(-1, 3, h), dc.reshape(-1, 1, h),
                        out=dg[t][:, :3 * h].reshape(-1, 3, h))
            np.multiply(dh, pt[:, 3 * h:], out=dg[t][:, 3 * h:])
        flat_dg = dg.reshape(-1, 4 * h)
        np.matmul(self.hids[:-1].reshape(-1, h).T, flat_dg, out=grads["wh"])
        np.matmul(self.xt.reshape(-1, self.d).T, flat_dg, out=grads["wx"])
        flat_dg.sum(axis=0, out=grads["bh"])
        np.copyto(grads["bx"], grads["bh"])

    def _factors(self) -> None:
        """[i * (1 - c~^2), c~ * i(1-i), c_prev * f(1-f), tanh(c) * o(1-o)] and
        K = o * (1 - tanh(c)^2), for every step at once."""
        h, g, pf = self.h, self.gates, self.factors
        np.subtract(1, g[..., h:], out=pf[..., h:])
        pf[..., h:] *= g[..., h:]
        np.multiply(g[..., :h], g[..., :h], out=pf[..., :h])
        np.subtract(1, pf[..., :h], out=pf[..., :h])
        pf[..., :h] *= g[..., h:2 * h]
        pf[..., h:2 * h] *= g[..., :h]
        pf[..., 2 * h:3 * h] *= self.cells[:-1]
        pf[..., 3 * h:] *= self.tanh_c
        np.multiply(self.tanh_c, self.tanh_c, out=self.k)
        np.subtract(1, self.k, out=self.k)
        self.k *= g[..., 3 * h:]

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        out = self.forward(x)
        last, p, grads = self.hids[self.t], self.p, self.g
        if self.classes:
            dout = np.empty_like(out)
            loss = softmax_xent(out, y.reshape(-1), dout)
        else:
            diff = out - y
            loss = float((diff * diff).mean())
            dout = diff * f32(2.0 / diff.size)
        np.matmul(last.T, dout, out=grads["wo"])
        dout.sum(axis=0, out=grads["bo"])
        self.backward(dout @ p["wo"].T)
        self.flat.adam(self.lr)
        return loss


class Encoder:
    """The W6 block, forward and backward by hand (see seq_workloads.py)."""
    ORDER = ["q_w", "q_b", "k_w", "k_b", "v_w", "v_b", "o_w", "o_b", "ln1_g", "ln1_b",
             "f1_w", "f1_b", "f2_w", "f2_b", "ln2_g", "ln2_b", "out_w", "out_b"]

    def __init__(self, params: dict[str, np.ndarray], w: Workload):
        self.b, self.t, self.d, self.heads, self.ffn, _ = ENCODER_SHAPE
        self.flat = Flat(params, self.ORDER, moments=True)
        self.p, self.g, self.lr = self.flat.views, self.flat.grads, w.lr
        self.dk = self.d // self.heads
        self.eps = 1e-5

    def _split(self, a: np.ndarray) -> np.ndarray:
        return a.reshape(self.b, self.t, self.heads, self.dk).transpose(0, 2, 1, 3)

    def _merge(self, a: np.ndarray) -> np.ndarray:
        return a.transpose(0, 2, 1, 3).reshape(self.b * self.t, self.d)

    def _norm(self, r: np.ndarray, gain: np.ndarray, bias: np.ndarray):
        mu = r.mean(axis=1, keepdims=True)
        xc = r - mu
        rstd = 1.0 / np.sqrt((xc * xc).mean(axis=1, keepdims=True) + self.eps)
        xhat = xc * rstd
        return xhat * gain + bias, (xhat, rstd)

    @staticmethod
    def _norm_back(dy: np.ndarray, gain: np.ndarray, saved, dgain, dbias) -> np.ndarray:
        xhat, rstd = saved
        np.sum(dy * xhat, axis=0, out=dgain)
        np.sum(dy, axis=0, out=dbias)
        dx = dy * gain
        return rstd * (dx - dx.mean(axis=1, keepdims=True)
                       - xhat * (dx * xhat).mean(axis=1, keepdims=True))

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        p, g = self.p, self.g
        x2 = x.reshape(-1, self.d)
        q, k, v = (self._split(x2 @ p[f"{n}_w"] + p[f"{n}_b"]) for n in "qkv")
        scale = f32(self.dk ** -0.5)
        s = (q @ k.transpose(0, 1, 3, 2)) * scale
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        att = self._merge(s @ v)
        y1, n1 = self._norm(x2 + att @ p["o_w"] + p["o_b"], p["ln1_g"], p["ln1_b"])
        f1 = np.maximum(y1 @ p["f1_w"] + p["f1_b"], 0)
        y2, n2 = self._norm(y1 + f1 @ p["f2_w"] + p["f2_b"], p["ln2_g"], p["ln2_b"])
        pooled = y2.reshape(self.b, self.t, self.d).mean(axis=1)
        logits = pooled @ p["out_w"] + p["out_b"]
        dz = np.empty_like(logits)
        loss = softmax_xent(logits, y.reshape(-1), dz)
        np.matmul(pooled.T, dz, out=g["out_w"])
        dz.sum(axis=0, out=g["out_b"])
        dy2 = np.repeat((dz @ p["out_w"].T) / self.t, self.t, axis=0)
        dr2 = self._norm_back(dy2, p["ln2_g"], n2, g["ln2_g"], g["ln2_b"])
        np.matmul(f1.T, dr2, out=g["f2_w"])
        dr2.sum(axis=0, out=g["f2_b"])
        df1 = (dr2 @ p["f2_w"].T) * (f1 > 0)
        np.matmul(y1.T, df1, out=g["f1_w"])
        df1.sum(axis=0, out=g["f1_b"])
        dr1 = self._norm_back(dr2 + df1 @ p["f1_w"].T, p["ln1_g"], n1, g["ln1_g"], g["ln1_b"])
        np.matmul(att.T, dr1, out=g["o_w"])
        dr1.sum(axis=0, out=g["o_b"])
        self._attention_back(x2, q, k, v, s, self._split(dr1 @ p["o_w"].T), scale)
        self.flat.adam(self.lr)
        return loss

    def _attention_back(self, x2, q, k, v, s, datt, scale) -> None:
        g = self.g
        dv = s.transpose(0, 1, 3, 2) @ datt
        ds = datt @ v.transpose(0, 1, 3, 2)
        ds -= (ds * s).sum(axis=-1, keepdims=True)
        ds *= s
        ds *= scale
        for name, d in (("q", ds @ k), ("k", ds.transpose(0, 1, 3, 2) @ q), ("v", dv)):
            d2 = self._merge(d)
            np.matmul(x2.T, d2, out=g[f"{name}_w"])
            d2.sum(axis=0, out=g[f"{name}_b"])


def make(w: Workload, params: dict[str, np.ndarray], device: str = "cpu") -> Contender:
    xs, ys = seq_batches(w.model, w.batch)
    net = Encoder(params, w) if w.model == "W6" else LSTM(params, w)

    def call(i: int) -> float:
        k = i % POOL
        return net.step(xs[k], ys[k])
    return Contender(call)
