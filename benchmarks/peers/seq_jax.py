"""The sequence workloads in JAX: the LSTM as a jitted ``lax.scan`` over time (W4, W5) and
the encoder block written with jax.numpy (W6); forward, gradient and Adam in one
``jax.jit`` with the state donated, as jax_impl.py does."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .jax_impl import adam_step
from .seq_workloads import ENCODER_SHAPE, LSTM_SHAPES, seq_batches
from .workloads import POOL, Contender, Workload


def _lstm_forward(w: Workload):
    h_size = LSTM_SHAPES[w.model][3]

    def forward(p, x):
        xs = jnp.einsum("btd,dg->tbg", x, p["wx"]) + p["bx"] + p["bh"]

        def cell(carry, xt):
            h, c = carry
            z = xt + h @ p["wh"]
            cand = jnp.tanh(z[:, :h_size])
            i, f, o = (jax.nn.sigmoid(z[:, k * h_size:(k + 1) * h_size]) for k in (1, 2, 3))
            c = f * c + i * cand
            h = o * jnp.tanh(c)
            return (h, c), None

        zeros = jnp.zeros((x.shape[0], h_size), x.dtype)
        (h, _), _ = jax.lax.scan(cell, (zeros, zeros), xs)
        return h @ p["wo"] + p["bo"]
    return forward


def _layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + eps) * g + b


def _encoder_forward(p, x):
    b, t, d = x.shape
    heads = ENCODER_SHAPE[3]

    def split(a):
        return a.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3)
    q, k, v = (split(x @ p[f"{n}_w"] + p[f"{n}_b"]) for n in "qkv")
    att = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(d // heads), axis=-1) @ v
    att = att.transpose(0, 2, 1, 3).reshape(b, t, d)
    h = _layer_norm(x + att @ p["o_w"] + p["o_b"], p["ln1_g"], p["ln1_b"])
    f = jax.nn.relu(h @ p["f1_w"] + p["f1_b"]) @ p["f2_w"] + p["f2_b"]
    h = _layer_norm(h + f, p["ln2_g"], p["ln2_b"])
    return h.mean(axis=1) @ p["out_w"] + p["out_b"]


def _loss(w: Workload):
    forward = _encoder_forward if w.model == "W6" else _lstm_forward(w)
    if w.model == "W4":
        return lambda p, x, y: jnp.mean((forward(p, x) - y) ** 2)

    def xent(p, x, y):
        logp = jax.nn.log_softmax(forward(p, x))
        return -jnp.mean(jnp.take_along_axis(logp, y, axis=1))
    return xent


def make(w: Workload, params: dict[str, np.ndarray], device: str = "cpu") -> Contender:
    p = {k: jnp.asarray(v) for k, v in params.items()}
    xs, ys = seq_batches(w.model, w.batch)
    jx, jy = [jnp.asarray(x) for x in xs], [jnp.asarray(y) for y in ys]
    step = adam_step(w, jax.value_and_grad(_loss(w)))
    zeros = jax.tree_util.tree_map(jnp.zeros_like, p)
    state = [(p, zeros, jax.tree_util.tree_map(jnp.zeros_like, p), jnp.float32(0.0))]

    def call(i: int) -> float:
        k = i % POOL
        state[0], loss = step(state[0], jx[k], jy[k])
        return float(loss)
    return Contender(call)
