"""The peer suite's workloads in PyTorch eager (default threads), written the way its
documentation teaches: nn modules, torch.optim, zero_grad(set_to_none=True)."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .seq_workloads import SEQ_MODELS
from .workloads import POOL, RMSPROP_EPS, RMSPROP_RHO, Contender, Workload, batches, infer_inputs


def _linear(w: np.ndarray, b: np.ndarray) -> nn.Linear:
    m = nn.Linear(*w.shape)
    with torch.no_grad():
        m.weight.copy_(torch.from_numpy(w.T.copy()))
        m.bias.copy_(torch.from_numpy(b))
    return m


def _conv(w: np.ndarray, b: np.ndarray) -> nn.Conv2d:
    m = nn.Conv2d(w.shape[1], w.shape[0], w.shape[2])
    with torch.no_grad():
        m.weight.copy_(torch.from_numpy(w))
        m.bias.copy_(torch.from_numpy(b))
    return m


def model(name: str, p: dict[str, np.ndarray]) -> nn.Module:
    if name == "W1":
        return _linear(p["w0"], p["b0"])
    if name == "W2":
        return nn.Sequential(_linear(p["w0"], p["b0"]), nn.ReLU(),
                             _linear(p["w1"], p["b1"]), nn.ReLU(), _linear(p["w2"], p["b2"]))
    return nn.Sequential(_conv(p["conv1_w"], p["conv1_b"]), nn.ReLU(), nn.MaxPool2d(2),
                         _conv(p["conv2_w"], p["conv2_b"]), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), _linear(p["fc1_w"], p["fc1_b"]), nn.ReLU(),
                         _linear(p["fc2_w"], p["fc2_b"]))


def make(w: Workload, params: dict[str, np.ndarray], device: str = "cpu") -> Contender:
    """On 'gpu' the model lives on CUDA and each batch is copied there from NumPy every
    call (as fluid's feeds are)."""
    if w.model in SEQ_MODELS:
        from .seq_torch import make as make_seq
        return make_seq(w, params, device)
    dev = torch.device("cuda" if device == "gpu" else "cpu")
    net = model(w.model, params).to(dev)
    if w.kind == "infer":
        inputs = infer_inputs(w)

        def infer(i: int) -> np.ndarray:
            x = inputs[i % POOL]
            if w.sample == "list":
                t = torch.tensor([x])
            elif w.sample == "array":
                t = torch.from_numpy(x).unsqueeze(0)
            else:
                t = torch.from_numpy(x)
            with torch.no_grad():
                return net(t.to(dev)).cpu().numpy()
        return Contender(infer)
    xs, ys = batches(w.model, w.batch)
    ys = [y if w.model == "W1" else y.reshape(-1) for y in ys]
    if dev.type == "cpu":   # zero-copy views of the NumPy batches
        xs, ys = [torch.from_numpy(x) for x in xs], [torch.from_numpy(y) for y in ys]
    opt = (torch.optim.Adam(net.parameters(), lr=w.lr, eps=1e-8) if w.optimizer == "adam"
           else torch.optim.RMSprop(net.parameters(), lr=w.lr, alpha=RMSPROP_RHO,
                                    eps=RMSPROP_EPS) if w.optimizer == "rmsprop"
           else torch.optim.SGD(net.parameters(), lr=w.lr))
    loss_fn = F.mse_loss if w.model == "W1" else F.cross_entropy

    def step(i: int) -> float:
        k = i % POOL
        opt.zero_grad(set_to_none=True)
        x, y = xs[k], ys[k]
        if dev.type != "cpu":
            x, y = torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()
    return Contender(step)


def version() -> str:
    gpu = f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return f"torch {torch.__version__}{gpu}"
