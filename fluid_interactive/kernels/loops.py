"""The optimizer updates of the compiled tier, as plain Python loops over flat arrays.

The tier compiles these functions with Numba (`build.py`); uncompiled they are the same
arithmetic, element by element, so a test can run them on a few values. Each computes
exactly what the NumPy kernel of its op computes (ops/optim.py), in the same order, with
its constants already rounded to the arrays' dtype as NumPy rounds a Python float mixed
with a float32 array; and no multiply-add is contracted (Numba's default), so the values
are bit-identical. The loops write only their outputs, which never alias an input (the fused
kernels write into a generation nothing references; ops/flat_state.py): given two
arguments that overlap, LLVM's vectoriser would find the overlap at run time and fall back
to a scalar loop (7x slower for Adam).

Each update's arithmetic is its ``*_element`` function, which its loops call (compiled
and inlined: it costs nothing).
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






# --- the adaptive updates of ops/optim_adaptive.py: each element function returns the new
# parameter first, then the new state in slot order; the plain loop writes them into the
# outputs ---------------------------------------------------------------------------------

def adagrad_element(p, g, m, eps, lr):
    m_new = m + g * g
    return p - (g / (np.sqrt(m_new) + eps)) * lr, m_new


def adagrad(param, grad, moment, eps, lr, p_out, m_out):
    for i in range(param.shape[0]):
        p_out[i], m_out[i] = adagrad_element(param[i], grad[i], moment[i], eps, lr)



def decayed_adagrad_element(p, g, m, decay, one_minus_decay, eps, lr):
    m_new = m * decay + (g * g) * one_minus_decay
    return p - (g / (np.sqrt(m_new) + eps)) * lr, m_new


def decayed_adagrad(param, grad, moment, decay, one_minus_decay, eps, lr, p_out, m_out):
    for i in range(param.shape[0]):
        p_out[i], m_out[i] = decayed_adagrad_element(param[i], grad[i], moment[i], decay,
                                                     one_minus_decay, eps, lr)



def rmsprop_element(p, g, mom, ms, mg, rho, one_minus_rho, eps, mu, lr, centered):
    ms_new = ms * rho + (g * g) * one_minus_rho
    if centered:
        mg_new = mg * rho + g * one_minus_rho
        d = (ms_new - mg_new * mg_new) + eps
    else:
        mg_new = mg
        d = ms_new + eps
    mom_new = mom * mu + (g / np.sqrt(d)) * lr
    return p - mom_new, mom_new, ms_new, mg_new


def rmsprop(param, grad, moment, mean_square, mean_grad, rho, one_minus_rho, eps, mu, lr,
            p_out, mom_out, ms_out, mg_out):
    for i in range(param.shape[0]):
        p_out[i], mom_out[i], ms_out[i], mg_out[i] = rmsprop_element(
            param[i], grad[i], moment[i], mean_square[i], mean_grad[i], rho, one_minus_rho,
            eps, mu, lr, False)



def rmsprop_centered(param, grad, moment, mean_square, mean_grad, rho, one_minus_rho, eps,
                     mu, lr, p_out, mom_out, ms_out, mg_out):
    for i in range(param.shape[0]):
        p_out[i], mom_out[i], ms_out[i], mg_out[i] = rmsprop_element(
            param[i], grad[i], moment[i], mean_square[i], mean_grad[i], rho, one_minus_rho,
            eps, mu, lr, True)



def adadelta_element(p, g, a, u, rho, one_minus_rho, eps):
    a_new = a * rho + (g * g) * one_minus_rho
    d = np.sqrt((u + eps) / (a_new + eps)) * g
    return p - d, a_new, u * rho + (d * d) * one_minus_rho


def adadelta(param, grad, avg_sq_grad, avg_sq_update, rho, one_minus_rho, eps, p_out, a_out,
             u_out):
    for i in range(param.shape[0]):
        p_out[i], a_out[i], u_out[i] = adadelta_element(
            param[i], grad[i], avg_sq_grad[i], avg_sq_update[i], rho, one_minus_rho, eps)



def adamax_element(p, g, m, u, b1, one_minus_b1, b2, eps, rate):
    m_new = m * b1 + g * one_minus_b1
    u_new = np.maximum(np.abs(g), u * b2 + eps)
    return p - (m_new / u_new) * rate, m_new, u_new


def adamax(param, grad, moment, inf_norm, b1, one_minus_b1, b2, eps, rate, p_out, m_out,
           u_out):
    for i in range(param.shape[0]):
        p_out[i], m_out[i], u_out[i] = adamax_element(
            param[i], grad[i], moment[i], inf_norm[i], b1, one_minus_b1, b2, eps, rate)



def ftrl_element(p, g, sq, lin, l1, two_l2, lr):
    """lr_power -0.5 (n^0.5 as sqrt(n)); the parameter is 0 where |l| <= l1 (and not NaN,
    as NumPy's comparison says)."""
    n = sq + g * g
    lin_new = (lin + g) - ((np.sqrt(n) - np.sqrt(sq)) / lr) * p
    y = np.sqrt(n) / lr + two_l2
    x = np.sign(lin_new) * l1 - lin_new
    return (0.0 if np.abs(lin_new) <= l1 else x / y), n, lin_new


def ftrl(param, grad, squared, linear, l1, two_l2, lr, p_out, sq_out, lin_out):
    for i in range(param.shape[0]):
        p_out[i], sq_out[i], lin_out[i] = ftrl_element(param[i], grad[i], squared[i],
                                                       linear[i], l1, two_l2, lr)



#: the element functions come first: the loops call them compiled
FUNCTIONS = ("sgd_element", "momentum_element", "adam_element", "sgd", "momentum",
             "momentum_nesterov", "adam",
             "adagrad_element", "decayed_adagrad_element", "rmsprop_element",
             "adadelta_element", "adamax_element", "ftrl_element",
             "adagrad", "decayed_adagrad", "rmsprop", "rmsprop_centered", "adadelta", "adamax",
             "ftrl")
