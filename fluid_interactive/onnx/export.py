"""`export_onnx`: one method of a compiled program as an ONNX model.

Every op of the method's block goes through its rule in `EXPORT_RULES`; the parameters
and other state the method reads become initializers holding their current values; the
method's data vars become the graph's inputs (the batch dim stays symbolic) and what it
returns its outputs. The model is checked with ``onnx.checker`` (full check) before a byte
is written, and written atomically.
"""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from ..errors import OnnxError
from ..ir.records import BlockDesc, OpRole, ProgramDesc, returned_names
from ..runtime.live.compiled import CompiledProgram
from . import (  # noqa: F401  (the rules)
    export_array,
    export_beam,
    export_branch,
    export_build,
    export_creation,
    export_detect,
    export_image,
    export_index,
    export_loss,
    export_mask,
    export_math,
    export_math2,
    export_nn,
    export_products,
    export_query,
    export_rnn,
    export_rnn_unit,
    export_seq,
    export_seq_mask,
    export_shape,
    export_vision,
)
from .export_control import ssa_view
from .export_registry import EXPORT_RULES, GraphBuilder, OpExport, export_error
from .proto import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET, onnx_module, value_info

#: The model metadata key holding the method's return structure (a JSON of output names).
RETURNS_KEY = "fluid_interactive.returns"


def export_onnx(compiled: CompiledProgram, path: str | None, method: str = "infer",
                opset: int = DEFAULT_OPSET) -> Any:
    """Write ``compiled.<method>`` to ``path`` as an ONNX model; returns the ModelProto.

    The method's data vars are the graph's inputs (the batch dim is symbolic, so any batch
    size runs), what it returns are the outputs, and the current values of the parameters
    and state it reads are initializers. ``opset`` may be 13 to 21 (default 17). An op with
    no ONNX mapping, or one running in training mode, is an `OnnxError` naming the op and
    the line that recorded it; nothing is written then. ``path=None`` only builds the model.
    """
    if not isinstance(compiled, CompiledProgram):
        raise TypeError(f"export_onnx takes a compiled program (the result of "
                        f"Program().Compile()), got {type(compiled).__name__}")
    if method not in compiled.methods:
        raise OnnxError(f"cannot export {method!r}: the program's methods are "
                        f"{', '.join(compiled.methods) or 'none'}")
    if isinstance(opset, bool) or not isinstance(opset, int) or not \
            MIN_OPSET <= opset <= MAX_OPSET:
        raise OnnxError(f"opset must be an int in [{MIN_OPSET}, {MAX_OPSET}], got {opset!r}")
    onnx = onnx_module()
    model = build_model(compiled, compiled.methods[method].block, opset)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:
        raise OnnxError(f"the ONNX model built for {method}() fails onnx.checker, so it was "
                        f"not written; please report this with the program's text:\n{e}") \
            from None
    if path is not None:
        _write_atomically(os.fspath(path), model.SerializeToString())
    return model


def build_model(compiled: CompiledProgram, block: BlockDesc, opset: int) -> Any:
    onnx = onnx_module()
    helper = onnx.helper
    program = compiled.program
    _check_exportable(program, block)
    block = ssa_view(program, block)   # a var a loop updates: one ONNX name per value
    graph = GraphBuilder(opset)
    inputs = [_value_info(program, block, name) for name in block.feeds]
    for name in block.feeds:
        graph.reserve(name)
    _add_state(compiled, block, graph)
    for name in (n for op in block.ops for n in op.output_names()):
        graph.reserve(name)
    is_test = block.is_test if block.is_test is not None else True
    for op in block.ops:
        EXPORT_RULES[op.type](OpExport(program, block, op, graph, is_test, block.name))
    _check_produced(program, block, graph)
    outputs, returns = _outputs(program, block, graph)
    graph.nodes = _read_nodes(graph.nodes, {v.name for v in outputs})
    read = _node_reads(graph.nodes)   # state a rule wrote in ONNX's layout is not kept twice
    graph.initializers = [t for t in graph.initializers if t.name in read]
    model_graph = helper.make_graph(graph.nodes, f"{program.name or 'program'}.{block.name}",
                                    inputs, outputs, initializer=graph.initializers)
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(model_graph, opset_imports=opsets,
                              producer_name="fluid_interactive",
                              ir_version=helper.find_min_ir_version_for(opsets))
    from .. import __version__
    model.producer_version = __version__
    helper.set_model_props(model, {RETURNS_KEY: json.dumps(returns)})
    return model


def _check_exportable(program: ProgramDesc, block: BlockDesc) -> None:
    """Only forward ops, each with a rule; the first offender is the error."""
    for op in block.ops:
        if op.role & ~OpRole.LOSS:
            raise export_error(program, block, op, block.name,
                               f"is a {OpRole.name(op.role)} op: {block.name}() trains. "
                               f"Export a method that only computes (such as infer)")
    missing = [op for op in block.ops if op.type not in EXPORT_RULES]
    if missing:
        others = sorted({op.type for op in missing[1:]} - {missing[0].type})
        more = f" (nor do: {', '.join(others)})" if others else ""
        raise export_error(program, block, missing[0], block.name,
                           f"has no ONNX mapping{more}. Ops with one: "
                           f"{', '.join(sorted(EXPORT_RULES))}")


def _value_info(program: ProgramDesc, block: BlockDesc, name: str) -> Any:
    """A graph input's or output's type: its first dim, when unknown, is the symbolic
    ``batch``; a later unknown dim (a sequence's time steps) is left unnamed, since
    nothing says it equals another."""
    var = program.find_var(block, name)
    assert var is not None, name
    dims = [d if d >= 0 else "batch" if k == 0 else None for k, d in enumerate(var.shape)]
    return value_info(name, var, dims)


def _add_state(compiled: CompiledProgram, block: BlockDesc, graph: GraphBuilder) -> None:
    """Persistable vars the block reads become initializers with their current values."""
    state = compiled.program.global_block().vars
    seen: set[str] = set()
    for op in block.ops:
        for name in op.input_names():
            var = state.get(name)
            if var is not None and var.persistable and name not in seen and \
                    name not in block.vars:
                if var.kind != "tensor":
                    continue   # a reader: its read op has no rule and fails first
                seen.add(name)
                graph.initializer(name, compiled.get_var(name))


def _check_produced(program: ProgramDesc, block: BlockDesc, graph: GraphBuilder) -> None:
    """Every op output that a node reads (in any subgraph too) or the method returns is
    some node's output, an input or state; the first op to leave one out is the error.
    (A rule may write an op's value inside a later node, as `cond`'s If does for its
    blocks, so this looks at what the nodes read, not at what the ops read.)"""
    defined = set(block.feeds) | {t.name for t in graph.initializers} | \
        {o for node in graph.nodes for o in node.output}
    read = _node_reads(graph.nodes) | set(returned_names(block.returns))
    for op in block.ops:
        for name in op.output_names():
            var = program.find_var(block, name)
            assert var is not None, name   # the verifier checked every output is declared
            if name in read and name not in defined and not var.persistable:
                raise export_error(program, block, op, block.name,
                                   f"has no ONNX counterpart for its output {name!r}, which "
                                   f"the method reads later or returns")


def _read_nodes(nodes: list, outputs: set[str]) -> list:
    """The nodes whose outputs the graph returns or a kept node reads: a rule's node that
    another rule made redundant (the ``Not`` and ``Cast`` of a `cond` whose If takes its
    predicate as it is) is left out."""
    read = set(outputs)
    kept = []
    for node in reversed(nodes):   # the nodes are in graph order: readers come later
        if any(o in read for o in node.output):
            kept.append(node)
            read |= _node_reads([node])
    return kept[::-1]


def _node_reads(nodes: list) -> set[str]:
    """The names ``nodes`` read, their subgraphs' reads of the graphs around included."""
    onnx = onnx_module()
    read: set[str] = set()
    for node in nodes:
        read.update(filter(None, node.input))
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                inner = {o for n in attr.g.node for o in n.output} | \
                    {v.name for v in attr.g.input} | {t.name for t in attr.g.initializer}
                read.update(_node_reads(list(attr.g.node)) - inner)
    return read


def _outputs(program: ProgramDesc, block: BlockDesc, graph: GraphBuilder) -> tuple[list, Any]:
    """The graph outputs, and the return structure over their names. A returned name
    that no node produces (a data var, a parameter) or that is returned twice gets an
    Identity node, since ONNX outputs are distinct node outputs."""
    produced = {o for node in graph.nodes for o in node.output}
    taken: set[str] = set()
    infos = []

    def output(name: str) -> str:
        out = name
        if name not in produced or name in taken:
            out = graph.fresh(f"{name}.out")
            graph.node("Identity", [name], [out], name=f"{out}/Identity")
        taken.add(out)
        info = _value_info(program, block, name)
        info.name = out
        infos.append(info)
        return out

    def walk(r: Any) -> Any:
        if r is None:
            return None
        if isinstance(r, str):
            return output(r)
        if isinstance(r, dict):
            return {k: walk(v) for k, v in r.items()}
        return [walk(v) for v in r]
    structure = walk(block.returns)
    if not infos:
        raise OnnxError(f"{block.name}() returns nothing, so its ONNX graph would have no "
                        f"outputs; return the values to export")
    return infos, structure


def _write_atomically(path: str, data: bytes) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".onnx-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


__all__ = ["export_onnx", "RETURNS_KEY"]
