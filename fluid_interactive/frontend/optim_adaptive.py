"""The adaptive optimizers of Paddle 1.8: Adagrad, DecayedAdagrad, RMSProp, Adadelta,
Adamax and Ftrl. Their update ops are in ops/optim_adaptive.py (the formulas there); each
runs fused over flat arrays, and compiled with the compiled tier, bit-identical to its
per-parameter op."""
from __future__ import annotations

from .clip import GradientClipBase
from .optim_base import Optimizer, ParamList, number
from .regularizer import WeightDecayRegularizer
from .variable import Variable

__all__ = ["Adagrad", "AdagradOptimizer", "DecayedAdagrad", "DecayedAdagradOptimizer",
           "RMSProp", "RMSPropOptimizer", "Adadelta", "AdadeltaOptimizer", "Adamax",
           "AdamaxOptimizer", "Ftrl", "FtrlOptimizer"]



class Adagrad(Optimizer):
    """``moment += g*g``; ``param -= lr * g / (sqrt(moment) + epsilon)``. Accumulator
    ``<param>_moment_N``, starting at ``initial_accumulator_value``."""

    op_type = "adagrad"
    _hyper = ("epsilon", "initial_accumulator_value")

    def __init__(self, learning_rate: float | Variable, epsilon: float = 1.0e-6,
                 parameter_list: ParamList = None,
                 regularization: WeightDecayRegularizer | None = None,
                 grad_clip: GradientClipBase | None = None, name: str | None = None,
                 initial_accumulator_value: float = 0.0):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.epsilon = number(epsilon, "Adagrad(epsilon=...)", 0.0)
        self.initial_accumulator_value = number(
            initial_accumulator_value, "Adagrad(initial_accumulator_value=...)", 0.0)

    _STATE = {"Moment": "moment"}

    def _create_accumulators(self, trace, param):
        self._accumulator(trace, "moment", param, self.initial_accumulator_value)

    def _attrs(self):
        return {"epsilon": self.epsilon}


class DecayedAdagrad(Optimizer):
    """``moment = decay * moment + (1 - decay) * g*g``; ``param -= lr * g / (sqrt(moment) +
    epsilon)``. Accumulator ``<param>_moment_N``."""

    op_type = "decayed_adagrad"
    _hyper = ("decay", "epsilon")

    def __init__(self, learning_rate: float | Variable, decay: float = 0.95,
                 epsilon: float = 1.0e-6,
                 parameter_list: ParamList = None,
                 regularization: WeightDecayRegularizer | None = None,
                 grad_clip: GradientClipBase | None = None, name: str | None = None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.decay = number(decay, "DecayedAdagrad(decay=...)", 0.0, 1.0, high_open=False)
        self.epsilon = number(epsilon, "DecayedAdagrad(epsilon=...)", 0.0)

    _STATE = {"Moment": "moment"}

    def _attrs(self):
        return {"decay": self.decay, "epsilon": self.epsilon}


class RMSProp(Optimizer):
    """``ms = rho * ms + (1 - rho) * g*g``; ``mom = momentum * mom + lr * g / sqrt(ms +
    epsilon)`` (centered: ``sqrt(ms - mg*mg + epsilon)`` with the mean gradient ``mg = rho *
    mg + (1 - rho) * g``); ``param -= mom``. Accumulators ``<param>_momentum_N``,
    ``<param>_mean_square_N`` and ``<param>_mean_grad_N`` (unchanged unless centered).
    (PyTorch adds epsilon outside the square root; Paddle, and so this, inside.)"""

    op_type = "rmsprop"
    _hyper = ("rho", "epsilon", "momentum", "centered")

    def __init__(self, learning_rate: float | Variable, rho: float = 0.95, epsilon: float = 1.0e-6,
                 momentum: float = 0.0, centered: bool = False,
                 parameter_list: ParamList = None,
                 regularization: WeightDecayRegularizer | None = None,
                 grad_clip: GradientClipBase | None = None, name: str | None = None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.rho = number(rho, "RMSProp(rho=...)", 0.0, 1.0, high_open=False)
        self.epsilon = number(epsilon, "RMSProp(epsilon=...)", 0.0)
        self.momentum = number(momentum, "RMSProp(momentum=...)", 0.0)
        self.centered = bool(centered)

    _STATE = {"Moment": "momentum", "MeanSquare": "mean_square", "MeanGrad": "mean_grad"}

    def _attrs(self):
        return {"decay": self.rho, "epsilon": self.epsilon, "momentum": self.momentum,
                "centered": self.centered}


class Adadelta(Optimizer):
    """``E[g²] = rho * E[g²] + (1 - rho) * g*g``; ``update = -sqrt((E[dx²] + epsilon) /
    (E[g²] + epsilon)) * g``; ``E[dx²] = rho * E[dx²] + (1 - rho) * update²``; ``param +=
    update``. As in Paddle 1.8 the update does not use ``learning_rate`` (so neither a
    schedule). Accumulators ``<param>__avg_squared_grad_N``,
    ``<param>__avg_squared_update_N`` (Paddle's names)."""

    op_type = "adadelta"
    _hyper = ("epsilon", "rho")

    def __init__(self, learning_rate: float | Variable, epsilon: float = 1.0e-6, rho: float = 0.95,
                 parameter_list: ParamList = None,
                 regularization: WeightDecayRegularizer | None = None,
                 grad_clip: GradientClipBase | None = None, name: str | None = None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.epsilon = number(epsilon, "Adadelta(epsilon=...)", 0.0)
        self.rho = number(rho, "Adadelta(rho=...)", 0.0, 1.0, high_open=False)

    _STATE = {"AvgSquaredGrad": "_avg_squared_grad", "AvgSquaredUpdate": "_avg_squared_update"}

    def _append_update(self, trace, u):
        self._update_op(trace, u, "adadelta", self._STATE,
                        {"rho": self.rho, "epsilon": self.epsilon}, lr=False)


class Adamax(Optimizer):
    """``m = beta1 * m + (1 - beta1) * g``; ``u = max(|g|, beta2 * u + epsilon)``; ``param -=
    lr / (1 - beta1^t) * m / u``. Accumulators ``<param>_moment_N``, ``<param>_inf_norm_N``
    and ``<param>_beta1_pow_acc_N`` (shape [1], from beta1; the op advances it). (PyTorch
    adds epsilon to ``|g|``; Paddle, and so this, to ``beta2 * u``.)"""

    op_type = "adamax"
    _hyper = ("beta1", "beta2", "epsilon")

    def __init__(self, learning_rate: float | Variable = 0.001, beta1: float = 0.9,
                 beta2: float = 0.999,
                 epsilon: float = 1e-8, parameter_list: ParamList = None,
                 regularization: WeightDecayRegularizer | None = None,
                 grad_clip: GradientClipBase | None = None,
                 name: str | None = None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.beta1 = number(beta1, "Adamax(beta1=...)", 0.0, 1.0)
        self.beta2 = number(beta2, "Adamax(beta2=...)", 0.0, 1.0)
        self.epsilon = number(epsilon, "Adamax(epsilon=...)", 0.0)

    _STATE = {"Moment": "moment", "InfNorm": "inf_norm", "Beta1Pow": "beta1_pow_acc"}

    def _create_accumulators(self, trace, param):
        self._accumulator(trace, "moment", param)
        self._accumulator(trace, "inf_norm", param)
        self._accumulator(trace, "beta1_pow_acc", param, self.beta1, shape=[1])

    def _attrs(self):
        return {"beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon}


class Ftrl(Optimizer):
    """FTRL-Proximal (McMahan et al.) with L1 ``l1`` and L2 ``l2`` strengths and the
    learning-rate power ``lr_power``; see the ``ftrl`` op for the update. Accumulators
    ``<param>_squared_N`` and ``<param>_linear_N``. (Paddle 1.8's Python passes ``l1`` as
    the op's ``l2``; here ``l2`` is ``l2``.)"""

    op_type = "ftrl"
    _hyper = ("l1", "l2", "lr_power")

    def __init__(self, learning_rate: float | Variable, l1: float = 0.0, l2: float = 0.0,
                 lr_power: float = -0.5, parameter_list: ParamList = None,
                 regularization: WeightDecayRegularizer | None = None,
                 grad_clip: GradientClipBase | None = None,
                 name: str | None = None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.l1 = number(l1, "Ftrl(l1=...)", 0.0)
        self.l2 = number(l2, "Ftrl(l2=...)", 0.0)
        self.lr_power = number(lr_power, "Ftrl(lr_power=...)", -1e308, 0.0, high_open=False)

    _STATE = {"SquaredAccumulator": "squared", "LinearAccumulator": "linear"}

    def _attrs(self):
        return {"l1": self.l1, "l2": self.l2, "lr_power": self.lr_power}


AdagradOptimizer = Adagrad
DecayedAdagradOptimizer = DecayedAdagrad
RMSPropOptimizer = RMSProp
AdadeltaOptimizer = Adadelta
AdamaxOptimizer = Adamax
FtrlOptimizer = Ftrl
