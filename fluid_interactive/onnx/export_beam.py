"""Export rule of ``gather_tree`` (the last step of a beam search): an ONNX ``Loop`` back
through the T steps.

Iteration i reads step t = T - 1 - i of Ids and Parents [T, B, beam] and the beam each
row's path is on ([B, beam], carried): the step's id on that beam is the output
(``GatherElements`` along the beams), and the step's parent on that beam the beam of the
step before. The carried beams start as 0 .. beam - 1 (each path on its own beam, so the
last step is read as it is). The scan output stacks the steps from the last to the first,
and a ``Slice`` of step -1 puts them in time order. T, B and beam are read when the graph
runs.
"""
from __future__ import annotations

import numpy as np

from .export_control import Subgraph
from .export_registry import OpExport, export_rule
from .proto import onnx_dtype, onnx_module


@export_rule("gather_tree")
def _gather_tree(e: OpExport) -> None:
    ids, parents = e.input("Ids"), e.input("Parents")
    helper = onnx_module().helper
    shape = e.node("Shape", [parents])[0]
    steps = e.node("Gather", [shape, e.const(0, "int64", "time_dim")], axis=0)[0]
    beams = e.node("Gather", [shape, e.const(2, "int64", "beam_dim")], axis=0)[0]
    index = e.dtype(parents)
    first = e.node("Gather", [parents, e.const(0, "int64", "first")], axis=0)[0]
    zeros = e.node("Mul", [first, e.const(0, index, "zero")])[0]
    own = e.node("Range", [e.const(0, index, "start"), e.node("Cast", [beams],
                                                              to=onnx_dtype(index))[0],
                           e.const(1, index, "step")])[0]
    start = e.node("Add", [zeros, own])[0]                           # [B, beam]: 0 .. beam-1

    body = Subgraph(e, {}, e.block)
    i = body.add_iteration()
    flag = body.add_flag()
    on = body.graph.fresh(e.tmp_hint("beam.in"))
    body.inputs.append(helper.make_tensor_value_info(on, onnx_dtype(index), [None, None]))
    back = body.node("Sub", [body.node("Sub", [steps, i], e.tmp_hint("rest")),
                             body.graph.constant(np.array(1, np.int64), e.tmp_hint("one"))],
                     e.tmp_hint("t"))
    at = [body.node("Gather", [v, back], e.tmp_hint(what), axis=0)
          for v, what in ((ids, "ids_t"), (parents, "parents_t"))]
    picked = body.node("GatherElements", [at[0], on], e.tmp_hint("picked"), axis=1)
    before = body.node("GatherElements", [at[1], on], e.tmp_hint("before"), axis=1)
    keep = body.node("Identity", [flag], e.tmp_hint("cond.out"))
    graph = helper.make_graph(body.graph.nodes, f"{e.method}.gather_tree", body.inputs, [
        body.flag_info(keep),
        helper.make_tensor_value_info(before, onnx_dtype(index), [None, None]),
        helper.make_tensor_value_info(picked, onnx_dtype(e.dtype(ids)), [None, None])])
    backwards = e.tmp("backwards")
    e.node("Loop", [steps, "", start], [e.tmp("beams"), backwards], body=graph)
    e.node("Slice", [backwards, e.ints([-1], "starts"), e.ints([-(2 ** 63)], "ends"),
                     e.ints([0], "axes"), e.ints([-1], "steps")], [e.output("Out")])

