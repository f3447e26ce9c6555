"""Normalisation over groups of channels of each sample: group_norm and instance_norm
(instance_norm is group_norm with one channel per group).

``group_norm``  X [N, C, ...] (``data_layout`` NCHW; NHWC puts C last), optional Scale,
Bias [C] -> Y, Mean [N, G], Variance [N, G]. The channels fall into ``groups`` groups of
C/G consecutive ones; each sample's group is normalised by its own mean and biased
variance over its channels and all spatial positions: Y = (X - mean) / sqrt(var +
epsilon) * Scale + Bias (per channel).

``instance_norm``  X [N, C, ...], Scale, Bias [C] -> Y, SavedMean [N*C], SavedVariance
[N*C] (= 1 / sqrt(var + epsilon), as Paddle keeps it): each sample's channel normalised
over its spatial positions.

Both see X as [N, G, C/G, S] (channel-last: [N, S, G, C/G]) and reduce over the group's
two axes; no copy of X is made.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from math import prod
from typing import Any

from ..ir.text import format_shape as fmt
from .norm import float_x
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, emit_default_grad, slots


class GroupView:
    """X [N, C, ...] seen as [N, G, C/G, S] (channel-last [N, S, G, C/G]): the axes of a
    group, and the shapes that broadcast a per-group statistic or a per-channel
    parameter against that view."""

    def __init__(self, shape: tuple[int, ...], groups: int, channel_last: bool):
        n = shape[0]
        c = shape[-1] if channel_last else shape[1]
        s = prod(shape) // (n * c) if n * c else 0
        self.n, self.c, self.g = n, c, groups
        cg = c // groups
        if channel_last:
            self.view, self.axes = (n, s, groups, cg), (1, 3)
            self.stat, self.param = (n, 1, groups, 1), (1, 1, groups, cg)
        else:
            self.view, self.axes = (n, groups, cg, s), (2, 3)
            self.stat, self.param = (n, groups, 1, 1), (1, groups, cg, 1)
        self.count = cg * s          # values per group
        self.sum_axes = (0, 1) if channel_last else (0, 3)   # per channel: all but G, C/G

    def stats(self, xp: Any, a: Any, eps: float) -> tuple[Any, Any, Any]:
        """(mean, biased variance, 1 / sqrt(var + eps)), each [N, G] laid out as `stat`."""
        x4 = a.reshape(self.view)
        mean = xp.mean(x4, axis=self.axes, keepdims=True)
        centred = x4 - mean
        var = xp.mean(centred * centred, axis=self.axes, keepdims=True)
        return mean, var, 1.0 / xp.sqrt(var + eps)

    def per_channel(self, xp: Any, a4: Any) -> Any:
        """The sum over the batch and the positions of a [view] array: [C]."""
        return xp.sum(a4, axis=self.sum_axes).reshape(self.c)


def _check_params(ctx: InferContext, c: int, x: Any, slots_: tuple[str, ...]) -> None:
    for slot in slots_:
        if ctx.has_input(slot):
            t = ctx.input(slot)
            if t.rank != 1 or (c >= 0 and t.shape[0] >= 0 and t.shape[0] != c):
                ctx.fail(f"{slot} {fmt(t.shape)} must be [C] = [{c}] for X {fmt(x.shape)}")
            if t.dtype != x.dtype:
                ctx.fail_dtype(f"{slot} is {t.dtype} but X is {x.dtype}")


def _layout(ctx: Any) -> bool:
    """Whether X is channel-last (group_norm's ``data_layout``)."""
    layout = ctx.attrs.get("data_layout", "NCHW")
    if layout not in ("NCHW", "NHWC"):
        ctx.fail(f"data_layout must be 'NCHW' or 'NHWC', got {layout!r}")
    return layout == "NHWC"


def _group_norm_infer(ctx: InferContext) -> None:
    x = float_x(ctx, "a batch and a channel dim")
    last = _layout(ctx)
    c = x.shape[-1] if last else x.shape[1]
    g = ctx.attrs["groups"]
    if isinstance(g, bool) or not isinstance(g, int) or g < 1:
        ctx.fail(f"groups must be a positive int, got {g!r}")
    if c >= 0 and c % g:
        ctx.fail(f"groups={g} must divide the {c} channels of X {fmt(x.shape)}")
    _check_params(ctx, c, x, ("Scale", "Bias"))
    ctx.set_output("Y", x.shape, x.dtype)
    ctx.set_output("Mean", (x.shape[0], g), x.dtype)
    ctx.set_output("Variance", (x.shape[0], g), x.dtype)


def _instance_norm_infer(ctx: InferContext) -> None:
    x = float_x(ctx, "a batch and a channel dim")
    c = x.shape[1]
    _check_params(ctx, c, x, ("Scale", "Bias"))
    nc = x.shape[0] * c if min(x.shape[0], c) >= 0 else -1
    ctx.set_output("Y", x.shape, x.dtype)
    ctx.set_output("SavedMean", (nc,), x.dtype)
    ctx.set_output("SavedVariance", (nc,), x.dtype)


def _view(ctx: KernelContext, instance: bool) -> GroupView:
    x = ctx.input("X")
    if instance:
        return GroupView(x.shape, x.shape[1], False)
    return GroupView(x.shape, int(ctx.attrs["groups"]), _layout(ctx))


def _forward(ctx: KernelContext, instance: bool) -> Callable:
    xp, x = ctx.xp, ctx.input("X")
    v = _view(ctx, instance)
    eps = float(ctx.attrs["epsilon"])
    has_scale, has_bias = ctx.has_input("Scale"), ctx.has_input("Bias")
    y_buf = ctx.buffer("Y")

    def normalise(a: Any, *params: Any) -> tuple:
        rest = list(params)
        scale = rest.pop(0) if has_scale else None
        bias = rest.pop(0) if has_bias else None
        mean, var, inv = v.stats(xp, a, eps)
        y = y_buf if y_buf is not None else xp.empty(x.shape, x.dtype)
        y4 = y.reshape(v.view)
        xp.subtract(a.reshape(v.view), mean, out=y4)
        xp.multiply(y4, inv, out=y4)
        if scale is not None:
            xp.multiply(y4, scale.reshape(v.param), out=y4)
        if bias is not None:
            xp.add(y4, bias.reshape(v.param), out=y4)
        if instance:
            return y, mean.reshape(-1), inv.reshape(-1)
        return y, mean.reshape(v.n, v.g), var.reshape(v.n, v.g)
    return normalise


def _backward(ctx: KernelContext, instance: bool) -> Callable:
    """dX = inv * (g - mean(g) - xhat * mean(g * xhat)) per group, g = dY * Scale;
    dScale = sum of dY * xhat, dBias = sum of dY, per channel."""
    xp, x = ctx.xp, ctx.input("X")
    v = _view(ctx, instance)
    eps = float(ctx.attrs["epsilon"])
    has_scale = ctx.has_input("Scale")
    wanted = [s for s in ("X@GRAD", "Scale@GRAD", "Bias@GRAD") if ctx.has_output(s)]

    def normalise_grad(a: Any, *rest: Any) -> Any:
        *scale, mean, spread, dy = rest
        mean = mean.reshape(v.stat)
        inv = spread.reshape(v.stat) if instance else 1.0 / xp.sqrt(spread.reshape(v.stat) + eps)
        xhat = (a.reshape(v.view) - mean) * inv
        dy4 = dy.reshape(v.view)
        got = {}
        if "X@GRAD" in wanted:
            g = dy4 * scale[0].reshape(v.param) if has_scale else dy4
            mg = xp.mean(g, axis=v.axes, keepdims=True)
            mgx = xp.mean(g * xhat, axis=v.axes, keepdims=True)
            got["X@GRAD"] = ((g - mg - xhat * mgx) * inv).reshape(x.shape)
        if "Scale@GRAD" in wanted:
            got["Scale@GRAD"] = v.per_channel(xp, dy4 * xhat)
        if "Bias@GRAD" in wanted:
            got["Bias@GRAD"] = v.per_channel(xp, dy4)
        out = tuple(got[s] for s in wanted)
        return out[0] if len(out) == 1 else out
    return normalise_grad


def _grad_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    c = x.shape[-1] if _layout(ctx) else x.shape[1]
    ctx.set_output("X@GRAD", x.shape, x.dtype)
    ctx.set_output("Scale@GRAD", (c,), x.dtype)
    ctx.set_output("Bias@GRAD", (c,), x.dtype)


def _grad_maker(grad_type: str, stats: tuple[str, str]) -> Callable[[GradContext], None]:
    def grad(g: GradContext) -> None:
        emit_default_grad(g, ("X", "Scale") + stats, grad_type, ("X", "Scale", "Bias"),
                          ("Y",))
    return grad


_GN_ATTRS = {"epsilon": 1e-5, "groups": 1, "data_layout": "NCHW"}
_IN_ATTRS = {"epsilon": 1e-5}

register(OpSpec("group_norm", slots("X", "Scale?", "Bias?"), slots("Y", "Mean", "Variance"),
                _group_norm_infer, partial(_forward, instance=False),
                _grad_maker("group_norm_grad", ("Mean", "Variance")), attrs=_GN_ATTRS,
                doc="Normalises each sample's groups of C/groups channels (with their "
                    "positions) by their own mean and variance, then times Scale plus Bias "
                    "per channel; Mean, Variance [N, groups]."))
register(OpSpec("group_norm_grad", slots("X", "Scale?", "Mean", "Variance", "Y@GRAD"),
                slots("X@GRAD?", "Scale@GRAD?", "Bias@GRAD?"), _grad_infer,
                partial(_backward, instance=False), attrs=_GN_ATTRS))
register(OpSpec("instance_norm", slots("X", "Scale?", "Bias?"),
                slots("Y", "SavedMean", "SavedVariance"), _instance_norm_infer,
                partial(_forward, instance=True),
                _grad_maker("instance_norm_grad", ("SavedMean", "SavedVariance")),
                attrs=_IN_ATTRS,
                doc="Normalises each sample's channel over its positions by its own mean and "
                    "variance, then times Scale plus Bias; SavedMean and SavedVariance (the "
                    "inverse standard deviation) [N*C]."))
register(OpSpec("instance_norm_grad", slots("X", "Scale?", "SavedMean", "SavedVariance",
                                            "Y@GRAD"),
                slots("X@GRAD?", "Scale@GRAD?", "Bias@GRAD?"), _grad_infer,
                partial(_backward, instance=True), attrs=_IN_ATTRS))
