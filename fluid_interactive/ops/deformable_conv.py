"""Deformable convolution: deformable_conv (modulated, DCN v2) and deformable_conv_v1.

Input [N, C, H, W], Offset [N, 2 * dg * kh * kw, OH, OW], Mask [N, dg * kh * kw, OH, OW]
(deformable_conv only), Filter [O, C / groups, kh, kw] -> Output [N, O, OH, OW], OH and
OW as a plain convolution's. Tap (i, j) of output position (oh, ow) reads channel c (of
deformable group d = c // (C / dg)) at ``(oh * s - p + i * dil + Offset[n, 2 * (d * K +
t)], ow * s - p + j * dil + Offset[n, 2 * (d * K + t) + 1])``, t = i * kw + j, sampled
bilinearly (each corner outside the image counts 0, and a position not strictly inside
(-1, H) x (-1, W) gives 0), times Mask[n, d * K + t].

The kernel is a convolution whose im2col samples: the columns [C * K, N * L] (the order
`ConvGeometry` uses batch-outer) are filled one tap at a time with a gather of the four
corners of every position, then the same per-group GEMM. The gradient: dcols from the
GEMM; per tap, the input gradient added at the four corners (``add.at``: positions may
share corners), the offsets' from the bilinear weights' derivatives, the mask's from the
unmasked samples.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from ..ir.text import format_shape as fmt
from .im2col import ConvGeometry
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, emit_default_grad, slots
from .window import check_float, check_rank4, ints, spatial_paddings

_ATTRS = {"strides": [1, 1], "paddings": [0, 0], "dilations": [1, 1], "groups": 1,
          "deformable_groups": 1, "im2col_step": 64}


def _params(ctx: Any) -> tuple:
    strides = ints(ctx, "strides", ctx.attrs["strides"], 2, 1)
    pads = spatial_paddings(ctx, ctx.attrs["paddings"], 2)
    dils = ints(ctx, "dilations", ctx.attrs["dilations"], 2, 1)
    groups, dg = int(ctx.attrs["groups"] or 1), int(ctx.attrs["deformable_groups"] or 1)
    return strides, pads, dils, groups, dg


def _infer(ctx: InferContext, masked: bool) -> None:
    for slot in ("Input", "Filter", "Offset") + (("Mask",) if masked else ()):
        check_rank4(ctx, slot, "tensor")
    check_float(ctx, "Input")
    x, f = ctx.input("Input"), ctx.input("Filter")
    strides, pads, dils, groups, dg = _params(ctx)
    n, c, h, w = x.shape
    o, cg, kh, kw = f.shape
    if c >= 0 and (c % groups or c % dg or cg * groups != c):
        ctx.fail(f"Input {fmt(x.shape)} with groups={groups}, deformable_groups={dg} does not "
                 f"fit Filter {fmt(f.shape)} (Filter's dim 1 must be C / groups)")
    outs = [-1 if size < 0 else (size + p0 + p1 - (d * (k - 1) + 1)) // s + 1
            for size, k, s, d, p0, p1 in ((h, kh, strides[0], dils[0], pads[0], pads[1]),
                                          (w, kw, strides[1], dils[1], pads[2], pads[3]))]
    want = {"Offset": 2 * dg * kh * kw, "Mask": dg * kh * kw}
    for slot in ("Offset", "Mask") if masked else ("Offset",):
        t = ctx.input(slot)
        if t.shape[1:] != (want[slot], *outs) and min(outs) >= 0:
            ctx.fail(f"{slot} must be [N, {want[slot]}, {outs[0]}, {outs[1]}] for Input "
                     f"{fmt(x.shape)} and Filter {fmt(f.shape)}, got {fmt(t.shape)}")
    ctx.set_output("Output", (n, o, *outs), x.dtype)


class _Sampler:
    """The sampling positions of one plan: the output grid, and per tap the four corners
    of every sample with their weights."""

    def __init__(self, ctx: KernelContext):
        x, f = ctx.input("Input"), ctx.input("Filter")
        strides, pads, dils, groups, self.dg = _params(ctx)
        self.xp = xp = ctx.xp
        self.n, self.c, self.h, self.w = x.shape
        o, _, self.kh, self.kw = f.shape
        oh = (self.h + pads[0] + pads[1] - (dils[0] * (self.kh - 1) + 1)) // strides[0] + 1
        ow = (self.w + pads[2] + pads[3] - (dils[1] * (self.kw - 1) + 1)) // strides[1] + 1
        self.geo = ConvGeometry(xp, x.dtype, x.shape, (self.n, o, oh, ow), (self.kh, self.kw),
                                strides, pads, dils, groups, batch_inner=False)
        self.l = oh * ow
        base_h = (xp.arange(oh) * strides[0] - pads[0])[:, None]
        base_w = (xp.arange(ow) * strides[1] - pads[2])[None, :]
        grid = (oh, ow)
        self.base = [(xp.broadcast_to(base_h + i * dils[0], grid).reshape(-1),
                      xp.broadcast_to(base_w + j * dils[1], grid).reshape(-1))
                     for i in range(self.kh) for j in range(self.kw)]

    def corners(self, offset: Any, t: int) -> list[tuple[Any, Any, Any, Any]]:
        """For tap t: per sample [N, dg, L] the four corners' flat index, their bilinear
        weights (0 outside), the weights' derivatives by h and by w, and the fractions."""
        xp, k = self.xp, self.kh * self.kw
        off = offset.reshape(self.n, self.dg, k, 2, self.l)
        ph = self.base[t][0] + off[:, :, t, 0]
        pw = self.base[t][1] + off[:, :, t, 1]
        inside = (ph > -1) & (pw > -1) & (ph < self.h) & (pw < self.w)
        h0, w0 = xp.floor(ph), xp.floor(pw)
        lh, lw = ph - h0, pw - w0
        found = []
        for dh, dw in ((0, 0), (0, 1), (1, 0), (1, 1)):
            ch, cw = h0 + dh, w0 + dw
            ok = inside & (ch >= 0) & (ch <= self.h - 1) & (cw >= 0) & (cw <= self.w - 1)
            wh, ww = (lh if dh else 1 - lh), (lw if dw else 1 - lw)
            sh, sw = (1.0 if dh else -1.0), (1.0 if dw else -1.0)
            index = xp.where(ok, ch * self.w + cw, 0).astype("int64")
            found.append((index, ok * (wh * ww), ok * (sh * ww), ok * (sw * wh)))
        return found

    def planes(self, a: Any) -> Any:
        """Input [N, C, H, W] as [N, dg, C / dg, H * W]."""
        return a.reshape(self.n, self.dg, self.c // self.dg, self.h * self.w)

    def sample(self, planes: Any, corners: list) -> Any:
        """[N, dg, C / dg, L]: the bilinear samples of one tap."""
        xp = self.xp
        out = None
        for index, weight, _, _ in corners:
            part = xp.take_along_axis(planes, index[:, :, None, :], axis=3) * weight[:, :, None]
            out = part if out is None else out + part
        return out

    def tap_columns(self, cols: Any, t: int) -> Any:
        """The columns of tap t as a view [N, dg, C / dg, L]."""
        k = self.kh * self.kw
        c6 = cols.reshape(self.dg, self.c // self.dg, k, self.n, self.l)
        return c6[:, :, t].transpose(2, 0, 1, 3)


def _kernel(ctx: KernelContext, masked: bool) -> Callable:
    s = _Sampler(ctx)
    geo = s.geo
    from_columns = geo.make_from_columns(ctx.buffer("Output"))

    def deformable_conv(a: Any, offset: Any, *rest: Any) -> Any:
        *mask, k = rest
        cols, planes = geo.cols(), s.planes(a)
        for t in range(s.kh * s.kw):
            val = s.sample(planes, s.corners(offset, t))
            if mask:
                val = val * mask[0].reshape(s.n, s.dg, -1, s.l)[:, :, t][:, :, None]
            s.xp.copyto(s.tap_columns(cols, t), val)
        return from_columns(geo.forward_gemm(k, cols, geo.yt()))
    return deformable_conv


def _grad_kernel(ctx: KernelContext, masked: bool) -> Callable:
    s = _Sampler(ctx)
    geo, xp = s.geo, ctx.xp
    wanted = [slot for slot in ("Input@GRAD", "Offset@GRAD", "Mask@GRAD", "Filter@GRAD")
              if ctx.has_output(slot)]

    def deformable_conv_grad(a: Any, offset: Any, *rest: Any) -> Any:
        *mask, k, g = rest
        planes, gt = s.planes(a), geo.to_columns(g)
        cols = xp.empty((geo.ckk, geo.nl), geo.dtype)
        dcols = geo.data_gemm(k, gt, xp.empty((geo.ckk, geo.nl), geo.dtype))
        got = {"Input@GRAD": xp.zeros(planes.shape, geo.dtype),
               "Offset@GRAD": xp.empty((s.n, s.dg, s.kh * s.kw, 2, s.l), geo.dtype),
               "Mask@GRAD": xp.empty((s.n, s.dg, s.kh * s.kw, s.l), geo.dtype)}
        for t in range(s.kh * s.kw):
            corners = s.corners(offset, t)
            val = s.sample(planes, corners)
            m = mask[0].reshape(s.n, s.dg, -1, s.l)[:, :, t][:, :, None] if mask else 1.0
            xp.copyto(s.tap_columns(cols, t), val * m)
            dval = s.tap_columns(dcols, t)
            got["Mask@GRAD"][:, :, t] = (dval * val).sum(axis=2)
            _tap_grads(xp, planes, corners, dval * m, got["Input@GRAD"],
                       got["Offset@GRAD"][:, :, t])
        got["Filter@GRAD"] = geo.filter_gemm(gt, cols, None)
        got["Input@GRAD"] = got["Input@GRAD"].reshape(a.shape)
        got["Offset@GRAD"] = got["Offset@GRAD"].reshape(offset.shape)
        got["Mask@GRAD"] = got["Mask@GRAD"].reshape(mask[0].shape) if mask else None
        out = tuple(got[slot] for slot in wanted)
        return out[0] if len(out) == 1 else out
    return deformable_conv_grad


def _tap_grads(xp: Any, planes: Any, corners: list, share: Any, dx: Any, doff: Any) -> None:
    """One tap's input gradient (added at its corners) and its offset gradient [N, dg, 2,
    L], from ``share`` = dcols * mask [N, dg, C / dg, L]."""
    n, dg, cg, _ = planes.shape
    rows = (xp.arange(n)[:, None, None, None], xp.arange(dg)[None, :, None, None],
            xp.arange(cg)[None, None, :, None])
    doff.fill(0)
    for index, weight, by_h, by_w in corners:
        at = index[:, :, None, :]
        xp.add.at(dx, rows + (at,), share * weight[:, :, None])
        seen = (share * xp.take_along_axis(planes, at, axis=3)).sum(axis=2)
        doff[:, :, 0] += seen * by_h
        doff[:, :, 1] += seen * by_w


def _grad(g: GradContext, grad_type: str, masked: bool) -> None:
    slots_ = ("Input", "Offset", "Mask", "Filter") if masked else ("Input", "Offset", "Filter")
    emit_default_grad(g, slots_, grad_type, slots_, ("Output",))


def _grad_infer(ctx: InferContext) -> None:
    for slot in ("Input", "Offset", "Mask", "Filter"):
        if ctx.has_output(f"{slot}@GRAD"):
            t = ctx.input(slot)
            ctx.set_output(f"{slot}@GRAD", t.shape, t.dtype)


def _register(op: str, masked: bool, doc: str) -> None:
    ins = ("Input", "Offset", "Mask", "Filter") if masked else ("Input", "Offset", "Filter")
    register(OpSpec(op, slots(*ins), slots("Output"), partial(_infer, masked=masked),
                    partial(_kernel, masked=masked),
                    partial(_grad, grad_type=f"{op}_grad", masked=masked), attrs=_ATTRS,
                    doc=doc))
    register(OpSpec(f"{op}_grad", slots(*ins, "Output@GRAD"),
                    slots(*(f"{s}@GRAD?" for s in ins)), _grad_infer,
                    partial(_grad_kernel, masked=masked), attrs=_ATTRS))


_register("deformable_conv", True,
          "Modulated deformable convolution (DCN v2): each tap of each output position "
          "samples Input bilinearly at its place moved by Offset, times Mask, then the "
          "convolution's GEMM with Filter.")
_register("deformable_conv_v1", False,
          "Deformable convolution (DCN v1): deformable_conv without the Mask.")
