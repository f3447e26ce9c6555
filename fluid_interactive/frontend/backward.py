"""The user-facing autodiff calls, used inside a traced method."""
from __future__ import annotations

from typing import Iterable, Optional, Sequence, Union

from ..errors import OpArgumentError
from ..passes import backward as _pass
from .layers.helpers import as_variable
from .tracing import current_trace, error_at
from .variable import Variable

VarOrName = Union[str, Variable]


def _name(v: VarOrName) -> str:
    return v if isinstance(v, str) else as_variable(v, "variable").name


def append_backward(loss: Variable, parameter_list: Optional[Sequence[VarOrName]] = None,
                    no_grad_set: Optional[Iterable[VarOrName]] = None
                    ) -> list[tuple[Variable, Variable]]:
    """Append the gradient ops of the scalar ``loss``; returns (param, grad) pairs."""
    trace = current_trace("fluid.backward.append_backward")
    params = None if parameter_list is None else [_name(p) for p in parameter_list]
    no_grad = None if no_grad_set is None else [_name(v) for v in no_grad_set]
    try:
        result = _pass.append_backward(trace.program, trace.block_idx,
                                       as_variable(loss, "loss").name, params, no_grad)
    except OpArgumentError as e:
        raise error_at(OpArgumentError, str(e)) from None
    trace.replace_program(result.program)
    return [(Variable(trace, p), Variable(trace, g)) for p, g in result.params_grads]


def gradients(targets: Union[Variable, Sequence[Variable]],
              inputs: Union[Variable, Sequence[Variable]],
              no_grad_set: Optional[Iterable[VarOrName]] = None) -> list[Optional[Variable]]:
    """Gradients of ``sum(targets)`` with respect to each of ``inputs`` (None where an input
    does not reach the targets)."""
    trace = current_trace("fluid.gradients")
    targets = [targets] if not isinstance(targets, (list, tuple)) else list(targets)
    inputs = [inputs] if not isinstance(inputs, (list, tuple)) else list(inputs)
    target_names = [as_variable(t, "target").name for t in targets]
    input_names = [as_variable(x, "input").name for x in inputs]
    no_grad = None if no_grad_set is None else [_name(v) for v in no_grad_set]
    try:
        result = _pass.calc_gradient(trace.program, trace.block_idx, target_names,
                                     input_names, no_grad)
    except OpArgumentError as e:
        raise error_at(OpArgumentError, str(e)) from None
    trace.replace_program(result.program)
    return [Variable(trace, result.grads[n]) if n in result.grads else None
            for n in input_names]
