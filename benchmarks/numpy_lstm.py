"""The adding problem's LSTM (examples/adding_problem_static_rnn.py) written by hand in
NumPy: forward over the steps keeping what the backward needs, backpropagation through
time, Adam. The reference bench_control_flow.py times the compiled StaticRNN against; it
computes the same loss and gradients as the compiled program
(tests/test_bench_control_flow.py)."""
from __future__ import annotations

import numpy as np


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


class NumpyLSTM:
    """Parameters named as the compiled program names them: ``lstm/fc_0.w_0`` (inputs ->
    gates), ``lstm/fc_0.w_1`` (hidden -> gates), ``lstm/fc_0.b_0``, ``lstm/fc_1.w_0``,
    ``lstm/fc_1.b_0`` (the read-out)."""

    def __init__(self, params: dict[str, np.ndarray], learning_rate: float = 0.01):
        self.p = {k: v.astype(np.float32).copy() for k, v in params.items()}
        self.m1 = {k: np.zeros_like(v) for k, v in self.p.items()}
        self.m2 = {k: np.zeros_like(v) for k, v in self.p.items()}
        self.lr, self.t = learning_rate, 0

    def forward(self, x: np.ndarray) -> tuple[np.ndarray, list]:
        wx, wh, b = self.p["lstm/fc_0.w_0"], self.p["lstm/fc_0.w_1"], self.p["lstm/fc_0.b_0"]
        hidden = wh.shape[0]
        h = np.zeros((x.shape[1], hidden), np.float32)
        c = np.zeros_like(h)
        kept = []
        for x_t in x:
            gates = x_t @ wx + h @ wh + b
            i, f, o, g = (gates[:, k * hidden:(k + 1) * hidden] for k in range(4))
            si, sf, so, tg = _sigmoid(i), _sigmoid(f + 1.0), _sigmoid(o), np.tanh(g)
            c_new = sf * c + si * tg
            tc = np.tanh(c_new)
            kept.append((x_t, h, c, si, sf, so, tg, tc))
            h, c = so * tc, c_new
        return h @ self.p["lstm/fc_1.w_0"] + self.p["lstm/fc_1.b_0"], kept

    def gradients(self, x: np.ndarray, y: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
        pred, kept = self.forward(x)
        diff = pred - y
        loss = float(np.mean(diff * diff))
        dpred = 2.0 * diff / diff.size
        h_last = kept[-1][5] * kept[-1][7]
        grads = {"lstm/fc_1.w_0": h_last.T @ dpred, "lstm/fc_1.b_0": dpred.sum(axis=0)}
        grads.update(self._through_time(kept, dpred @ self.p["lstm/fc_1.w_0"].T))
        return loss, grads

    def _through_time(self, kept: list, dh: np.ndarray) -> dict[str, np.ndarray]:
        wx, wh = self.p["lstm/fc_0.w_0"], self.p["lstm/fc_0.w_1"]
        dwx, dwh, db = np.zeros_like(wx), np.zeros_like(wh), np.zeros(wh.shape[1], np.float32)
        dc = np.zeros_like(dh)
        for x_t, h_prev, c_prev, si, sf, so, tg, tc in reversed(kept):
            dc = dc + dh * so * (1.0 - tc * tc)
            dgates = np.concatenate([dc * tg * si * (1.0 - si), dc * c_prev * sf * (1.0 - sf),
                                     dh * tc * so * (1.0 - so), dc * si * (1.0 - tg * tg)],
                                    axis=1)
            dwx += x_t.T @ dgates
            dwh += h_prev.T @ dgates
            db += dgates.sum(axis=0)
            dh, dc = dgates @ wh.T, dc * sf
        return {"lstm/fc_0.w_0": dwx, "lstm/fc_0.w_1": dwh, "lstm/fc_0.b_0": db}

    def train_step(self, x: np.ndarray, y: np.ndarray) -> float:
        """One Adam step (beta1 0.9, beta2 0.999, epsilon 1e-8, as fluid's Adam)."""
        loss, grads = self.gradients(x, y)
        self.t += 1
        rate = self.lr * np.sqrt(1 - 0.999 ** self.t) / (1 - 0.9 ** self.t)
        for k, g in grads.items():
            self.m1[k] = 0.9 * self.m1[k] + 0.1 * g
            self.m2[k] = 0.999 * self.m2[k] + 0.001 * g * g
            self.p[k] -= rate * self.m1[k] / (np.sqrt(self.m2[k]) + 1e-8)
        return loss
