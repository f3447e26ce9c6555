"""How things look: one colour per op role, one look per kind of variable.

Ops are ellipses filled by *kind* (derived from the op's role bits, or from its type for the
reader ops); the loss bit draws a red double border on top of the fill. Variables are
records ``name | type | tag`` (HTML-like tables, see `dot`) whose fill and border say
whether they are parameters, other persistable state, fed data, gradients or temporaries.

The palette is pastel fills with a darker border of the same hue, chosen so the hues stay
apart for the common forms of colour blindness (blue / orange / green / magenta / purple /
yellow / brown).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.records import OpDesc, OpRole, VarDesc

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


def is_reader_op(op_type: str) -> bool:
    """`read` and the `create_*reader*` family draw as reader ops, whatever their role."""
    return op_type == "read" or (op_type.startswith("create_") and "reader" in op_type)


def op_kind(op: OpDesc) -> str:
    """The palette key of an op. Combined roles take the most specific bit: RPC and Dist
    before LR schedule, LR schedule before optimize, optimize before backward."""
    if is_reader_op(op.type):
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


def var_kind(name: str, var: VarDesc | None) -> str:
    if var is None:
        return "undeclared"
    if var.is_parameter:
        return "param"
    if var.persistable:
        return "state"
    if var.is_data:
        return "data"
    if "@GRAD" in name:
        return "grad"
    return "var"
