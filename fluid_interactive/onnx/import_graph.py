"""Reading an ONNX file: everything taken from it is checked here, once, before any of it
reaches a program.

The file is untrusted input. It is parsed without following external-data references,
every name that may become a var name passes `checked_name`, element types and shapes are
checked, and every node type must have an import rule: otherwise one `OnnxError` lists the
unsupported types with their counts.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import OnnxError
from .names import checked_name
from .proto import MIN_IMPORT_OPSET, dtype_from_onnx, onnx_module


@dataclass(frozen=True)
class GraphInput:
    name: str
    shape: tuple[int, ...]   # -1 for the batch dim
    dtype: str


@dataclass
class Node:
    op_type: str
    inputs: list[str]        # '' marks an optional input left out
    outputs: list[str]
    attrs: dict[str, Any]
    label: str               # how messages name the node (escaped)


@dataclass
class OnnxGraph:
    """A validated ONNX graph, ready to replay."""
    path: str
    opset: int
    inputs: list[GraphInput]
    outputs: list[str]
    nodes: list[Node]
    initializers: dict[str, np.ndarray]
    constants: dict[str, np.ndarray] = field(default_factory=dict)   # Constant node outputs
    returns: Any = None      # the return structure over output names, when the file says

    def producers(self) -> dict[str, Node]:
        return {o: node for node in self.nodes for o in node.outputs if o}


def read_onnx(path: str) -> OnnxGraph:
    """Parse and validate the ONNX model at ``path``."""
    from .import_registry import IMPORT_RULES  # the rules register on import
    onnx = onnx_module()
    path = os.fspath(path)
    try:
        model = onnx.load(path, load_external_data=False)
    except FileNotFoundError:
        raise
    except Exception as e:
        raise OnnxError(f"{path} is not a readable ONNX model: {type(e).__name__}: {e}") \
            from None
    g = model.graph
    opset = _default_opset(model, path)
    _reject_unsupported(path, g, IMPORT_RULES)
    initializers = _initializers(path, g)
    constants: dict[str, np.ndarray] = {}
    nodes = []
    for i, node in enumerate(g.node):
        nodes.append(_node(path, i, node))
        if node.op_type == "Constant":
            constants[nodes[-1].outputs[0]] = _constant_value(path, nodes[-1])
    inputs = [_graph_input(path, v) for v in g.input if v.name not in initializers]
    outputs = [checked_name(v.name, "graph output", path) for v in g.output]
    if not outputs:
        raise OnnxError(f"{path}: the graph has no outputs")
    graph = OnnxGraph(path, opset, inputs, outputs, nodes, initializers, constants)
    _check_defined(graph)
    graph.returns = _returns(model, graph)
    return graph


def _default_opset(model: Any, path: str) -> int:
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not versions:
        raise OnnxError(f"{path}: the model imports no version of the default ONNX opset")
    if versions[0] < MIN_IMPORT_OPSET:
        raise OnnxError(f"{path} uses ONNX opset {versions[0]}; the importer reads opset "
                        f"{MIN_IMPORT_OPSET} and later (convert it with "
                        f"onnx.version_converter.convert_version)")
    return int(versions[0])


def _reject_unsupported(path: str, g: Any, rules: dict) -> None:
    counts: Counter = Counter()
    _count_unsupported(g, rules, counts)
    if counts:
        listed = ", ".join(f"{t!r} x{n}" for t, n in sorted(counts.items()))
        raise OnnxError(f"{path} uses ONNX node types that fluid_interactive cannot import: "
                        f"{listed}. Supported: {', '.join(sorted(rules))}")


def _count_unsupported(g: Any, rules: dict, counts: Counter) -> None:
    """The node types of ``g`` and of its subgraphs that have no import rule."""
    onnx = onnx_module()
    for node in g.node:
        key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"
        if node.domain not in ("", "ai.onnx") or node.op_type not in rules:
            counts[key] += 1
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                _count_unsupported(attr.g, rules, counts)


def _initializers(path: str, g: Any) -> dict[str, np.ndarray]:
    onnx = onnx_module()
    if len(g.sparse_initializer):
        raise OnnxError(f"{path} holds sparse initializers, which the importer does not read")
    out = {}
    for t in g.initializer:
        name = checked_name(t.name, "initializer", path)
        if t.data_location == onnx.TensorProto.EXTERNAL:
            raise OnnxError(f"{path}: initializer {name!r} keeps its data in an external "
                            f"file; the importer reads self-contained models only (save with "
                            f"onnx.save(model, path, save_as_external_data=False))")
        dtype_from_onnx(t.data_type, f"initializer {name!r}")
        out[name] = onnx.numpy_helper.to_array(t).copy()
    return out


def _attr_value(path: str, attr: Any, label: str) -> Any:
    onnx = onnx_module()
    value = onnx.helper.get_attribute_value(attr)
    if attr.type == onnx.AttributeProto.TENSOR:
        if value.data_location == onnx.TensorProto.EXTERNAL:
            raise OnnxError(f"{path}: {label} keeps a tensor in an external file")
        return onnx.numpy_helper.to_array(value).copy()
    if attr.type == onnx.AttributeProto.STRING:
        return value.decode("utf-8", "replace")
    if attr.type == onnx.AttributeProto.INTS:
        return [int(v) for v in value]
    if attr.type == onnx.AttributeProto.FLOATS:
        return [_shortest(v) for v in value]
    if attr.type == onnx.AttributeProto.FLOAT:
        return _shortest(value)
    if attr.type == onnx.AttributeProto.GRAPH:   # the body of a Loop, a branch of an If
        return _subgraph(path, value, label)
    if attr.type == onnx.AttributeProto.GRAPHS:
        raise OnnxError(f"{path}: {label} holds a list of subgraphs, which the importer does "
                        f"not read")
    return value


def _subgraph(path: str, g: Any, label: str) -> OnnxGraph:
    """A subgraph, read and checked as the graph is; its inputs may have any shape (a loop
    body's iteration number and condition are 0-d) and its nodes may read the values of
    the graphs around it."""
    initializers = _initializers(path, g)
    nodes = [_node(path, i, node) for i, node in enumerate(g.node)]
    constants = {n.outputs[0]: _constant_value(path, n) for n in nodes if n.op_type == "Constant"}
    inputs = [_any_input(path, v, label) for v in g.input if v.name not in initializers]
    outputs = [checked_name(v.name, f"output of {label}", path) for v in g.output]
    return OnnxGraph(path, 0, inputs, outputs, nodes, initializers, constants)


def _any_input(path: str, v: Any, label: str) -> GraphInput:
    name = checked_name(v.name, f"input of {label}", path)
    t = v.type.tensor_type
    if not v.type.HasField("tensor_type"):
        raise OnnxError(f"{path}: input {name!r} of {label} is not a tensor")
    dims = tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else -1
                 for d in t.shape.dim)
    return GraphInput(name, dims, dtype_from_onnx(t.elem_type, f"input {name!r} of {label}"))


def _shortest(value: float) -> float:
    """ONNX keeps float attributes in float32: the shortest decimal with that float32
    value, so an epsilon written as 1e-05 reads back as 1e-05."""
    return float(str(np.float32(value)))


def _node(path: str, index: int, node: Any) -> Node:
    label = f"node {index} ({node.op_type}{', ' + repr(node.name[:80]) if node.name else ''})"
    inputs = [checked_name(n, f"input of {label}", path) if n else "" for n in node.input]
    outputs = [checked_name(n, f"output of {label}", path) if n else "" for n in node.output]
    attrs = {a.name: _attr_value(path, a, f"attribute {a.name!r} of {label}")
             for a in node.attribute}
    return Node(node.op_type, inputs, outputs, attrs, label)


def _constant_value(path: str, node: Node) -> np.ndarray:
    for key, dtype in (("value", None), ("value_float", "float32"), ("value_floats", "float32"),
                       ("value_int", "int64"), ("value_ints", "int64")):
        if key in node.attrs:
            return np.asarray(node.attrs[key], dtype=dtype)
    raise OnnxError(f"{path}: {node.label} has none of the attributes value, value_float(s), "
                    f"value_int(s) that the importer reads")


def _graph_input(path: str, v: Any) -> GraphInput:
    name = checked_name(v.name, "graph input", path)
    t = v.type.tensor_type
    if not v.type.HasField("tensor_type") or not t.HasField("shape"):
        raise OnnxError(f"{path}: graph input {name!r} is not a tensor of known rank")
    dims = []
    for i, d in enumerate(t.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0 and i > 0:
            dims.append(int(d.dim_value))
        elif i == 0:
            dims.append(-1)   # the batch dim, symbolic or not, takes any size
        else:
            raise OnnxError(f"{path}: graph input {name!r} has an unknown dim at position {i}; "
                            f"only the first (batch) dim may vary")
    # a 0-d input is one value for the whole call (a loop's trip count), no batch
    return GraphInput(name, tuple(dims), dtype_from_onnx(t.elem_type, f"graph input {name!r}"))


def _check_defined(graph: OnnxGraph, around: frozenset[str] = frozenset()) -> None:
    """Every value a node reads is a graph input, an initializer or an earlier output (of
    this graph, or of the graphs around a subgraph)."""
    known = set(around) | {i.name for i in graph.inputs} | set(graph.initializers)
    for node in graph.nodes:
        for name in node.inputs:
            if name and name not in known:
                raise OnnxError(f"{graph.path}: {node.label} reads {name!r}, which no earlier "
                                f"node, input or initializer defines (is the graph sorted?)")
        for sub in (v for v in node.attrs.values() if isinstance(v, OnnxGraph)):
            _check_defined(sub, frozenset(known))
        for name in filter(None, node.outputs):
            if name in known:
                raise OnnxError(f"{graph.path}: {node.label} writes {name!r} a second time")
            known.add(name)
    for name in graph.outputs:
        if name not in known:
            raise OnnxError(f"{graph.path}: graph output {name!r} is never computed")


def _returns(model: Any, graph: OnnxGraph) -> Any | None:
    """The return structure a fluid_interactive export recorded, if it is well formed."""
    from .export import RETURNS_KEY
    text = next((p.value for p in model.metadata_props if p.key == RETURNS_KEY), None)
    if text is None:
        return None
    try:
        structure = json.loads(text)
    except ValueError:
        return None
    names = set(graph.outputs)

    def valid(r: Any) -> bool:
        if isinstance(r, str):
            return r in names
        if isinstance(r, list):
            return all(valid(v) for v in r)
        if isinstance(r, dict):
            return all(isinstance(k, str) and k.isprintable() and valid(v)
                       for k, v in r.items())
        return False
    return structure if valid(structure) else None
