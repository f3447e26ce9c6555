"""Paddle 1.8's optimizers that scale by norms of whole tensors: Lamb, LarsMomentum and
Dpsgd (update ops in ops/optim_norm.py). A distributed job keeps each of their
parameters whole on one parameter server (a row block's norm is not the tensor's)."""
from __future__ import annotations

from collections.abc import Callable

from ..errors import OpArgumentError
from .clip import GradientClipBase
from .optim_base import Optimizer, ParamList, number
from .optim_basic import Adam
from .regularizer import WeightDecayRegularizer
from .tracing import error_at
from .variable import Variable

__all__ = ["Lamb", "LambOptimizer", "LarsMomentum", "LarsMomentumOptimizer", "Dpsgd",
           "DpsgdOptimizer"]



class Lamb(Adam):
    """LAMB (You et al.): Adam's moments (without bias correction, as Paddle 1.8), then
    ``r = m1 / (sqrt(m2) + epsilon) + lamb_weight_decay * param`` and ``param -= lr *
    ||param|| / ||r|| * r``. ``exclude_from_weight_decay_fn(param)`` True: no weight decay
    for that parameter. Accumulators as Adam's: ``<param>_moment1_N``, ``_moment2_N``,
    ``_beta1_pow_acc_N``, ``_beta2_pow_acc_N`` (the powers are read by no formula)."""

    op_type = "lamb"
    _hyper = ("lamb_weight_decay", "beta1", "beta2", "epsilon")

    def __init__(self, learning_rate: float | Variable = 0.001, lamb_weight_decay: float = 0.01,
                 beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-6,
                 parameter_list: ParamList = None,
                 regularization: WeightDecayRegularizer | None = None,
                 grad_clip: GradientClipBase | None = None,
                 exclude_from_weight_decay_fn: Callable[[Variable], bool] | None = None,
                 name: str | None = None):
        super().__init__(learning_rate, beta1, beta2, epsilon, parameter_list, regularization,
                         grad_clip, name)
        self.lamb_weight_decay = number(lamb_weight_decay, "Lamb(lamb_weight_decay=...)", 0.0)
        if exclude_from_weight_decay_fn is not None and not callable(
                exclude_from_weight_decay_fn):
            raise error_at(OpArgumentError, f"exclude_from_weight_decay_fn must be a function "
                                            f"of a parameter, got "
                                            f"{exclude_from_weight_decay_fn!r}")
        self._exclude = exclude_from_weight_decay_fn

    def _append_update(self, trace, u):
        excluded = self._exclude is not None and self._exclude(Variable(trace, u.param))
        # the powers are read by no formula: the op does not advance them
        self._moments_op(trace, u, {"beta1": self.beta1, "beta2": self.beta2,
                                    "epsilon": self.epsilon,
                                    "weight_decay": 0.0 if excluded else self.lamb_weight_decay},
                         advance_powers=False)


class LarsMomentum(Optimizer):
    """Momentum with a layer-wise rate (LARS, You et al.): ``local_lr = lr * lars_coeff *
    ||param|| / (||g|| + lars_weight_decay * ||param||)``; ``v = momentum * v + local_lr *
    (g + lars_weight_decay * param)``; ``param -= v``. Accumulator ``<param>_velocity_N``."""

    op_type = "lars_momentum"
    _hyper = ("momentum", "lars_coeff", "lars_weight_decay")

    def __init__(self, learning_rate: float | Variable, momentum: float, lars_coeff: float = 0.001,
                 lars_weight_decay: float = 0.0005, parameter_list: ParamList = None,
                 regularization: WeightDecayRegularizer | None = None,
                 grad_clip: GradientClipBase | None = None,
                 name: str | None = None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.momentum = number(momentum, "LarsMomentum(momentum=...)", 0.0)
        self.lars_coeff = number(lars_coeff, "LarsMomentum(lars_coeff=...)", 0.0)
        self.lars_weight_decay = number(lars_weight_decay,
                                        "LarsMomentum(lars_weight_decay=...)", 0.0)

    _STATE = {"Velocity": "velocity"}

    def _attrs(self):
        return {"mu": self.momentum, "lars_coeff": self.lars_coeff,
                "lars_weight_decay": self.lars_weight_decay}


class Dpsgd(Optimizer):
    """Differentially private SGD (Abadi et al.): ``param -= lr * (g / max(1, ||g|| / clip)
    + sigma * noise / batch_size)``, one standard normal ``noise`` drawn per step from the
    program's seeded generator. Set ``_seed`` (Paddle's debugging knob) to give each
    update op a generator of its own seeded with it."""

    op_type = "dpsgd"
    _hyper = ("clip", "batch_size", "sigma")

    def __init__(self, learning_rate: float | Variable = 0.001, clip: float = 0.9,
                 batch_size: float = 0.999,
                 sigma: float = 1e-8, parameter_list: ParamList = None):
        super().__init__(learning_rate, parameter_list)
        self.clip = number(clip, "Dpsgd(clip=...)", 0.0, low_open=True)
        self.batch_size = number(batch_size, "Dpsgd(batch_size=...)", 0.0, low_open=True)
        self.sigma = number(sigma, "Dpsgd(sigma=...)", 0.0)
        self._seed: int | None = None

    def _attrs(self):
        return {"clip": self.clip, "batch_size": self.batch_size, "sigma": self.sigma,
                "seed": int(self._seed or 0)}


LambOptimizer = Lamb
LarsMomentumOptimizer = LarsMomentum
DpsgdOptimizer = Dpsgd
