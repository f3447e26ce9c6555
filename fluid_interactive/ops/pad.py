"""Padding: ``pad2d`` around the height and width of images, ``pad_constant_like`` up to
another tensor's shape.

``pad2d``              Out = X [N, C, H, W] (or NHWC) padded by ``paddings`` [top, bottom,
                       left, right] (attr, or the int tensor Paddings): 'constant' fills with
                       ``pad_value``, 'reflect' mirrors the rows and columns next to the edge
                       (not the edge itself), 'edge' repeats the edge
``pad_constant_like``  Out = Y padded at the end of each dim with ``pad_value`` up to the
                       shape of X (read for its shape alone)

Gradients: pad2d's adds each padded position's dOut to the position of X it copied (in
'reflect' and 'edge' modes a row of X may be copied several times).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ir.text import format_shape as _fmt
from .int_args import IntList, read_list, split_inputs
from .registry import register
from .shape import RunTimeCheck
from .spec import (
    InferContext,
    KernelContext,
    OpSpec,
    emit_default_grad,
    infer_like,
    slots,
)

_MODES = ("constant", "reflect", "edge")
PADDINGS = IntList("paddings", "Paddings", "PaddingsList")


def _spatial_axes(ctx: Any, rank: int) -> tuple[int, int]:
    layout = ctx.attrs["data_format"]
    if layout not in ("NCHW", "NHWC"):
        ctx.fail(f"pad2d: data_format must be 'NCHW' or 'NHWC', got {layout!r}")
    if rank != 4:
        ctx.fail(f"pad2d: X must be 4-D ({layout}), got rank {rank}")
    return (2, 3) if layout == "NCHW" else (1, 2)


def padded_shape(ctx: Any, shape: Sequence[int], pads: Sequence[int | None]
                 ) -> list[int]:
    """X's shape with its height and width grown by [top, bottom, left, right] (-1 where
    unknown); 'reflect' needs each padding below the dim it mirrors."""
    mode = ctx.attrs["mode"]
    if mode not in _MODES:
        ctx.fail(f"pad2d: mode must be one of {', '.join(_MODES)}, got {mode!r}")
    if len(pads) != 4:
        ctx.fail(f"pad2d: paddings must be [top, bottom, left, right], got {list(pads)}")
    out = list(shape)
    for axis, (before, after) in zip(_spatial_axes(ctx, len(shape)), (pads[:2], pads[2:])):
        d = shape[axis]
        if any(p is not None and p < 0 for p in (before, after)):
            ctx.fail(f"pad2d: paddings must be >= 0, got {list(pads)}")
        if mode == "reflect" and d >= 0 and any(p is not None and p >= d
                                                for p in (before, after)):
            ctx.fail(f"pad2d: 'reflect' padding {list(pads)} must be smaller than the dims it "
                     f"mirrors, X {_fmt(shape)}")
        out[axis] = -1 if d < 0 or before is None or after is None else d + before + after
    return out


def _pad2d_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    pads = PADDINGS.traced(ctx, 4)
    ctx.set_output("Out", padded_shape(ctx, x.shape, pads), x.dtype)


def _widths(ctx: KernelContext, rank: int, pads: Sequence[int]) -> list[tuple[int, int]]:
    h, w = _spatial_axes(ctx, rank)
    widths = [(0, 0)] * rank
    widths[h], widths[w] = (pads[0], pads[1]), (pads[2], pads[3])
    return widths


def _pad2d_kernel(ctx: KernelContext):
    xp, mode, value = ctx.xp, ctx.attrs["mode"], ctx.attrs["pad_value"]

    def pad2d(*args: Any) -> Any:
        x = args[0]
        pads = read_list(PADDINGS, ctx.attrs, split_inputs(ctx, args))
        padded_shape(RunTimeCheck(ctx.attrs), x.shape, pads)   # checks them
        widths = _widths(ctx, x.ndim, pads)
        if mode != "constant":
            return xp.pad(x, widths, mode=mode)
        out = xp.full(tuple(d + a + b for d, (a, b) in zip(x.shape, widths)), value, x.dtype)
        out[tuple(slice(a, a + d) for d, (a, _) in zip(x.shape, widths))] = x
        return out
    return pad2d


def source_rows(xp: Any, size: int, before: int, after: int, mode: str) -> Any:
    """For each position along a padded dim, the position of X it copies ('reflect' and
    'edge'), as an int array of length size + before + after."""
    at = xp.arange(-before, size + after)
    if mode == "edge":
        return xp.clip(at, 0, size - 1)
    at = xp.abs(at)   # reflect about 0, then about size - 1
    return xp.where(at > size - 1, 2 * (size - 1) - at, at)


def _pad2d_grad_kernel(ctx: KernelContext):
    xp, mode, x = ctx.xp, ctx.attrs["mode"], ctx.input("X")
    out = ctx.buffer("X@GRAD")

    def grad(*args: Any) -> Any:
        dout = args[-1]
        widths = _widths(ctx, x.rank, read_list(PADDINGS, ctx.attrs, split_inputs(ctx, args)))
        if mode == "constant":
            inner = dout[tuple(slice(a, a + d) for d, (a, _) in zip(x.shape, widths))]
            if out is None:
                return inner.copy()
            xp.copyto(out, inner)
            return out
        g = dout
        for axis, (before, after) in enumerate(widths):
            if before or after:   # fold the padded positions back onto the rows they copied
                shape = g.shape[:axis] + (x.shape[axis],) + g.shape[axis + 1:]
                folded = xp.zeros(shape, x.dtype)
                xp.add.at(xp.moveaxis(folded, axis, 0),
                          source_rows(xp, x.shape[axis], before, after, mode),
                          xp.moveaxis(g, axis, 0))
                g = folded
        return g
    return grad


_PAD2D = {"paddings": [0, 0, 0, 0], "mode": "constant", "pad_value": 0.0,
          "data_format": "NCHW"}
register(OpSpec("pad2d", slots("X", *PADDINGS.slot_specs()), slots("Out"), _pad2d_infer,
                _pad2d_kernel,
                lambda g: emit_default_grad(g, ("X", "Paddings", "PaddingsList"), "pad2d_grad",
                                            ("X",)),
                attrs=_PAD2D, host_access="reads",
                doc="Out = X padded around its height and width by [top, bottom, left, "
                    "right]: 'constant' (pad_value), 'reflect' or 'edge'."))
register(OpSpec("pad2d_grad", slots("X", *PADDINGS.slot_specs(), "Out@GRAD"),
                slots("X@GRAD"), infer_like({"X@GRAD": "X"}), _pad2d_grad_kernel,
                attrs=_PAD2D, shape_only=("X",), host_access="reads",
                doc="X@GRAD = each padded position's dOut added to the position it copied."))


# --- pad_constant_like ------------------------------------------------------------------------

def _pad_like_infer(ctx: InferContext) -> None:
    x, y = ctx.input("X"), ctx.input("Y")
    if x.rank != y.rank or any(a >= 0 and b >= 0 and b > a for a, b in zip(x.shape, y.shape)):
        ctx.fail(f"pad_constant_like: Y {_fmt(y.shape)} must have X's rank and no dim larger "
                 f"than X's {_fmt(x.shape)}: Y is padded up to X's shape")
    ctx.set_output("Out", x.shape, y.dtype)


def _pad_like_kernel(ctx: KernelContext):
    xp, t, value = ctx.xp, ctx.output("Out"), ctx.attrs["pad_value"]
    out = ctx.buffer("Out")

    def pad_like(_x: Any, y: Any) -> Any:
        o = xp.empty(t.shape, t.dtype) if out is None else out
        o.fill(value)
        o[tuple(slice(0, d) for d in y.shape)] = y
        return o
    return pad_like


def _pad_like_grad_kernel(ctx: KernelContext):
    y = ctx.input("Y").shape
    index = tuple(slice(0, d) for d in y)
    return lambda _y, dout: dout[index]


_PAD_LIKE = {"pad_value": 0.0}
register(OpSpec("pad_constant_like", slots("X", "Y"), slots("Out"), _pad_like_infer,
                _pad_like_kernel,
                lambda g: emit_default_grad(g, ("Y",), "pad_constant_like_grad", ("Y",)),
                attrs=_PAD_LIKE, shape_only=("X",),
                doc="Out = Y padded at the end of each dim with pad_value up to X's shape."))
register(OpSpec("pad_constant_like_grad", slots("Y", "Out@GRAD"), slots("Y@GRAD"),
                infer_like({"Y@GRAD": "Y"}), _pad_like_grad_kernel, attrs=_PAD_LIKE,
                aliases=True, shape_only=("Y",),
                doc="Y@GRAD = the part of dOut where Y lies (a view)."))
