"""Optimizers: ``minimize(loss)`` appends backward ops, then update ops (role Optimize).

The steps of `Optimizer.minimize`:

1. `append_backward` (a pure pass) gives ``(param, grad)`` pairs, sorted by name;
2. weight decay adds ``coeff * param`` (L2) or ``coeff * sign(param)`` (L1) to each grad,
   the parameter's own regularizer winning over the optimizer's;
3. the learning rate becomes a persistable var in block 0 (``learning_rate_N``), scaled
   per parameter by ``ParamAttr.learning_rate``;
4. accumulators (persistable, block 0, initialised there) are created per parameter, named
   ``<param>_<key>_N`` (``fc_0.w_0_velocity_0``, ``fc_0.w_0_moment1_0``, ...);
5. one update op per parameter.

Every op of steps 2-5 has role Optimize and ``op_role_var = (param, grad)`` where ``grad``
is the gradient backward produced (before weight decay), as Paddle's ``optimized_guard``
tags them: a transpiler reads the pairs from there and sends that gradient.
"""
from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any

from ..errors import OpArgumentError
from ..ir.records import OpRole, VarDesc
from ..passes.backward import append_backward
from .layers.helpers import as_variable
from .regularizer import L1Decay, L2Decay, WeightDecayRegularizer
from .tracing import TraceContext, current_trace, error_at
from .variable import Variable

ParamList = Sequence[str | Variable] | None


def _names(values: Iterable[str | Variable] | None, trace: TraceContext,
           what: str, parameters_only: bool) -> list[str] | None:
    if values is None:
        return None
    if isinstance(values, (str, Variable)):
        values = [values]
    names = []
    for v in values:
        name = v if isinstance(v, str) else as_variable(v, what).name
        var = trace.find(name)
        if var is None:
            raise error_at(OpArgumentError, f"{what} names {name!r}, which is not a variable "
                                            f"of this program")
        if parameters_only and not var.is_parameter:
            raise error_at(OpArgumentError, f"{what} names {name!r}, which is not a parameter")
        names.append(name)
    return names


def _number(value: Any, what: str, low: float, high: float | None = None,
            low_open: bool = False, high_open: bool = True) -> float:
    """``value`` as a float, checked to lie in the given range."""
    ok = isinstance(value, Real) and not isinstance(value, bool)
    if ok:
        v = float(value)
        ok = (v > low if low_open else v >= low) and (
            high is None or (v < high if high_open else v <= high))
    if not ok:
        lo = "(" if low_open else "["
        hi = "inf)" if high is None else (f"{high})" if high_open else f"{high}]")
        raise error_at(OpArgumentError, f"{what} must be a number in {lo}{low}, {hi}; "
                                        f"got {value!r}")
    return float(value)


@dataclass(frozen=True)
class ParamUpdate:
    """What one parameter's update op reads."""
    param: str
    grad: str        # the gradient after weight decay
    lr: str          # the learning rate, scaled by the parameter's ParamAttr
    role_grad: str   # the gradient backward produced: op_role_var = (param, role_grad)


class Optimizer:
    """Base class; subclasses give `_append_update` and, if they keep state,
    `_create_accumulators`."""

    op_type = ""

    def __init__(self, learning_rate: float | Variable,
                 regularization: WeightDecayRegularizer | None = None,
                 name: str | None = None):
        if not isinstance(learning_rate, Variable) and not (
                isinstance(learning_rate, (int, float)) and not isinstance(learning_rate, bool)
                and learning_rate > 0):
            raise error_at(OpArgumentError, f"learning_rate must be a positive number or a "
                                            f"Variable, got {learning_rate!r}")
        if regularization is not None and not isinstance(regularization,
                                                         WeightDecayRegularizer):
            raise error_at(OpArgumentError, f"regularization must be a fluid.regularizer "
                                            f"(L2Decay or L1Decay) or None, got "
                                            f"{regularization!r}")
        self.learning_rate = learning_rate
        self.regularization = regularization
        self.name = name
        self._trace: weakref.ref | None = None
        self._lr_var: str | None = None
        self._acc: dict[tuple[str, str], str] = {}

    # --- the pass ------------------------------------------------------------------------------

    def minimize(self, loss: Variable, parameter_list: ParamList = None,
                 no_grad_set: Iterable[str | Variable] | None = None
                 ) -> list[tuple[Variable, Variable]]:
        """Append backward and update ops for ``loss``; returns the (param, grad) pairs.

        Only parameters in ``parameter_list`` (vars or names; default: every trainable
        parameter the loss reaches) are updated; a listed parameter the loss does not reach
        gets no gradient and is left alone."""
        trace = current_trace(f"{type(self).__name__}.minimize")
        self._bind(trace)
        loss = as_variable(loss, "loss")
        params = _names(parameter_list, trace, "parameter_list", parameters_only=True)
        no_grad = _names(no_grad_set, trace, "no_grad_set", parameters_only=False)
        try:
            result = append_backward(trace.program, trace.block_idx, loss.name, params, no_grad)
        except OpArgumentError as e:
            raise error_at(OpArgumentError, str(e)) from None
        trace.replace_program(result.program)
        pairs = [(p, g) for p, g in result.params_grads
                 if trace.program.var(trace.block, p).trainable]
        lr = self._learning_rate(trace, trace.type_of(loss.name).dtype)
        for p, g in pairs:
            decayed = self._regularize(trace, p, g)
            self._create_accumulators(trace, p)
            self._append_update(trace, ParamUpdate(p, decayed, self._param_lr(trace, p, g, lr),
                                                   g))
        self._finish(trace, pairs)
        return [(Variable(trace, p), Variable(trace, g)) for p, g in pairs]

    # --- pieces -------------------------------------------------------------------------------

    def _bind(self, trace: TraceContext) -> None:
        """State names belong to one trace: an optimizer object reused by a second
        `Compile()` starts afresh; one shared by several methods of a program shares its
        learning rate and accumulators between them."""
        if self._trace is None or self._trace() is not trace:
            self._trace = weakref.ref(trace)
            self._lr_var = None
            self._acc = {}

    def _learning_rate(self, trace: TraceContext, dtype: str = "float32") -> str:
        if isinstance(self.learning_rate, Variable):
            return self.learning_rate.name
        if self._lr_var is None:
            self._lr_var = self._global_state(trace, "learning_rate", [1],
                                              float(self.learning_rate), dtype)
        return self._lr_var

    def _global_state(self, trace: TraceContext, key: str, shape: Sequence[int],
                      value: float, dtype: str = "float32") -> str:
        """A persistable var in block 0, filled with ``value`` when the program compiles."""
        name = trace.state_names.generate(key)
        trace.declare(VarDesc(name, tuple(shape), dtype, persistable=True), in_global=True)
        trace.append_op("fill_constant", {}, {"Out": [name]},
                        {"shape": list(shape), "dtype": dtype, "value": float(value)},
                        in_global=True)
        return name

    def _accumulator(self, trace: TraceContext, key: str, param: str, value: float = 0.0,
                     shape: Sequence[int] | None = None) -> str:
        """The optimizer state ``key`` of ``param`` (created on first use): persistable, in
        block 0, the parameter's shape and dtype unless ``shape`` says otherwise."""
        name = self._acc.get((key, param))
        if name is None:
            var = trace.type_of(param)
            name = self._global_state(trace, f"{param}_{key}",
                                      var.shape if shape is None else shape, value, var.dtype)
            self._acc[(key, param)] = name
        return name

    def _optimize_op(self, trace: TraceContext, type: str, inputs: dict, outputs: dict,
                     attrs: dict | None, param: str, grad: str) -> None:
        trace.append_op(type, inputs, outputs, attrs, role=OpRole.OPTIMIZE,
                        role_var=(param, grad))

    def _tmp(self, trace: TraceContext, hint: str) -> str:
        """A fresh temporary of the method block: ``hint``, or ``hint_1``, ... if taken."""
        return trace.unique_in_block(hint)

    def _regularize(self, trace: TraceContext, param: str, grad: str) -> str:
        attr = trace.param_attrs.get(param)
        reg = (attr.regularizer if attr is not None and attr.regularizer is not None
               else self.regularization)
        if reg is None or reg.coeff == 0:
            return grad
        term_src = param
        if isinstance(reg, L1Decay):
            term_src = self._tmp(trace, f"{param}@SIGN")
            self._optimize_op(trace, "sign", {"X": [param]}, {"Out": [term_src]}, None,
                              param, grad)
        elif not isinstance(reg, L2Decay):
            raise error_at(OpArgumentError, f"unknown regularizer {reg!r}")
        term = self._tmp(trace, f"{param}@DECAY")
        self._optimize_op(trace, "scale", {"X": [term_src]}, {"Out": [term]},
                          {"scale": float(reg.coeff)}, param, grad)
        decayed = trace.unique_in_block(f"{grad}@REG")
        self._optimize_op(trace, "elementwise_add", {"X": [grad], "Y": [term]},
                          {"Out": [decayed]}, None, param, grad)
        return decayed

    def _param_lr(self, trace: TraceContext, param: str, grad: str, lr: str) -> str:
        attr = trace.param_attrs.get(param)
        factor = 1.0 if attr is None else float(attr.learning_rate)
        if factor == 1.0:
            return lr
        scaled = self._tmp(trace, f"{param}@LR")
        self._optimize_op(trace, "scale", {"X": [lr]}, {"Out": [scaled]}, {"scale": factor},
                          param, grad)
        return scaled

    def _create_accumulators(self, trace: TraceContext, param: str) -> None:
        """Create this optimizer's per-parameter state (none for plain SGD)."""

    def _append_update(self, trace: TraceContext, u: ParamUpdate) -> None:
        raise NotImplementedError

    def _finish(self, trace: TraceContext, pairs: list[tuple[str, str]]) -> None:
        """Ops run once per step after all updates (none by default)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(learning_rate={self.learning_rate!r})"


class SGD(Optimizer):
    """``param -= learning_rate * grad``."""

    op_type = "sgd"

    def __init__(self, learning_rate: float | Variable = 0.001, **kwargs: Any):
        super().__init__(learning_rate, **kwargs)

    def _append_update(self, trace, u):
        self._optimize_op(trace, "sgd",
                          {"Param": [u.param], "Grad": [u.grad], "LearningRate": [u.lr]},
                          {"ParamOut": [u.param]}, None, u.param, u.role_grad)


class Momentum(Optimizer):
    """``v = momentum * v + grad``, then ``param -= learning_rate * v``; with
    ``use_nesterov``, ``param -= learning_rate * (grad + momentum * v)``. One accumulator
    per parameter: ``<param>_velocity_N``, starting at zero."""

    op_type = "momentum"

    def __init__(self, learning_rate: float | Variable, momentum: float,
                 use_nesterov: bool = False,
                 regularization: WeightDecayRegularizer | None = None,
                 name: str | None = None):
        super().__init__(learning_rate, regularization, name)
        self.momentum = _number(momentum, "Momentum(momentum=...)", 0.0)
        self.use_nesterov = bool(use_nesterov)

    def _create_accumulators(self, trace, param):
        self._accumulator(trace, "velocity", param)

    def _append_update(self, trace, u):
        velocity = self._accumulator(trace, "velocity", u.param)
        self._optimize_op(trace, "momentum",
                          {"Param": [u.param], "Grad": [u.grad], "Velocity": [velocity],
                           "LearningRate": [u.lr]},
                          {"ParamOut": [u.param], "VelocityOut": [velocity]},
                          {"mu": self.momentum, "use_nesterov": self.use_nesterov},
                          u.param, u.role_grad)

    def __repr__(self) -> str:
        return (f"Momentum(learning_rate={self.learning_rate!r}, momentum={self.momentum}, "
                f"use_nesterov={self.use_nesterov})")


class Adam(Optimizer):
    """Adam (Kingma & Ba): moments ``m1 = beta1*m1 + (1-beta1)*g``,
    ``m2 = beta2*m2 + (1-beta2)*g*g``, then
    ``param -= lr * sqrt(1-beta2^t) / (1-beta1^t) * m1 / (sqrt(m2) + epsilon)``.

    Accumulators per parameter: ``<param>_moment1_N``, ``<param>_moment2_N`` (zeros) and
    ``<param>_beta1_pow_acc_N``, ``<param>_beta2_pow_acc_N`` (shape [1], starting at beta1
    and beta2); the ``adam`` op advances the powers itself."""

    op_type = "adam"

    def __init__(self, learning_rate: float | Variable = 0.001, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-8,
                 regularization: WeightDecayRegularizer | None = None,
                 name: str | None = None):
        super().__init__(learning_rate, regularization, name)
        self.beta1 = _number(beta1, "Adam(beta1=...)", 0.0, 1.0)
        self.beta2 = _number(beta2, "Adam(beta2=...)", 0.0, 1.0)
        self.epsilon = _number(epsilon, "Adam(epsilon=...)", 0.0)

    def _create_accumulators(self, trace, param):
        self._accumulator(trace, "moment1", param)
        self._accumulator(trace, "moment2", param)
        self._accumulator(trace, "beta1_pow_acc", param, self.beta1, shape=[1])
        self._accumulator(trace, "beta2_pow_acc", param, self.beta2, shape=[1])

    def _append_update(self, trace, u):
        m1, m2, b1p, b2p = (self._accumulator(trace, key, u.param) for key in
                            ("moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc"))
        self._optimize_op(trace, "adam",
                          {"Param": [u.param], "Grad": [u.grad], "LearningRate": [u.lr],
                           "Moment1": [m1], "Moment2": [m2], "Beta1Pow": [b1p],
                           "Beta2Pow": [b2p]},
                          {"ParamOut": [u.param], "Moment1Out": [m1], "Moment2Out": [m2],
                           "Beta1PowOut": [b1p], "Beta2PowOut": [b2p]},
                          {"beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon},
                          u.param, u.role_grad)

    def __repr__(self) -> str:
        return (f"Adam(learning_rate={self.learning_rate!r}, beta1={self.beta1}, "
                f"beta2={self.beta2}, epsilon={self.epsilon})")


SGDOptimizer = SGD
MomentumOptimizer = Momentum
AdamOptimizer = Adam

__all__ = ["Optimizer", "SGD", "Momentum", "Adam", "SGDOptimizer", "MomentumOptimizer",
           "AdamOptimizer"]
