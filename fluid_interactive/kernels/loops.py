"""The optimizer updates of the compiled tier, as plain Python loops over flat arrays.

The tier compiles these functions with Numba (`build.py`); uncompiled they are the same
arithmetic, element by element, so a test can run them on a few values. Each computes
exactly what the NumPy kernel of its op computes (ops/optim.py), in the same order, with
its constants already rounded to the arrays' dtype as NumPy rounds a Python float mixed
with a float32 array; and no multiply-add is contracted (Numba's default), so the values
are bit-identical. Each writes only its outputs, which never alias an input (the fused
kernels write into a generation nothing references; ops/flat_state.py).
"""
import numpy as np


def sgd(param, grad, lr, p_out):
    """p_out = param - grad * lr."""
    for i in range(param.shape[0]):
        p_out[i] = param[i] - grad[i] * lr


def momentum(param, grad, velocity, mu, lr, p_out, v_out):
    """v_out = velocity * mu + grad; p_out = param - v_out * lr."""
    for i in range(param.shape[0]):
        v = velocity[i] * mu + grad[i]
        v_out[i] = v
        p_out[i] = param[i] - v * lr


def momentum_nesterov(param, grad, velocity, mu, lr, p_out, v_out):
    """v_out = velocity * mu + grad; p_out = param - (v_out * mu + grad) * lr."""
    for i in range(param.shape[0]):
        g = grad[i]
        v = velocity[i] * mu + g
        v_out[i] = v
        p_out[i] = param[i] - (v * mu + g) * lr


def adam(param, grad, m1, m2, b1, one_minus_b1, b2, one_minus_b2, eps, rate, p_out,
         m1_out, m2_out):
    """m1_out = m1 * b1 + grad * (1 - b1); m2_out = m2 * b2 + (grad * grad) * (1 - b2);
    p_out = param - (m1_out / (sqrt(m2_out) + eps)) * rate."""
    for i in range(param.shape[0]):
        g = grad[i]
        a = m1[i] * b1 + g * one_minus_b1
        b = m2[i] * b2 + (g * g) * one_minus_b2
        m1_out[i] = a
        m2_out[i] = b
        p_out[i] = param[i] - (a / (np.sqrt(b) + eps)) * rate


FUNCTIONS = ("sgd", "momentum", "momentum_nesterov", "adam")
