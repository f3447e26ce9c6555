"""The optimizer base class: ``minimize(loss)`` appends backward ops, then update ops (role
Optimize), in Paddle 1.8's two parts ``backward`` and ``apply_gradients``.

The steps:

1. `append_backward` (a pure pass) gives ``(param, grad)`` pairs, sorted by name; error
   clips (`fluid.clip.ErrorClipByValue`) clip the gradients of the vars that have one;
2. gradient clipping: the optimizer's ``grad_clip``, or else each parameter's own clip
   (`fluid.clip.set_gradient_clip`, ``ParamAttr(gradient_clip=...)``);
3. weight decay adds ``coeff * param`` (L2) or ``coeff * sign(param)`` (L1) to each grad,
   the parameter's own regularizer winning over the optimizer's;
4. the learning rate becomes a persistable var in block 0 (``learning_rate_N``), scaled
   per parameter by ``ParamAttr.learning_rate``;
5. accumulators (persistable, block 0, initialised there) are created per parameter, named
   ``<param>_<key>_N`` (``fc_0.w_0_velocity_0``, ``fc_0.w_0_moment1_0``, ...), with the
   optimizer's ``name`` before the key when it has one, as Paddle names them;
6. one update op per parameter.

Every op of steps 2-6 has role Optimize and ``op_role_var = (param, grad)`` where ``grad``
is the gradient backward produced (before clipping and weight decay), as Paddle's
``optimized_guard`` tags them: a transpiler reads the pairs from there and sends that
gradient. Ops that read the gradients of several parameters (a global-norm clip) list
every pair they read.
"""
from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any

from ..errors import FluidWarning, OpArgumentError
from ..ir.records import SELECTED_ROWS, OpDesc, OpRole, VarDesc
from ..ir.source import warn_at_user
from ..ops.registry import get_spec
from ..passes.backward import append_backward
from . import clip as _clip
from .layers.helpers import as_variable
from .regularizer import L1Decay, L2Decay, WeightDecayRegularizer
from .tracing import TraceContext, current_trace, error_at
from .variable import Variable

ParamList = Sequence[str | Variable] | None
Pairs = Sequence[tuple[str | Variable, str | Variable]]


def var_names(values: Iterable[str | Variable] | None, trace: TraceContext,
              what: str, parameters_only: bool) -> list[str] | None:
    """Var names from vars or names; one the program lacks (or, with ``parameters_only``,
    one that is not a parameter) is an error at the user's line."""
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


def number(value: Any, what: str, low: float, high: float | None = None,
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


def check_optimizer(value: Any, what: str) -> Any:
    """``value`` if it is an optimizer (it has ``minimize``), else an error at the user's
    line that says what it got (a gradient clip in the wrong place, most often)."""
    if hasattr(value, "minimize") and not isinstance(value, _clip.GradientClipBase):
        return value
    hint = ""
    if isinstance(value, _clip.GradientClipBase):
        hint = (f"; {type(value).__name__} is a gradient clip: give it to the optimizer as "
                f"grad_clip=, e.g. fluid.optimizer.SGD(0.1, grad_clip=clip)")
    raise error_at(OpArgumentError, f"{what} must be an optimizer (such as "
                                    f"fluid.optimizer.SGD(0.1)), got {value!r}{hint}")


@dataclass(frozen=True)
class ParamUpdate:
    """What one parameter's update op reads."""
    param: str
    grad: str        # the gradient after clipping and weight decay
    lr: str          # the learning rate, scaled by the parameter's ParamAttr
    role_grad: str   # the gradient backward produced: op_role_var = (param, role_grad)


class Optimizer:
    """Base class; subclasses give `_append_update` and, if they keep state,
    `_create_accumulators`. ``_hyper`` names the attributes `repr` shows."""

    op_type = ""
    _hyper: tuple[str, ...] = ()   # the attributes `repr` shows

    def __init__(self, learning_rate: float | Variable,
                 parameter_list: ParamList = None,
                 regularization: WeightDecayRegularizer | None = None,
                 grad_clip: _clip.GradientClipBase | None = None,
                 name: str | None = None):
        if isinstance(learning_rate, _clip.GradientClipBase):
            raise error_at(OpArgumentError, f"learning_rate got a gradient clip "
                                            f"({type(learning_rate).__name__}); give it as "
                                            f"grad_clip=, after the learning rate")
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
        self._grad_clip = _clip.check_grad_clip(grad_clip)
        self._parameter_list = parameter_list
        self.name = name
        self._trace: weakref.ref | None = None
        self._lr_var: str | None = None
        self._acc: dict[tuple[str, str], str] = {}
        self._dtype = "float32"

    # --- Paddle's parts of minimize ------------------------------------------------------------

    def minimize(self, loss: Variable, startup_program: Any = None,
                 parameter_list: ParamList = None,
                 no_grad_set: Iterable[str | Variable] | None = None
                 ) -> tuple[list[OpDesc], list[tuple[Variable, Variable]]]:
        """Append backward and update ops for ``loss``; returns ``(optimize_ops,
        params_grads)``: the update-side ops appended and the (param, grad) pairs.

        Only parameters in ``parameter_list`` (vars or names; default: the optimizer's own
        ``parameter_list``, else every trainable parameter the loss reaches) are updated;
        a listed parameter the loss does not reach gets no gradient and is left alone."""
        current_trace(f"{type(self).__name__}.minimize")
        params_grads = self.backward(loss, startup_program, parameter_list, no_grad_set)
        return self.apply_optimize(loss, startup_program, params_grads), params_grads

    def backward(self, loss: Variable, startup_program: Any = None,
                 parameter_list: ParamList = None,
                 no_grad_set: Iterable[str | Variable] | None = None,
                 callbacks: Any = None) -> list[tuple[Variable, Variable]]:
        """The first part of `minimize`: the backward ops; returns the (param, grad) pairs."""
        trace = self._start(f"{type(self).__name__}.backward", startup_program)
        loss = as_variable(loss, "loss")
        self._dtype = trace.type_of(loss.name).dtype
        if parameter_list is None:
            parameter_list = self._parameter_list
        params = var_names(parameter_list, trace, "parameter_list", parameters_only=True)
        no_grad = var_names(no_grad_set, trace, "no_grad_set", parameters_only=False)
        pairs = self._append_backward(trace, loss.name, params, no_grad)
        return [(Variable(trace, p), Variable(trace, g)) for p, g in pairs]

    def _append_backward(self, trace: TraceContext, loss: str, params: list[str] | None,
                         no_grad: list[str] | None) -> list[tuple[str, str]]:
        try:
            result = append_backward(trace.program, trace.block_idx, loss, params, no_grad)
        except OpArgumentError as e:
            raise error_at(OpArgumentError, str(e)) from None
        trace.replace_program(result.program)
        _clip.append_error_clips(trace, result.grads)
        return result.params_grads

    def apply_gradients(self, params_grads: Pairs) -> list[OpDesc]:
        """The second part of `minimize`: clipping, weight decay and the update ops for
        ``params_grads``; returns the ops appended."""
        trace = self._start(f"{type(self).__name__}.apply_gradients")
        pairs = sorted((_name(p, "param"), _name(g, "grad")) for p, g in params_grads)
        pairs = [(p, g) for p, g in pairs if trace.program.var(trace.block, p).trainable]
        count = len(trace.block.ops)
        self._create_optimization_pass(trace, pairs)
        return trace.block.ops[count:]

    def apply_optimize(self, loss: Variable, startup_program: Any,
                       params_grads: Pairs) -> list[OpDesc]:
        """`apply_gradients`, as Paddle's `minimize` calls it."""
        return self.apply_gradients(params_grads)

    # --- the pass ------------------------------------------------------------------------------

    def _start(self, what: str, startup_program: Any = None) -> TraceContext:
        trace = current_trace(what)
        if startup_program is not None:
            raise error_at(OpArgumentError,
                           f"{what}: startup_program has no meaning here (block 0 of the "
                           f"program initialises its state); leave it out, and pass "
                           f"parameter_list= by keyword")
        self._bind(trace)
        return trace

    def _create_optimization_pass(self, trace: TraceContext,
                                  pairs: list[tuple[str, str]]) -> None:
        clipped = _clip.clip_gradients(trace, pairs, self._grad_clip)
        lr = self._learning_rate(trace, self._dtype)
        for p, g in pairs:
            decayed = self._regularize(trace, p, clipped.get(p, g), g)
            self._create_accumulators(trace, p)
            self._append_update(trace, ParamUpdate(p, decayed, self._param_lr(trace, p, g, lr),
                                                   g))
        self._finish(trace, pairs)

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
                     shape: Sequence[int] | None = None, dtype: str | None = None) -> str:
        """The optimizer state ``key`` of ``param`` (created on first use): persistable, in
        block 0, the parameter's shape and dtype unless ``shape``/``dtype`` say otherwise;
        ``<param>_<name>_<key>_N`` when the optimizer has a name."""
        name = self._acc.get((key, param))
        if name is None:
            var = trace.type_of(param)
            full = f"{self.name}_{key}" if self.name else key
            name = self._global_state(trace, f"{param}_{full}",
                                      var.shape if shape is None else shape, value,
                                      dtype or var.dtype)
            self._acc[(key, param)] = name
        return name

    def _optimize_op(self, trace: TraceContext, type: str, inputs: dict, outputs: dict,
                     attrs: dict | None, param: str, grad: str) -> OpDesc:
        return trace.append_op(type, inputs, outputs, attrs, role=OpRole.OPTIMIZE,
                               role_var=(param, grad))

    def _update_op(self, trace: TraceContext, u: ParamUpdate, op_type: str,
                   state: dict[str, str], attrs: dict[str, Any], lr: bool = True) -> OpDesc:
        """The update op ``op_type`` of ``u``: it reads Param, Grad, the learning rate (when
        ``lr``) and each state slot's accumulator (``state``: slot -> key), and writes
        ParamOut and ``<slot>Out`` back into them."""
        names = {slot: self._accumulator(trace, key, u.param) for slot, key in state.items()}
        given = {"Param": [u.param], "Grad": [u.grad], **({"LearningRate": [u.lr]} if lr else {}),
                 **{slot: [n] for slot, n in names.items()}}
        ins = {s.name: given[s.name] for s in get_spec(op_type).inputs if s.name in given}
        outs = {"ParamOut": [u.param], **{slot + "Out": [n] for slot, n in names.items()}}
        return self._optimize_op(trace, op_type, ins, outs, attrs, u.param, u.role_grad)

    def _tmp(self, trace: TraceContext, hint: str) -> str:
        """A fresh temporary of the method block: ``hint``, or ``hint_1``, ... if taken."""
        return trace.unique_in_block(hint)

    def _regularize(self, trace: TraceContext, param: str, grad: str, role_grad: str) -> str:
        attr = trace.param_attrs.get(param)
        reg = (attr.regularizer if attr is not None and attr.regularizer is not None
               else self.regularization)
        if reg is None or reg.coeff == 0:
            return grad
        term_src = param
        if isinstance(reg, L1Decay):
            term_src = self._tmp(trace, f"{param}@SIGN")
            self._optimize_op(trace, "sign", {"X": [param]}, {"Out": [term_src]}, None,
                              param, role_grad)
        elif not isinstance(reg, L2Decay):
            raise error_at(OpArgumentError, f"unknown regularizer {reg!r}")
        if trace.type_of(grad).kind == SELECTED_ROWS:
            warn_at_user(f"{type(reg).__name__} on {param!r}, whose gradient is rows only "
                         f"(embedding(is_sparse=True)): the decayed gradient is dense, every "
                         f"row decays each step as in Paddle 1.8, and the step costs the "
                         f"whole table. To keep steps sparse, leave the table out of weight "
                         f"decay (ParamAttr(regularizer=L2Decay(0.0)))", FluidWarning)
        term = self._tmp(trace, f"{param}@DECAY")
        self._optimize_op(trace, "scale", {"X": [term_src]}, {"Out": [term]},
                          {"scale": float(reg.coeff)}, param, role_grad)
        decayed = trace.unique_in_block(f"{role_grad}@REG")
        self._optimize_op(trace, "elementwise_add", {"X": [grad], "Y": [term]},
                          {"Out": [decayed]}, None, param, role_grad)
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

    #: the update op's state slots and their accumulators' keys (slot -> key), each
    #: starting at zero unless `_create_accumulators` says otherwise
    _STATE: dict[str, str] = {}

    def _create_accumulators(self, trace: TraceContext, param: str) -> None:
        """Create this optimizer's per-parameter state (none for plain SGD)."""
        for key in self._STATE.values():
            self._accumulator(trace, key, param)

    def _attrs(self) -> dict[str, Any]:
        """The update op's attrs."""
        return {}

    def _append_update(self, trace: TraceContext, u: ParamUpdate) -> None:
        """The update op ``op_type`` over the `_STATE` accumulators, with `_attrs`."""
        self._update_op(trace, u, self.op_type, self._STATE, self._attrs())

    def _finish(self, trace: TraceContext, pairs: list[tuple[str, str]]) -> None:
        """Ops run once per step after all updates (none by default)."""

    def __repr__(self) -> str:
        hyper = "".join(f", {k}={getattr(self, k)!r}" for k in self._hyper)
        return f"{type(self).__name__}(learning_rate={self.learning_rate!r}{hyper})"


def _name(value: str | Variable, what: str) -> str:
    return value if isinstance(value, str) else as_variable(value, what).name
