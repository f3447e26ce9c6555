"""What every layer function uses: naming, inputs, ops, parameters, activations."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import OpArgumentError
from ...ir.records import VarDesc, canonical_dtype
from ...ir.text import short_type
from ...ops.registry import get_spec, registered_ops
from ..initializer import Constant, Initializer, Xavier
from ..param_attr import ParamAttr, to_param_attr
from ..tracing import TraceContext, check_parameter_shape, current_trace, error_at
from ..variable import Placeholder, Variable

Inputs = Mapping[str, Variable | Sequence[Variable] | None]

ACTIVATIONS = ("relu", "sigmoid", "tanh", "softmax", "leaky_relu", "exp", "log", "sqrt",
               "square", "abs", "gelu", "elu", "swish", "log_softmax",
               # Paddle's act= takes any elementwise op by its type, with default attrs
               "relu6", "hard_sigmoid", "hard_swish", "selu", "brelu", "soft_relu", "stanh",
               "mish", "logsigmoid", "tanh_shrink", "softplus", "softsign", "softshrink",
               "hard_shrink", "thresholded_relu", "sin", "cos", "atan", "asin", "acos", "ceil",
               "floor", "round", "reciprocal", "rsqrt", "log1p", "erf", "sign")


def as_variable(value: Any, what: str) -> Variable:
    """A Variable from a Variable or a declared placeholder; a clear error otherwise."""
    if isinstance(value, Placeholder):
        return value.resolve()
    if isinstance(value, Variable):
        return value
    raise error_at(OpArgumentError, f"{what} must be a fluid Variable (the result of a layer "
                                    f"or fluid.layers.data), got {type(value).__name__}")


def float_input(value: Any, what: str) -> Variable:
    """`as_variable`, and the var must be float16/32/64 (Paddle raises TypeError too)."""
    x = as_variable(value, what)
    if x.dtype not in ("float16", "float32", "float64"):
        raise error_at(OpArgumentError, f"{what} {x.name}:{short_type(x.desc)} must be "
                                        f"float16, float32 or float64; cast it first")
    return x


class LayerHelper:
    """Names a layer (``fc_0``, or ``prediction/fc_0`` under a var_scope) and creates its
    temporaries, outputs and parameters."""

    def __init__(self, layer_type: str, name: str | None = None):
        self.trace: TraceContext = current_trace(f"fluid.layers.{layer_type}")
        self.layer_type = layer_type
        self.user_name = None if name is None else self.trace.names.prefix + name
        self.name = self.user_name or self.trace.names.generate(layer_type)
        self._counters: dict[str, int] = {}

    def _next(self, suffix: str) -> str:
        k = self._counters.get(suffix, 0)
        self._counters[suffix] = k + 1
        return f"{self.name}.{suffix}_{k}"

    def tmp(self) -> str:
        return self.trace.unique_in_block(self._next("tmp"))

    def out_name(self) -> str:
        """The layer's final output: the user's ``name`` when given, else a temporary."""
        if self.user_name is not None:
            return self.trace.unique_in_block(self.user_name)
        return self.tmp()

    def append(self, op_type: str, inputs: Inputs, attrs: Mapping | None = None,
               outputs: Mapping[str, Sequence[str]] | None = None,
               final: bool = True) -> dict[str, list[Variable]]:
        """Record ``op_type``; outputs not named get fresh names (the first output slot
        takes the layer's final name when ``final``)."""
        spec = get_spec(op_type)
        names = self._input_names(spec, inputs)
        outs = dict(outputs or {})
        for i, slot in enumerate(spec.outputs):
            if slot.name not in outs and not slot.optional and not slot.duplicable:
                outs[slot.name] = [self.out_name() if (final and i == 0) else self.tmp()]
        op = self.trace.append_op(op_type, names, outs, attrs)
        return {slot: [Variable(self.trace, n) for n in ns] for slot, ns in op.outputs.items()}

    def _input_names(self, spec, inputs: Inputs) -> dict[str, list[str]]:
        duplicable = {slot.name for slot in spec.inputs if slot.duplicable}
        names = {}
        for slot, value in inputs.items():
            if value is None:
                continue
            what = f"{self.layer_type}: input {slot} of {spec.type}"
            if isinstance(value, (list, tuple)) and slot not in duplicable:
                raise error_at(OpArgumentError, f"{what} takes one Variable, got a "
                                                f"{type(value).__name__}")
            values = value if isinstance(value, (list, tuple)) else [value]
            names[slot] = [as_variable(v, what).name for v in values]
        return names

    def append_one(self, op_type: str, inputs: Inputs, attrs: Mapping | None = None,
                   final: bool = True) -> Variable:
        outputs = self.append(op_type, inputs, attrs, final=final)
        return outputs[get_spec(op_type).outputs[0].name][0]

    def create_parameter(self, attr: ParamAttr, shape: Sequence[int], dtype: str,
                         default_initializer: Initializer | None = None,
                         is_bias: bool = False) -> Variable:
        shape = [int(d) for d in shape]
        if any(d <= 0 for d in shape):
            raise error_at(OpArgumentError,
                           f"{self.layer_type}: parameter shape {shape} must be fully known "
                           f"and positive; the input's non-batch dims must be known")
        dtype = canonical_dtype(dtype)
        name = attr.name or self._next("b" if is_bias else "w")
        trace = self.trace
        existing = trace.find(name)
        if existing is not None:
            check_parameter_shape(existing, shape, dtype, self.layer_type, self.context)
            return Variable(trace, name)
        trace.declare(VarDesc(name, tuple(shape), dtype, persistable=True, is_parameter=True,
                              trainable=attr.trainable, stop_gradient=not attr.trainable),
                      in_global=True)
        trace.param_attrs[name] = attr
        init = attr.initializer or default_initializer or (Constant(0.0) if is_bias
                                                           else Xavier())
        op_type, attrs = init.op(shape, dtype)
        trace.append_op(op_type, {}, {"Out": [name]}, attrs, in_global=True)
        return Variable(trace, name)

    #: Extra words for parameter errors, e.g. " (input x:f32[?,13])"; layers set it.
    context = ""

    def param_attr(self, value: Any, what: str) -> ParamAttr | None:
        """``param_attr=`` / ``bias_attr=`` as a ParamAttr (None for False), or an error
        at the user's line."""
        try:
            return to_param_attr(value, f"{self.layer_type} {what}")
        except TypeError as e:
            raise error_at(OpArgumentError, str(e)) from None

    def activation(self, x: Variable, act: str | None) -> Variable:
        if act is None:
            return x
        known = available_activations()
        if act not in known:
            raise error_at(OpArgumentError,
                           f"{self.layer_type}: unknown activation act={act!r} (input "
                           f"{x.name}:{short_type(x.desc)}); choose one of "
                           f"{', '.join(known)}, or None for no activation")
        return self.append_one(act, {"X": x})


def available_activations() -> list[str]:
    """The names ``act=`` accepts: known activations whose op is registered."""
    ops = set(registered_ops())
    return [a for a in ACTIVATIONS if a in ops]


def append_simple(op_type: str, inputs: Inputs, attrs: Mapping | None = None,
                  layer: str | None = None, name: str | None = None) -> Variable:
    """One op, one output: the common shape of a layer function."""
    helper = LayerHelper(layer or op_type, name)
    return helper.append_one(op_type, inputs, attrs)
