"""Ops that put values on a diagonal or take them off one: diag, diag_embed, trace.

``diag``        Out [n, n] = a matrix with the 1-D Diagonal [n] on its diagonal.
``diag_embed``  Out = Input [..., n] placed on the diagonals of the planes of dims dim1 and
                dim2 of a new tensor of rank + 1 whose two new dims have size n + |offset|:
                ``Out[..., i, i + offset, ...] = Input[..., i]`` (offset > 0: above the
                main diagonal), zeros elsewhere, as ``torch.diag_embed``. dim1 and dim2
                index the output (negative: from its end).
``trace``       Out = the sums of the diagonals (with ``offset``) of the planes of dims dim1
                and dim2 of Input: its shape is Input's without those dims, or [1] when
                nothing is left. An offset past the edge sums nothing: zeros.

Putting and taking are each other's gradients: ``diag_embed_grad`` takes the diagonal of
dOut back, ``trace_grad`` puts dOut on the diagonal.
"""
from __future__ import annotations

from typing import Any

from ..ir.text import format_shape
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, grad_slot, infer_like, slots

_NUMERIC = ("float16", "float32", "float64", "int32", "int64")


def diagonal_positions(xp: Any, rows: int, cols: int, offset: int) -> tuple[Any, Any]:
    """The (row, column) indices of the diagonal ``offset`` of a [rows, cols] plane."""
    m = max(0, min(rows - max(-offset, 0), cols - max(offset, 0)))
    index = xp.arange(m)
    return index + max(-offset, 0), index + max(offset, 0)


def zeroed(xp: Any, out: Any, t: Any) -> Any:
    """The planner's buffer ``out`` filled with zeros, or new zeros of type ``t`` (whose
    pages the allocator hands out zeroed, untouched until written)."""
    if out is None:
        return xp.zeros(t.shape, t.dtype)
    out.fill(0)
    return out


class DiagonalPut:
    """Puts ``values`` [..., m] on the diagonals ``offset`` of the planes of dims d1, d2 of
    an array of ``shape`` (its other dims, in order, are values' leading dims), into zeros:
    ``put(xp, out, values)``. The positions are found once, for the shape."""

    def __init__(self, xp: Any, shape: tuple[int, ...], offset: int, d1: int, d2: int):
        self.dims = (d1, d2)
        self.rows, self.cols = diagonal_positions(xp, shape[d1], shape[d2], offset)
        self.plain = (d1, d2) == (len(shape) - 2, len(shape) - 1)

    def put(self, xp: Any, out: Any, values: Any) -> Any:
        planes = out if self.plain else xp.moveaxis(out, self.dims, (-2, -1))   # a view
        planes[..., self.rows, self.cols] = values
        return out


def _axis(ctx: InferContext, d: int, rank: int, what: str) -> int:
    if not -rank <= d < rank:
        ctx.fail(f"{what}={d} is out of range for a rank-{rank} tensor; use [{-rank}, "
                 f"{rank - 1}]")
    return d + rank if d < 0 else d


def _plane_dims(ctx: InferContext | KernelContext, rank: int) -> tuple[int, int]:
    d1, d2 = int(ctx.attrs["dim1"]), int(ctx.attrs["dim2"])
    return d1 + rank if d1 < 0 else d1, d2 + rank if d2 < 0 else d2


def _numeric(ctx: InferContext, slot: str) -> Any:
    t = ctx.input(slot)
    if t.dtype not in _NUMERIC:
        ctx.fail_dtype(f"{slot} must be one of {', '.join(_NUMERIC)}, got {t.dtype}")
    return t


# --- diag_embed ---------------------------------------------------------------------------------

def _diag_embed_infer(ctx: InferContext) -> None:
    x = _numeric(ctx, "Input")
    if x.rank < 1:
        ctx.fail("Input must have at least one dim (the values of each diagonal)")
    rank = x.rank + 1
    d1 = _axis(ctx, int(ctx.attrs["dim1"]), rank, "dim1")
    d2 = _axis(ctx, int(ctx.attrs["dim2"]), rank, "dim2")
    if d1 == d2:
        ctx.fail(f"dim1 and dim2 name the same output dim {d1}; give two different dims")
    n = x.shape[-1] + abs(int(ctx.attrs["offset"])) if x.shape[-1] >= 0 else -1
    shape = list(x.shape[:-1])
    for d in sorted((d1, d2)):
        shape.insert(d, n)
    ctx.set_output("Out", shape, x.dtype)


def _diag_embed_kernel(ctx: KernelContext):
    xp, o = ctx.xp, ctx.output("Out")
    d1, d2 = _plane_dims(ctx, o.rank)
    diagonal = DiagonalPut(xp, o.shape, int(ctx.attrs["offset"]), d1, d2)
    out = ctx.buffer("Out")
    return lambda x: diagonal.put(xp, zeroed(xp, out, o), x)


def _take_diagonal_kernel(ctx: KernelContext):
    """dInput = the diagonal of dOut (diag_embed's gradient, and diag's)."""
    xp, o = ctx.xp, ctx.input("Out@GRAD")
    d1, d2 = _plane_dims(ctx, o.rank)
    offset, out = int(ctx.attrs["offset"]), ctx.buffer("Input@GRAD")

    def fn(x: Any, g: Any) -> Any:
        taken = xp.diagonal(g, offset, d1, d2)
        if out is None:
            return xp.ascontiguousarray(taken)
        xp.copyto(out, taken)
        return out
    return fn


def _emit_take(g: GradContext, slot: str, attrs: dict) -> None:
    dout = g.flowing("Out")
    if dout is not None and g.wants(slot):
        g.emit("diag_embed_grad", {"Input": g.input(slot), "Out@GRAD": [dout]},
               {"Input@GRAD": g.in_grad(slot)}, attrs)


_DIAG_EMBED = {"offset": 0, "dim1": -2, "dim2": -1}
register(OpSpec("diag_embed", slots("Input"), slots("Out"), _diag_embed_infer,
                _diag_embed_kernel, lambda g: _emit_take(g, "Input", dict(g.attrs)),
                attrs=_DIAG_EMBED,
                doc="Out = Input [..., n] on the diagonals (offset) of the planes dim1, dim2"))
register(OpSpec("diag_embed_grad", slots("Input", "Out@GRAD"), slots("Input@GRAD"),
                infer_like({"Input@GRAD": "Input"}), _take_diagonal_kernel,
                shape_only=("Input",), attrs=_DIAG_EMBED))


# --- diag ---------------------------------------------------------------------------------------

def _diag_infer(ctx: InferContext) -> None:
    d = _numeric(ctx, "Diagonal")
    if d.rank != 1:
        ctx.fail(f"Diagonal must be 1-D, got shape {format_shape(d.shape)}")
    ctx.set_output("Out", (d.shape[0], d.shape[0]), d.dtype)


def _diag_kernel(ctx: KernelContext):
    xp, o, out = ctx.xp, ctx.output("Out"), ctx.buffer("Out")
    diagonal = DiagonalPut(xp, o.shape, 0, 0, 1)
    return lambda d: diagonal.put(xp, zeroed(xp, out, o), d)


register(OpSpec("diag", slots("Diagonal"), slots("Out"), _diag_infer, _diag_kernel,
                lambda g: _emit_take(g, "Diagonal", {"offset": 0, "dim1": 0, "dim2": 1}),
                doc="Out [n, n] = zeros with the 1-D Diagonal on the diagonal"))


# --- trace --------------------------------------------------------------------------------------

def _trace_infer(ctx: InferContext) -> None:
    x = _numeric(ctx, "Input")
    if x.rank < 2:
        ctx.fail(f"Input must have at least 2 dims, got shape {format_shape(x.shape)}")
    d1 = _axis(ctx, int(ctx.attrs["dim1"]), x.rank, "dim1")
    d2 = _axis(ctx, int(ctx.attrs["dim2"]), x.rank, "dim2")
    if d1 == d2:
        ctx.fail(f"dim1 and dim2 name the same dim {d1}; give two different dims")
    rest = [d for i, d in enumerate(x.shape) if i not in (d1, d2)]
    ctx.set_output("Out", rest or [1], x.dtype)


def _trace_kernel(ctx: KernelContext):
    xp, o = ctx.xp, ctx.output("Out")
    d1, d2 = _plane_dims(ctx, ctx.input("Input").rank)
    offset = int(ctx.attrs["offset"])
    return lambda x: xp.trace(x, offset, d1, d2).astype(o.dtype, copy=False).reshape(o.shape)


def _trace_grad_kernel(ctx: KernelContext):
    """dInput = dOut on every position of the diagonal it summed, zeros elsewhere."""
    xp, x = ctx.xp, ctx.input("Input")
    d1, d2 = _plane_dims(ctx, x.rank)
    diagonal = DiagonalPut(xp, x.shape, int(ctx.attrs["offset"]), d1, d2)
    out = ctx.buffer("Input@GRAD")
    rest = tuple(d for i, d in enumerate(x.shape) if i not in (d1, d2))
    return lambda _x, g: diagonal.put(xp, zeroed(xp, out, x), g.reshape(rest + (1,)))


def _trace_grad(g: GradContext) -> None:
    dout = g.flowing("Out")
    if dout is not None and g.wants("Input"):
        g.emit("trace_grad", {"Input": g.input("Input"), grad_slot("Out"): [dout]},
               {grad_slot("Input"): g.in_grad("Input")}, dict(g.attrs))


_TRACE = {"offset": 0, "dim1": -2, "dim2": -1}
register(OpSpec("trace", slots("Input"), slots("Out"), _trace_infer, _trace_kernel, _trace_grad,
                attrs=_TRACE, doc="Out = the sums of the diagonals of the planes dim1, dim2"))
register(OpSpec("trace_grad", slots("Input", "Out@GRAD"), slots("Input@GRAD"),
                infer_like({"Input@GRAD": "Input"}), _trace_grad_kernel,
                shape_only=("Input",), attrs=_TRACE))
