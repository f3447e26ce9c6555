"""Export rules of the sequence ops over a padded batch X [B, T, ...] and its lengths, as
masks of the valid steps (``Range(0, T) < lengths``, T read from X's shape when the graph
runs, so neither B nor T is fixed in the file):

``sequence_pool``       SUM / AVERAGE / SQRT: ``ReduceSum`` of X ``Where`` valid (over the
                        length, or its ``Sqrt``); MAX: ``ReduceMax`` and ``ArgMax`` of X
                        with -inf at padding; FIRST / LAST: the step picked by an ``Equal``
                        mask, summed; ``pad_value`` for an empty row
``sequence_softmax``    exp of X less its valid maximum, 0 at padding, over its sum
``sequence_mask``       ``Range(0, maxlen) < lengths`` (maxlen: the attr, the
                        ``MaxLenTensor``, or the longest length), ``Cast`` to out_dtype
``sequence_reverse``    each row's steps read in the order length - 1 - t (padding in
                        place), or a ``Slice`` of step -1 without lengths
``sequence_slice``      steps offset + t for t < length, zeros after
``sequence_enumerate``  for each k of the window, the ids at t + k (pad_value past the
                        length), ``Concat``-ed on a new last dim
``sequence_expand``     X ``Unsqueeze``-d and selected by the mask of Y's lengths (and of
                        X's own)

Reading row b's step s (`take_steps`) is ``GatherElements`` along T for [B, T] values, and a
``Gather`` of the rows of X flattened to [B * T, ...] at b * T + s otherwise.
"""
from __future__ import annotations

import numpy as np

from .export_registry import OpExport, export_rule


def _int64(e: OpExport, name: str) -> str:
    return name if e.dtype(name) == "int64" else \
        e.node("Cast", [name], to=e.onnx_dtype("int64"))[0]


def _dim(e: OpExport, x: str, axis: int) -> str:
    """Dim ``axis`` of ``x``, 0-d int64: a constant when the file knows it."""
    known = e.shape(x)[axis]
    if known >= 0:
        return e.const(known, "int64", "dim")
    return e.node("Gather", [e.node("Shape", [x])[0], e.const(axis, "int64", "axis")],
                  axis=0)[0]


def _steps(e: OpExport, count: str) -> str:
    """[1, T]: 0 .. T - 1, T the 0-d ``count``."""
    each = e.node("Range", [e.const(0, "int64", "first"), count, e.const(1, "int64", "step")])[0]
    return e.node("Unsqueeze", [each, e.ints([0])])[0]


def _per_row(e: OpExport, value: str, rank: int) -> str:
    """A [B] value as [B, 1, ...] (``rank`` dims)."""
    return e.node("Reshape", [value, e.ints([-1] + [1] * (rank - 1), "per_row")])[0]


def _lengths(e: OpExport, slot: str, x: str) -> str:
    """The [B] int64 lengths of ``slot``, or T for every row without them."""
    if e.has_input(slot):
        return e.node("Reshape", [_int64(e, e.input(slot)), e.ints([-1], "flat")])[0]
    rows = e.node("Gather", [e.node("Shape", [x])[0], e.ints([0], "batch_dim")], axis=0)[0]
    return e.node("Expand", [_dim(e, x, 1), rows])[0]


def _mask(e: OpExport, x: str, lengths: str, rank: int) -> str:
    """[B, T, 1, ...] (``rank`` dims) bool: t < lengths[b], T being x's dim 1."""
    inside = e.node("Less", [_steps(e, _dim(e, x, 1)),
                             e.node("Unsqueeze", [lengths, e.ints([1])])[0]])[0]
    if rank == 2:
        return inside
    return e.node("Unsqueeze", [inside, e.ints(list(range(2, rank)))])[0]


def take_steps(e: OpExport, x: str, index: str) -> str:
    """out[b, t] = x[b, index[b, t]] for x [B, T, ...] and an int64 index [B, T']."""
    rank = len(e.shape(x))
    if rank == 2:
        return e.node("GatherElements", [x, index], axis=1)[0]
    shape = e.node("Shape", [x])[0]
    tail = e.node("Slice", [shape, e.ints([2]), e.ints([rank])])[0]
    starts = e.node("Mul", [e.node("Range", [e.const(0, "int64", "first"), _dim(e, x, 0),
                                             e.const(1, "int64", "step")])[0],
                            _dim(e, x, 1)])[0]
    flat = e.node("Reshape", [e.node("Add", [index, e.node("Unsqueeze", [
        starts, e.ints([1])])[0]])[0], e.ints([-1], "flat")])[0]
    rows = e.node("Reshape", [x, e.node("Concat", [e.ints([-1], "rows"), tail], axis=0)[0]])[0]
    got = e.node("Gather", [rows, flat], axis=0)[0]
    return e.node("Reshape", [got, e.node("Concat", [e.node("Shape", [index])[0], tail],
                                          axis=0)[0]])[0]


def _zero_outside(e: OpExport, mask: str, value: str, like: str, out: str | None = None,
                  fill: float = 0.0) -> str:
    return e.node("Where", [mask, value, e.scalar(fill, like, "fill")],
                  None if out is None else [out])[0]


# --- sequence_pool -------------------------------------------------------------------------

@export_rule("sequence_pool")
def _sequence_pool(e: OpExport) -> None:
    x, kind = e.input("X"), e.attrs["pooltype"]
    rank = len(e.shape(x))
    lengths = _lengths(e, "Lengths", x)
    mask = _mask(e, x, lengths, rank)
    if kind == "MAX":
        low = e.node("Where", [mask, x, e.scalar(-np.inf, x, "low")])[0]
        pooled = e.node("ReduceMax", [low], axes=[1], keepdims=0)[0] if e.opset < 18 else \
            e.node("ReduceMax", [low, e.ints([1])], keepdims=0)[0]
        if e.op.output("MaxIndex"):
            e.node("ArgMax", [low], [e.output("MaxIndex")], axis=1, keepdims=0)
    elif kind in ("FIRST", "LAST"):
        at = e.node("Mul", [lengths, e.const(0, "int64", "zero")])[0] if kind == "FIRST" \
            else e.node("Max", [e.node("Sub", [lengths, e.const(1, "int64", "one")])[0],
                                e.const(0, "int64", "zero")])[0]
        picked = e.node("Equal", [_steps(e, _dim(e, x, 1)),
                                  e.node("Unsqueeze", [at, e.ints([1])])[0]])[0]
        if rank > 2:
            picked = e.node("Unsqueeze", [picked, e.ints(list(range(2, rank)))])[0]
        pooled = e.node("ReduceSum", [_zero_outside(e, picked, x, x), e.ints([1])],
                        keepdims=0)[0]
    else:
        pooled = e.node("ReduceSum", [_zero_outside(e, mask, x, x), e.ints([1])],
                        keepdims=0)[0]
        if kind != "SUM":
            count = e.node("Cast", [e.node("Max", [lengths, e.const(1, "int64", "one")])[0]],
                           to=e.onnx_dtype(e.dtype(x)))[0]
            if kind == "SQRT":
                count = e.node("Sqrt", [count])[0]
            pooled = e.node("Div", [pooled, _per_row(e, count, rank - 1)])[0]
    some = e.node("Greater", [lengths, e.const(0, "int64", "zero")])[0]
    _zero_outside(e, _per_row(e, some, rank - 1), pooled, x, e.output("Out"),
                  float(e.attrs["pad_value"]))


# --- sequence_softmax ----------------------------------------------------------------------

@export_rule("sequence_softmax")
def _sequence_softmax(e: OpExport) -> None:
    x = e.input("X")
    if not e.has_input("Lengths"):
        e.node("Softmax", [x], [e.output("Out")], axis=1)
        return
    rank = len(e.shape(x))
    lengths = _lengths(e, "Lengths", x)
    mask = _mask(e, x, lengths, rank)
    low = e.node("Where", [mask, x, e.scalar(-np.inf, x, "low")])[0]
    top = e.node("ReduceMax", [low], axes=[1], keepdims=1)[0] if e.opset < 18 else \
        e.node("ReduceMax", [low, e.ints([1])], keepdims=1)[0]
    some = _per_row(e, e.node("Greater", [lengths, e.const(0, "int64", "zero")])[0], rank)
    top = _zero_outside(e, some, top, x)                      # an empty row: 0
    shifted = e.node("Where", [mask, e.node("Sub", [x, top])[0], e.scalar(-np.inf, x, "low")])[0]
    z = e.node("Exp", [shifted])[0]
    total = e.node("ReduceSum", [z, e.ints([1])], keepdims=1)[0]
    positive = e.node("Greater", [total, e.scalar(0.0, x, "zero")])[0]
    e.node("Div", [z, e.node("Where", [positive, total, e.scalar(1.0, x, "one")])[0]],
           [e.output("Out")])


# --- sequence_mask -------------------------------------------------------------------------

@export_rule("sequence_mask")
def _sequence_mask(e: OpExport) -> None:
    lengths = _int64(e, e.input("X"))
    maxlen = int(e.attrs["maxlen"])
    if e.has_input("MaxLenTensor"):
        count = e.node("Reshape", [_int64(e, e.input("MaxLenTensor")), e.ints([], "scalar")])[0]
    elif maxlen >= 0:
        count = e.const(maxlen, "int64", "maxlen")
    else:
        longest = e.node("ReduceMax", [lengths], keepdims=0)[0]
        count = e.node("Max", [longest, e.const(0, "int64", "zero")])[0]
    steps = e.node("Range", [e.const(0, "int64", "first"), count,
                             e.const(1, "int64", "step")])[0]
    inside = e.node("Less", [steps, e.node("Unsqueeze", [lengths, e.ints([-1])])[0]])[0]
    e.node("Cast", [inside], [e.output("Y")], to=e.onnx_dtype(e.attrs["out_dtype"]))


# --- sequence_reverse, sequence_slice ---------------------------------------------------------

@export_rule("sequence_reverse")
def _sequence_reverse(e: OpExport) -> None:
    x = e.input("X")
    if not e.has_input("Lengths"):
        e.node("Slice", [x, e.ints([-1], "starts"), e.ints([-(2 ** 63)], "ends"),
                         e.ints([1], "axes"), e.ints([-1], "steps")], [e.output("Y")])
        return
    t = _steps(e, _dim(e, x, 1))
    n = e.node("Unsqueeze", [_lengths(e, "Lengths", x), e.ints([1])])[0]
    back = e.node("Sub", [e.node("Sub", [n, e.const(1, "int64", "one")])[0], t])[0]
    index = e.node("Where", [e.node("Less", [t, n])[0], back, t])[0]      # [B, T]
    e.node("Identity", [take_steps(e, x, index)], [e.output("Y")])


def _column(e: OpExport, slot: str) -> str:
    """A per-row [B] or [B, 1] input as int64 [B, 1]."""
    return e.node("Reshape", [_int64(e, e.input(slot)), e.ints([-1, 1], "column")])[0]


@export_rule("sequence_slice")
def _sequence_slice(e: OpExport) -> None:
    x = e.input("X")
    rank = len(e.shape(x))
    t = _steps(e, _dim(e, x, 1))
    inside = e.node("Less", [t, _column(e, "Length")])[0]                   # [B, T]
    index = e.node("Where", [inside, e.node("Add", [_column(e, "Offset"), t])[0],
                             e.const(0, "int64", "zero")])[0]
    mask = inside if rank == 2 else \
        e.node("Unsqueeze", [inside, e.ints(list(range(2, rank)))])[0]
    _zero_outside(e, mask, take_steps(e, x, index), x, e.output("Out"))


# --- sequence_enumerate, sequence_expand --------------------------------------------------

@export_rule("sequence_enumerate")
def _sequence_enumerate(e: OpExport) -> None:
    x = e.input("X")
    ids = e.node("Squeeze", [x, e.ints([2])])[0] if len(e.shape(x)) == 3 else x
    n = e.node("Unsqueeze", [_lengths(e, "Lengths", x), e.ints([1])])[0]
    t = _steps(e, _dim(e, x, 1))
    pad = e.const(int(e.attrs["pad_value"]), e.dtype(x), "pad")
    windows = []
    for k in range(int(e.attrs["win_size"])):
        at = e.node("Add", [t, e.const(k, "int64", "k")])[0]
        inside = e.node("Less", [at, n])[0]
        got = e.node("GatherElements", [ids, e.node("Where", [
            inside, at, e.const(0, "int64", "zero")])[0]], axis=1)[0]
        windows.append(e.node("Unsqueeze", [e.node("Where", [inside, got, pad])[0],
                                            e.ints([2])])[0])
    e.node("Concat", windows, [e.output("Out")], axis=2)


@export_rule("sequence_expand")
def _sequence_expand(e: OpExport) -> None:
    x, y = e.input("X"), e.input("Y")
    rank = len(e.shape(x)) + 1
    mask = _mask(e, y, _lengths(e, "YLengths", y), rank)                  # [B, Ty, 1, ...]
    if e.has_input("XLengths"):
        own = _mask(e, x, _lengths(e, "XLengths", x), rank - 1)          # [B, Tx, 1, ...]
        mask = e.node("And", [mask, e.node("Unsqueeze", [own, e.ints([1])])[0]])[0]
    spread = e.node("Unsqueeze", [x, e.ints([1])])[0]
    _zero_outside(e, mask, spread, x, e.output("Out"))
