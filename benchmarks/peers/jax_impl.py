"""The peer suite's workloads in JAX: the whole training step (forward, gradient, update)
under one ``jax.jit``, parameters and optimizer state donated so XLA updates them in place;
Adam written out (no optax), with the same bias correction as fluid's."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .seq_workloads import SEQ_MODELS
from .workloads import POOL, RMSPROP_EPS, RMSPROP_RHO, Contender, Workload, batches, infer_inputs


def _forward(model: str):
    if model == "W1":
        return lambda p, x: x @ p["w0"] + p["b0"]
    if model == "W2":
        def mlp(p, x):
            h = jax.nn.relu(x @ p["w0"] + p["b0"])
            h = jax.nn.relu(h @ p["w1"] + p["b1"])
            return h @ p["w2"] + p["b2"]
        return mlp

    def conv(x, w, b):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), "VALID",
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return y + b[None, :, None, None]

    def pool(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2),
                                     "VALID")

    def lenet(p, x):
        h = pool(jax.nn.relu(conv(x, p["conv1_w"], p["conv1_b"])))
        h = pool(jax.nn.relu(conv(h, p["conv2_w"], p["conv2_b"])))
        h = jax.nn.relu(h.reshape(h.shape[0], -1) @ p["fc1_w"] + p["fc1_b"])
        return h @ p["fc2_w"] + p["fc2_b"]
    return lenet


def _loss(model: str):
    forward = _forward(model)
    if model == "W1":
        return lambda p, x, y: jnp.mean((forward(p, x) - y) ** 2)

    def xent(p, x, y):
        z = forward(p, x)
        logp = jax.nn.log_softmax(z)
        return -jnp.mean(jnp.take_along_axis(logp, y, axis=1))
    return xent


def adam_step(w: Workload, grad_fn):
    """One jitted Adam step over ``grad_fn``'s (loss, gradients); the state donated."""
    b1, b2, eps = 0.9, 0.999, 1e-8

    def adam(state, x, y):
        p, m1, m2, t = state
        loss, g = grad_fn(p, x, y)
        t = t + 1.0
        rate = w.lr * jnp.sqrt(1.0 - b2 ** t) / (1.0 - b1 ** t)
        m1 = jax.tree_util.tree_map(lambda m, gi: b1 * m + (1 - b1) * gi, m1, g)
        m2 = jax.tree_util.tree_map(lambda m, gi: b2 * m + (1 - b2) * gi * gi, m2, g)
        p = jax.tree_util.tree_map(lambda pi, a, b: pi - rate * a / (jnp.sqrt(b) + eps),
                                   p, m1, m2)
        return (p, m1, m2, t), loss
    return jax.jit(adam, donate_argnums=(0,))


def rmsprop_step(w: Workload, grad_fn):
    """One jitted RMSProp step (the mean square as the state's second item)."""
    def rmsprop(state, x, y):
        p, ms = state
        loss, g = grad_fn(p, x, y)
        ms = jax.tree_util.tree_map(lambda m, gi: RMSPROP_RHO * m + (1 - RMSPROP_RHO) * gi * gi,
                                    ms, g)
        p = jax.tree_util.tree_map(lambda pi, gi, m: pi - w.lr * gi / jnp.sqrt(m + RMSPROP_EPS),
                                   p, g, ms)
        return (p, ms), loss
    return jax.jit(rmsprop, donate_argnums=(0,))


def _train_step(w: Workload):
    grad_fn = jax.value_and_grad(_loss(w.model))
    if w.optimizer == "adam":
        return adam_step(w, grad_fn)
    if w.optimizer == "rmsprop":
        return rmsprop_step(w, grad_fn)

    def sgd(state, x, y):
        loss, g = grad_fn(state, x, y)
        return jax.tree_util.tree_map(lambda pi, gi: pi - w.lr * gi, state, g), loss
    return jax.jit(sgd, donate_argnums=(0,))


def make(w: Workload, params: dict[str, np.ndarray], device: str = "cpu") -> Contender:
    """JAX runs where its default backend is (the suite compares it on the CPU)."""
    if w.model in SEQ_MODELS:
        from .seq_jax import make as make_seq
        return make_seq(w, params, device)
    p = {k: jnp.asarray(v) for k, v in params.items()}
    if w.kind == "infer":
        forward = jax.jit(_forward(w.model))
        inputs = infer_inputs(w)

        def infer(i: int) -> np.ndarray:
            x = inputs[i % POOL]
            a = np.asarray(x, np.float32)
            return np.asarray(forward(p, a[None] if w.sample else a))
        return Contender(infer)
    xs, ys = batches(w.model, w.batch)
    jx, jy = [jnp.asarray(x) for x in xs], [jnp.asarray(y) for y in ys]
    step = _train_step(w)
    zeros = jax.tree_util.tree_map(jnp.zeros_like, p)
    state = [(p, zeros, jax.tree_util.tree_map(jnp.zeros_like, p), jnp.float32(0.0))
             if w.optimizer == "adam" else (p, zeros) if w.optimizer == "rmsprop" else p]

    def call(i: int) -> float:
        k = i % POOL
        state[0], loss = step(state[0], jx[k], jy[k])
        return float(loss)
    return Contender(call)


def version() -> str:
    return f"jax {jax.__version__} ({jax.default_backend()})"
