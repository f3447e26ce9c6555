"""Moving elements around without arithmetic: flip, roll, and the image rearrangements.

``flip``             Out = X reversed along each of ``dims`` (a view)
``roll``             Out = X shifted by ``shifts[i]`` along ``dims[i]``, wrapping around; no
                     dims: shifted as one flat list, in X's shape
``pixel_shuffle``    Out [N, C, H*r, W*r] from X [N, C*r*r, H, W] (r = upscale_factor): the
                     r*r channels of a group become an r x r block of pixels
``shuffle_channel``  Out = X [N, C, H, W] with its channels, split into ``group`` groups,
                     interleaved (channel g*C/group + i goes to i*group + g)
``space_to_depth``   Out [N, C*b*b, H/b, W/b] from X [N, C, H, W] (b = blocksize), as
                     Paddle's op (YOLOv2's reorg): X seen as [N, b, b, C/(b*b), H, W] and
                     laid out as [N, C/(b*b), H, b, W, b], read in the output's shape
``temporal_shift``   X [N*T, C, H, W] (T = seg_num) with the first C*shift_ratio channels
                     taken from the previous time step and the next as many from the next
                     one (zeros at the ends); the other channels stay

The three image rearrangements are one reshape, one transpose and one reshape each; their
gradients run the same steps backwards.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..ir.text import format_shape as _fmt
from .registry import register
from .shape import RunTimeCheck, normalize_axis
from .spec import (
    InferContext,
    KernelContext,
    OpSpec,
    emit_default_grad,
    infer_like,
    slots,
)

# --- flip, roll ---------------------------------------------------------------------------------


def _axes(ctx: Any, shape: Sequence[int], attr: str, op: str) -> list[int]:
    axes = [normalize_axis(ctx, int(a), len(shape), f"{op} dim", shape)
            for a in ctx.attrs[attr]]
    if len(set(axes)) != len(axes):
        ctx.fail(f"{op}: {attr} {list(ctx.attrs[attr])} name a dim twice")
    return axes


def _flip_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if not ctx.attrs["dims"]:
        ctx.fail("flip: dims must name at least one dim")
    _axes(ctx, x.shape, "dims", "flip")
    ctx.set_output("Out", x.shape, x.dtype)


def _flipper(ctx: KernelContext, slot: str) -> Callable:
    t = ctx.input(slot)
    flipped = set(_axes(ctx, t.shape, "dims", "flip"))
    index = tuple(slice(None, None, -1) if i in flipped else slice(None) for i in range(t.rank))
    return lambda a: a[index]


register(OpSpec("flip", slots("X"), slots("Out"), _flip_infer, lambda ctx: _flipper(ctx, "X"),
                lambda g: emit_default_grad(g, (), "flip_grad", ("X",)),
                attrs={"dims": []}, aliases=True,
                doc="Out = X reversed along each of dims (a view)."))
register(OpSpec("flip_grad", slots("Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "Out@GRAD"}), lambda ctx: _flipper(ctx, "Out@GRAD"),
                attrs={"dims": []}, aliases=True,
                doc="X@GRAD = dOut reversed along the same dims (a view)."))


def _roll_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    shifts, dims = ctx.attrs["shifts"], _axes(ctx, x.shape, "dims", "roll")
    if not shifts or (dims and len(dims) != len(shifts)):
        ctx.fail(f"roll: shifts {list(shifts)} must be non-empty and have one entry per dim "
                 f"in dims {list(ctx.attrs['dims'])}")
    if not dims and len(shifts) != 1:
        ctx.fail(f"roll: without dims, shifts must be one number, got {list(shifts)}")
    ctx.set_output("Out", x.shape, x.dtype)


def _roller(sign: int) -> Callable[[KernelContext], Callable]:
    def kernel(ctx: KernelContext) -> Callable:
        xp, t = ctx.xp, ctx.in_types[-1]
        dims = _axes(ctx, t.shape, "dims", "roll")
        shifts = [sign * int(s) for s in ctx.attrs["shifts"]]
        if not dims:   # the flat list, in X's shape
            return lambda *args: xp.roll(args[-1].reshape(-1), shifts[0]).reshape(t.shape)
        return lambda *args: xp.roll(args[-1], shifts, axis=dims)
    return kernel


_ROLL: dict[str, list[int]] = {"shifts": [], "dims": []}
register(OpSpec("roll", slots("X"), slots("Out"), _roll_infer, _roller(1),
                lambda g: emit_default_grad(g, (), "roll_grad", ("X",)), attrs=_ROLL,
                doc="Out = X shifted by shifts along dims, wrapping around (no dims: as one "
                    "flat list)."))
register(OpSpec("roll_grad", slots("Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "Out@GRAD"}), _roller(-1), attrs=_ROLL,
                doc="X@GRAD = dOut shifted back."))


# --- the image rearrangements -------------------------------------------------------------------

class Regroup:
    """X [N, C, H, W] -> reshape to ``split`` -> transpose by ``perm`` -> reshape to
    ``out``, copied once into the output's array; the gradient runs it backwards."""

    def __init__(self, split: Sequence[int], perm: Sequence[int], out: Sequence[int]):
        self.split, self.perm, self.out = tuple(split), tuple(perm), tuple(out)
        self.moved = tuple(self.split[p] for p in self.perm)

    def forward(self, xp: Any, a: Any, out: Any = None) -> Any:
        o = xp.empty(self.out, a.dtype) if out is None else out
        xp.copyto(o.reshape(self.moved), a.reshape(self.split).transpose(self.perm))
        return o

    def backward(self, xp: Any, g: Any, x_shape: Sequence[int], out: Any = None) -> Any:
        inverse = tuple(sorted(range(len(self.perm)), key=self.perm.__getitem__))
        o = xp.empty(tuple(x_shape), g.dtype) if out is None else out
        xp.copyto(o.reshape(self.split), g.reshape(self.moved).transpose(inverse))
        return o


def _pixel_shuffle(ctx: Any, shape: Sequence[int]) -> Regroup:
    r = int(ctx.attrs["upscale_factor"])
    n, c, h, w = shape
    if r < 1 or (c >= 0 and c % (r * r)):
        ctx.fail(f"pixel_shuffle: the channels of X {_fmt(shape)} must divide by "
                 f"upscale_factor**2 = {r * r} (upscale_factor={r} must be >= 1)")
    known = [d >= 0 for d in (c, h, w)]
    return Regroup((n, c // (r * r), r, r, h, w), (0, 1, 4, 2, 5, 3),
                   (n, c // (r * r) if known[0] else -1, h * r if known[1] else -1,
                    w * r if known[2] else -1))


def _shuffle_channel(ctx: Any, shape: Sequence[int]) -> Regroup:
    g = int(ctx.attrs["group"])
    n, c, h, w = shape
    if g < 1 or (c >= 0 and c % g):
        ctx.fail(f"shuffle_channel: the channels of X {_fmt(shape)} must divide into "
                 f"group={g} groups")
    return Regroup((n, g, c // g, h, w), (0, 2, 1, 3, 4), tuple(shape))


def _space_to_depth(ctx: Any, shape: Sequence[int]) -> Regroup:
    b = int(ctx.attrs["blocksize"])
    n, c, h, w = shape
    if b < 2 or any(d >= 0 and d % m for d, m in ((c, b * b), (h, b), (w, b))):
        ctx.fail(f"space_to_depth: X {_fmt(shape)} needs channels divisible by "
                 f"blocksize**2 and height and width divisible by blocksize={b} (>= 2)")
    out = (n, c * b * b if c >= 0 else -1, h // b if h >= 0 else -1, w // b if w >= 0 else -1)
    return Regroup((n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2), out)


def _define_regroup(name: str, make: Callable[[Any, Sequence[int]], Regroup], attr: str,
                    default: int, doc: str) -> None:
    def infer(ctx: InferContext) -> None:
        x = ctx.input("X")
        if x.rank != 4:
            ctx.fail(f"{name}: X must be 4-D [N, C, H, W], got {_fmt(x.shape)}")
        ctx.set_output("Out", make(ctx, x.shape).out, x.dtype)

    def kernel(ctx: KernelContext) -> Callable:
        xp, out = ctx.xp, ctx.buffer("Out")
        regroup = make(ctx, ctx.input("X").shape)
        return lambda a: regroup.forward(xp, a, out)

    def grad_kernel(ctx: KernelContext) -> Callable:
        xp, x, out = ctx.xp, ctx.input("X"), ctx.buffer("X@GRAD")
        regroup = make(ctx, x.shape)
        return lambda _x, g: regroup.backward(xp, g, x.shape, out)

    attrs = {attr: default}
    register(OpSpec(name, slots("X"), slots("Out"), infer, kernel,
                    lambda g: emit_default_grad(g, ("X",), name + "_grad", ("X",)),
                    attrs=attrs, doc=doc))
    register(OpSpec(name + "_grad", slots("X", "Out@GRAD"), slots("X@GRAD"),
                    infer_like({"X@GRAD": "X"}), grad_kernel, attrs=attrs,
                    shape_only=("X",), doc=f"X@GRAD = dOut put back where {name} took it."))


_define_regroup("pixel_shuffle", _pixel_shuffle, "upscale_factor", 1,
                "Out [N, C, H*r, W*r] from X [N, C*r*r, H, W]: each group of r*r channels "
                "becomes r x r blocks of pixels.")
_define_regroup("shuffle_channel", _shuffle_channel, "group", 1,
                "Out = X with its channels, in group groups, interleaved.")
_define_regroup("space_to_depth", _space_to_depth, "blocksize", 2,
                "Out [N, C*b*b, H/b, W/b] from X [N, C, H, W], as Paddle's (YOLOv2 reorg) "
                "op lays it out.")


# --- temporal_shift ---------------------------------------------------------------------------

def _segments(ctx: Any, shape: Sequence[int]) -> tuple[int, int, int]:
    """(seg_num, the last channel shifted from the past, the last shifted from the
    future)."""
    seg, ratio = int(ctx.attrs["seg_num"]), float(ctx.attrs["shift_ratio"])
    if len(shape) != 4:
        ctx.fail(f"temporal_shift: X must be 4-D [N*T, C, H, W], got {_fmt(shape)}")
    if seg < 1 or (shape[0] >= 0 and shape[0] % seg):
        ctx.fail(f"temporal_shift: the first dim of X {_fmt(shape)} must be a multiple of "
                 f"seg_num={seg} (>= 1)")
    if not 0 <= ratio <= 0.5:
        ctx.fail(f"temporal_shift: shift_ratio={ratio} must lie in [0, 0.5]")
    c = shape[1]
    return seg, int(c * ratio), int(c * 2 * ratio)


def _temporal_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    _segments(ctx, x.shape)
    ctx.set_output("Out", x.shape, x.dtype)


def _shift(sign: int) -> Callable[[KernelContext], Callable]:
    """Forward (+1): a step's first channels come from the step before, the next ones from
    the step after; the gradient (-1) sends them back."""
    def kernel(ctx: KernelContext) -> Callable:
        xp, t = ctx.xp, ctx.in_types[-1]
        seg, c1, c2 = _segments(ctx, t.shape)
        split = (t.shape[0] // seg, seg) + t.shape[1:]
        out = ctx.buffer(ctx.spec.outputs[0].name)
        past, future = (slice(None, -1), slice(1, None))[::sign]

        def temporal_shift(*args: Any) -> Any:
            a = args[-1].reshape(split)
            o = xp.empty(split, t.dtype) if out is None else out.reshape(split)
            o[:, :, :c2] = 0
            o[:, future, :c1] = a[:, past, :c1]
            o[:, past, c1:c2] = a[:, future, c1:c2]
            o[:, :, c2:] = a[:, :, c2:]
            return o.reshape(t.shape)
        return temporal_shift
    return kernel


_TEMPORAL = {"seg_num": 1, "shift_ratio": 0.25}
register(OpSpec("temporal_shift", slots("X"), slots("Out"), _temporal_infer, _shift(1),
                lambda g: emit_default_grad(g, (), "temporal_shift_grad", ("X",)),
                attrs=_TEMPORAL,
                doc="Out = X [N*T, C, H, W] with its first C*shift_ratio channels from the "
                    "previous step, the next as many from the next step (zeros at the ends)."))
register(OpSpec("temporal_shift_grad", slots("Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "Out@GRAD"}), _shift(-1), attrs=_TEMPORAL,
                doc="X@GRAD = dOut shifted back in time."))


def regroup_of(op_type: str, attrs: Any, shape: Sequence[int]) -> Regroup:
    """The reshape-transpose-reshape one of the image rearrangements makes of X's shape
    (the ONNX export spells it out)."""
    makers = {"pixel_shuffle": _pixel_shuffle, "shuffle_channel": _shuffle_channel,
              "space_to_depth": _space_to_depth}
    return makers[op_type](RunTimeCheck(attrs), shape)
