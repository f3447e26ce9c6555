"""Optimizers: ``minimize(loss)`` appends backward ops, then update ops (role Optimize).

The steps of `Optimizer.minimize`:

1. `append_backward` (a pure pass) gives ``(param, grad)`` pairs, sorted by name;
2. weight decay adds ``coeff * param`` (L2) or ``coeff * sign(param)`` (L1) to each grad,
   the parameter's own regularizer winning over the optimizer's;
3. the learning rate becomes a persistable var in block 0 (``learning_rate_N``), scaled
   per parameter by ``ParamAttr.learning_rate``;
4. accumulators (persistable, block 0, initialised there) are created per parameter;
5. one update op per parameter, tagged ``op_role_var = (param, grad)``.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence, Union

from ..errors import OpArgumentError
from ..ir.records import OpRole, VarDesc
from ..passes.backward import append_backward
from .layers.helpers import as_variable
from .regularizer import L1Decay, L2Decay, WeightDecayRegularizer
from .tracing import TraceContext, current_trace, error_at
from .variable import Variable

ParamList = Optional[Sequence[Union[str, Variable]]]


def _names(values: Optional[Iterable[Union[str, Variable]]], trace: TraceContext,
           what: str, parameters_only: bool) -> Optional[list[str]]:
    if values is None:
        return None
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


class Optimizer:
    """Base class; subclasses give `_append_update` and `_accumulators`."""

    op_type = ""

    def __init__(self, learning_rate: Union[float, Variable],
                 regularization: Optional[WeightDecayRegularizer] = None,
                 name: Optional[str] = None):
        if not isinstance(learning_rate, Variable) and not (
                isinstance(learning_rate, (int, float)) and learning_rate > 0):
            raise error_at(OpArgumentError, f"learning_rate must be a positive number or a "
                                            f"Variable, got {learning_rate!r}")
        self.learning_rate = learning_rate
        self.regularization = regularization
        self.name = name
        self._lr_var: Optional[str] = None
        self._acc: dict[tuple[str, str], str] = {}

    # --- the pass ------------------------------------------------------------------------------

    def minimize(self, loss: Variable, parameter_list: ParamList = None,
                 no_grad_set: Optional[Iterable[Union[str, Variable]]] = None
                 ) -> list[tuple[Variable, Variable]]:
        """Append backward and update ops for ``loss``; returns the (param, grad) pairs.

        Only parameters in ``parameter_list`` (vars or names; default: every trainable
        parameter the loss reaches) are updated."""
        trace = current_trace(f"{type(self).__name__}.minimize")
        loss = as_variable(loss, "loss")
        params = _names(parameter_list, trace, "parameter_list", parameters_only=True)
        no_grad = _names(no_grad_set, trace, "no_grad_set", parameters_only=False)
        try:
            result = append_backward(trace.program, trace.block_idx, loss.name, params, no_grad)
        except OpArgumentError as e:
            raise error_at(OpArgumentError, str(e)) from None
        trace.replace_program(result.program)
        pairs = [(p, g) for p, g in result.params_grads if trace.find(p).trainable]
        lr = self._learning_rate(trace)
        for p, g in pairs:
            g = self._regularize(trace, p, g)
            self._create_accumulators(trace, p)
            self._append_update(trace, p, g, self._param_lr(trace, p, g, lr))
        self._finish(trace, pairs)
        return [(Variable(trace, p), Variable(trace, g)) for p, g in pairs]

    # --- pieces -------------------------------------------------------------------------------

    def _learning_rate(self, trace: TraceContext) -> str:
        if isinstance(self.learning_rate, Variable):
            return self.learning_rate.name
        if self._lr_var is None:
            self._lr_var = self._global_state(trace, "learning_rate", [1],
                                              float(self.learning_rate))
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
                     shape: Optional[Sequence[int]] = None) -> str:
        name = self._acc.get((key, param))
        if name is None:
            var = trace.find(param)
            name = self._global_state(trace, f"{param}_{key}",
                                      var.shape if shape is None else shape, value, var.dtype)
            self._acc[(key, param)] = name
        return name

    def _optimize_op(self, trace: TraceContext, type: str, inputs: dict, outputs: dict,
                     attrs: Optional[dict], param: str, grad: str) -> None:
        trace.append_op(type, inputs, outputs, attrs, role=OpRole.OPTIMIZE,
                        role_var=(param, grad))

    def _tmp(self, trace: TraceContext, hint: str) -> str:
        return trace.unique_in_block(f"{hint}_{trace.names.generate('opt')}")

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
                          {"Out": [decayed]}, None, param, decayed)
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

    def _append_update(self, trace: TraceContext, param: str, grad: str, lr: str) -> None:
        raise NotImplementedError

    def _finish(self, trace: TraceContext, pairs: list[tuple[str, str]]) -> None:
        """Ops run once per step after all updates (none by default)."""


class SGD(Optimizer):
    """``param -= learning_rate * grad``."""

    op_type = "sgd"

    def __init__(self, learning_rate: Union[float, Variable] = 0.001, **kwargs: Any):
        super().__init__(learning_rate, **kwargs)

    def _append_update(self, trace, param, grad, lr):
        self._optimize_op(trace, "sgd", {"Param": [param], "Grad": [grad], "LearningRate": [lr]},
                          {"ParamOut": [param]}, None, param, grad)


SGDOptimizer = SGD
