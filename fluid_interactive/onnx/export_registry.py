"""The export rules: one function per op type, registered here, each turning one op of a
method's block into ONNX nodes.

A rule is ``rule(e: OpExport) -> None``. It reads the op's inputs (ONNX value names), attrs
and var types from ``e`` and appends nodes with ``e.node(...)``; the op's outputs keep
their var names. A rule that cannot express the op (a training-mode batch_norm, an opset
too old) calls ``e.fail(...)``, which names the op and the user's line.

Adding an op is one rule in the family's file (`export_math`, `export_nn`, `export_shape`,
`export_control`, `export_rnn`, `export_rnn_unit`, `export_mask`, `export_array`,
`export_vision`, `export_image`), which `export` imports::

    @export_rule("relu")
    def _relu(e):
        e.node("Relu", [e.input("X")], [e.output("Out")])
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import OnnxError
from ..ir.names import fresh_name
from ..ir.records import BlockDesc, OpDesc, ProgramDesc, VarDesc
from ..ir.source import format_location
from ..ir.text import format_op
from ..ops.registry import get_spec
from .proto import onnx_dtype, onnx_module

ExportRule = Callable[["OpExport"], None]
EXPORT_RULES: dict[str, ExportRule] = {}


def export_rule(*op_types: str) -> Callable[[ExportRule], ExportRule]:
    """Register the decorated function as the export rule of ``op_types``."""
    def register(fn: ExportRule) -> ExportRule:
        for t in op_types:
            if t in EXPORT_RULES:
                raise ValueError(f"op {t!r} already has an export rule")
            EXPORT_RULES[t] = fn
        return fn
    return register


class GraphBuilder:
    """The nodes, initializers and value names of the graph being written."""

    def __init__(self, opset: int, root: GraphBuilder | None = None):
        self.opset = opset
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        # a subgraph (a loop body) shares its model's names, state and initializers
        self.root: GraphBuilder = root or self
        self.used: set[str] = root.used if root else set()
        self.values: dict[str, np.ndarray] = root.values if root else {}   # state's values
        self._helper = onnx_module().helper

    def reserve(self, name: str) -> str:
        self.used.add(name)
        return name

    def fresh(self, hint: str) -> str:
        """A value name not used yet: ``hint``, else ``hint_1``, ``hint_2``, ..."""
        return self.reserve(fresh_name(hint, self.used.__contains__, sep="_"))

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str],
             name: str, doc: str = "", **attrs: Any) -> None:
        attrs = {k: v for k, v in attrs.items() if v is not None}
        node = self._helper.make_node(op_type, list(inputs), list(outputs),
                                      name=self.fresh(name), doc_string=doc or None, **attrs)
        self.nodes.append(node)

    def constant(self, value: np.ndarray, hint: str) -> str:
        """A Constant node holding ``value``; returns its output name."""
        out = self.fresh(hint)
        tensor = onnx_module().numpy_helper.from_array(np.array(value, order="C"), out)
        self.nodes.append(self._helper.make_node("Constant", [], [out], name=out,
                                                 value=tensor))
        return out

    def initializer(self, name: str, value: np.ndarray) -> None:
        """An initializer of the model (a subgraph's nodes read it by name)."""
        self.reserve(name)
        self.values[name] = value
        self.root.initializers.append(
            onnx_module().numpy_helper.from_array(np.array(value, order="C"), name))


class OpExport:
    """What an export rule sees of its op."""

    def __init__(self, program: ProgramDesc, block: BlockDesc, op: OpDesc,
                 graph: GraphBuilder, is_test: bool, method: str):
        self.program, self.block, self.op, self.graph = program, block, op, graph
        self.attrs = get_spec(op.type).full_attrs(op.attrs)
        self.opset = graph.opset
        self.method = method
        self._is_test = is_test
        # what the names of the nodes and values this op adds start with
        self._stem = op.output_names()[0] if op.output_names() else op.type

    # --- reading the op ----------------------------------------------------------------

    def input(self, slot: str, i: int = 0) -> str:
        return self.op.input(slot)[i]

    def inputs(self, slot: str) -> list[str]:
        return list(self.op.input(slot))

    def has_input(self, slot: str) -> bool:
        return bool(self.op.input(slot))

    def output(self, slot: str, i: int = 0) -> str:
        return self.op.output(slot)[i]

    def outputs(self, slot: str) -> list[str]:
        return list(self.op.output(slot))

    def var(self, name: str) -> VarDesc:
        var = self.program.find_var(self.block, name)
        assert var is not None, name   # the program passed check_program
        return var

    def shape(self, name: str) -> tuple[int, ...]:
        return self.var(name).shape

    def value(self, name: str) -> np.ndarray | None:
        """The current value of var ``name`` when the method reads it as state (a
        parameter): a rule may write a value derived from it (`initializer`)."""
        return self.graph.values.get(name)

    def dtype(self, name: str) -> str:
        return self.var(name).dtype

    def is_test(self) -> bool:
        """Whether the op runs in inference mode: its ``is_test`` attr when set, else the
        method's mode (a method that runs an optimizer trains)."""
        flag = self.attrs.get("is_test")
        return self._is_test if flag is None else bool(flag)

    # --- writing nodes -------------------------------------------------------------------

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str] | None = None,
             **attrs: Any) -> list[str]:
        """Append an ONNX node; ``outputs`` None makes one fresh intermediate value.
        Returns the output names."""
        if outputs is None:
            outputs = [self.tmp(op_type.lower())]
        loc = f" at {format_location(self.op.loc, short=True)}" if self.op.loc else ""
        self.graph.node(op_type, inputs, outputs, name=f"{self._stem}/{op_type}",
                        doc=f"{self.op.type}{loc}", **attrs)
        return list(outputs)

    def tmp(self, suffix: str) -> str:
        """A fresh value name for an intermediate result, derived from the op's output."""
        return self.graph.fresh(self.tmp_hint(suffix))

    def const(self, value: Any, dtype: str, hint: str = "const") -> str:
        """A Constant node holding ``value`` as ``dtype``."""
        return self.graph.constant(np.asarray(value, dtype=dtype), self.tmp_hint(hint))

    def ints(self, values: Sequence[int], hint: str = "axes") -> str:
        """A 1-D int64 Constant (axes, shapes, sections, pads)."""
        return self.const(list(values), "int64", hint)

    def initializer(self, value: np.ndarray, hint: str) -> str:
        """A new initializer holding ``value`` (a parameter in ONNX's layout); returns its
        name."""
        name = self.tmp(hint)
        self.graph.initializer(name, value)
        return name

    def scalar(self, value: float, like: str, hint: str = "value") -> str:
        """A 0-d Constant of the dtype of var ``like``."""
        return self.const(value, self.dtype(like), hint)

    def tmp_hint(self, suffix: str) -> str:
        return f"{self._stem}.{suffix}"

    def onnx_dtype(self, dtype: str) -> int:
        return onnx_dtype(dtype)

    # --- errors ----------------------------------------------------------------------------

    def require_opset(self, opset: int, node: str) -> None:
        if self.opset < opset:
            self.fail(f"it needs the ONNX {node} operator, which opset {opset} introduced; "
                      f"export with opset={opset} or later (this export uses {self.opset})")

    def fail(self, problem: str) -> None:
        raise export_error(self.program, self.block, self.op, self.method, problem)


def export_error(program: ProgramDesc, block: BlockDesc, op: OpDesc, method: str,
                 problem: str) -> OnnxError:
    """An `OnnxError` naming the op, its text line and the user's line that recorded it."""
    line = format_op(op, lambda n: program.find_var(block, n)).split("   # ")[0]
    where = format_location(op.loc) or "an unknown location"
    return OnnxError(f"cannot export {method}() to ONNX: op {op.type!r} {problem}\n"
                     f"  {line}\n  recorded at {where}")
