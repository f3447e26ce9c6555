"""SGD, Momentum and Adam (and their ``*Optimizer`` aliases)."""
from __future__ import annotations

from .clip import GradientClipBase
from .optim_base import Optimizer, ParamList, number
from .regularizer import WeightDecayRegularizer
from .variable import Variable

__all__ = ["SGD", "Momentum", "Adam", "SGDOptimizer", "MomentumOptimizer", "AdamOptimizer"]


class SGD(Optimizer):
    """``param -= learning_rate * grad``."""

    op_type = "sgd"

    def __init__(self, learning_rate: float | Variable = 0.001, parameter_list: ParamList = None,
                 regularization: WeightDecayRegularizer | None = None,
                 grad_clip: GradientClipBase | None = None, name: str | None = None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)

    def _append_update(self, trace, u):
        self._optimize_op(trace, "sgd",
                          {"Param": [u.param], "Grad": [u.grad], "LearningRate": [u.lr]},
                          {"ParamOut": [u.param]}, None, u.param, u.role_grad)


class Momentum(Optimizer):
    """``v = momentum * v + grad``, then ``param -= learning_rate * v``; with
    ``use_nesterov``, ``param -= learning_rate * (grad + momentum * v)``. One accumulator
    per parameter: ``<param>_velocity_N``, starting at zero."""

    op_type = "momentum"
    _hyper = ("momentum", "use_nesterov")

    def __init__(self, learning_rate: float | Variable, momentum: float,
                 parameter_list: ParamList = None, use_nesterov: bool = False,
                 regularization: WeightDecayRegularizer | None = None,
                 grad_clip: GradientClipBase | None = None, name: str | None = None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.momentum = number(momentum, "Momentum(momentum=...)", 0.0)
        self.use_nesterov = bool(use_nesterov)

    _STATE = {"Velocity": "velocity"}

    def _attrs(self):
        return {"mu": self.momentum, "use_nesterov": self.use_nesterov}


class Adam(Optimizer):
    """Adam (Kingma & Ba): moments ``m1 = beta1*m1 + (1-beta1)*g``,
    ``m2 = beta2*m2 + (1-beta2)*g*g``, then
    ``param -= lr * sqrt(1-beta2^t) / (1-beta1^t) * m1 / (sqrt(m2) + epsilon)``.

    Accumulators per parameter: ``<param>_moment1_N``, ``<param>_moment2_N`` (zeros) and
    ``<param>_beta1_pow_acc_N``, ``<param>_beta2_pow_acc_N`` (shape [1], starting at beta1
    and beta2); the ``adam`` op advances the powers itself.

    ``lazy_mode`` matters for rows-only gradients (``embedding(is_sparse=True)``): with it,
    a step updates the moments and the parameter of the batch's rows alone (the other rows'
    moments do not decay that step), at the cost of those rows; without it, every row's
    moments decay, exactly as dense Adam on the dense gradient (docs/sparse.md). Dense
    gradients are updated the same either way."""

    op_type = "adam"
    _hyper: tuple[str, ...] = ("beta1", "beta2", "epsilon")

    def __init__(self, learning_rate: float | Variable = 0.001, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-8, parameter_list: ParamList = None,
                 regularization: WeightDecayRegularizer | None = None,
                 grad_clip: GradientClipBase | None = None, name: str | None = None,
                 lazy_mode: bool = False):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.beta1 = number(beta1, "Adam(beta1=...)", 0.0, 1.0)
        self.beta2 = number(beta2, "Adam(beta2=...)", 0.0, 1.0)
        self.epsilon = number(epsilon, "Adam(epsilon=...)", 0.0)
        self.lazy_mode = bool(lazy_mode)

    def _create_accumulators(self, trace, param):
        self._accumulator(trace, "moment1", param)
        self._accumulator(trace, "moment2", param)
        self._accumulator(trace, "beta1_pow_acc", param, self.beta1, shape=[1])
        self._accumulator(trace, "beta2_pow_acc", param, self.beta2, shape=[1])

    def _append_update(self, trace, u):
        lazy = {"lazy_mode": True} if self.lazy_mode else {}   # the default stays unwritten
        self._moments_op(trace, u, {"beta1": self.beta1, "beta2": self.beta2,
                                    "epsilon": self.epsilon, **lazy}, advance_powers=True)

    def _moments_op(self, trace, u, attrs, advance_powers):
        """The ``op_type`` op over Adam's four accumulators (writing the powers back when
        ``advance_powers``)."""
        m1, m2, b1p, b2p = (self._accumulator(trace, key, u.param) for key in
                            ("moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc"))
        outs = {"ParamOut": [u.param], "Moment1Out": [m1], "Moment2Out": [m2]}
        if advance_powers:
            outs.update({"Beta1PowOut": [b1p], "Beta2PowOut": [b2p]})
        self._optimize_op(trace, self.op_type,
                          {"Param": [u.param], "Grad": [u.grad], "LearningRate": [u.lr],
                           "Moment1": [m1], "Moment2": [m2], "Beta1Pow": [b1p],
                           "Beta2Pow": [b2p]}, outs, attrs, u.param, u.role_grad)



SGDOptimizer = SGD
MomentumOptimizer = Momentum
AdamOptimizer = Adam
