"""The user-facing autodiff calls, used inside a traced method.

Both run the backward pass (`passes.backward`) on the program being traced and continue
the trace on its result; the ops it appends carry the user's line of the call when the
pass gives them none (the loss-gradient seed, the final gradient sums).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..errors import OpArgumentError
from ..ir.source import user_location
from ..passes import backward as _pass
from .clip import append_error_clips
from .layers.helpers import as_variable
from .tracing import TraceContext, current_trace, error_at
from .variable import Variable

VarOrName = str | Variable


def _names(trace: TraceContext, values: Iterable[VarOrName] | None, what: str
           ) -> list[str] | None:
    """Var names from vars or names; a name the method cannot see is an error."""
    if values is None:
        return None
    if isinstance(values, (str, Variable)):
        values = [values]
    names = [v if isinstance(v, str) else as_variable(v, what).name for v in values]
    for name in names:
        if trace.find(name) is None:
            raise error_at(OpArgumentError, f"{what} names {name!r}, which is not a variable "
                                            f"of {trace.method}() or of the global block")
    return names


def _as_list(value: Variable | Sequence[Variable]) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _run_pass(trace: TraceContext, run) -> _pass.BackwardResult:
    """Run a backward pass on the traced program; errors and new ops get the user's line."""
    count = len(trace.block.ops)
    try:
        result = run(trace.program, trace.block_idx)
    except OpArgumentError as e:
        raise error_at(OpArgumentError, str(e)) from None
    loc = user_location()
    for op in result.program.blocks[trace.block_idx].ops[count:]:
        if op.loc is None:
            op.loc = loc
    trace.replace_program(result.program)
    return result


def append_backward(loss: Variable, parameter_list: Sequence[VarOrName] | None = None,
                    no_grad_set: Iterable[VarOrName] | None = None
                    ) -> list[tuple[Variable, Variable]]:
    """Append the gradient ops of the scalar ``loss``; returns (param, grad) pairs.

    ``parameter_list`` (vars or names) restricts which parameters get gradients (default:
    every trainable parameter the loss reaches); no gradient flows through the vars of
    ``no_grad_set``. The loss op gets role Forward|Loss, the seed op Backward|Loss. The
    gradient of a var with an error clip (`Variable._set_error_clip`) is clipped.
    """
    trace = current_trace("fluid.backward.append_backward")
    loss_name = as_variable(loss, "loss").name
    params = _names(trace, parameter_list, "parameter_list")
    no_grad = _names(trace, no_grad_set, "no_grad_set")
    result = _run_pass(trace, lambda prog, idx: _pass.append_backward(
        prog, idx, loss_name, params, no_grad))
    append_error_clips(trace, result.grads)
    return [(Variable(trace, p), Variable(trace, g)) for p, g in result.params_grads]


def gradients(targets: Variable | Sequence[Variable],
              inputs: Variable | Sequence[Variable],
              no_grad_set: Iterable[VarOrName] | None = None) -> list[Variable | None]:
    """Gradients of ``sum(targets)`` with respect to each of ``inputs`` (None where an input
    does not reach the targets). A var used several times gets the sum of its gradients."""
    trace = current_trace("fluid.gradients")
    target_names = [as_variable(t, "target").name for t in _as_list(targets)]
    input_names = [as_variable(x, "input").name for x in _as_list(inputs)]
    no_grad = _names(trace, no_grad_set, "no_grad_set")
    result = _run_pass(trace, lambda prog, idx: _pass.calc_gradient(
        prog, idx, target_names, input_names, no_grad))
    return [Variable(trace, result.grads[n]) if n in result.grads else None
            for n in input_names]
