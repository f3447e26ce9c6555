"""What every layer function uses: naming, inputs, ops, parameters, activations."""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Union

from ...errors import OpArgumentError
from ...ir.records import VarDesc, canonical_dtype
from ...ops.registry import get_spec
from ..initializer import Constant, Initializer, Xavier
from ..param_attr import ParamAttr
from ..tracing import TraceContext, check_parameter_shape, current_trace, error_at
from ..variable import Placeholder, Variable

Inputs = Mapping[str, Union[Variable, Sequence[Variable], None]]

ACTIVATIONS = ("relu", "sigmoid", "tanh", "softmax", "leaky_relu", "exp", "log", "sqrt",
               "square", "abs", "gelu", "elu", "swish", "log_softmax")


def as_variable(value: Any, what: str) -> Variable:
    """A Variable from a Variable or a declared placeholder; a clear error otherwise."""
    if isinstance(value, Variable):
        return value
    if isinstance(value, Placeholder):
        return value.resolve()
    raise error_at(OpArgumentError, f"{what} must be a fluid Variable (the result of a layer "
                                    f"or fluid.layers.data), got {type(value).__name__}")


class LayerHelper:
    """Names a layer (``fc_0``, or ``prediction/fc_0`` under a var_scope) and creates its
    temporaries, outputs and parameters."""

    def __init__(self, layer_type: str, name: Optional[str] = None):
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

    def append(self, op_type: str, inputs: Inputs, attrs: Optional[Mapping] = None,
               outputs: Optional[Mapping[str, Sequence[str]]] = None,
               final: bool = True) -> dict[str, list[Variable]]:
        """Record ``op_type``; outputs not named get fresh names (the first output slot
        takes the layer's final name when ``final``)."""
        names = {}
        for slot, value in inputs.items():
            if value is None:
                continue
            values = value if isinstance(value, (list, tuple)) else [value]
            names[slot] = [as_variable(v, f"{op_type} input {slot}").name for v in values]
        spec = get_spec(op_type)
        outs = dict(outputs or {})
        for i, slot in enumerate(spec.outputs):
            if slot.name not in outs and not slot.optional and not slot.duplicable:
                outs[slot.name] = [self.out_name() if (final and i == 0) else self.tmp()]
        op = self.trace.append_op(op_type, names, outs, attrs)
        return {slot: [Variable(self.trace, n) for n in ns] for slot, ns in op.outputs.items()}

    def append_one(self, op_type: str, inputs: Inputs, attrs: Optional[Mapping] = None,
                   final: bool = True) -> Variable:
        return self.append(op_type, inputs, attrs, final=final)[get_spec(op_type).outputs[0].name][0]

    def create_parameter(self, attr: ParamAttr, shape: Sequence[int], dtype: str,
                         default_initializer: Optional[Initializer] = None,
                         is_bias: bool = False) -> Variable:
        shape = [int(d) for d in shape]
        if any(d <= 0 for d in shape):
            raise error_at(OpArgumentError,
                           f"{self.layer_type}: parameter shape {shape} must be fully known "
                           f"and positive; the input's non-batch dims must be known")
        dtype = canonical_dtype(dtype)
        name = attr.name or self._next("b" if is_bias else "w")
        trace = self.trace
        existing = trace.program.global_block().vars.get(name)
        if existing is not None:
            check_parameter_shape(existing, shape, dtype)
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

    def activation(self, x: Variable, act: Optional[str]) -> Variable:
        if act is None:
            return x
        if act not in ACTIVATIONS:
            raise error_at(OpArgumentError, f"unknown activation {act!r}; choose one of "
                                            f"{', '.join(ACTIVATIONS)} or None")
        return self.append_one(act, {"X": x})


def append_simple(op_type: str, inputs: Inputs, attrs: Optional[Mapping] = None,
                  layer: Optional[str] = None, name: Optional[str] = None) -> Variable:
    """One op, one output: the common shape of a layer function."""
    helper = LayerHelper(layer or op_type, name)
    return helper.append_one(op_type, inputs, attrs)
