"""Convolution ops on NCHW tensors: conv2d and conv2d_transpose (pooling: `pool.py`).

``conv2d``            Input [N, C, H, W], Filter [O, C/groups, kh, kw] -> Output [N, O, OH, OW]
``conv2d_transpose``  Input [N, C, H, W], Filter [C, O/groups, kh, kw] -> Output [N, O, OH, OW]
``pool2d``            X [N, C, H, W] -> Out [N, C, OH, OW] (max or avg)

Attributes follow Paddle: ``strides``, ``paddings`` ([ph, pw] or [top, bottom, left,
right]), ``dilations``, ``groups``; pool2d has ``pooling_type``, ``ksize``,
``global_pooling``, ``ceil_mode`` and ``exclusive``.

How the kernels work. A convolution relates an *image* side X [N, C, H, W] to a
*response* side Y [N, O, OH, OW] through a filter K [O, C/G, kh, kw]:
Y[n, o, p] = sum over (c, i, j) of K[o, c, i, j] * Xpad[n, c, p*s + (i, j)*d]. Everything
is three primitives of `_ConvGeometry`, each one big copy or one GEMM per group:

* im2col: X -> cols [C*kh*kw, N*OH*OW], one strided copy of a window view;
* GEMM: Y^T [O, N*OH*OW] = K [O, C*kh*kw] @ cols (per group);
* col2im: the adjoint of im2col, kh*kw strided adds into a zeroed image.

The columns are ordered (n, oh, ow) or (oh, ow, n), whichever makes the copies cheaper for
the shapes at hand (see `_ConvGeometry`); with one image, Output is written by the GEMM.

conv2d is im2col + GEMM; its input gradient is GEMM + col2im and its filter gradient is
dY^T @ cols^T. conv2d_transpose is the same relation read backwards (its Input is the
response side, its Output the image side, and Paddle's filter layout [C_in, C_out/G, kh,
kw] is the conv layout of that relation), so it reuses the same three primitives.

Index arrays, padded scratch images, column buffers and their strided views are built once
per plan in the kernel factory; a step makes no Python loop over the batch.

``data_format`` CHWN (set by the layout plan pass, never by a layer) runs the same ops on
batch-innermost images: Input [C, H, W, N] -> Output [O, OH, OW, N], the GEMMs' own
column order, so no transposing copy is left (`ConvGeometry`, layouts.py).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..kernels.col2im import col2im_source
from .compiled import compiled_kernel
from .im2col import ConvGeometry, layout_gain
from .layouts import CHWN, NCHW, LayoutRule, check_layout, from_layout, to_layout
from .registry import register
from .spec import (
    GradContext,
    InferContext,
    KernelContext,
    OpSpec,
    emit_default_grad,
    infer_like,
    slots,
)
from .window import check_float, check_rank4, fmt, paddings, pair

_ConvGeometry = ConvGeometry  # the name tests and older callers use


# --- conv2d ------------------------------------------------------------------------------------

_CONV_ATTRS = {"strides": [1, 1], "paddings": [0, 0], "dilations": [1, 1], "groups": 1,
               "use_cudnn": True, "data_format": NCHW}
_CONV_T_ATTRS = {**_CONV_ATTRS, "output_size": []}


def _conv_params(ctx: Any) -> tuple:
    strides = pair(ctx, "strides", ctx.attrs["strides"], 1)
    pads = paddings(ctx, ctx.attrs["paddings"])
    dils = pair(ctx, "dilations", ctx.attrs["dilations"], 1)
    groups = ctx.attrs["groups"]
    if groups is None:
        groups = 1
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        ctx.fail(f"groups must be a positive int, got {groups!r}")
    return strides, pads, dils, int(groups)


def _conv_out_dim(size: int, k: int, s: int, p0: int, p1: int, d: int) -> int:
    if size < 0 or k < 0:
        return -1
    return (size + p0 + p1 - (d * (k - 1) + 1)) // s + 1


def _layout(ctx: Any) -> str:
    return check_layout(ctx, "data_format", (NCHW, CHWN))


def _operands(ctx: InferContext, filter_layout: str) -> tuple:
    """The checks conv2d and conv2d_transpose share: 4-D float Input and Filter of one
    dtype, valid attrs, groups dividing the input channels. Returns (x, Input's shape in
    NCHW order, f, params)."""
    layout = _layout(ctx)
    check_rank4(ctx, "Input", f"{layout} image batch")
    check_rank4(ctx, "Filter", f"filter {filter_layout}")
    check_float(ctx, "Input")
    x, f = ctx.input("Input"), ctx.input("Filter")
    if x.dtype != f.dtype:
        ctx.fail_dtype(f"Input is {x.dtype} but Filter is {f.dtype}")
    params = _conv_params(ctx)
    shape = from_layout(x.shape, layout)
    c, g = shape[1], params[3]
    if c >= 0 and c % g:
        ctx.fail(f"groups={g} does not divide the {c} channels of Input {fmt(x.shape)} "
                 f"(Filter {fmt(f.shape)})")
    return x, shape, f, params


def _conv_infer(ctx: InferContext) -> None:
    x, shape, f, params = _operands(ctx, "[out_c, in_c/groups, kh, kw]")
    (sh, sw), (pt, pb, pl, pr), (dh, dw), g = params
    n, c, h, w = shape
    o, cg, kh, kw = f.shape
    if o >= 0 and o % g:
        ctx.fail(f"groups={g} does not divide the {o} output channels of Filter "
                 f"{fmt(f.shape)} (Input {fmt(x.shape)})")
    if c >= 0 and cg >= 0 and cg * g != c:
        ctx.fail(f"Input {fmt(x.shape)} has {c} channels but Filter {fmt(f.shape)} "
                 f"expects {cg} per group x groups {g} = {cg * g}")
    for size, k, d, p0, p1, what in ((h, kh, dh, pt, pb, "height"), (w, kw, dw, pl, pr,
                                                                       "width")):
        if size >= 0 and k >= 0 and size + p0 + p1 < d * (k - 1) + 1:
            ctx.fail(f"the kernel of Filter {fmt(f.shape)} (dilated {what} "
                     f"{d * (k - 1) + 1}) is larger than the padded Input {fmt(x.shape)} "
                     f"({what} {size} + padding {p0 + p1})")
    out = (n, o, _conv_out_dim(h, kh, sh, pt, pb, dh), _conv_out_dim(w, kw, sw, pl, pr, dw))
    ctx.set_output("Output", to_layout(out, _layout(ctx)), x.dtype)


#: The column layout of every conv kernel: None chooses by cost; tests force each.
BATCH_INNER: bool | None = None


def _conv_geometry(ctx: KernelContext, image: Sequence[int], response: Sequence[int],
                   filt: Sequence[int]) -> _ConvGeometry:
    """The geometry of a relation between ``image`` and ``response``, both given in the
    op's layout."""
    strides, pads, dils, g = _conv_params(ctx)
    layout = _layout(ctx)
    return ConvGeometry(ctx.xp, ctx.input("Filter").dtype, from_layout(image, layout),
                        from_layout(response, layout), filt[2:], strides, pads, dils, g,
                        batch_inner=BATCH_INNER, layout=layout)


def _shared_conv_geometry(ctx: KernelContext, image: Sequence[int], response: Sequence[int],
                          filt: Sequence[int]) -> _ConvGeometry:
    """One geometry for conv2d and its gradient op over the same Input and Filter vars, so
    the gradient reads the columns the forward op left (`ConvGeometry.columns_of`)."""
    key = ("conv2d", ctx.input_name("Input"), ctx.input_name("Filter"), tuple(image),
           tuple(response), tuple(filt), _conv_params(ctx), _layout(ctx), BATCH_INNER)
    return ctx.shared(key, lambda: _conv_geometry(ctx, image, response, filt))


def _col2im(ctx: KernelContext, geo: _ConvGeometry, out: Any) -> Callable[[Any], Any]:
    """``geo.make_col2im(out)``, or where the compiled tier has a form of it
    (`kernels/col2im.py`: batch-innermost images, float32/64, on the host) a kernel that
    runs that once the plan switched to it."""
    numpy_col2im = geo.make_col2im(out)
    if ctx.xp.__name__ != "numpy" or not geo.chwn or geo.dtype not in ("float32", "float64"):
        return numpy_col2im
    source = col2im_source((geo.kh, geo.kw), (geo.sh, geo.sw), (geo.dh, geo.dw),
                           (geo.pt, geo.pl), geo.dtype)
    handle = compiled_kernel(ctx, source, geo.dtype)
    assert handle is not None   # a host array of float32/64, checked above
    shape6 = (geo.c, geo.kh, geo.kw, geo.oh, geo.ow, geo.n)

    def col2im(dcols: Any) -> Any:
        dst = out if out is not None else geo.xp.empty(geo.image_shape(), geo.dtype)
        return dst if handle.ran((dcols.reshape(shape6), dst)) else numpy_col2im(dcols)
    col2im.tier_label = handle.label  # type: ignore[attr-defined]
    return col2im


def _conv_kernel(ctx: KernelContext):
    x, f, y = ctx.input("Input"), ctx.input("Filter"), ctx.output("Output")
    geo = _shared_conv_geometry(ctx, x.shape, y.shape, f.shape)
    out = ctx.buffer("Output")
    if geo.response_is_columns:   # Output is [O, N*L] as it is: the GEMM writes it
        def conv_direct(a, k):
            dst = out if out is not None else geo.xp.empty(y.shape, geo.dtype)
            geo.forward_gemm(k, geo.im2col(a), dst.reshape(geo.o, geo.nl))
            return dst
        return conv_direct
    from_columns = geo.make_from_columns(out)
    yt = geo.yt()

    def conv(a, k):
        return from_columns(geo.forward_gemm(k, geo.im2col(a), yt))
    return conv


def _conv_grad_kernel(ctx: KernelContext):
    x, f = ctx.input("Input"), ctx.input("Filter")
    dy = ctx.input("Output@GRAD")
    geo = _shared_conv_geometry(ctx, x.shape, dy.shape, f.shape)
    want_x, want_f = ctx.has_output("Input@GRAD"), ctx.has_output("Filter@GRAD")
    col2im = _col2im(ctx, geo, ctx.buffer("Input@GRAD")) if want_x else None
    dfilter = ctx.buffer("Filter@GRAD")

    def grad(a, k, g):
        if want_f and not want_x:   # the filter gradient alone may skip the transposing copy of g
            return geo.filter_from_response(g, geo.columns_of(a), dfilter)
        gt = geo.to_columns(g)
        df = geo.filter_gemm(gt, geo.columns_of(a), dfilter) if want_f else None
        # the columns are read: dcols, of their shape, take their memory
        dx = col2im(geo.data_gemm(k, gt, geo.spent_columns()))
        return dx if df is None else (dx, df)
    grad.tier_label = getattr(col2im, "tier_label", None)  # type: ignore[attr-defined]
    return grad


def _conv_grad(g: GradContext) -> None:
    emit_default_grad(g, ("Input", "Filter"), "conv2d_grad", ("Input", "Filter"), ("Output",))


def _layout_rule(images: tuple[str, ...], image: str, response: str,
                 gradient: bool) -> LayoutRule:
    """Runs in CHWN; ``image`` and ``response`` name the slots of the relation's sides."""
    def gain(attrs: Any, shapes: Any) -> float:
        return layout_gain(shapes[image], shapes[response], shapes["Filter"][2:], gradient)
    return LayoutRule(images, (CHWN,), "data_format", gain=gain)


register(OpSpec("conv2d", slots("Input", "Filter"), slots("Output"), _conv_infer,
                _conv_kernel, _conv_grad, attrs=_CONV_ATTRS,
                layout=_layout_rule(("Input", "Output"), "Input", "Output", False),
                doc="2-D convolution (cross-correlation) of NCHW Input with Filter [O, C/groups, "
                    "kh, kw]; Output [N, O, (H + pads - dilation*(kh-1) - 1) / stride + 1, "
                    "...]. Attrs strides, paddings ([h, w] or [top, bottom, left, right]), "
                    "dilations, groups."))
register(OpSpec("conv2d_grad", slots("Input", "Filter", "Output@GRAD"),
                slots("Input@GRAD?", "Filter@GRAD?"),
                infer_like({"Input@GRAD": "Input", "Filter@GRAD": "Filter"}),
                _conv_grad_kernel, attrs=_CONV_ATTRS,
                layout=_layout_rule(("Input", "Output@GRAD", "Input@GRAD"), "Input",
                                    "Output@GRAD", True)))


# --- conv2d_transpose --------------------------------------------------------------------------

def _transpose_out_dim(size: int, k: int, s: int, p0: int, p1: int, d: int) -> int:
    if size < 0 or k < 0:
        return -1
    return (size - 1) * s - p0 - p1 + d * (k - 1) + 1


def _conv_t_infer(ctx: InferContext) -> None:
    x, shape, f, params = _operands(ctx, "[in_c, out_c/groups, kh, kw]")
    (sh, sw), (pt, pb, pl, pr), (dh, dw), g = params
    n, c, h, w = shape
    ci, og, kh, kw = f.shape
    if c >= 0 and ci >= 0 and ci != c:
        ctx.fail(f"Input {fmt(x.shape)} has {c} channels but Filter {fmt(f.shape)} "
                 f"(layout [in_c, out_c/groups, kh, kw]) expects {ci}")
    oh = _transpose_out_dim(h, kh, sh, pt, pb, dh)
    ow = _transpose_out_dim(w, kw, sw, pl, pr, dw)
    if (oh >= 0 and oh < 1) or (ow >= 0 and ow < 1):
        ctx.fail(f"Input {fmt(x.shape)} with Filter {fmt(f.shape)}, strides {[sh, sw]} and "
                 f"paddings {[pt, pb, pl, pr]} gives an empty output ({oh} x {ow}); use less "
                 f"padding")
    size = list(ctx.attrs["output_size"] or [])
    if size:
        want = pair(ctx, "output_size", size, 1)
        for got, computed, s, what in ((want[0], oh, sh, "height"), (want[1], ow, sw,
                                                                      "width")):
            if computed >= 0 and not computed <= got < computed + s:
                ctx.fail(f"output_size {list(want)}: the {what} must lie in [{computed}, "
                         f"{computed + s - 1}] for Input {fmt(x.shape)}, Filter "
                         f"{fmt(f.shape)} and stride {s}")
        oh = want[0] if oh >= 0 else -1
        ow = want[1] if ow >= 0 else -1
    ctx.set_output("Output", to_layout((n, og * g if og >= 0 else -1, oh, ow), _layout(ctx)),
                   x.dtype)


def _conv_t_kernel(ctx: KernelContext):
    x, f, y = ctx.input("Input"), ctx.input("Filter"), ctx.output("Output")
    # The relation: image side = Output, response side = Input.
    geo = _conv_geometry(ctx, y.shape, x.shape, f.shape)
    col2im = _col2im(ctx, geo, ctx.buffer("Output"))

    def conv_transpose(a, k):
        return col2im(geo.data_gemm(k, geo.to_columns(a), geo.cols()))
    conv_transpose.tier_label = getattr(col2im, "tier_label", None)  # type: ignore[attr-defined]
    return conv_transpose


def _conv_t_grad_kernel(ctx: KernelContext):
    x, f = ctx.input("Input"), ctx.input("Filter")
    dy = ctx.input("Output@GRAD")
    geo = _conv_geometry(ctx, dy.shape, x.shape, f.shape)
    want_x, want_f = ctx.has_output("Input@GRAD"), ctx.has_output("Filter@GRAD")
    dx_buf, df_buf = ctx.buffer("Input@GRAD"), ctx.buffer("Filter@GRAD")
    direct = geo.response_is_columns
    from_columns = None if direct else geo.make_from_columns(dx_buf)
    xt = geo.xp.empty((geo.o, geo.nl), geo.dtype) if want_x and not direct else None

    def grad(a, k, g):
        cols = geo.im2col(g)
        res = []
        if want_x:
            if from_columns is not None:
                res.append(from_columns(geo.forward_gemm(k, cols, xt)))
            else:   # Input@GRAD is [C, N*L] as it is: the GEMM writes it
                dst = dx_buf if dx_buf is not None else geo.xp.empty(x.shape, geo.dtype)
                geo.forward_gemm(k, cols, dst.reshape(geo.o, geo.nl))
                res.append(dst)
        if want_f:
            res.append(geo.filter_from_response(a, cols, df_buf))
        return res[0] if len(res) == 1 else tuple(res)
    return grad


def _conv_t_grad(g: GradContext) -> None:
    emit_default_grad(g, ("Input", "Filter"), "conv2d_transpose_grad", ("Input", "Filter"),
                      ("Output",))


register(OpSpec("conv2d_transpose", slots("Input", "Filter"), slots("Output"), _conv_t_infer,
                _conv_t_kernel, _conv_t_grad, attrs=_CONV_T_ATTRS,
                layout=_layout_rule(("Input", "Output"), "Output", "Input", True),
                doc="Transposed 2-D convolution (the gradient of conv2d w.r.t. its input) of "
                    "NCHW Input with Filter [C_in, C_out/groups, kh, kw]; Output [N, C_out, "
                    "(H-1)*stride - pads + dilation*(kh-1) + 1, ...], or output_size when "
                    "given (it may add up to stride-1 rows/cols)."))
register(OpSpec("conv2d_transpose_grad", slots("Input", "Filter", "Output@GRAD"),
                slots("Input@GRAD?", "Filter@GRAD?"),
                infer_like({"Input@GRAD": "Input", "Filter@GRAD": "Filter"}),
                _conv_t_grad_kernel, attrs=_CONV_T_ATTRS,
                layout=_layout_rule(("Input", "Output@GRAD", "Input@GRAD"), "Output@GRAD",
                                    "Input", True)))
