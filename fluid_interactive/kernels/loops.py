"""The optimizer updates of the compiled tier, as plain Python loops over flat arrays.

The tier compiles these functions with Numba (`build.py`); uncompiled they are the same
arithmetic, element by element, so a test can run them on a few values. Each computes
exactly what the NumPy kernel of its op computes (ops/optim.py), in the same order, with
its constants already rounded to the arrays' dtype as NumPy rounds a Python float mixed
with a float32 array; and no multiply-add is contracted (Numba's default), so the values
are bit-identical. The plain forms write only their outputs, which never alias an input
(the fused kernels write into a generation nothing references; ops/flat_state.py).

Each update's arithmetic is its ``*_element`` function, which its loops call (compiled
and inlined: it costs nothing). The ``*_over`` forms write the new parameters over the
gradients (``grad_p``: read, then written, element by element) for a plan that lends
the update its gradients' arena (runtime/plan/turns.py). They are loops of their own,
not the others called with one array twice: given two arguments that overlap, LLVM's
vectoriser checks at run time, finds the overlap and falls back to a scalar loop (7x
slower for Adam); one argument read and written at the same index vectorises.
"""
import numpy as np


def sgd_element(p, g, lr):
    """One parameter after one SGD step: p - g * lr."""
    return p - g * lr


def momentum_element(p, g, v, mu, lr, nesterov):
    """(velocity, parameter) of one element after one momentum step: v * mu + g, and
    p - v_new * lr (Nesterov: p - (v_new * mu + g) * lr)."""
    v_new = v * mu + g
    return v_new, p - ((v_new * mu + g) if nesterov else v_new) * lr


def adam_element(p, g, m1, m2, b1, one_minus_b1, b2, one_minus_b2, eps, rate):
    """(moment 1, moment 2, parameter) of one element after one Adam step: m1 * b1 +
    g * (1 - b1), m2 * b2 + (g * g) * (1 - b2), p - (m1_new / (sqrt(m2_new) + eps)) *
    rate."""
    a = m1 * b1 + g * one_minus_b1
    b = m2 * b2 + (g * g) * one_minus_b2
    return a, b, p - (a / (np.sqrt(b) + eps)) * rate


def sgd(param, grad, lr, p_out):
    for i in range(param.shape[0]):
        p_out[i] = sgd_element(param[i], grad[i], lr)


def momentum(param, grad, velocity, mu, lr, p_out, v_out):
    for i in range(param.shape[0]):
        v_out[i], p_out[i] = momentum_element(param[i], grad[i], velocity[i], mu, lr, False)


def momentum_nesterov(param, grad, velocity, mu, lr, p_out, v_out):
    for i in range(param.shape[0]):
        v_out[i], p_out[i] = momentum_element(param[i], grad[i], velocity[i], mu, lr, True)


def adam(param, grad, m1, m2, b1, one_minus_b1, b2, one_minus_b2, eps, rate, p_out,
         m1_out, m2_out):
    for i in range(param.shape[0]):
        m1_out[i], m2_out[i], p_out[i] = adam_element(
            param[i], grad[i], m1[i], m2[i], b1, one_minus_b1, b2, one_minus_b2, eps, rate)


def sgd_over(param, grad_p, lr):
    for i in range(param.shape[0]):
        grad_p[i] = sgd_element(param[i], grad_p[i], lr)


def momentum_over(param, grad_p, velocity, mu, lr, v_out):
    for i in range(param.shape[0]):
        v_out[i], grad_p[i] = momentum_element(param[i], grad_p[i], velocity[i], mu, lr,
                                               False)


def momentum_nesterov_over(param, grad_p, velocity, mu, lr, v_out):
    for i in range(param.shape[0]):
        v_out[i], grad_p[i] = momentum_element(param[i], grad_p[i], velocity[i], mu, lr,
                                               True)


def adam_over(param, grad_p, m1, m2, b1, one_minus_b1, b2, one_minus_b2, eps, rate,
              m1_out, m2_out):
    for i in range(param.shape[0]):
        m1_out[i], m2_out[i], grad_p[i] = adam_element(
            param[i], grad_p[i], m1[i], m2[i], b1, one_minus_b1, b2, one_minus_b2, eps, rate)


#: the element functions come first: the loops call them compiled
FUNCTIONS = ("sgd_element", "momentum_element", "adam_element", "sgd", "momentum",
             "momentum_nesterov", "adam", "sgd_over", "momentum_over", "momentum_nesterov_over",
             "adam_over")
