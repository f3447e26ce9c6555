"""The workloads of the peer suite: shapes, data and initial parameters, the same in every
process (NumPy, seeded), named in one framework-neutral way.

W1  fit_a_line: fc 13 -> 1, batch 256, square error, SGD lr 0.001
W2  MLP 784 -> 512 relu -> 512 relu -> 10, batch 128, softmax cross-entropy, SGD lr 0.01,
    Adam lr 0.001 or RMSProp lr 0.001 (decay `RMSPROP_RHO`, epsilon `RMSPROP_EPS`)
W3  LeNet on 1x28x28: conv 5x5 20 -> relu -> max-pool 2 -> conv 5x5 50 -> relu -> max-pool 2
    -> fc 500 relu -> fc 10, batch 64, SGD lr 0.01
W4-W6  sequence models: an LSTM and a Transformer encoder block (seq_workloads.py)

Parameters use fluid's layouts (fc weight [in, out], conv filter [O, C, kh, kw]).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

POOL = 8          # batches cycled through by every training loop
#: W2-rmsprop's decay and epsilon. Paddle adds epsilon inside the square root, PyTorch
#: outside; at an epsilon this small the two compute the same steps (at PyTorch's 1e-8
#: the many tiny gradients of a relu MLP step differently), and the time is the same.
RMSPROP_RHO, RMSPROP_EPS = 0.9, 1e-30
CHECK_STEPS = 30  # steps of the loss check
CHECK_AT = (0, 1, 5, 10, 20, 29)


@dataclass(frozen=True)
class Workload:
    name: str
    model: str            # 'W1', 'W2' or 'W3': which parameters and data
    kind: str             # 'train' or 'infer'
    optimizer: str = "sgd"
    lr: float = 0.0
    batch: int = 0
    sample: str = ""      # infer: 'array', 'list' (one sample) or '' (a batch)
    steps: int = 0        # timed calls per block
    warmup: int = 0
    what: str = ""


WORKLOADS = {w.name: w for w in (
    Workload("W1", "W1", "train", "sgd", 0.001, 256, steps=2000, warmup=200,
             what="W1 fit_a_line train (13->1, b256, SGD)"),
    Workload("W2-sgd", "W2", "train", "sgd", 0.01, 128, steps=60, warmup=10,
             what="W2 MLP 784-512-512-10 b128, SGD"),
    Workload("W2-adam", "W2", "train", "adam", 0.001, 128, steps=60, warmup=10,
             what="W2 same, Adam"),
    Workload("W2-rmsprop", "W2", "train", "rmsprop", 0.001, 128, steps=60, warmup=10,
             what="W2 same, RMSProp"),
    Workload("W2-gemm", "W2", "floor", batch=128, steps=60, warmup=10,
             what="W2's three forward and five backward GEMMs alone (NumPy): the floor"),
    Workload("W3", "W3", "train", "sgd", 0.01, 64, steps=15, warmup=3,
             what="W3 LeNet b64, SGD (conv2d + pool2d)"),
    Workload("W3-scp", "W3", "train", "sgd", 0.01, 64, steps=15, warmup=3,
             what="W3 LeNet b64, SGD (simple_img_conv_pool)"),
    Workload("W4", "W4", "train", "adam", 0.001, 64, steps=5, warmup=2,
             what="W4 LSTM b64 T100 D2 H64, Adam (the adding problem)"),
    Workload("W5", "W5", "train", "adam", 0.001, 32, steps=15, warmup=3,
             what="W5 LSTM b32 T29 D12 H64, Adam"),
    Workload("W6", "W6", "train", "adam", 0.001, 32, steps=5, warmup=2,
             what="W6 Transformer encoder block b32 T64 d128 4 heads, Adam"),
    Workload("W1-infer-1", "W1", "infer", batch=1, sample="array", steps=3000, warmup=300,
             what="W1 infer 1 sample (array)"),
    Workload("W1-infer-list", "W1", "infer", batch=1, sample="list", steps=3000, warmup=300,
             what="W1 infer 1 sample from a Python list"),
    Workload("W1-infer-256", "W1", "infer", batch=256, steps=2000, warmup=200,
             what="W1 infer batch 256"),
    Workload("W2-infer", "W2", "infer", batch=128, steps=100, warmup=10,
             what="W2 infer batch 128"),
    Workload("W3-infer", "W3", "infer", batch=64, steps=20, warmup=3,
             what="W3 infer batch 64"),
)}


def _uniform(rng: np.random.Generator, shape: tuple, fan_in: int) -> np.ndarray:
    bound = np.sqrt(6.0 / fan_in) / 2
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def initial_parameters(model: str) -> dict[str, np.ndarray]:
    if model in ("W4", "W5", "W6"):   # the sequence workloads: seq_workloads.py
        from .seq_workloads import seq_parameters
        return seq_parameters(model)
    rng = np.random.default_rng({"W1": 1, "W2": 2, "W3": 3}[model])
    if model == "W1":
        return {"w0": _uniform(rng, (13, 1), 13), "b0": np.zeros(1, np.float32)}
    if model == "W2":
        sizes = (784, 512, 512, 10)
        out = {}
        for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
            out[f"w{i}"] = _uniform(rng, (a, b), a)
            out[f"b{i}"] = np.zeros(b, np.float32)
        return out
    return {"conv1_w": _uniform(rng, (20, 1, 5, 5), 25), "conv1_b": np.zeros(20, np.float32),
            "conv2_w": _uniform(rng, (50, 20, 5, 5), 500), "conv2_b": np.zeros(50, np.float32),
            "fc1_w": _uniform(rng, (800, 500), 800), "fc1_b": np.zeros(500, np.float32),
            "fc2_w": _uniform(rng, (500, 10), 500), "fc2_b": np.zeros(10, np.float32)}


def batches(model: str, batch: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """POOL learnable batches: x float32, y float32 [N, 1] (W1) or int64 [N, 1]."""
    rng = np.random.default_rng(100 + batch)
    xs, ys = [], []
    if model == "W1":
        w = rng.standard_normal((13, 1))
        for _ in range(POOL):
            x = rng.standard_normal((batch, 13))
            xs.append(x.astype(np.float32))
            ys.append((x @ w + 0.1 * rng.standard_normal((batch, 1))).astype(np.float32))
    elif model == "W2":
        protos = rng.random((10, 784))
        for _ in range(POOL):
            y = rng.integers(0, 10, batch)
            xs.append((0.5 * protos[y] + 0.5 * rng.random((batch, 784))).astype(np.float32))
            ys.append(y.reshape(batch, 1).astype(np.int64))
    else:
        protos = np.kron(rng.random((10, 7, 7)), np.ones((4, 4)))
        for _ in range(POOL):
            y = rng.integers(0, 10, batch)
            x = 0.5 * protos[y] + 0.5 * rng.random((batch, 28, 28))
            xs.append(x.reshape(batch, 1, 28, 28).astype(np.float32))
            ys.append(y.reshape(batch, 1).astype(np.int64))
    return xs, ys


def infer_inputs(w: Workload) -> list:
    """What one inference call gets: an array (a batch, or one sample without its batch
    dimension) or a Python list of floats."""
    xs, _ = batches(w.model, max(w.batch, 2))
    if w.sample == "array":
        return [x[0] for x in xs]
    if w.sample == "list":
        return [x[0].tolist() for x in xs]
    return [x[:w.batch] for x in xs]


@dataclass
class Contender:
    """One framework's implementation of one workload: ``call(i)`` runs call number i
    (train: one step on batch i % POOL, returning the loss as a float; infer: one call,
    returning a NumPy array); ``compile_ms``: building the model, where the framework has
    a separate step for it."""
    call: Callable[[int], object]
    compile_ms: float = float("nan")
    settle: Callable[[], None] | None = None   # wait for background work (compiled kernels)
