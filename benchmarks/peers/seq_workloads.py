"""The sequence workloads of the peer suite: shapes, data and initial parameters (NumPy,
seeded), the same in every process.

W4  LSTM train step: x [64, 100, 2] (the adding problem), fc 2 -> 4H, LSTM H=64 (no
    peepholes), last step, fc 64 -> 1, square error, Adam lr 0.001
W5  the same LSTM at B=32, T=29, D=12 (Japanese Vowels' shape), last step, fc 64 -> 9,
    softmax cross-entropy, Adam lr 0.001
W6  a Transformer encoder block, x [32, 64, 128]: 4-head self-attention (fc for q, k, v
    and the output), residual + layer_norm, fc 128 -> 512 relu -> 128, residual +
    layer_norm; mean over T, fc 128 -> 10, softmax cross-entropy, Adam lr 0.001

Parameters use fluid's layouts: fc weights [in, out]; the LSTM's input projection
``wx [D, 4H]`` / ``bx [4H]`` and recurrent ``wh [H, 4H]`` / ``bh [4H]`` with the gates in
Paddle's order c~, i, f, o (a peer maps them to its own order).
"""
from __future__ import annotations

import numpy as np

from .workloads import POOL

SEQ_MODELS = ("W4", "W5", "W6")
#: (B, T, D, H, classes); classes 0 is a regression
LSTM_SHAPES = {"W4": (64, 100, 2, 64, 0), "W5": (32, 29, 12, 64, 9)}
#: (B, T, d, heads, ffn, classes)
ENCODER_SHAPE = (32, 64, 128, 4, 512, 10)


def _uniform(rng: np.random.Generator, shape: tuple, bound: float) -> np.ndarray:
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def seq_parameters(model: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng({"W4": 4, "W5": 5, "W6": 6}[model])
    if model in LSTM_SHAPES:
        _, _, d, h, classes = LSTM_SHAPES[model]
        k = 1 / np.sqrt(h)     # PyTorch's nn.LSTM initialisation
        out = max(classes, 1)
        return {"wx": _uniform(rng, (d, 4 * h), k), "bx": _uniform(rng, (4 * h,), k),
                "wh": _uniform(rng, (h, 4 * h), k), "bh": _uniform(rng, (4 * h,), k),
                "wo": _uniform(rng, (h, out), k), "bo": np.zeros(out, np.float32)}
    _, _, d, _, ffn, classes = ENCODER_SHAPE
    p = {}
    for name, (a, b) in {"q": (d, d), "k": (d, d), "v": (d, d), "o": (d, d),
                         "f1": (d, ffn), "f2": (ffn, d), "out": (d, classes)}.items():
        p[f"{name}_w"] = _uniform(rng, (a, b), np.sqrt(6.0 / (a + b)))
        p[f"{name}_b"] = np.zeros(b, np.float32)
    for i in (1, 2):
        p[f"ln{i}_g"], p[f"ln{i}_b"] = np.ones(d, np.float32), np.zeros(d, np.float32)
    return p


def adding_problem(rng: np.random.Generator, b: int, t: int) -> tuple[np.ndarray, np.ndarray]:
    """x [b, t, 2]: uniform values and a 0/1 channel marking two positions, one in each
    half; y [b, 1]: the sum of the two marked values."""
    x = np.zeros((b, t, 2), np.float32)
    x[..., 0] = rng.random((b, t))
    first = rng.integers(0, t // 2, b)
    second = rng.integers(t // 2, t, b)
    rows = np.arange(b)
    x[rows, first, 1] = x[rows, second, 1] = 1.0
    y = x[rows, first, 0] + x[rows, second, 0]
    return x, y.reshape(b, 1).astype(np.float32)


def seq_batches(model: str, batch: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(200 + batch)
    if model == "W4":
        pairs = [adding_problem(rng, batch, LSTM_SHAPES["W4"][1]) for _ in range(POOL)]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    if model == "W5":
        _, t, d, _, classes = LSTM_SHAPES["W5"]
        protos = rng.standard_normal((classes, t, d))
    else:
        _, t, d, _, _, classes = ENCODER_SHAPE
        protos = rng.standard_normal((classes, 1, d))
    xs, ys = [], []
    for _ in range(POOL):
        y = rng.integers(0, classes, batch)
        scale = 0.5 if model == "W5" else 0.15
        xs.append((scale * protos[y] + rng.standard_normal((batch, t, d))).astype(np.float32))
        ys.append(y.reshape(batch, 1).astype(np.int64))
    return xs, ys
