"""Where a layer writes: a new var, or the var given as Paddle's ``out=`` / ``output=``.

``create_tensor(dtype)`` without a shape makes a `NewTensor`: a name with no type yet,
which the first layer writing it (``fill_constant(..., out=t)``, ``assign(x, output=t)``,
``sums([...], out=t)``) declares with the type that layer gives; a persistable one goes to
the program's state (block 0). A var that exists already must get exactly its own type.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import DTypeError, OpArgumentError, ShapeError
from ...ir.records import VarDesc
from ...ir.text import short_type
from ...ops.apply import declared_typer, infer_op
from ...ops.spec import TensorType, dims_compatible
from ..tracing import TraceContext, error_at
from ..variable import Placeholder, Variable
from .helpers import Inputs, LayerHelper, as_variable


class NewTensor(Placeholder):
    """A var `create_tensor` named without a shape: typed by the first layer that writes
    it. Reading it before that is an error that says so (as for a `Placeholder`, layers
    resolve it before they use it)."""

    __slots__ = ("wanted_dtype", "wants_state")

    def __init__(self, trace: TraceContext, name: str, dtype: str, persistable: bool):
        super().__init__(trace, name, trace.method)
        self.wanted_dtype, self.wants_state = dtype, persistable

    @property
    def declared(self) -> bool:
        return self._trace.find(self.name) is not None

    def undeclared(self) -> str:
        return (f"{self.name!r} (fluid.layers.create_tensor) holds nothing yet: write it "
                f"first, e.g. fluid.layers.assign(value, output=var) or "
                f"fluid.layers.fill_constant(shape, dtype, value, out=var), or give "
                f"create_tensor a shape=")

    def __repr__(self) -> str:
        var = self._trace.find(self.name)
        return f"Variable({self.name}: {short_type(var) if var else 'not written yet'})"


def append_into(helper: LayerHelper, op_type: str, inputs: Inputs, attrs: Mapping[str, Any],
                out: Any, what: str = "out", slot: str = "Out") -> Variable:
    """Record ``op_type`` with its output ``slot`` written into ``out`` (None: a new var,
    the layer's output). ``out`` must get exactly its declared type; a `NewTensor` takes
    the type the op gives."""
    if out is None:
        return helper.append_one(op_type, inputs, attrs)
    target = out if isinstance(out, NewTensor) else as_variable(out, f"{helper.layer_type} "
                                                                      f"{what}")
    trace = helper.trace
    declared = trace.find(target.name)
    if declared is not None and not (declared.persistable or declared.is_data) \
            and trace.block.name and trace.has_value(target.name):
        raise error_at(OpArgumentError,
                       f"{helper.layer_type}: {what}={target.name!r} already holds a value, "
                       f"and a method's temporaries are written once; write into a parameter "
                       f"or state var, or use the returned result instead of {what}=")
    helper.append(op_type, inputs, attrs, outputs={slot: [target.name]})
    op = trace.block.ops[-1]
    got = infer_op(op, trace.type_of, declared_typer(trace.program))[slot][0]
    if declared is None:
        _settle(helper, target, got)
    elif not _fits(declared, got):
        trace.block.ops.pop()
        cls = DTypeError if declared.dtype != got.dtype else ShapeError
        raise error_at(cls, f"{helper.layer_type}: its result is {got.dtype}"
                            f"{list(got.shape)} but {what} {target.name!r} is "
                            f"{short_type(declared)}; they must match")
    return Variable(trace, target.name)


def written_to(result: Variable, out: Any, layer: str, what: str = "out") -> Variable:
    """``result``, or a copy of it written into ``out`` (Paddle's ``out=``) for a layer
    built of several ops, as ``assign(result, output=out)`` writes it."""
    if out is None:
        return result
    return append_into(LayerHelper(layer), "assign", {"X": result}, {}, out, what)


def _fits(var: VarDesc, t: TensorType) -> bool:
    return var.dtype == t.dtype and len(var.shape) == len(t.shape) and all(
        dims_compatible(a, b) for a, b in zip(var.shape, t.shape))


def _settle(helper: LayerHelper, target: Variable, got: TensorType) -> None:
    """A `NewTensor`'s first writer declared it: check its dtype, and move a persistable
    one into the program's state."""
    trace = helper.trace
    wanted = getattr(target, "wanted_dtype", got.dtype)
    if wanted != got.dtype:
        trace.block.ops.pop()
        del trace.block.vars[target.name]
        raise error_at(DTypeError, f"{helper.layer_type}: its result is {got.dtype} but "
                                   f"{target.name!r} was created as {wanted}")
    if getattr(target, "wants_state", False):
        var = trace.block.vars.pop(target.name)
        var.persistable = True
        trace.program.global_block().vars[target.name] = var
