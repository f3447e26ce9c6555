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
``sequence_concat``     the inputs joined along T, each output step reading the input
                        whose valid steps it falls in
``sequence_reshape``    each row's valid values flattened, padded to whole rows, in rows
                        of new_dim
``sequence_scatter``    X plus the valid Updates selected per column (``Equal`` with a
                        ``Range`` of the columns) and summed over the steps

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
    """Dim ``axis`` of ``x`` (a var, or a value the rule computed), 0-d int64: a constant
    when the file knows it."""
    known = e.shape(x)[axis] if e.program.find_var(e.block, x) is not None else -1
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


def take_steps(e: OpExport, x: str, index: str, rank: int) -> str:
    """out[b, t] = x[b, index[b, t]] for x [B, T, ...] (``rank`` dims) and an int64 index
    [B, T']."""
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
    e.node("Identity", [take_steps(e, x, index, len(e.shape(x)))], [e.output("Y")])


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
    _zero_outside(e, mask, take_steps(e, x, index, rank), x, e.output("Out"))


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


# --- sequence_concat, sequence_reshape, sequence_scatter --------------------------------------

@export_rule("sequence_concat")
def _sequence_concat(e: OpExport) -> None:
    """The inputs joined along T; output step s of row b reads input i's step s - (the
    lengths of row b's inputs before i) at its place in the join, while inside input i's
    length; zeros after the summed length."""
    xs, lens = e.inputs("X"), e.inputs("Lengths")
    joined = e.node("Concat", xs, axis=1)[0]
    steps = _steps(e, _dim(e, joined, 1))                                    # [1, T]
    index = e.node("Mul", [steps, e.const(0, "int64", "zero")])[0]
    base = e.const(0, "int64", "base")                    # where input i starts in the join
    offset = None                                         # [B, 1]: where it starts in a row
    anywhere = None
    for i, x in enumerate(xs):
        n = e.node("Unsqueeze", [_int64(e, lens[i]) if lens else e.node(
            "Expand", [_dim(e, x, 1), e.node("Gather", [e.node("Shape", [x])[0],
                                                         e.ints([0], "batch_dim")],
                                              axis=0)[0]])[0], e.ints([1])])[0]
        start = e.node("Mul", [n, e.const(0, "int64", "zero")])[0] if offset is None else offset
        end = e.node("Add", [start, n])[0]
        inside = e.node("And", [e.node("GreaterOrEqual", [steps, start])[0],
                                e.node("Less", [steps, end])[0]])[0]          # [B, T]
        place = e.node("Add", [base, e.node("Sub", [steps, start])[0]])[0]
        index = e.node("Where", [inside, place, index])[0]
        anywhere = inside if anywhere is None else e.node("Or", [anywhere, inside])[0]
        offset, base = end, e.node("Add", [base, _dim(e, x, 1)])[0]
    rank = len(e.shape(xs[0]))
    assert anywhere is not None and offset is not None   # one input at least
    mask = anywhere if rank == 2 else \
        e.node("Unsqueeze", [anywhere, e.ints(list(range(2, rank)))])[0]
    _zero_outside(e, mask, take_steps(e, joined, index, rank), xs[0], e.output("Out"))
    e.node("Reshape", [offset, e.ints([-1], "flat")], [e.output("OutLengths")])


@export_rule("sequence_reshape")
def _sequence_reshape(e: OpExport) -> None:
    """Each row's first length * D values (zeros after), padded to a whole number of rows
    of new_dim (``Pad`` by new_dim - 1, ``Slice`` to the size), in rows of new_dim."""
    x, new_dim = e.input("X"), int(e.attrs["new_dim"])
    depth = e.shape(x)[2]
    flat = e.node("Reshape", [x, e.ints([0, -1], "rows")])[0]               # [B, T * D]
    n = _lengths(e, "Lengths", x)
    size = e.node("Mul", [n, e.const(depth, "int64", "depth")])[0]
    inside = e.node("Less", [_steps(e, e.node("Mul", [_dim(e, x, 1), e.const(
        depth, "int64", "depth")])[0]), e.node("Unsqueeze", [size, e.ints([1])])[0]])[0]
    kept = _zero_outside(e, inside, flat, x)
    padded = e.node("Pad", [kept, e.ints([0, 0, 0, new_dim - 1], "pads")], mode="constant")[0]
    total = e.node("Mul", [_dim(e, x, 1), e.const(depth, "int64", "depth")])[0]
    rows = e.node("Div", [e.node("Add", [total, e.const(new_dim - 1, "int64", "up")])[0],
                          e.const(new_dim, "int64", "new_dim")])[0]
    end = e.node("Unsqueeze", [e.node("Mul", [rows, e.const(new_dim, "int64", "new_dim")])[0],
                               e.ints([0])])[0]
    cut = e.node("Slice", [padded, e.ints([0], "starts"), end, e.ints([1], "axes")])[0]
    e.node("Reshape", [cut, e.ints([0, -1, new_dim], "shape")], [e.output("Out")])
    e.node("Div", [size, e.const(new_dim, "int64", "new_dim")], [e.output("OutLengths")])


@export_rule("sequence_scatter")
def _sequence_scatter(e: OpExport) -> None:
    """X [B, D] plus, at each column, the Updates of the valid steps whose id is that
    column: a [B, T, D] selection (``Equal``, ``Where``) summed over T."""
    x, ids, updates = e.input("X"), e.input("Ids"), e.input("Updates")
    flat = [e.node("Squeeze", [v, e.ints([2])])[0] if len(e.shape(v)) == 3 else v
            for v in (ids, updates)]
    valid = _mask(e, flat[0], _lengths(e, "Lengths", flat[0]), 2)          # [B, T]
    columns = e.node("Range", [e.const(0, "int64", "first"), _dim(e, x, 1),
                               e.const(1, "int64", "step")])[0]
    hit = e.node("Equal", [e.node("Unsqueeze", [_int64(e, flat[0]), e.ints([2])])[0],
                           columns])[0]                                     # [B, T, D]
    hit = e.node("And", [hit, e.node("Unsqueeze", [valid, e.ints([2])])[0]])[0]
    spread = _zero_outside(e, hit, e.node("Unsqueeze", [flat[1], e.ints([2])])[0], x)
    e.node("Add", [x, e.node("ReduceSum", [spread, e.ints([1])], keepdims=0)[0]],
           [e.output("Out")])
