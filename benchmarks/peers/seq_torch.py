"""The sequence workloads in PyTorch eager, the way its documentation teaches: the fused
``nn.LSTM`` (W4, W5) and ``nn.TransformerEncoderLayer`` (W6), torch.optim.Adam."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .seq_workloads import ENCODER_SHAPE, LSTM_SHAPES, seq_batches
from .torch_impl import _linear
from .workloads import POOL, Contender, Workload


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


class LSTMNet(nn.Module):
    def __init__(self, p: dict[str, np.ndarray], w: Workload):
        super().__init__()
        _, _, d, h, _ = LSTM_SHAPES[w.model]
        # fluid's gate blocks c~, i, f, o -> PyTorch's i, f, g, o
        perm = np.concatenate([np.arange(k * h, (k + 1) * h) for k in (1, 2, 0, 3)])
        self.lstm = nn.LSTM(d, h, batch_first=True)
        with torch.no_grad():
            self.lstm.weight_ih_l0.copy_(_t(p["wx"][:, perm].T))
            self.lstm.bias_ih_l0.copy_(_t(p["bx"][perm]))
            self.lstm.weight_hh_l0.copy_(_t(p["wh"][:, perm].T))
            self.lstm.bias_hh_l0.copy_(_t(p["bh"][perm]))
        self.head = _linear(p["wo"], p["bo"])

    def forward(self, x):
        return self.head(self.lstm(x)[0][:, -1])


class EncoderNet(nn.Module):
    def __init__(self, p: dict[str, np.ndarray]):
        super().__init__()
        _, _, d, heads, ffn, _ = ENCODER_SHAPE
        self.block = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.0, batch_first=True)
        b = self.block
        with torch.no_grad():
            b.self_attn.in_proj_weight.copy_(_t(np.concatenate([p[f"{n}_w"].T for n in "qkv"])))
            b.self_attn.in_proj_bias.copy_(_t(np.concatenate([p[f"{n}_b"] for n in "qkv"])))
            b.self_attn.out_proj.weight.copy_(_t(p["o_w"].T))
            b.self_attn.out_proj.bias.copy_(_t(p["o_b"]))
            for lin, n in ((b.linear1, "f1"), (b.linear2, "f2")):
                lin.weight.copy_(_t(p[f"{n}_w"].T))
                lin.bias.copy_(_t(p[f"{n}_b"]))
            for norm, n in ((b.norm1, "ln1"), (b.norm2, "ln2")):
                norm.weight.copy_(_t(p[f"{n}_g"]))
                norm.bias.copy_(_t(p[f"{n}_b"]))
        self.head = _linear(p["out_w"], p["out_b"])

    def forward(self, x):
        return self.head(self.block(x).mean(dim=1))


def make(w: Workload, params: dict[str, np.ndarray], device: str = "cpu") -> Contender:
    dev = torch.device("cuda" if device == "gpu" else "cpu")
    net = (EncoderNet(params) if w.model == "W6" else LSTMNet(params, w)).to(dev)
    xs, ys = seq_batches(w.model, w.batch)
    regression = w.model == "W4"
    xs = [_t(x).to(dev) for x in xs]
    ys = [_t(y if regression else y.reshape(-1)).to(dev) for y in ys]
    opt = torch.optim.Adam(net.parameters(), lr=w.lr, eps=1e-8)
    loss_fn = F.mse_loss if regression else F.cross_entropy

    def step(i: int) -> float:
        k = i % POOL
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(xs[k]), ys[k])
        loss.backward()
        opt.step()
        return loss.item()
    return Contender(step)
