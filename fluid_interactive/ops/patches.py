"""The patches of images as data: unfold and im2sequence, the im2col of `ConvGeometry`
(im2col.py) with their own output arrangement, and col2im as their gradient.

``unfold``  X [N, C, H, W] -> Y [N, C*kh*kw, L], L = OH*OW the window positions in
row-major order; attrs ``kernel_sizes``, ``strides``, ``dilations`` and ``paddings``
[top, left, bottom, right] (Paddle's order for this op). Each output dim is (size + pads -
dilation*(k-1) - 1) / stride + 1.

``im2sequence``  X [N, C, H, W] -> Out [N, OH*OW, C*kh*kw]: each image a sequence of its
patches in row-major order (Paddle's LoD rows, one sequence per image, as a padded batch
that needs no lengths: they all have OH*OW steps). Attrs ``kernels``, ``strides``,
``paddings`` [up, left, down, right]; each output dim is rounded up, (size + pads - k +
stride - 1) / stride + 1, and a last window reaching past the padding sees zeros there.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from .im2col import ConvGeometry
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, infer_like, slots
from .window import check_float, check_rank4, fmt, ints


@dataclass(frozen=True)
class _Form:
    """How an op lays out its patches: the attr of the kernel size, whether output dims
    round up, the output slot, and the axes taking the columns [C*kh*kw, N, L] to it."""
    kernel_attr: str
    ceil: bool
    out_slot: str
    axes: tuple[int, int, int]


UNFOLD = _Form("kernel_sizes", False, "Y", (1, 0, 2))
IM2SEQUENCE = _Form("kernels", True, "Out", (1, 2, 0))


def _window(ctx: Any, form: _Form) -> tuple:
    """(kernel, strides, dilations, pads as (top, bottom, left, right))."""
    kernel_attr = form.kernel_attr
    kernel = ints(ctx, kernel_attr, ctx.attrs[kernel_attr], 2, 1)
    strides = ints(ctx, "strides", ctx.attrs["strides"], 2, 1)
    dils = ints(ctx, "dilations", ctx.attrs.get("dilations", [1, 1]), 2, 1)
    p = list(ctx.attrs["paddings"])
    if len(p) == 2:
        p = p * 2
    if len(p) != 4 or not all(isinstance(v, int) and v >= 0 for v in p):
        ctx.fail(f"paddings must be 4 non-negative ints [top, left, bottom, right], got "
                 f"{ctx.attrs['paddings']!r}")
    return kernel, strides, dils, (p[0], p[2], p[1], p[3])


def _outs(ctx: Any, form: _Form, sizes: tuple[int, ...]) -> tuple[int, ...]:
    kernel, strides, dils, pads = _window(ctx, form)
    ceil = form.ceil
    outs = []
    for i, size in enumerate(sizes):
        span = size + pads[2 * i] + pads[2 * i + 1] - (dils[i] * (kernel[i] - 1) + 1)
        outs.append(-1 if size < 0 else (span + (strides[i] - 1 if ceil else 0))
                    // strides[i] + 1)
    return tuple(outs)


def _infer(ctx: InferContext, form: _Form) -> None:
    check_rank4(ctx, "X", "image batch [N, C, H, W]")
    check_float(ctx, "X")
    x = ctx.input("X")
    n, c, h, w = x.shape
    outs = _outs(ctx, form, (h, w))
    kernel = _window(ctx, form)[0]
    if any(o < 1 for o, size in zip(outs, (h, w)) if size >= 0):
        ctx.fail(f"the window {list(kernel)} leaves no position in X {fmt(x.shape)} with "
                 f"paddings {ctx.attrs['paddings']}")
    length = -1 if min(outs) < 0 else outs[0] * outs[1]
    taps = c * kernel[0] * kernel[1] if c >= 0 else -1
    columns = (taps, n, length)
    ctx.set_output(form.out_slot, tuple(columns[i] for i in form.axes), x.dtype)


def _geometry(ctx: KernelContext, form: _Form) -> ConvGeometry:
    x = ctx.input("X")
    n, c, h, w = x.shape
    kernel, strides, dils, pads = _window(ctx, form)
    return ConvGeometry(ctx.xp, x.dtype, x.shape, (n, 1) + _outs(ctx, form, (h, w)), kernel,
                        strides, pads, dils, 1, batch_inner=False)


def _kernel(ctx: KernelContext, form: _Form) -> Callable:
    """One strided copy of the window view (c, kh, kw | n | oh, ow) into the output."""
    xp, geo = ctx.xp, _geometry(ctx, form)
    groups = ((0, 1, 2), (3,), (4, 5))    # the view's axes of the columns' taps, n, l
    axes = tuple(a for g in form.axes for a in groups[g])
    out = ctx.buffer(form.out_slot)
    shape = ctx.output(form.out_slot).shape
    view_shape = [(geo.c, *geo.k), (geo.n,), geo.outs]
    dst_shape = tuple(d for g in form.axes for d in view_shape[g])

    def patches(a: Any) -> Any:
        dst = out if out is not None else xp.empty(shape, geo.dtype)
        xp.copyto(dst.reshape(dst_shape), geo.windows(a).transpose(axes))
        return dst
    return patches


def _grad_kernel(ctx: KernelContext, form: _Form) -> Callable:
    xp, geo = ctx.xp, _geometry(ctx, form)
    axes = form.axes
    back = tuple(axes.index(i) for i in range(3))   # output -> [C*kh*kw, N, L]
    col2im = geo.make_col2im(ctx.buffer("X@GRAD"))

    def patches_grad(a: Any, g: Any) -> Any:
        dcols = geo.cols()
        xp.copyto(dcols.reshape(geo.ckk, geo.n, geo.l), g.transpose(back))
        return col2im(dcols)
    return patches_grad


def _grad(g: GradContext, form: _Form, grad_type: str) -> None:
    flowing = g.flowing(form.out_slot)
    if not g.wants("X") or flowing is None:
        return
    g.emit(grad_type, {"X": g.input("X"), f"{form.out_slot}@GRAD": [flowing]},
           {"X@GRAD": [n for n in g.in_grad("X") if n]}, g.attrs)


_UNFOLD = {"kernel_sizes": [], "strides": [1, 1], "paddings": [0, 0, 0, 0],
           "dilations": [1, 1]}
_IM2SEQ = {"kernels": [], "strides": [1, 1], "paddings": [0, 0, 0, 0], "out_stride": [1, 1]}


def _register(op: str, form: _Form, attrs: dict[str, Any], doc: str) -> None:
    register(OpSpec(op, slots("X"), slots(form.out_slot), partial(_infer, form=form),
                    partial(_kernel, form=form), partial(_grad, form=form,
                                                         grad_type=f"{op}_grad"),
                    attrs=attrs, doc=doc))
    register(OpSpec(f"{op}_grad", slots("X", f"{form.out_slot}@GRAD"), slots("X@GRAD"),
                    infer_like({"X@GRAD": "X"}), partial(_grad_kernel, form=form),
                    attrs=attrs, shape_only=("X",)))


_register("unfold", UNFOLD, _UNFOLD,
          "The kh x kw windows of X [N, C, H, W] as columns: Y [N, C*kh*kw, L]; paddings "
          "[top, left, bottom, right].")
_register("im2sequence", IM2SEQUENCE, _IM2SEQ,
          "Each image of X [N, C, H, W] as the sequence of its kernel-sized patches: Out "
          "[N, OH*OW, C*kh*kw], output dims rounded up.")
