"""The import rules: one function per ONNX node type, each appending ops to the method being
traced, and the replay that runs them.

A rule is ``rule(n: NodeImport) -> None``: it reads the node's inputs as our vars
(``n.var(i)``), values known at import time (``n.static(i)``, e.g. a Reshape's shape),
appends ops with ``n.op(...)`` and binds the node's outputs. Initializers become
parameters (trainable) the first time a rule reads them as tensors; rules that need other
state (batch_norm's moving statistics) ask for it with ``n.state(i)``.

Some nodes only reshape a value for the next node (the Flatten before a MatMul, the Unsqueeze
that lines a bias up with a conv output, the Mul of a scale). They bind a `Pending` value
instead of an op: the consumer that recognises it folds it into its own op (fc's ``mul``
with ``x_num_col_dims``, an elementwise op's ``axis``, ``scale``'s bias); any other consumer
gets the op. So a file this package exported imports as the ops it came from.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from ..errors import FluidError, OnnxError
from ..frontend.tracing import TraceContext, check_parameter_shape
from ..ir.records import FLOAT_DTYPES, VarDesc
from ..ops.registry import get_spec
from .import_graph import MALFORMED, Node, OnnxGraph

ImportRule = Callable[["NodeImport"], None]
IMPORT_RULES: dict[str, ImportRule] = {}


def import_rule(*node_types: str) -> Callable[[ImportRule], ImportRule]:
    """Register the decorated function as the import rule of ``node_types``."""
    def register(fn: ImportRule) -> ImportRule:
        for t in node_types:
            if t in IMPORT_RULES:
                raise ValueError(f"ONNX node type {t!r} already has an import rule")
            IMPORT_RULES[t] = fn
        return fn
    return register


@dataclass
class Pending:
    """A one-input op not appended yet: ``op_type(X=base) {attrs}``; ``info`` holds what a
    consumer needs to fold it (e.g. that an unsqueeze only appends trailing 1s)."""
    op_type: str
    base: str
    attrs: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)   # other slots: ONNX value names
    position: int = -1   # where in the block the op goes: where the node stood
    order: int = -1
    slot: str = "X"      # the op's input slot of ``base``
    cast: str = ""       # a dtype the op's result is cast to (the ONNX value's)


Value = str | Pending


class Replay:
    """Replays an `OnnxGraph` into the block being traced."""

    def __init__(self, graph: OnnxGraph, trace: TraceContext):
        self.graph, self.trace = graph, trace
        self.values: dict[str, Value] = {}
        self.pendings: list[Pending] = []

    def run(self, inputs: Sequence[str], wanted: Sequence[str]) -> list[str]:
        """Bind the graph inputs to the vars ``inputs``, replay the nodes ``wanted`` needs,
        and return the vars holding ``wanted``."""
        for spec, var in zip(self.graph.inputs, inputs):
            self.values[spec.name] = var
        for node in self._needed(wanted):
            self._replay(node)
        return [self._returned(name) for name in wanted]

    def _returned(self, name: str) -> str:
        """The var of returned value ``name`` (appending its pending op, if any)."""
        try:
            return self.var(name, "a returned value")
        except OnnxError:
            raise
        except FluidError as e:
            raise OnnxError(f"{self.graph.path}: the value {name!r} the graph returns "
                            f"cannot be computed: {e}") from None

    def _replay(self, node: Node) -> None:
        """Run ``node``'s import rule; whatever a malformed node makes it raise is an
        `OnnxError` naming the node."""
        try:
            IMPORT_RULES[node.op_type](NodeImport(self, node))
        except OnnxError:
            raise
        except FluidError as e:
            raise OnnxError(f"{self.graph.path}: {node.label} cannot be imported: "
                            f"{e}") from None
        except MALFORMED as e:
            raise OnnxError(f"{self.graph.path}: {node.label} is malformed: its inputs or "
                            f"attributes are not what {node.op_type} takes "
                            f"({type(e).__name__}: {e})") from None

    def _needed(self, wanted: Sequence[str]) -> list[Node]:
        producers = self.graph.producers()
        needed: set[int] = set()
        stack = list(wanted)
        seen: set[str] = set()
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            node = producers.get(name)
            if node is not None:
                needed.add(id(node))
                stack.extend(n for n in node.inputs if n)
                for body in node.attrs.values():   # what a branch or loop body reads
                    if isinstance(body, OnnxGraph):
                        stack.extend(body.outer_reads())
        return [n for n in self.graph.nodes if id(n) in needed]

    # --- values ----------------------------------------------------------------------------

    def var(self, name: str, what: str) -> str:
        """The var holding ONNX value ``name``; pending ops are appended now, initializers
        and constants become state the first time."""
        value = self.values.get(name)
        if isinstance(value, Pending):
            inputs = {value.slot: [value.base]}
            inputs.update({slot: [self.var(n, what)] for slot, n in value.inputs.items()})
            out = self.new_name(name)
            result = self.new_name(f"{name}.{value.op_type}") if value.cast else out
            self.append(value.op_type, inputs, {"Out": [result]}, value.attrs)
            self._move_last_op(value)
            if value.cast:
                self.append("cast", {"X": [result]}, {"Out": [out]}, {"out_dtype": value.cast})
                value.position += 1
                self._move_last_op(value)
            self.values[name] = out
            return out
        if value is not None:
            return value
        if name in self.graph.initializers:
            array = self.graph.initializers[name]
            return self.declare_state(name, array, parameter=array.dtype.name in FLOAT_DTYPES)
        if name in self.graph.constants:
            return self.declare_state(name, self.graph.constants[name], parameter=False)
        raise OnnxError(f"{self.graph.path}: {what} {name!r} is not available in this replay")

    def defer(self, value: Pending) -> None:
        """Note where ``value`` stands among the ops, so that if it becomes an op, the op
        takes the node's place and the block reads in the graph's order."""
        value.position, value.order = len(self.trace.block.ops), len(self.pendings)
        self.pendings.append(value)

    def _move_last_op(self, value: Pending) -> None:
        ops = self.trace.block.ops
        ops.insert(value.position, ops.pop())
        for other in self.pendings:
            if other is not value and (other.position > value.position or (
                    other.position == value.position and other.order > value.order)):
                other.position += 1

    def declare_state(self, name: str, array: np.ndarray, parameter: bool) -> str:
        """``name`` as a var of block 0 starting at ``array``: a trainable parameter, or
        persistable state that no optimizer touches. A method that replays the graph again
        reuses it."""
        trace = self.trace
        dtype = array.dtype.name
        existing = trace.program.global_block().vars.get(name)
        if existing is not None:
            if parameter:
                check_parameter_shape(existing, array.shape, dtype, "onnx_graph")
            elif existing.is_parameter or existing.shape != array.shape:
                raise OnnxError(f"{self.graph.path}: {name!r} is needed as state "
                                f"{list(array.shape)} but the program already has it as "
                                f"{'a parameter ' if existing.is_parameter else ''}"
                                f"{list(existing.shape)}")
        else:
            trace.declare(VarDesc(name, array.shape, dtype, persistable=True,
                                  is_parameter=parameter, stop_gradient=not parameter),
                          in_global=True)
            trace.initial_values[name] = np.array(array, order="C")
        self.values[name] = name
        return name

    def new_name(self, onnx_name: str) -> str:
        return self.trace.unique_in_block(onnx_name)

    def append(self, op_type: str, inputs: dict[str, list[str]], outputs: dict[str, list[str]],
               attrs: dict[str, Any]) -> None:
        self.trace.append_op(op_type, inputs, outputs, attrs)

    def shape(self, var: str) -> tuple[int, ...]:
        desc = self.trace.find(var)
        assert desc is not None, var
        return desc.shape

    def dtype(self, var: str) -> str:
        desc = self.trace.find(var)
        assert desc is not None, var
        return desc.dtype


class NodeImport:
    """What an import rule sees of its node."""

    def __init__(self, replay: Replay, node: Node):
        self.replay, self.node = replay, node
        self.opset = replay.graph.opset

    # --- reading the node ---------------------------------------------------------------

    def attr(self, name: str, default: Any = None) -> Any:
        return self.node.attrs.get(name, default)

    def has_input(self, i: int) -> bool:
        return i < len(self.node.inputs) and bool(self.node.inputs[i])

    def input_name(self, i: int) -> str:
        return self.node.inputs[i]

    def var(self, i: int) -> str:
        """Input ``i`` as a var (appending a pending op, declaring a parameter)."""
        if not self.has_input(i):
            self.fail(f"needs input {i}")
        return self.replay.var(self.node.inputs[i], f"input {i} of {self.node.label}")

    def pending(self, i: int, op_type: str) -> Pending | None:
        """Input ``i`` when it is a pending ``op_type`` (not an op yet)."""
        value = self.replay.values.get(self.node.inputs[i]) if self.has_input(i) else None
        return value if isinstance(value, Pending) and value.op_type == op_type else None

    def static(self, i: int) -> np.ndarray | None:
        """Input ``i``'s value when the file fixes it (a Constant node or an initializer)."""
        if not self.has_input(i):
            return None
        name = self.node.inputs[i]
        graph = self.replay.graph
        if name in graph.constants:
            return graph.constants[name]
        if name in graph.initializers and name not in self.replay.values:
            return graph.initializers[name]
        return None

    def constant(self, i: int) -> np.ndarray | None:
        """Input ``i``'s value when it comes from a Constant node (not a parameter)."""
        if self.has_input(i) and self.node.inputs[i] in self.replay.graph.constants:
            return self.replay.graph.constants[self.node.inputs[i]]
        return None

    def ints(self, i: int, attr: str, what: str) -> list[int] | None:
        """A list of ints given as input ``i`` (newer opsets) or as attribute ``attr``."""
        if self.has_input(i):
            value = self.static(i)
            if value is None:
                self.fail(f"needs its {what} (input {i}) fixed in the file (a Constant or an "
                          f"initializer); computed {what} are not supported")
            return [int(v) for v in np.asarray(value).reshape(-1)]
        value = self.attr(attr)
        return None if value is None else [int(v) for v in np.atleast_1d(value)]

    def state(self, i: int) -> str:
        """Input ``i``, an initializer, as persistable state that is not a parameter."""
        name = self.node.inputs[i] if self.has_input(i) else ""
        value = self.replay.values.get(name)
        if isinstance(value, str):
            return value
        if name not in self.replay.graph.initializers:
            self.fail(f"needs input {i} ({name!r}) to be an initializer")
        return self.replay.declare_state(name, self.replay.graph.initializers[name], False)

    def shape(self, var: str) -> tuple[int, ...]:
        return self.replay.shape(var)

    def dtype(self, var: str) -> str:
        return self.replay.dtype(var)

    # --- writing ops ---------------------------------------------------------------------

    def op(self, op_type: str, inputs: Mapping[str, str | list[str]], attrs: dict[str, Any],
           out: int = 0, slot: str | None = None, name: str | None = None) -> str:
        """Append ``op_type`` whose main output holds node output ``out`` (or, with
        ``name``, an intermediate named after it); other output slots get fresh names.
        Returns the main output var."""
        spec = get_spec(op_type)
        slot = slot or spec.outputs[0].name
        onnx_name = self.node.outputs[out]
        main = self.replay.new_name(name or onnx_name)
        outputs = {slot: [main]}
        for s in spec.outputs:
            if s.name not in outputs and not s.optional:
                outputs[s.name] = [self.replay.new_name(f"{main}.{s.name.lower()}")]
        self.append(op_type, inputs, outputs, attrs)
        if name is None:
            self.replay.values[onnx_name] = main
        return main

    def append(self, op_type: str, inputs: Mapping[str, str | list[str]],
               outputs: dict[str, list[str]], attrs: dict[str, Any]) -> None:
        """Append one op with every slot named; a shape or dtype error names the node."""
        ins = {k: [v] if isinstance(v, str) else list(v) for k, v in inputs.items()}
        try:
            self.replay.append(op_type, ins, outputs, attrs)
        except FluidError as e:
            raise OnnxError(f"{self.replay.graph.path}: {self.node.label} could not become "
                            f"{op_type}: {e}") from None

    def bind(self, value: Value, out: int = 0) -> None:
        """Node output ``out`` is ``value`` (a var or a pending op)."""
        if isinstance(value, Pending):
            self.replay.defer(value)
        self.replay.values[self.node.outputs[out]] = value

    def unused(self, *outs: int) -> None:
        """Fail when a node output this import does not produce is read by a later node or
        returned."""
        graph = self.replay.graph
        readers = {n for node in graph.nodes for n in node.inputs} | set(graph.outputs)
        for i in outs:
            if i < len(self.node.outputs) and self.node.outputs[i] in readers:
                self.fail(f"has output {i} ({self.node.outputs[i]!r}) read later, which the "
                          f"import does not produce")

    def fail(self, problem: str) -> NoReturn:
        raise OnnxError(f"{self.replay.graph.path}: {self.node.label} {problem}")
