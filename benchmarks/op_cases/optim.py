"""Cases of the update ops of Paddle 1.8's optimizers (ops/optim_adaptive.py,
optim_norm.py, optim_average.py), each one parameter of 512 x 512, against the update a
careful person would write in NumPy. An optimizer appends these ops itself, so each case
appends its op to the traced method directly, writing fresh outputs. Dpsgd runs without
noise (its draw is the op's own)."""
from __future__ import annotations

from typing import Any

import numpy as np

from fluid_interactive.frontend.tracing import current_trace
from fluid_interactive.frontend.variable import Variable
from fluid_interactive.ops import get_spec

from . import OpCase, f32

SHAPE = (512, 512)


def _update(op_type: str, attrs: dict[str, Any] | None = None, **inputs: Variable
            ) -> tuple[Variable, ...]:
    """Append ``op_type`` reading ``inputs`` (slot -> var); its outputs, in slot order."""
    trace = current_trace()
    spec = get_spec(op_type)
    outs = {s.name: [trace.unique_in_block(f"{op_type}_{s.name}")] for s in spec.outputs}
    trace.append_op(op_type, {k: [v.name] for k, v in inputs.items()}, outs, attrs)
    return tuple(Variable(trace, outs[s.name][0]) for s in spec.outputs)


def _lr():
    return np.array([0.01], np.float32)


def _pos(seed):
    return f32(*SHAPE, seed=seed, low=0.1, high=1.0)


def _adagrad(p, g, m, lr, eps=1e-6):
    m = m + g * g
    return p - lr * g / (np.sqrt(m) + eps), m


def _decayed_adagrad(p, g, m, lr, decay=0.95, eps=1e-6):
    m = decay * m + (1 - decay) * g * g
    return p - lr * g / (np.sqrt(m) + eps), m


def _average(p, s1, s2, s3, acc, old, upd):
    """A step of ModelAverage's sums that fills no window (the usual step)."""
    return s1 + p, s2.copy(), s3.copy(), acc + 1, old.copy(), upd + 1


def _rmsprop(p, g, mom, ms, mg, lr, rho=0.95, eps=1e-6, mu=0.5):
    ms = rho * ms + (1 - rho) * g * g
    mg = rho * mg + (1 - rho) * g
    mom = mu * mom + lr * g / np.sqrt(ms - mg * mg + eps)
    return p - mom, mom, ms, mg


def _adadelta(p, g, a, u, rho=0.95, eps=1e-6):
    a = rho * a + (1 - rho) * g * g
    update = -np.sqrt((u + eps) / (a + eps)) * g
    return p + update, a, rho * u + (1 - rho) * update * update


def _adamax(p, g, lr, m, u, b1p, b1=0.9, b2=0.999, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    u = np.maximum(np.abs(g), b2 * u + eps)
    return p - lr / (1 - b1p) * m / u, m, u, b1p * b1


def _ftrl(p, g, lr, sq, lin, l1=0.01, l2=0.01):
    new = sq + g * g
    lin = lin + g - (np.sqrt(new) - np.sqrt(sq)) / lr * p
    y = np.sqrt(new) / lr + 2 * l2
    return np.where(np.abs(lin) > l1, (l1 * np.sign(lin) - lin) / y, 0.0), new, lin


def _lamb(p, g, lr, m1, m2, b1=0.9, b2=0.999, eps=1e-6, wd=0.01):
    m1 = b1 * m1 + (1 - b1) * g
    m2 = b2 * m2 + (1 - b2) * g * g
    r = m1 / (np.sqrt(m2) + eps) + wd * p
    return p - lr * (np.linalg.norm(p) / np.linalg.norm(r)) * r, m1, m2


def _lars(p, g, v, lr, mu=0.9, coeff=0.001, wd=0.0005):
    pn, gn = np.linalg.norm(p), np.linalg.norm(g)
    v = mu * v + lr * coeff * pn / (gn + wd * pn) * (g + wd * p)
    return p - v, v


def _lookahead(p, slow, alpha=0.5):
    # two arrays: the fast weights are updated in place by the next step, and the slow
    # ones must not follow them
    blend = alpha * p + (1 - alpha) * slow
    return blend, blend.copy()


CASES = [
    OpCase("adagrad", {"p": f32(*SHAPE), "g": f32(*SHAPE, seed=1), "m": _pos(2), "lr": _lr()},
           lambda p, g, m, lr: _update("adagrad", Param=p, Grad=g, Moment=m, LearningRate=lr),
           _adagrad),
    OpCase("decayed_adagrad", {"p": f32(*SHAPE), "g": f32(*SHAPE, seed=1), "m": _pos(2),
                               "lr": _lr()},
           lambda p, g, m, lr: _update("decayed_adagrad", Param=p, Grad=g, Moment=m,
                                       LearningRate=lr),
           _decayed_adagrad),
    OpCase("rmsprop", {"p": f32(*SHAPE), "g": f32(*SHAPE, seed=1), "mom": f32(*SHAPE, seed=2),
                       "ms": _pos(3), "mg": f32(*SHAPE, seed=4, low=-0.1, high=0.1),
                       "lr": _lr()},
           lambda p, g, mom, ms, mg, lr: _update(
               "rmsprop", {"decay": 0.95, "epsilon": 1e-6, "momentum": 0.5, "centered": True},
               Param=p, Grad=g, LearningRate=lr, Moment=mom, MeanSquare=ms, MeanGrad=mg),
           _rmsprop, rtol=1e-4),
    OpCase("adadelta", {"p": f32(*SHAPE), "g": f32(*SHAPE, seed=1), "a": _pos(2), "u": _pos(3)},
           lambda p, g, a, u: _update("adadelta", Param=p, Grad=g, AvgSquaredGrad=a,
                                      AvgSquaredUpdate=u),
           _adadelta),
    OpCase("adamax", {"p": f32(*SHAPE), "g": f32(*SHAPE, seed=1), "lr": _lr(),
                      "m": f32(*SHAPE, seed=2), "u": _pos(3),
                      "b1p": np.array([0.9 ** 3], np.float32)},
           lambda p, g, lr, m, u, b1p: _update("adamax", Param=p, Grad=g, LearningRate=lr,
                                               Moment=m, InfNorm=u, Beta1Pow=b1p),
           _adamax, rtol=1e-4),
    OpCase("ftrl", {"p": f32(*SHAPE), "g": f32(*SHAPE, seed=1), "lr": _lr(), "sq": _pos(2),
                    "lin": f32(*SHAPE, seed=3)},
           lambda p, g, lr, sq, lin: _update(
               "ftrl", {"l1": 0.01, "l2": 0.01}, Param=p, Grad=g, LearningRate=lr,
               SquaredAccumulator=sq, LinearAccumulator=lin),
           _ftrl, rtol=1e-4, atol=1e-5),
    OpCase("lamb", {"p": f32(*SHAPE), "g": f32(*SHAPE, seed=1), "lr": _lr(),
                    "m1": f32(*SHAPE, seed=2), "m2": _pos(3)},
           lambda p, g, lr, m1, m2: _update("lamb", Param=p, Grad=g, LearningRate=lr,
                                            Moment1=m1, Moment2=m2),
           _lamb, rtol=1e-4),
    OpCase("lars_momentum", {"p": f32(*SHAPE), "g": f32(*SHAPE, seed=1),
                             "v": f32(*SHAPE, seed=2), "lr": _lr()},
           lambda p, g, v, lr: _update("lars_momentum", Param=p, Grad=g, Velocity=v,
                                       LearningRate=lr),
           _lars, rtol=1e-4),
    OpCase("dpsgd", {"p": f32(*SHAPE), "g": f32(*SHAPE, seed=1), "lr": _lr()},
           lambda p, g, lr: _update("dpsgd", {"clip": 10.0, "batch_size": 16.0, "sigma": 0.0},
                                    Param=p, Grad=g, LearningRate=lr),
           lambda p, g, lr: p - lr * g / max(1.0, np.linalg.norm(g) / 10.0), rtol=1e-4),
    OpCase("ema_accumulate", {"p": f32(*SHAPE), "a": f32(*SHAPE, seed=1),
                              "d": np.array([0.9], np.float32)},
           lambda p, a, d: _update("ema_accumulate", Param=p, Average=a, Decay=d),
           lambda p, a, d: a * d + p * (1 - d)),
    OpCase("average_accumulates", {"p": f32(*SHAPE), "s1": f32(*SHAPE, seed=1),
                                   "s2": f32(*SHAPE, seed=2), "s3": f32(*SHAPE, seed=3),
                                   "acc": np.array([3], np.int64), "old": np.array([0], np.int64),
                                   "upd": np.array([3], np.int64)},
           lambda p, s1, s2, s3, acc, old, upd: _update(
               "average_accumulates", {"average_window": 0.5, "min_average_window": 100,
                                       "max_average_window": 100},
               param=p, in_sum_1=s1, in_sum_2=s2, in_sum_3=s3, in_num_accumulates=acc,
               in_old_num_accumulates=old, in_num_updates=upd),
           _average),
    OpCase("lookahead", {"p": f32(*SHAPE), "slow": f32(*SHAPE, seed=1),
                         "step": np.array([5], np.int64)},
           lambda p, slow, step: _update("lookahead", {"alpha": 0.5, "k": 5}, Param=p,
                                         Slow=slow, Step=step),
           lambda p, slow, step: _lookahead(p, slow)),
]
