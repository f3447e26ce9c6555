"""Import rules of ONNX control flow, as ``torch.onnx.export`` writes a scripted loop or
branch: ``Loop`` becomes a `fluid.layers.While` (a trip count and a condition combined into
the loop's condition; carried values updated in place; scan outputs written to tensor
arrays and stacked after the loop) and ``If`` becomes `fluid.layers.cond`.

A subgraph is replayed inside the loop's or branch's block with the values of the graph
around it in view; those values are made vars before the block starts, so that what the
body only reads is computed once, outside it.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..frontend import layers as L
from ..frontend.variable import Variable
from ..ops.tensor_array import ARRAY
from .import_graph import OnnxGraph
from .import_registry import NodeImport, Pending, Replay, import_rule


def _reads_around(graph: OnnxGraph) -> list[str]:
    """The names ``graph`` (and its subgraphs) reads of the graphs around it."""
    known = {i.name for i in graph.inputs} | set(graph.initializers) | set(graph.constants)
    reads: dict[str, None] = {}
    for node in graph.nodes:
        for sub in (v for v in node.attrs.values() if isinstance(v, OnnxGraph)):
            reads.update((n, None) for n in _reads_around(sub) if n not in known)
        reads.update((n, None) for n in node.inputs if n and n not in known)
        known.update(n for n in node.outputs if n)
    return list(reads)


def _inner_replay(n: NodeImport, graph: OnnxGraph) -> Replay:
    """A replay of ``graph`` seeing the values of the replay around it, every one of them
    a var already (made now, in the block around)."""
    parent = n.replay
    for name in _reads_around(graph):
        parent.var(name, f"a value {n.node.label} reads")
    inner = Replay(graph, parent.trace)
    inner.values.update(parent.values)
    return inner


def _flag(value: str, trace) -> Variable:
    """A 0-d or [1] bool value as a bool var of shape [1] (a condition)."""
    return L.reshape(Variable(trace, value), [1])


@import_rule("Loop")
def _loop(n: NodeImport) -> None:
    body: OnnxGraph = n.attr("body")
    trace = n.replay.trace
    n_carried = len(n.node.inputs) - 2
    carried = [_copy(trace, Variable(trace, n.var(2 + k))) for k in range(n_carried)]
    i = L.fill_constant([1], "int64", 0)
    trip = L.cast(L.reshape(Variable(trace, n.var(0)), [1]), "int64") if n.has_input(0) else None
    going = _keep_going(_flag(n.var(1), trace) if n.has_input(1) else None, i, trip)
    inner = _inner_replay(n, body)
    parent_block = trace.block
    arrays: list[Variable] = []
    loop = L.While(going)
    with loop.block():
        inputs = [L.reshape(i, []).name, L.reshape(going, []).name, *[v.name for v in carried]]
        outs = [Variable(trace, v) for v in inner.run(inputs, body.outputs)]
        for new, var in zip(outs[1:1 + n_carried], carried):
            _copy(trace, new, var)
        for value in outs[1 + n_carried:]:   # scan outputs: one element per iteration
            dtype = value.dtype   # read here: the value is not visible around the loop
            with trace.in_block(parent_block):
                arrays.append(L.create_array(dtype))
            L.array_write(value, i, array=arrays[-1])
        L.increment(i, in_place=True)
        L.assign(_keep_going(_flag(outs[0].name, trace), i, trip), output=going)
    for k, var in enumerate(carried):
        n.bind(var.name, k)
    for k, arr in enumerate(arrays):
        n.bind(L.tensor_array_to_tensor(arr, axis=0, use_stack=True)[0].name, n_carried + k)


def _copy(trace, value: Variable, into: Variable | None = None) -> Variable:
    """``value`` copied into a new var, or into ``into`` (a carried value updated). A
    tensor array is copied by the op itself: the layer compares element shapes, which
    an array made empty before the loop does not have yet."""
    if value.desc.kind != ARRAY:
        return L.assign(value, output=into)
    if into is not None and not into.desc.shape:   # as array_write does: the element
        into.desc.shape = value.desc.shape         # type learnt from the first write
    out = into.name if into is not None else trace.unique_in_block(f"{value.name}.carried")
    trace.append_op("assign", {"X": [value.name]}, {"Out": [out]}, {})
    return Variable(trace, out)


def _keep_going(cond: Variable | None, i: Variable, trip: Variable | None) -> Variable:
    """The loop's condition: its own (if any) and fewer iterations than the trip count."""
    counting = L.less_than(i, trip) if trip is not None else None
    if cond is None:
        return counting if counting is not None else L.fill_constant([1], "bool", True)
    return cond if counting is None else L.logical_and(cond, counting)


#: Recognisers of an If that is one op's export (an array write): each appends that op
#: and returns True, or returns False and appends nothing (`import_array` adds them).
IF_FORMS: list[Callable[[NodeImport], bool]] = []


@import_rule("If")
def _if(n: NodeImport) -> None:
    """An If whose else branch passes values of the graph around on unchanged (what a
    ``Switch`` case or an array write in a branch exports as) becomes a conditional block
    updating copies of them: a ``Switch`` case; any other If is a `fluid.layers.cond`."""
    if any(form(n) for form in IF_FORMS):
        return
    trace = n.replay.trace
    pred = _flag(n.var(0), trace)
    kept = _passed_on(n.attr("else_branch"))
    if kept is not None:
        _case(n, pred, [Variable(trace, n.replay.var(v, f"a value {n.node.label} keeps"))
                        for v in kept])
        return

    def branch(graph: OnnxGraph) -> Callable[[], list[Variable]]:
        inner = _inner_replay(n, graph)
        return lambda: [Variable(trace, v) for v in inner.run([], graph.outputs)]
    outs = L.cond(pred, branch(n.attr("then_branch")), branch(n.attr("else_branch")))
    for k, var in enumerate(outs):
        n.bind(var.name, k)


def _passed_on(graph: OnnxGraph) -> list[str] | None:
    """The values of the graph around that ``graph`` gives unchanged (through Identity
    nodes), output by output; None when it computes anything."""
    sources = {node.outputs[0]: node.inputs[0] for node in graph.nodes
               if node.op_type == "Identity" and len(node.inputs) == 1}
    if len(sources) != len(graph.nodes) or graph.inputs:
        return None
    kept = [sources.get(name, name) for name in graph.outputs]
    inner = set(sources) | set(graph.initializers) | set(graph.constants)
    return None if inner & set(kept) else kept


def _case(n: NodeImport, pred: Variable, kept: list[Variable]) -> None:
    """Copies of ``kept``, which the then branch overwrites when ``pred`` holds."""
    trace = n.replay.trace
    copies = [_copy(trace, v) for v in kept]
    graph: OnnxGraph = n.attr("then_branch")
    inner = _inner_replay(n, graph)
    with L.Switch() as switch:
        with switch.case(pred):
            for value, var in zip(inner.run([], graph.outputs), copies):
                _copy(trace, Variable(trace, value), var)
    for k, var in enumerate(copies):
        n.bind(var.name, k)


# --- what scripted loops and branches are made of ------------------------------------------

_COMPARE = {"Less": "less_than", "LessOrEqual": "less_equal", "Greater": "greater_than",
            "GreaterOrEqual": "greater_equal", "Equal": "equal"}


@import_rule(*_COMPARE)
def _compare(n: NodeImport) -> None:
    n.op(_COMPARE[n.node.op_type], {"X": n.var(0), "Y": n.var(1)}, {"axis": -1})


_LOGICAL = {"And": "logical_and", "Or": "logical_or", "Xor": "logical_xor"}


@import_rule(*_LOGICAL)
def _logical(n: NodeImport) -> None:
    n.op(_LOGICAL[n.node.op_type], {"X": n.var(0), "Y": n.var(1)}, {"axis": -1})


@import_rule("Not")
def _not(n: NodeImport) -> None:
    n.op("logical_not", {"X": n.var(0)}, {})


@import_rule("Shape")
def _shape(n: NodeImport) -> None:
    """A shape op (its int32 result cast to ONNX's int64) when a consumer reads the shape
    as a value; ConstantOfShape folds it away (a tensor shaped like another, as
    ``torch.zeros_like`` writes it)."""
    n.bind(Pending("shape", n.var(0), slot="Input", cast="int64"))


@import_rule("ConstantOfShape")
def _constant_of_shape(n: NodeImport) -> None:
    value = n.attr("value")
    fill = np.asarray(value).reshape(-1)[0] if value is not None else np.float32(0)
    dtype = np.asarray(fill).dtype.name
    like = n.pending(0, "shape")
    if like is not None:
        shape = list(n.shape(like.base))
        if any(d < 0 for d in shape[1:]):
            n.fail("fills the shape of a value with unknown dims beyond the first; only the "
                   "batch dim may be unknown")
        if shape and shape[0] < 0:
            n.op("fill_constant_batch_size_like", {"Input": like.base},
                 {"shape": [-1, *shape[1:]], "dtype": dtype, "value": fill.item()})
            return
    else:
        static = n.static(0)
        if static is None:
            _fill_computed_shape(n, fill, dtype)
            return
        shape = [int(d) for d in np.asarray(static).reshape(-1)]
    n.op("fill_constant", {}, {"shape": shape, "dtype": dtype, "value": fill.item()})


def _fill_computed_shape(n: NodeImport, fill: np.ndarray, dtype: str) -> None:
    """A shape computed in the graph (a Shape's dims gathered and concatenated, as
    fill_constant_batch_size_like exports): one value of each dim, expanded that many
    times along it."""
    dims = n.var(0)
    (rank,) = n.shape(dims) or (-1,)
    if rank < 0:
        n.fail("takes a shape whose length is not fixed in the file")
    one = n.op("fill_constant", {}, {"shape": [1] * rank, "dtype": dtype,
                                     "value": fill.item()}, name=f"{n.node.outputs[0]}.one")
    n.op("expand", {"X": one, "ExpandTimes": dims}, {"expand_times": [-1] * rank})
