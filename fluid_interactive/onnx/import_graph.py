"""Reading an ONNX file: everything taken from it is checked here, once, before any of it
reaches a program.

The file is untrusted input. It is read as a regular file only (`files.py`), passed
through `onnx.checker` with shape inference, and parsed; external data is read only from
files beside the model, at offsets inside them. Every name that may become a var name passes
`checked_name`, element types, dims and data sizes are checked, and every node type must
have an import rule: otherwise one `OnnxError` lists the unsupported types with their
counts. Only the initializers some node reads are converted.
"""
from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import OnnxError
from .files import ExternalData, read_regular
from .names import checked_name
from .proto import MIN_IMPORT_OPSET, dtype_from_onnx, onnx_module

#: Rewrites of the parsed graph proto, applied before anything else reads it (the import
#: rule modules register them, e.g. import_rnn's for PyTorch's zero initial states).
GRAPH_REWRITES: list[Callable[[Any], None]] = []


@dataclass(frozen=True)
class GraphInput:
    name: str
    shape: tuple[int, ...]   # -1 for the batch dim
    dtype: str
    exported_batch: int | None = None   # the batch size the file fixes, if it does


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

    def outer_reads(self) -> set[str]:
        """The values this graph's nodes (its subgraphs' too) read or it returns that it
        neither takes nor computes: values of the graph around it (a branch reading what
        was computed before the If)."""
        inner = ({i.name for i in self.inputs} | set(self.initializers) | set(self.constants)
                 | {o for node in self.nodes for o in node.outputs})
        reads = set(self.outputs)
        for node in self.nodes:
            reads.update(n for n in node.inputs if n)
            reads.update(*(g.outer_reads() for g in node.attrs.values()
                           if isinstance(g, OnnxGraph)))
        return reads - inner


#: Exceptions that malformed content raises in NumPy or in the onnx package while it is
#: converted: each becomes an `OnnxError` naming the part of the file at fault.
MALFORMED = (ValueError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError,
             RecursionError)

_ELEMENT_LIMIT = 1 << 46   # more elements than any real tensor: a hostile dim


def read_onnx(path: str, rules: Mapping[str, Any]) -> OnnxGraph:
    """Parse and validate the ONNX model at ``path``: `onnx.checker` first, then every
    part the importer uses; any problem is an `OnnxError` saying where and what. A node
    type without an import rule in ``rules`` (by type) is refused by name."""
    path = os.fspath(path)
    model = _load(path)
    g = model.graph
    for rewrite in GRAPH_REWRITES:
        rewrite(g)
    opset = _default_opset(model, path)
    _reject_unsupported(path, g, rules)
    every_initializer = {t.name for t in g.initializer}
    with ExternalData(path) as external:
        initializers = _initializers(path, g, _used_names(g), external)
        constants: dict[str, np.ndarray] = {}
        nodes = []
        for i, node in enumerate(g.node):
            nodes.append(_node(path, i, node, external))
            if node.op_type == "Constant":
                constants[nodes[-1].outputs[0]] = _constant_value(path, nodes[-1])
    given = [v for v in g.input if v.name not in every_initializer]
    # A file whose every input fixes its first dim fixed its batch size when it was
    # written (a static export): the first dims take any size. A file leaving some first
    # dim open says which dims vary itself, and so does every file this package writes
    # (a dim it fixes was fixed in the program).
    static = model.producer_name != "fluid_interactive" and \
        all(_fixed(v, 0) for v in given if len(v.type.tensor_type.shape.dim))
    inputs = [_graph_input(path, v, static) for v in given]
    outputs = [checked_name(v.name, "graph output", path) for v in g.output]
    if not outputs:
        raise OnnxError(f"{path}: the graph has no outputs")
    graph = OnnxGraph(path, opset, inputs, outputs, nodes, initializers, constants)
    _check_defined(graph)
    graph.returns = _returns(model, graph)
    return graph


def _load(path: str) -> Any:
    """The parsed model, after `onnx.checker` (with shape inference) passed it.

    The checker sees the model without its large tensors (declared as graph inputs of
    their type instead; `tensor_array` checks their data): handed the whole file, it
    would hold two more copies of it, and it looks for external data relative to the
    working directory, not the model."""
    onnx = onnx_module()
    data = read_regular(path)
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as e:
        raise OnnxError(f"{path} is not a readable ONNX model: {type(e).__name__}: "
                        f"{_printable(str(e))}") from None
    del data
    try:
        checked = _for_checker(model).SerializeToString()
    except UnicodeDecodeError as e:   # protobuf decodes text fields when they are read
        raise OnnxError(f"{path} holds text that is not UTF-8 ({e}); names and string "
                        f"attributes in ONNX are UTF-8") from None
    failure = _checker_failure(checked)
    if failure is not None:
        raise OnnxError(f"{path} fails onnx.checker (ONNX's own validation, which "
                        f"onnxruntime applies too): {failure}")
    return model


def _checker_failure(data: bytes) -> str | None:
    """What `onnx.checker.check_model` (full check) finds wrong in the model ``data``."""
    onnx = onnx_module()
    try:
        onnx.checker.check_model(data, full_check=True)
    except MemoryError:
        raise
    except Exception as e:
        return _printable(str(e))[:1500] or type(e).__name__
    return None


def _printable(text: str) -> str:
    """``text`` with control characters escaped: names in it come from the file."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text.strip())


#: Initializers of up to this many elements stay in what the checker sees (shape inference
#: reads the values of small ones, such as a Reshape's shape); larger ones become typed
#: inputs. (Counted from the dims: asking protobuf for a tensor's size encodes it.)
_CHECKED_INLINE = 512


def _for_checker(model: Any) -> Any:
    """A small copy of ``model`` for the checker: everything but the initializers that
    are large or kept in external files, which become graph inputs of their type."""
    onnx = onnx_module()
    copy = onnx.ModelProto()
    for desc, value in model.ListFields():
        if desc.name == "graph":
            continue
        target = getattr(copy, desc.name)
        if isinstance(value, (str, bytes, int, float)):
            setattr(copy, desc.name, value)
        elif hasattr(target, "extend"):
            target.extend(value)
        else:
            target.CopyFrom(value)
    g, out = model.graph, copy.graph
    for desc, value in g.ListFields():
        if desc.name == "initializer":
            continue
        if isinstance(value, (str, bytes)):
            setattr(out, desc.name, value)
        else:
            getattr(out, desc.name).extend(value)
    declared = {v.name for v in g.input}
    for t in g.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL and \
                math.prod(t.dims) <= _CHECKED_INLINE:
            out.initializer.add().CopyFrom(t)
        elif t.name not in declared:
            declared.add(t.name)
            out.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type,
                                                                list(t.dims)))
    return copy


def _used_names(g: Any) -> set[str]:
    """The values the nodes read (those of its subgraphs too: a loop body reads the
    values around it) and the graph returns: the initializers worth keeping."""
    onnx = onnx_module()
    used = {n for node in g.node for n in node.input} | {v.name for v in g.output}
    for node in g.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                used |= _used_names(attr.g)
    return used


def _default_opset(model: Any, path: str) -> int:
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not versions:
        raise OnnxError(f"{path}: the model imports no version of the default ONNX opset")
    if versions[0] < MIN_IMPORT_OPSET:
        raise OnnxError(f"{path} uses ONNX opset {versions[0]}; the importer reads opset "
                        f"{MIN_IMPORT_OPSET} and later (convert it with "
                        f"onnx.version_converter.convert_version)")
    return int(versions[0])


def _reject_unsupported(path: str, g: Any, rules: Mapping[str, Any]) -> None:
    counts: Counter = Counter()
    _count_unsupported(g, rules, counts)
    if counts:
        listed = ", ".join(f"{t!r} x{n}" for t, n in sorted(counts.items()))
        raise OnnxError(f"{path} uses ONNX node types that fluid_interactive cannot import: "
                        f"{listed}. Supported: {', '.join(sorted(rules))}")


def _count_unsupported(g: Any, rules: Mapping[str, Any], counts: Counter) -> None:
    """The node types of ``g`` and of its subgraphs that have no import rule."""
    onnx = onnx_module()
    for node in g.node:
        key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"
        if node.domain not in ("", "ai.onnx") or node.op_type not in rules:
            counts[key] += 1
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                _count_unsupported(attr.g, rules, counts)


def _initializers(path: str, g: Any, used: set[str], external: ExternalData
                  ) -> dict[str, np.ndarray]:
    """The initializers some node reads (or the graph returns), as arrays; the others are
    never converted."""
    if len(g.sparse_initializer):
        raise OnnxError(f"{path} holds sparse initializers, which the importer does not read")
    out: dict[str, np.ndarray] = {}
    for t in g.initializer:
        if t.name not in used:
            continue
        name = checked_name(t.name, "initializer", path)
        if name in out:
            raise OnnxError(f"{path}: initializer {name!r} is defined twice")
        out[name] = tensor_array(path, t, f"initializer {name!r}", external)
    return out


def tensor_array(path: str, t: Any, what: str, external: ExternalData) -> np.ndarray:
    """The value of the TensorProto ``t`` (an initializer, a Constant's value), checked
    against its dims and type. Raw data is viewed, not copied (read-only)."""
    onnx = onnx_module()
    dtype = np.dtype(dtype_from_onnx(t.data_type, f"{path}: {what}"))
    dims = [int(d) for d in t.dims]
    if any(d < 0 for d in dims) or math.prod(dims) > _ELEMENT_LIMIT:
        raise OnnxError(f"{path}: {what} has dims {dims[:8]}, which no tensor can have")
    nbytes = math.prod(dims) * dtype.itemsize
    if t.data_location == onnx.TensorProto.EXTERNAL:
        raw = external.read({e.key: e.value for e in t.external_data}, nbytes, what)
    elif t.HasField("raw_data"):
        raw = t.raw_data
    else:
        try:
            return np.asarray(onnx.numpy_helper.to_array(t), dtype=dtype).reshape(dims)
        except MALFORMED as e:
            raise OnnxError(f"{path}: {what}: its values do not make a {dtype.name} "
                            f"tensor of dims {dims} ({type(e).__name__}: {e})") from None
    if len(raw) != nbytes:
        raise OnnxError(f"{path}: {what} holds {len(raw)} bytes of data; dims {dims} of "
                        f"{dtype.name} need {nbytes}")
    return np.frombuffer(raw, dtype.newbyteorder("<")).astype(dtype, copy=False) \
        .reshape(dims)


def _attr_value(path: str, attr: Any, label: str, external: ExternalData) -> Any:
    onnx = onnx_module()
    value = onnx.helper.get_attribute_value(attr)
    if attr.type == onnx.AttributeProto.TENSOR:
        return tensor_array(path, value, label, external)
    if attr.type == onnx.AttributeProto.STRING:
        return value.decode("utf-8", "replace")
    if attr.type == onnx.AttributeProto.STRINGS:   # an RNN's activations
        return [v.decode("utf-8", "replace") for v in value]
    if attr.type == onnx.AttributeProto.INTS:
        return [int(v) for v in value]
    if attr.type == onnx.AttributeProto.FLOATS:
        return [_shortest(v) for v in value]
    if attr.type == onnx.AttributeProto.FLOAT:
        return _shortest(value)
    if attr.type == onnx.AttributeProto.GRAPH:   # the body of a Loop, a branch of an If
        return _subgraph(path, value, label, external)
    if attr.type == onnx.AttributeProto.GRAPHS:
        raise OnnxError(f"{path}: {label} holds a list of subgraphs, which the importer does "
                        f"not read")
    return value


def _subgraph(path: str, g: Any, label: str, external: ExternalData) -> OnnxGraph:
    """A subgraph, read and checked as the graph is; its inputs may have any shape (a loop
    body's iteration number and condition are 0-d) and its nodes may read the values of
    the graphs around it."""
    initializers = _initializers(path, g, _used_names(g), external)
    nodes = [_node(path, i, node, external) for i, node in enumerate(g.node)]
    constants = {n.outputs[0]: _constant_value(path, n) for n in nodes if n.op_type == "Constant"}
    inputs = [_any_input(path, v, label) for v in g.input if v.name not in initializers]
    outputs = [checked_name(v.name, f"output of {label}", path) for v in g.output]
    return OnnxGraph(path, 0, inputs, outputs, nodes, initializers, constants)


def _any_input(path: str, v: Any, label: str) -> GraphInput:
    """A subgraph input: a tensor of any shape, or a sequence of tensors (a tensor array
    a Loop carries)."""
    name = checked_name(v.name, f"input of {label}", path)
    sequence = v.type.HasField("sequence_type")
    kind = v.type.sequence_type.elem_type if sequence else v.type
    if not kind.HasField("tensor_type"):
        raise OnnxError(f"{path}: input {name!r} of {label} is neither a tensor nor a "
                        f"sequence of tensors")
    t = kind.tensor_type
    dims = tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else -1
                 for d in t.shape.dim)
    return GraphInput(name, dims, dtype_from_onnx(t.elem_type, f"input {name!r} of {label}"))


def _shortest(value: float) -> float:
    """ONNX keeps float attributes in float32: the shortest decimal with that float32
    value, so an epsilon written as 1e-05 reads back as 1e-05."""
    return float(str(np.float32(value)))


def _node(path: str, index: int, node: Any, external: ExternalData) -> Node:
    label = f"node {index} ({node.op_type}{', ' + repr(node.name[:80]) if node.name else ''})"
    inputs = [checked_name(n, f"input of {label}", path) if n else "" for n in node.input]
    outputs = [checked_name(n, f"output of {label}", path) if n else "" for n in node.output]
    attrs = {}
    for a in node.attribute:
        what = f"attribute {a.name[:80]!r} of {label}"
        try:
            attrs[a.name] = _attr_value(path, a, what, external)
        except OnnxError:
            raise
        except MALFORMED as e:
            raise OnnxError(f"{path}: {what} cannot be read ({type(e).__name__}: "
                            f"{_printable(str(e))[:200]})") from None
    return Node(node.op_type, inputs, outputs, attrs, label)


def _constant_value(path: str, node: Node) -> np.ndarray:
    for key, dtype in (("value", None), ("value_float", "float32"), ("value_floats", "float32"),
                       ("value_int", "int64"), ("value_ints", "int64")):
        if key in node.attrs:
            try:
                return np.asarray(node.attrs[key], dtype=dtype)
            except MALFORMED:
                raise OnnxError(f"{path}: {node.label} has a {key} attribute that is not "
                                f"a {dtype or 'tensor'}") from None
    raise OnnxError(f"{path}: {node.label} has none of the attributes value, value_float(s), "
                    f"value_int(s) that the importer reads")


def _fixed(v: Any, i: int) -> bool:
    """Whether dim ``i`` of graph input ``v`` has a size in the file (not a symbol)."""
    dims = v.type.tensor_type.shape.dim
    return i < len(dims) and dims[i].HasField("dim_value") and dims[i].dim_value > 0


def _graph_input(path: str, v: Any, static: bool) -> GraphInput:
    """``v`` as a data var: its symbolic dims take any size, and so does its first dim in
    a ``static`` file (one whose inputs all fix their first dim: its batch size)."""
    name = checked_name(v.name, "graph input", path)
    t = v.type.tensor_type
    if not v.type.HasField("tensor_type") or not t.HasField("shape"):
        raise OnnxError(f"{path}: graph input {name!r} is not a tensor of known rank")
    dims = [int(d.dim_value) if _fixed(v, i) and not (i == 0 and static) else -1
            for i, d in enumerate(t.shape.dim)]
    if not dims:   # a 0-d input is one value for the whole call (a loop's trip count)
        return GraphInput(name, (), dtype_from_onnx(t.elem_type, f"{path}: graph input {name!r}"))
    first = t.shape.dim[0]
    fixed = int(first.dim_value) if first.HasField("dim_value") and first.dim_value > 0 \
        else None
    return GraphInput(name, tuple(dims),
                      dtype_from_onnx(t.elem_type, f"{path}: graph input {name!r}"), fixed)


def _check_defined(graph: OnnxGraph, around: frozenset[str] = frozenset()) -> None:
    """Every value a node reads is a graph input, an initializer or an earlier output (of
    this graph, or of the graphs around a subgraph), and each is defined once."""
    names = [i.name for i in graph.inputs]
    for name in names:
        if names.count(name) > 1:
            raise OnnxError(f"{graph.path}: graph input {name!r} is defined twice")
    known = set(around) | set(names) | set(graph.initializers)
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
    except (ValueError, RecursionError):   # RecursionError: nested deeper than JSON can be
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
    try:
        return structure if valid(structure) else None
    except RecursionError:
        return None
