"""Activations with a parameter or a shape change: ``prelu`` and ``maxout``.

``prelu``   Out = X where X > 0, else Alpha * X. ``mode``: 'all' (one Alpha), 'channel'
            (one per channel, dim 1 of an NCHW input: Alpha holds C numbers) or 'element'
            (one per element of a sample: Alpha holds prod(X.shape[1:]) numbers).
``maxout``  the maximum over ``groups`` consecutive channels: channel c of Out is the max
            of channels c*groups .. c*groups + groups - 1 of X, along ``axis`` (1 for NCHW,
            3 for NHWC). The gradient goes to the first maximum of each group, as Paddle's.
"""
from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import Any

from ..ir.text import format_shape as _fmt
from .grad_rules import check_same_float, register_grad
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, slots

_MODES = ("all", "channel", "element")


def _alpha_size(ctx: Any, shape: tuple[int, ...]) -> int:
    """How many numbers Alpha holds for X of ``shape`` in the op's mode (-1: unknown)."""
    mode = ctx.attrs["mode"]
    if mode not in _MODES:
        ctx.fail(f"mode must be one of {', '.join(map(repr, _MODES))}, got {mode!r}")
    if mode == "channel" and len(shape) < 2:
        ctx.fail(f"mode 'channel' needs X of rank >= 2 (N, C, ...), got X {_fmt(shape)}")
    if mode == "element" and len(shape) < 1:
        ctx.fail("mode 'element' needs X of rank >= 1")
    dims = {"all": (), "channel": shape[1:2], "element": shape[1:]}[mode]
    return -1 if any(d < 0 for d in dims) else prod(dims)


def _prelu_infer(ctx: InferContext) -> None:
    x = check_same_float(ctx, "X", "Alpha")
    alpha = ctx.input("Alpha")
    want = _alpha_size(ctx, x.shape)
    if want >= 0 and all(d >= 0 for d in alpha.shape) and prod(alpha.shape) != want:
        ctx.fail(f"mode {ctx.attrs['mode']!r} needs Alpha of {want} numbers for X "
                 f"{_fmt(x.shape)}, got Alpha {_fmt(alpha.shape)}")
    ctx.set_output("Out", x.shape, x.dtype)


def _alpha_shape(ctx: KernelContext) -> tuple[int, ...]:
    """The shape Alpha broadcasts against X in."""
    shape = ctx.input("X").shape
    mode = ctx.attrs["mode"]
    if mode == "all":
        return (1,) * len(shape)
    if mode == "channel":
        return (1, shape[1]) + (1,) * (len(shape) - 2)
    return (1,) + tuple(shape[1:])


def _prelu_kernel(ctx: KernelContext) -> Callable:
    xp, out = ctx.xp, ctx.buffer("Out")
    aligned = _alpha_shape(ctx)
    return lambda x, a: xp.multiply(x, xp.where(x > 0, 1, a.reshape(aligned)), out=out)


def _prelu_grads(ctx: KernelContext) -> Callable[..., dict[str, Any]]:
    aligned = _alpha_shape(ctx)
    alpha_shape = ctx.input("Alpha").shape
    axes = tuple(i for i, d in enumerate(aligned) if d == 1)
    xp = ctx.xp

    def fn(x, a, g):
        neg = x <= 0
        return {"X": g * xp.where(neg, a.reshape(aligned), 1),
                "Alpha": (g * x * neg).sum(axis=axes).reshape(alpha_shape)}
    return fn


register(OpSpec("prelu", slots("X", "Alpha"), slots("Out"), _prelu_infer, _prelu_kernel,
                register_grad("prelu", ("X", "Alpha"), ("X", "Alpha"), _prelu_grads,
                              {"mode": "all"}),
                attrs={"mode": "all"}, doc="Out = X if X > 0 else Alpha * X, Alpha shared "
                                           "by mode ('all', 'channel' or 'element')."))


# --- maxout ----------------------------------------------------------------------------------

def _maxout_geometry(ctx: Any, shape: tuple[int, ...]) -> tuple[int, int]:
    """(the channel axis, groups), checked."""
    groups, axis = ctx.attrs["groups"], ctx.attrs["axis"]
    if len(shape) != 4:
        ctx.fail(f"maxout takes a 4-D image, got X {_fmt(shape)}")
    if axis not in (1, 3):
        ctx.fail(f"axis must be 1 (NCHW) or 3 (NHWC), got {axis}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        ctx.fail(f"groups must be a positive int, got {groups!r}")
    if shape[axis] >= 0 and shape[axis] % groups:
        ctx.fail(f"the {shape[axis]} channels of X {_fmt(shape)} do not split into groups "
                 f"of {groups}")
    return axis, groups


def _maxout_infer(ctx: InferContext) -> None:
    x = check_same_float(ctx, "X")
    axis, groups = _maxout_geometry(ctx, x.shape)
    c = x.shape[axis] // groups if x.shape[axis] >= 0 else -1
    ctx.set_output("Out", x.shape[:axis] + (c,) + x.shape[axis + 1:], x.dtype)


def _grouped(ctx: KernelContext) -> tuple[tuple[int, ...], int]:
    """X's shape with its channels split as [C / groups, groups], and the groups' axis."""
    shape = ctx.input("X").shape
    axis, groups = _maxout_geometry(ctx, shape)
    split = shape[:axis] + (shape[axis] // groups, groups) + shape[axis + 1:]
    return split, axis + 1


def _maxout_kernel(ctx: KernelContext) -> Callable:
    xp, out = ctx.xp, ctx.buffer("Out")
    split, gaxis = _grouped(ctx)
    return lambda x: xp.amax(x.reshape(split), axis=gaxis, out=out)


def _maxout_grads(ctx: KernelContext) -> Callable[..., dict[str, Any]]:
    xp = ctx.xp
    split, gaxis = _grouped(ctx)
    shape = ctx.input("X").shape
    positions = xp.arange(split[gaxis]).reshape((-1,) + (1,) * (len(split) - gaxis - 1))

    def fn(x, g):
        first = xp.expand_dims(xp.argmax(x.reshape(split), axis=gaxis), gaxis)
        hit = positions == first
        return {"X": (hit * xp.expand_dims(g, gaxis)).reshape(shape)}
    return fn


_MAXOUT = {"groups": 1, "axis": 1}
register(OpSpec("maxout", slots("X"), slots("Out"), _maxout_infer, _maxout_kernel,
                register_grad("maxout", ("X",), ("X",), _maxout_grads, _MAXOUT),
                attrs=_MAXOUT,
                doc="Out = the max over groups of consecutive channels along axis."))
