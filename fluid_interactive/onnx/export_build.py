"""Export rules of ops that build a tensor from others or from attrs:

``assign_value``                    a ``Constant`` of the listed values
``pad``                             ``Pad`` (constant mode) by the attr's paddings
``one_hot``                         ``OneHot`` of X's ids (its last dim of 1 squeezed); a
                                    negative id gives a zero row, as ONNX gives for ids past
                                    the depth (ONNX would count it from the end)
``fill_zeros_like`` / ``ones``      ``ConstantOfShape`` of X's ``Shape``
``diag``                            the diagonal times an identity made of ``Range`` and
                                    ``Equal``
``trace``                           X summed where the same mask is 1 (``Where``,
                                    ``ReduceSum`` over the two dims)
``diag_embed``                      X (``Pad``-ded by the offset) times the 0/1 mask of the
                                    offset diagonal, the plane moved to dim1, dim2
                                    (``Transpose``)
``kron``                            X and Y ``Unsqueeze``-d to interleaved dims, ``Mul``-ed,
                                    and ``Reshape``-d to the products of the sizes
``meshgrid``                        each input ``Reshape``-d along its dim and ``Expand``-ed
                                    to the grid (or added to zeros of the grid's ``Shape``)
``cross``                           X and Y ``Gather``-ed in rotated order along the dim:
                                    X[1, 2, 0] * Y[2, 0, 1] - X[2, 0, 1] * Y[1, 2, 0]
"""
from __future__ import annotations

import numpy as np

from ..ops.products import cross_dim
from .export_registry import OpExport, export_rule
from .proto import onnx_module


@export_rule("assign_value")
def _assign_value(e: OpExport) -> None:
    a, out = e.attrs, e.output("Out")
    value = np.asarray(a["values"], dtype=e.dtype(out)).reshape([int(d) for d in a["shape"]])
    e.node("Constant", [], [out], value=onnx_module().numpy_helper.from_array(value, out))


@export_rule("pad")
def _pad(e: OpExport) -> None:
    x = e.input("X")
    pairs = [int(p) for p in e.attrs["paddings"]]
    pads = pairs[0::2] + pairs[1::2]   # ONNX: every dim's start, then every dim's end
    e.node("Pad", [x, e.ints(pads, "pads"), e.scalar(float(e.attrs["pad_value"]), x, "value")],
           [e.output("Out")], mode="constant")


@export_rule("one_hot")
def _one_hot(e: OpExport) -> None:
    depth = int(e.attrs["depth"])
    ids = e.node("Squeeze", [e.input("X"), e.ints([-1])])[0]
    dtype = e.dtype(e.input("X"))
    limit = e.const(depth, dtype, "depth")
    negative = e.node("Less", [ids, e.const(0, dtype, "zero")])[0]
    ids = e.node("Where", [negative, limit, ids])[0]   # past the depth: a zero row
    values = e.const([0, 1], e.dtype(e.output("Out")), "values")
    e.node("OneHot", [ids, e.const(depth, "int64", "depth"), values], [e.output("Out")],
           axis=-1)


@export_rule("fill_zeros_like", "fill_ones_like")
def _fill_like(e: OpExport) -> None:
    out = e.output("Out")
    value = np.array([1 if e.op.type == "fill_ones_like" else 0], dtype=e.dtype(out))
    e.node("ConstantOfShape", [e.node("Shape", [e.input("X")])[0]], [out],
           value=onnx_module().numpy_helper.from_array(value, e.tmp_hint("value")))


def _size(e: OpExport, x: str, axis: int, grow: int = 0) -> str:
    """Dim ``axis`` of ``x`` plus ``grow``, as a 0-d int64: a constant when the file knows
    it."""
    known = e.shape(x)[axis]
    if known >= 0:
        return e.const(known + grow, "int64", "size")
    size = e.node("Gather", [e.node("Shape", [x])[0], e.const(axis, "int64", "axis")],
                  axis=0)[0]
    return e.node("Add", [size, e.const(grow, "int64", "grow")])[0] if grow else size


def _diagonal_mask(e: OpExport, n: str, offset: int, dtype: str) -> str:
    """[n, n] of ``dtype``: 1 where column - row == offset."""
    steps = e.node("Range", [e.const(0, "int64", "first"), n, e.const(1, "int64", "step")])[0]
    rows = e.node("Unsqueeze", [steps, e.ints([1])])[0]
    cols = e.node("Unsqueeze", [steps, e.ints([0])])[0]
    on = e.node("Equal", [e.node("Sub", [cols, rows])[0], e.const(offset, "int64", "offset")])[0]
    return e.node("Cast", [on], to=e.onnx_dtype(dtype))[0]


@export_rule("diag")
def _diag(e: OpExport) -> None:
    d = e.input("Diagonal")
    eye = _diagonal_mask(e, _size(e, d, 0), 0, e.dtype(d))
    e.node("Mul", [eye, e.node("Unsqueeze", [d, e.ints([0])])[0]], [e.output("Out")])


@export_rule("diag_embed")
def _diag_embed(e: OpExport) -> None:
    x, out = e.input("Input"), e.output("Out")
    rank = len(e.shape(x)) + 1
    offset = int(e.attrs["offset"])
    d1, d2 = (int(e.attrs[k]) % rank for k in ("dim1", "dim2"))
    padded = x
    if offset:   # the values sit in rows (offset > 0) or columns (< 0) 0 .. m - 1 of n
        pads = [0] * (2 * (rank - 1))
        pads[-1] = abs(offset)
        padded = e.node("Pad", [x, e.ints(pads, "pads")], mode="constant")[0]
    mask = _diagonal_mask(e, _size(e, x, -1, abs(offset)), offset, e.dtype(x))
    spread = e.node("Unsqueeze", [padded, e.ints([-1 if offset >= 0 else -2])])[0]
    plane = e.node("Mul", [spread, mask])[0]                 # [..., n (dim1), n (dim2)]
    rest = iter(range(rank - 2))
    perm = [rank - 2 if i == d1 else rank - 1 if i == d2 else next(rest) for i in range(rank)]
    if perm == list(range(rank)):
        e.node("Identity", [plane], [out])
    else:
        e.node("Transpose", [plane], [out], perm=perm)


def _shape_input(e: OpExport, dims: list[int], computed: list[str]) -> str:
    """A Reshape's shape: ``dims`` as a constant when all are known, else ``computed``
    (the 1-D dims, Concat-ed)."""
    if all(d >= 0 for d in dims):
        return e.ints(dims, "shape")
    return e.node("Concat", computed, axis=0)[0] if len(computed) > 1 else computed[0]


@export_rule("kron")
def _kron(e: OpExport) -> None:
    x, y = e.input("X"), e.input("Y")
    rank = max(len(e.shape(x)), len(e.shape(y)))
    xs, ys = (_ranked(e, v, rank) for v in (x, y))
    spread_x = e.node("Unsqueeze", [xs, e.ints(list(range(1, 2 * rank, 2)))])[0]
    spread_y = e.node("Unsqueeze", [ys, e.ints(list(range(0, 2 * rank, 2)))])[0]
    product = e.node("Mul", [spread_x, spread_y])[0]
    dims = [a * b if a >= 0 and b >= 0 else -1 for a, b in
            zip(_padded(e.shape(x), rank), _padded(e.shape(y), rank))]
    sizes = [] if all(d >= 0 for d in dims) else \
        [e.node("Mul", [e.node("Shape", [xs])[0], e.node("Shape", [ys])[0]])[0]]
    e.node("Reshape", [product, _shape_input(e, dims, sizes)], [e.output("Out")])


def _padded(shape: tuple[int, ...], rank: int) -> tuple[int, ...]:
    return (1,) * (rank - len(shape)) + tuple(shape)


def _ranked(e: OpExport, x: str, rank: int) -> str:
    """``x`` with leading dims of 1 up to ``rank``."""
    have = len(e.shape(x))
    if have == rank:
        return x
    return e.node("Unsqueeze", [x, e.ints(list(range(rank - have)))])[0]


@export_rule("meshgrid")
def _meshgrid(e: OpExport) -> None:
    xs, outs = e.inputs("X"), e.outputs("Out")
    rank = len(xs)
    sizes = [e.shape(x)[0] for x in xs]
    known = all(s >= 0 for s in sizes)
    grid = e.ints(sizes, "grid") if known else e.node(
        "Concat", [e.node("Shape", [x])[0] for x in xs], axis=0)[0]
    zeros = None if known else e.node("ConstantOfShape", [grid], value=onnx_module(
        ).numpy_helper.from_array(np.zeros(1, e.dtype(xs[0])), e.tmp_hint("zero")))[0]
    for k, (x, out) in enumerate(zip(xs, outs)):
        along = e.node("Reshape", [x, e.ints([-1 if i == k else 1 for i in range(rank)],
                                             "along")])[0]
        if zeros is None:
            e.node("Expand", [along, grid], [out])
        else:
            e.node("Add", [zeros, along], [out])


@export_rule("cross")
def _cross(e: OpExport) -> None:
    x, y = e.input("X"), e.input("Y")
    dim = cross_dim(e, e.shape(x))
    turned = [e.const(order, "int64", "order") for order in ([1, 2, 0], [2, 0, 1])]
    x1, x2 = (e.node("Gather", [x, t], axis=dim)[0] for t in turned)
    y1, y2 = (e.node("Gather", [y, t], axis=dim)[0] for t in turned)
    e.node("Sub", [e.node("Mul", [x1, y2])[0], e.node("Mul", [x2, y1])[0]], [e.output("Out")])


@export_rule("trace")
def _trace(e: OpExport) -> None:
    """The sum of X where column - row == offset on the planes dim1 (rows), dim2
    (columns): the mask of `diag_embed` laid over X, ``ReduceSum`` over the two dims."""
    x, out = e.input("Input"), e.output("Out")
    rank = len(e.shape(x))
    d1, d2 = (int(e.attrs[k]) % rank for k in ("dim1", "dim2"))
    rows = e.node("Range", [e.const(0, "int64", "first"), _size(e, x, d1),
                            e.const(1, "int64", "step")])[0]
    cols = e.node("Range", [e.const(0, "int64", "first"), _size(e, x, d2),
                            e.const(1, "int64", "step")])[0]
    gap = e.node("Sub", [e.node("Unsqueeze", [cols, e.ints([0])])[0],
                         e.node("Unsqueeze", [rows, e.ints([1])])[0]])[0]
    mask = e.node("Equal", [gap, e.const(int(e.attrs["offset"]), "int64", "offset")])[0]
    if d1 > d2:   # the mask's dims in X's order
        mask = e.node("Transpose", [mask], perm=[1, 0])[0]
    others = [i for i in range(rank) if i not in (d1, d2)]
    if others:
        mask = e.node("Unsqueeze", [mask, e.ints(others)])[0]
    kept = e.node("Where", [mask, x, e.scalar(0.0, x, "zero")])[0]
    total = e.node("ReduceSum", [kept, e.ints(sorted((d1, d2)))], keepdims=0)[0]
    if others:
        e.node("Identity", [total], [out])
    else:
        e.node("Reshape", [total, e.ints([1], "one")], [out])
