"""How things look: one colour per op role, one look per kind of variable.

Ops are ellipses filled by *kind*, asked of the IR: an op that reads or writes a var of
reader kind is a reader op (whatever its type: a program from elsewhere may hold reader ops
no spec here knows), any other op's kind comes from its role bits; the loss bit draws a red
double border on top of the fill. Variables are records ``name | type | tag`` (HTML-like
tables, see `dot`) whose fill and border say whether they are parameters, other persistable
state, fed data, gradients (written by a Backward-role op, or named as the gradient of an
``op_role_var`` pair) or temporaries.

The palette is pastel fills with a darker border of the same hue, chosen so the hues stay
apart for the common forms of colour blindness (blue / orange / green / magenta / purple /
yellow / brown).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..ir.records import OpDesc, OpRole, ProgramDesc, VarDesc

#: How a drawing finds the declaration of a var an op names (None: not declared).
VarLookup = Callable[[str], "VarDesc | None"]

FONT = "Helvetica"
EDGE_COLOR = "#555555"
CLUSTER_COLOR = "#9a9a9a"
GLOBAL_CLUSTER_FILL = "#f7f7f7"
CROSS_EDGE_COLOR = "#7b3fa0"


@dataclass(frozen=True)
class OpStyle:
    kind: str
    legend: str      # the legend's wording
    fill: str
    border: str


# Legend order is this order.
OP_STYLES: dict[str, OpStyle] = {s.kind: s for s in (
    OpStyle("forward", "forward", "#cfe3f7", "#2b6ca3"),
    OpStyle("backward", "backward", "#fbd9b8", "#c0661c"),
    OpStyle("optimize", "optimize", "#cdeccd", "#2e7d32"),
    OpStyle("lrsched", "LR schedule", "#f6d6ea", "#a8447f"),
    OpStyle("rpc", "RPC (send/recv)", "#e2d7f3", "#6a4c9c"),
    OpStyle("dist", "distributed", "#fff1a8", "#9a7d0a"),
    OpStyle("reader", "reader", "#ead7c3", "#7b5534"),
    OpStyle("unspecified", "role not set", "#ffffff", "#9a9a9a"),
)}

LOSS_BORDER = "#d62728"       # red double border on ops with the Loss bit
SUMMARY_SHAPE = "box3d"       # collapsed backward / optimize ops
BODY_SHAPE = "folder"         # an op running a block (a loop, a branch): opens into it


def is_reader_op(op: OpDesc, var_of: VarLookup) -> bool:
    """Whether ``op`` makes, wraps or reads a reader: one of its inputs or outputs is a var
    of reader kind (``create_batch_reader``, ``read``, Paddle's ``create_*_reader``)."""
    return any((var := var_of(n)) is not None and var.kind == "reader"
               for n in op.input_names() + op.output_names())


def op_kind(op: OpDesc, var_of: VarLookup) -> str:
    """The palette key of an op (``var_of`` finds the vars it names). A reader op is
    "reader" whatever its role; otherwise combined roles take the most specific bit: RPC
    and Dist before LR schedule, LR schedule before optimize, optimize before backward."""
    if is_reader_op(op, var_of):
        return "reader"
    role = op.role
    if role & OpRole.NOT_SPECIFIED:
        return "unspecified"
    for bit, kind in ((OpRole.RPC, "rpc"), (OpRole.DIST, "dist"), (OpRole.LRSCHED, "lrsched"),
                      (OpRole.OPTIMIZE, "optimize"), (OpRole.BACKWARD, "backward")):
        if role & bit:
            return kind
    return "forward"


def is_loss(op: OpDesc) -> bool:
    return bool(op.role & OpRole.LOSS)


@dataclass(frozen=True)
class VarStyle:
    kind: str
    legend: str
    tag: str         # third cell of the record; "" for none
    fill: str
    border: str
    width: int = 1   # cell border width: 2 marks persistable vars
    fontcolor: str = "#000000"
    bold: bool = False   # the name in bold


VAR_STYLES: dict[str, VarStyle] = {s.kind: s for s in (
    VarStyle("param", "parameter", "param", "#fde9a9", "#8a6d00", 2, bold=True),
    VarStyle("state", "other persistable state", "state", "#e6e6e6", "#4d4d4d", 2, bold=True),
    VarStyle("data", "fed data", "data", "#ffffff", "#2b6ca3"),
    VarStyle("var", "temporary", "", "#ffffff", "#8c8c8c"),
    VarStyle("grad", "gradient", "", "#ffffff", "#b0b0b0", 1, "#6e6e6e"),
    VarStyle("undeclared", "not declared", "", "#f3f3f3", "#b0b0b0", 1, "#6e6e6e"),
)}


#: Roles of the ops that move a gradient on to its parameter's update.
_UPDATE_ROLES = OpRole.OPTIMIZE | OpRole.RPC | OpRole.DIST


def gradient_names(program: ProgramDesc) -> set[str]:
    """The vars of ``program`` that hold gradients or pieces of them: every output of an op
    with the Backward role, the gradient of every ``op_role_var`` (param, grad, ...) pair,
    and the temporaries that optimize, RPC or distributed ops of such a pair make from a
    gradient or into one (the blocks a trainer splits a gradient into, the pieces a
    parameter server sums), but not the parameter's blocks they receive."""
    found: set[str] = set()
    moves: list[tuple[list[str], list[str]]] = []   # (temporaries read, written)
    for block in program.blocks:
        for op in block.ops:
            found.update(op.role_var[1::2])
            if op.role & OpRole.BACKWARD:
                found.update(op.output_names())
            elif op.role_var and op.role & _UPDATE_ROLES:
                def temps(names: list[str], block=block) -> list[str]:
                    return [n for n in names if not _is_state(program.find_var(block, n))]
                moves.append((temps(op.input_names()), temps(op.output_names())))
    grown = True
    while grown:     # follow the gradient through the moves, both ways, until nothing new
        grown = False
        for ins, outs in moves:
            if found.intersection(ins) and not found.issuperset(outs):
                found.update(outs)
                grown = True
            if found.intersection(outs) and not found.issuperset(ins):
                found.update(ins)
                grown = True
    return found


def _is_state(var: VarDesc | None) -> bool:
    return var is not None and (var.persistable or var.kind != "tensor")


def var_kind(var: VarDesc | None, gradient: bool = False) -> str:
    """The palette key of a var; ``gradient``: it is in `gradient_names`."""
    if var is None:
        return "undeclared"
    if var.is_parameter:
        return "param"
    if var.persistable:
        return "state"
    if var.is_data:
        return "data"
    if gradient:
        return "grad"
    return "var"


@dataclass(frozen=True)
class DiffStyle:
    """How a difference marks what changed (`diff_dot`)."""
    kind: str
    legend: str
    fill: str
    border: str
    line: str = "solid"
    width: float = 1.0


# Legend order is this order. Orange, green and red are told apart by line style and
# width too (changed: thick; removed and dropped: dashed).
DIFF_STYLES: dict[str, DiffStyle] = {s.kind: s for s in (
    DiffStyle("changed", "changed", "#ffe0b2", "#e65100", "solid", 2.4),
    DiffStyle("added", "added", "#c8ecc9", "#2e7d32", "solid", 1.6),
    DiffStyle("removed", "removed", "#f9d2d2", "#c62828", "dashed", 1.6),
    DiffStyle("reinitialised", "state that starts again", "#ffe0b2", "#e65100", "solid", 2.0),
    DiffStyle("dropped", "dropped state", "#f9d2d2", "#c62828", "dashed", 1.6),
    DiffStyle("same", "unchanged", "#ffffff", "#9a9a9a", "solid", 1.0),
)}
