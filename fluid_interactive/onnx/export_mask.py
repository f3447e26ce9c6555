"""Export rules of selection by a mask (`ops/mask.py`): ``where`` as ONNX ``Where``,
``sequence_step_mask`` as the comparison of a range of steps with the lengths, and the
row routing of IfElse: ``split_lod_tensor`` (the rows where the mask holds, and the
others: ``NonZero``, ``Gather``) and ``merge_lod_tensor`` (each row from the side its mask
names, read at that side's running count: ``CumSum``, ``Gather``, ``Where``).

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


def _flat_mask(e: OpExport) -> str:
    return e.node("Reshape", [e.input("Mask"), e.ints([-1], "flat")])[0]


def _rows_where(e: OpExport, x: str, mask: str, out: str) -> None:
    """The rows of x where the bool [N] mask holds, in order (``NonZero``, ``Gather``)."""
    at = e.node("Reshape", [e.node("NonZero", [mask])[0], e.ints([-1], "flat")])[0]
    e.node("Gather", [x, at], [out], axis=0)


@export_rule("split_lod_tensor")
def _split_lod_tensor(e: OpExport) -> None:
    mask, x = _flat_mask(e), e.input("X")
    _rows_where(e, x, mask, e.output("OutTrue"))
    _rows_where(e, x, e.node("Not", [mask])[0], e.output("OutFalse"))


def _side(e: OpExport, rows: str, mask: str) -> str:
    """Row i of the merge from ``rows`` (a side of the split): the side's row number of
    i (the mask's running count, less one), read from the side with a zero row appended
    (so an empty side is read safely; the Where never keeps that row)."""
    count = e.node("CumSum", [e.node("Cast", [mask], to=e.onnx_dtype("int64"))[0],
                              e.const(0, "int64", "axis")])[0]
    at = e.node("Max", [e.node("Sub", [count, e.const(1, "int64", "one")])[0],
                        e.const(0, "int64", "zero")])[0]
    rank = len(e.shape(rows))
    padded = e.node("Pad", [rows, e.ints([0] * rank + [1] + [0] * (rank - 1), "pads")],
                    mode="constant")[0]
    return e.node("Gather", [padded, at], axis=0)[0]


@export_rule("merge_lod_tensor")
def _merge_lod_tensor(e: OpExport) -> None:
    """Out's row i is the next row of InTrue where Mask[i] holds, else of InFalse."""
    mask = _flat_mask(e)
    taken = _side(e, e.input("InTrue"), mask)
    other = _side(e, e.input("InFalse"), e.node("Not", [mask])[0])
    rank = len(e.shape(e.input("InTrue")))
    chosen = mask if rank == 1 else \
        e.node("Unsqueeze", [mask, e.ints(list(range(1, rank)))])[0]
    e.node("Where", [chosen, taken, other], [e.output("Out")])
