"""Export rules of control flow: ``while`` as an ONNX ``Loop``, ``recurrent`` (a StaticRNN
or DynamicRNN) as a ``Loop`` whose scan outputs stack the steps (branches, as ``If``, are
in `export_branch`); and the small ops loops are made of (comparisons, logical
ops, ``increment``, ``elementwise_mod``, ``fill_constant``,
``fill_constant_batch_size_like``).

An ONNX graph assigns each value once, while a loop updates its carried vars in place:
`ssa_view` gives a method's block a new name for each value written again, and the body of
a loop or branch is exported into a subgraph of its own the same way (its carried vars
enter as the subgraph's inputs and leave as its outputs; what it only reads of the graph
around it is read from there by name, as ONNX allows). A tensor array among them is an
ONNX sequence (`export_array`), which Loop and If carry from opset 13 on.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..ir.blocks import sub_block_index
from ..ir.names import fresh_name
from ..ir.records import BlockDesc, OpDesc, ProgramDesc, clone_var
from .export_math import aligned_operand
from .export_registry import EXPORT_RULES, GraphBuilder, OpExport, export_rule
from .proto import onnx_dtype, onnx_module, value_info

# --- one name per value ----------------------------------------------------------------------


def _fresh(name: str, taken: set[str]) -> str:
    """``name.v1``, ``name.v2``, ...: the next value of var ``name`` (no '@', which marks a
    gradient, so that the file imports back)."""
    stem = f"{name}.v"   # never the bare stem: every value has its number
    new = fresh_name(stem, lambda n: n == stem or n in taken, sep="")
    taken.add(new)
    return new


def ssa_view(program: ProgramDesc, block: BlockDesc) -> BlockDesc:
    """``block`` with a new name for each value of a var written again (by a loop that
    carries it, or an in-place update), reads and returns following; the block itself
    when no var is written twice."""
    taken = {n for b in program.blocks for n in b.vars}
    current: dict[str, str] = {}
    written: set[str] = set(block.feeds)
    ops, declared = [], dict(block.vars)
    for op in block.ops:
        ins = {slot: [current.get(n, n) for n in names] for slot, names in op.inputs.items()}
        outs: dict[str, list[str]] = {}
        for slot, names in op.outputs.items():
            outs[slot] = []
            for name in names:
                new = _fresh(name, taken) if name in written else name
                if new != name:
                    declared[new] = _renamed(program, block, name, new)
                written.add(name)
                current[name] = new
                outs[slot].append(new)
        ops.append(dataclasses.replace(op, inputs=ins, outputs=outs))
    if not any(new != name for name, new in current.items()):
        return block
    return dataclasses.replace(block, ops=ops, vars=declared,
                               returns=_rename_returns(block.returns, current))


def _renamed(program: ProgramDesc, block: BlockDesc, name: str, new: str):
    var = program.find_var(block, name)
    assert var is not None, name
    copy = clone_var(var)
    copy.name = new
    copy.persistable = copy.is_parameter = copy.is_data = False
    return copy


def _rename_returns(returns: Any, current: Mapping[str, str]) -> Any:
    if returns is None:
        return None
    if isinstance(returns, str):
        return current.get(returns, returns)
    if isinstance(returns, tuple):
        return tuple(_rename_returns(r, current) for r in returns)
    return {k: _rename_returns(v, current) for k, v in returns.items()}


def original_op(e: OpExport, op: OpDesc | None = None) -> OpDesc:
    """The op of the program that ``op`` (default ``e.op``), an op of ``e.block`` perhaps
    renamed, stands for."""
    target = e.op if op is None else op
    k = next(i for i, o in enumerate(e.block.ops) if o is target)
    return e.program.blocks[e.block.idx].ops[k]


# --- a sub-block as a subgraph ---------------------------------------------------------------

class Subgraph:
    """The body of a loop or branch exported into a graph of its own."""

    def __init__(self, e: OpExport, env: dict[str, str], block: BlockDesc | None = None):
        self.e, self.env = e, dict(env)   # var of the program -> its value name here
        self.origin = {v: k for k, v in env.items()}   # and back, for every name used
        self.graph = GraphBuilder(e.opset, root=e.graph.root)   # names unique model-wide
        self.inputs: list[Any] = []
        if block is None:   # the block the op runs
            idx = sub_block_index(original_op(e))
            assert idx is not None
            block = e.program.blocks[idx]
        self.block = block

    def value_info(self, name: str, like: str, scalar: bool = False) -> Any:
        var = self.e.program.find_var(self.block, like) or self.e.var(like)
        dims: list[Any] = [] if scalar else [None if d < 0 else d for d in var.shape]
        return value_info(name, var, dims)

    def add_input(self, var: str, scalar: bool = False) -> str:
        """A subgraph input holding var ``var`` (a 0-d one with ``scalar``)."""
        name = self.graph.fresh(f"{var}.in")
        self.inputs.append(self.value_info(name, var, scalar))
        self.bind(var, name)
        return name

    def bind(self, var: str, name: str) -> None:
        """Var ``var`` is the value ``name`` from here on."""
        self.env[var] = name
        self.origin[name] = var

    def add_iteration(self) -> str:
        """The Loop body's first input: the iteration number, int64, 0-d."""
        name = self.graph.fresh(f"{self.e.tmp_hint('iteration')}")
        self.inputs.append(onnx_module().helper.make_tensor_value_info(
            name, onnx_dtype("int64"), []))
        return name

    def node(self, op_type: str, inputs: list[str], hint: str, **attrs: Any) -> str:
        """One node of the subgraph; returns its output's name."""
        out = self.graph.fresh(hint)
        self.graph.node(op_type, inputs, [out], name=f"{hint}/{op_type}", **attrs)
        return out

    def ints(self, values: list[int]) -> str:
        return self.graph.constant(np.asarray(values, dtype=np.int64), self.graph.fresh("axes"))

    def run(self) -> None:
        """Export the block's ops, each reading and writing through ``env``."""
        copy = dataclasses.replace(self.block, ops=[], vars=dict(self.block.vars))
        for op in self.block.ops:
            copy.ops.append(self._rename(op, copy))
        for op in copy.ops:
            rule = EXPORT_RULES.get(op.type)
            if rule is None:
                self.e.fail(f"runs an op {op.type!r} in its block, which has no ONNX mapping")
                return
            rule(OpExport(self.e.program, copy, op, self.graph, True, self.e.method))

    def _rename(self, op: OpDesc, copy: BlockDesc) -> OpDesc:
        ins = {slot: [self.env.get(n, n) for n in names] for slot, names in op.inputs.items()}
        outs: dict[str, list[str]] = {}
        for slot, names in op.outputs.items():
            outs[slot] = []
            for name in names:
                new = name if name in self.block.vars and name not in self.env \
                    else self.graph.fresh(name)
                self.graph.reserve(new)
                self.bind(name, new)
                outs[slot].append(new)
        for name in {n for ns in (*ins.values(), *outs.values()) for n in ns}:
            if name not in copy.vars and self.e.program.find_var(copy, name) is None:
                copy.vars[name] = _renamed(self.e.program, self.block, self.origin[name], name)
        return dataclasses.replace(op, inputs=ins, outputs=outs)

    def add_flag(self) -> str:
        """A 0-d bool input (the Loop body's condition, when the loop counts its steps)."""
        name = self.graph.fresh(self.e.tmp_hint("cond.in"))
        self.inputs.append(self.flag_info(name))
        return name

    def flag_info(self, name: str) -> Any:
        return onnx_module().helper.make_tensor_value_info(name, onnx_dtype("bool"), [])

    def make(self, outputs: list[tuple[str, str]], name: str, first: Any = None) -> Any:
        """The subgraph giving ``outputs``: (value name, var whose type it has), after the
        value info ``first`` when given."""
        infos = ([first] if first is not None else []) + [
            self.value_info(value, var) for value, var in outputs]
        return onnx_module().helper.make_graph(self.graph.nodes, name, self.inputs, infos)


def scalar_bool(e: OpExport, cond: str) -> str:
    """A bool [1] condition as the 0-d bool ONNX's Loop and If take."""
    return e.node("Squeeze", [cond, e.ints([0])], [e.tmp("cond")])[0]


def outer_values(e: OpExport, slot: str, op: OpDesc | None = None) -> dict[str, str]:
    """Var of the program -> its value name in the graph around, for the vars of ``slot``
    of ``op`` (default ``e.op``)."""
    target = e.op if op is None else op
    return dict(zip(original_op(e, target).input(slot), target.input(slot)))


# --- while -> Loop ------------------------------------------------------------------------------

@export_rule("while")
def _while(e: OpExport) -> None:
    op = original_op(e)
    cond = op.input("Condition")[0]
    outer = outer_values(e, "X")
    carried = [n for n in op.output("Out") if n != cond]
    missing = [n for n in carried if n not in outer]
    if missing:
        e.fail(f"writes {missing} in its body without a value before the loop; an ONNX Loop "
               f"needs each carried value to start from one")
    body = Subgraph(e, outer)
    body.add_iteration()
    cond_in = body.add_flag()
    body.bind(cond, body.node("Unsqueeze", [cond_in, body.ints([0])], f"{cond}.in1"))
    for name in carried:
        body.add_input(name)
    body.run()
    cond_out = body.node("Squeeze", [body.env[cond], body.ints([0])], f"{cond}.out")
    graph = body.make([(body.env[n], n) for n in carried], f"{e.method}.block{body.block.idx}",
                      first=body.flag_info(cond_out))
    finals = dict(zip(op.output("Out"), e.outputs("Out")))
    e.node("Loop", ["", scalar_bool(e, e.input("Condition")),
                    *[outer[n] for n in carried]], [finals[n] for n in carried], body=graph)
    if _read_later(e, finals[cond]):   # a loop ends when its condition is false
        e.node("Constant", [], [finals[cond]],
               value=onnx_module().numpy_helper.from_array(np.zeros(1, bool), finals[cond]))


def _read_later(e: OpExport, name: str) -> bool:
    from ..ir.records import returned_names
    at = next(i for i, op in enumerate(e.block.ops) if op is e.op)
    return any(name in op.input_names() for op in e.block.ops[at + 1:]) or \
        name in returned_names(e.block.returns)


# --- recurrent (StaticRNN) -> Loop with scan outputs ------------------------------------------

@export_rule("recurrent")
def _recurrent(e: OpExport) -> None:
    """A Loop over the first dim of the inputs: each step Gathers its slices, the memories
    are carried, the step outputs are the Loop's scan outputs (stacked along dim 0)."""
    a = e.attrs
    body = Subgraph(e, outer_values(e, "Parameters"))
    step = body.add_iteration()
    cond_in = body.add_flag()
    for outer_x, inner in zip(e.inputs("Inputs"), a["step_inputs"]):
        body.bind(inner, body.node("Gather", [outer_x, step], inner, axis=0))
    for name in a["ex_states"]:
        body.add_input(name)
    body.run()
    cond_out = body.node("Identity", [cond_in], e.tmp_hint("cond.out"))
    graph = body.make([(body.env[n], n) for n in [*a["states"], *a["step_outputs"]]],
                      f"{e.method}.block{body.block.idx}", first=body.flag_info(cond_out))
    steps = e.node("Gather", [e.node("Shape", [e.inputs("Inputs")[0]])[0], e.ints([0])])[0]
    always = e.const(np.array(True), "bool", "always")
    finals = [e.tmp("memory") for _ in a["states"]]
    e.node("Loop", [steps, always, *e.inputs("InitialStates")], finals + e.outputs("Outputs"),
           body=graph)


# --- what loops are made of -----------------------------------------------------------------------

_COMPARE = {"less_than": "Less", "less_equal": "LessOrEqual", "greater_than": "Greater",
            "greater_equal": "GreaterOrEqual", "equal": "Equal", "not_equal": "Equal"}


@export_rule(*_COMPARE)
def _compare(e: OpExport) -> None:
    x = e.input("X")
    y = aligned_operand(e, x, e.input("Y"), e.attrs["axis"])
    if e.op.type == "not_equal":
        same = e.node("Equal", [x, y])[0]
        e.node("Not", [same], [e.output("Out")])
    else:
        e.node(_COMPARE[e.op.type], [x, y], [e.output("Out")])


_LOGICAL = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}


@export_rule(*_LOGICAL)
def _logical(e: OpExport) -> None:
    x = e.input("X")
    y = aligned_operand(e, x, e.input("Y"), e.attrs["axis"])
    e.node(_LOGICAL[e.op.type], [x, y], [e.output("Out")])


@export_rule("logical_not")
def _logical_not(e: OpExport) -> None:
    e.node("Not", [e.input("X")], [e.output("Out")])


@export_rule("increment")
def _increment(e: OpExport) -> None:
    x = e.input("X")
    step = e.attrs["step"]
    e.node("Add", [x, e.const([int(step) if e.dtype(x).startswith(("int", "uint")) else step],
                               e.dtype(x), "step")], [e.output("Out")])


@export_rule("elementwise_mod")
def _mod(e: OpExport) -> None:
    """x mod y with the sign of y: ONNX's Mod for integers; x - floor(x / y) * y for
    floats (ONNX's float Mod is C's fmod, with the sign of x)."""
    x = e.input("X")
    y = aligned_operand(e, x, e.input("Y"), e.attrs["axis"])
    if not e.dtype(x).startswith("float"):
        e.node("Mod", [x, y], [e.output("Out")], fmod=0)
        return
    whole = e.node("Floor", [e.node("Div", [x, y])[0]])[0]
    e.node("Sub", [x, e.node("Mul", [whole, y])[0]], [e.output("Out")])


@export_rule("fill_constant")
def _fill_constant(e: OpExport) -> None:
    a = e.attrs
    if e.has_input("ValueTensor"):   # zeros plus the value, cast to the dtype, broadcast
        given = e.node("Cast", [e.node("Reshape", [e.input("ValueTensor"), e.ints([])])[0]],
                       to=e.onnx_dtype(a["dtype"]))[0]
        zeros = e.const(np.zeros([int(d) for d in a["shape"]]), a["dtype"], "zeros")
        e.node("Add", [zeros, given], [e.output("Out")])
        return
    value = np.full([int(d) for d in a["shape"]], a["value"], dtype=a["dtype"])
    e.node("Constant", [], [e.output("Out")],
           value=onnx_module().numpy_helper.from_array(value, e.output("Out")))


@export_rule("fill_constant_batch_size_like")
def _fill_batch_size_like(e: OpExport) -> None:
    """ConstantOfShape of ``shape`` whose dim output_dim_idx is Input's input_dim_idx."""
    a = e.attrs
    size = e.node("Gather", [e.node("Shape", [e.input("Input")])[0],
                             e.ints([a["input_dim_idx"]])])[0]
    dims = [int(d) for d in a["shape"]]
    at = a["output_dim_idx"]
    parts = ([e.ints(dims[:at], "before")] if at else []) + [size] + (
        [e.ints(dims[at + 1:], "after")] if at + 1 < len(dims) else [])
    shape = parts[0] if len(parts) == 1 else e.node("Concat", parts, axis=0)[0]
    fill = onnx_module().numpy_helper.from_array(np.full([1], a["value"], a["dtype"]), "value")
    e.node("ConstantOfShape", [shape], [e.output("Out")], value=fill)
