"""Export rules of selection by a mask (`ops/mask.py`): ``where`` as ONNX ``Where`` and
``sequence_step_mask`` as the comparison of a range of steps with the lengths.

``sequence_step_mask`` reads its padded batch X [B, T, ...] for T alone: ``Shape`` and
``Gather`` give T when the graph runs, ``Range`` the steps 0..T-1, and ``Less`` compares
them as a column [T, 1] with the lengths as a row [1, B], so neither B nor T is fixed in
the file. What a `DynamicRNN` with lengths adds around its loop is these two ops.
"""
from __future__ import annotations

from .export_registry import OpExport, export_rule


@export_rule("where")
def _where(e: OpExport) -> None:
    """Our where broadcasts Condition and Y to X's shape as NumPy does; so does ONNX's."""
    e.node("Where", [e.input("Condition"), e.input("X"), e.input("Y")], [e.output("Out")])


@export_rule("sequence_step_mask")
def _sequence_step_mask(e: OpExport) -> None:
    """Out [T, B, 1, ...] (``rank`` dims) = t < Lengths[b]."""
    lengths = e.input("Lengths")
    if e.dtype(lengths) != "int64":
        lengths = e.node("Cast", [lengths], to=e.onnx_dtype("int64"))[0]
    shape = e.node("Shape", [e.input("X")])[0]
    steps = e.node("Gather", [shape, e.const(1, "int64", "time_dim")], axis=0)[0]   # 0-d T
    each = e.node("Range", [e.const(0, "int64", "first"), steps,
                            e.const(1, "int64", "stride")])[0]
    column = e.node("Unsqueeze", [each, e.ints([1])])[0]
    row = e.node("Unsqueeze", [lengths, e.ints([0])])[0]
    rank = int(e.attrs["rank"])
    if rank == 2:
        e.node("Less", [column, row], [e.output("Out")])
        return
    mask = e.node("Less", [column, row])[0]
    e.node("Unsqueeze", [mask, e.ints(list(range(2, rank)))], [e.output("Out")])
