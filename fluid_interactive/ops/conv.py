"""Convolution ops over 2 or 3 spatial dims: conv2d, conv3d and their transposes
(pooling: `pool.py`).

``conv2d``            Input [N, C, H, W], Filter [O, C/groups, kh, kw] -> Output [N, O, OH, OW]
``conv2d_transpose``  Input [N, C, H, W], Filter [C, O/groups, kh, kw] -> Output [N, O, OH, OW]
``conv3d``            Input [N, C, D, H, W], Filter [O, C/groups, kd, kh, kw] -> [N, O, OD, OH, OW]
``conv3d_transpose``  Input [N, C, D, H, W], Filter [C, O/groups, kd, kh, kw] -> likewise

Attributes follow Paddle: ``strides``, ``paddings`` (one per spatial dim, or a before and
an after for each: [top, bottom, left, right]), ``dilations``, ``groups``,
``padding_algorithm`` (EXPLICIT uses ``paddings``; SAME pads to an output of
ceil(size / stride), dilation 1; VALID pads nothing) and ``data_format`` (NCHW or
NHWC; NCDHW or NDHWC).

How the kernels work. A convolution relates an *image* side X [N, C, *S] to a *response*
side Y [N, O, *OS] through a filter K [O, C/G, *k]: Y[n, o, p] = sum over (c, t) of
K[o, c, t] * Xpad[n, c, p*s + t*d]. Everything is three primitives of `ConvGeometry`,
each one big copy or one GEMM per group:

* im2col: X -> cols [C*prod(k), N*L], one strided copy of a window view;
* GEMM: Y^T [O, N*L] = K [O, C/G*prod(k)] @ cols (per group);
* col2im: the adjoint of im2col, one strided add per kernel tap into a zeroed image.

The columns are ordered (n, *out) or (*out, n), whichever makes the copies cheaper for
the shapes at hand (see `ConvGeometry`); with one image, Output is written by the GEMM.

conv is im2col + GEMM; its input gradient is GEMM + col2im and its filter gradient is
dY^T @ cols^T. The transposed convolution is the same relation read backwards (its Input
is the response side, its Output the image side, and Paddle's filter layout [C_in,
C_out/G, *k] is the conv layout of that relation), so it reuses the same three primitives.

Index arrays, padded scratch images, column buffers and their strided views are built once
per plan in the kernel factory; a step makes no Python loop over the batch.

``data_format`` CHWN (set by the layout plan pass, never by a layer; 2-D only) runs the
same ops on batch-innermost images: Input [C, H, W, N] -> Output [O, OH, OW, N], the
GEMMs' own column order, so no transposing copy is left (`ConvGeometry`, layouts.py).
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import Any

from ..kernels.col2im import col2im_source
from .compiled import compiled_kernel, run_compiled
from .im2col import ConvGeometry, layout_gain
from .layouts import (
    CHWN,
    NCDHW,
    NCHW,
    NDHWC,
    NHWC,
    LayoutRule,
    from_layout,
    image_layout,
    to_layout,
)
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
from .window import check_float, check_rank, fmt, ints, resolved_paddings, spatial_paddings

_ConvGeometry = ConvGeometry  # the name tests and older callers use

#: The layouts the ops of each spatial rank take (CHWN: only the layout pass sets it).
LAYOUTS = {2: (NCHW, NHWC, CHWN), 3: (NCDHW, NDHWC)}
_NAMES = {2: ("[h, w]", "[out_c, in_c/groups, kh, kw]", "[in_c, out_c/groups, kh, kw]"),
          3: ("[d, h, w]", "[out_c, in_c/groups, kd, kh, kw]",
              "[in_c, out_c/groups, kd, kh, kw]")}
_AXES = ("depth", "height", "width")


# --- shared attrs and checks -------------------------------------------------------------------

def _conv_attrs(rank: int) -> dict[str, Any]:
    return {"strides": [1] * rank, "paddings": [0] * rank, "dilations": [1] * rank,
            "groups": 1, "use_cudnn": True, "padding_algorithm": "EXPLICIT",
            "data_format": LAYOUTS[rank][0]}


def conv_params(ctx: Any, sizes: Sequence[int], kernel: Sequence[int]) -> tuple:
    """(strides, paddings (before, after per dim), dilations, groups) of a convolution
    over images of spatial ``sizes`` (-1 unknown) with a ``kernel``, padding_algorithm
    applied (SAME also sets the dilations to 1, as Paddle does)."""
    rank = len(sizes)
    strides = ints(ctx, "strides", ctx.attrs["strides"], rank, 1)
    pads = spatial_paddings(ctx, ctx.attrs["paddings"], rank)
    dils = ints(ctx, "dilations", ctx.attrs["dilations"], rank, 1)
    pads = resolved_paddings(ctx, pads, sizes, kernel, strides)
    if ctx.attrs.get("padding_algorithm") == "SAME":
        dils = (1,) * rank
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


def _layout(ctx: Any, rank: int) -> str:
    return image_layout(ctx, "data_format", rank, (CHWN,) if rank == 2 else ())


def _operands(ctx: InferContext, rank: int, filter_layout: str) -> tuple:
    """The checks the convolutions share: float Input and Filter of rank + 2 dims and one
    dtype, valid attrs, groups dividing the input channels. Returns (x, Input's shape in
    channel-first order, f, params)."""
    layout = _layout(ctx, rank)
    check_rank(ctx, "Input", rank + 2, f"{layout} image batch")
    check_rank(ctx, "Filter", rank + 2, f"filter {filter_layout}")
    check_float(ctx, "Input")
    x, f = ctx.input("Input"), ctx.input("Filter")
    if x.dtype != f.dtype:
        ctx.fail_dtype(f"Input is {x.dtype} but Filter is {f.dtype}")
    shape = from_layout(x.shape, layout)
    params = conv_params(ctx, shape[2:], f.shape[2:])
    c, g = shape[1], params[3]
    if c >= 0 and c % g:
        ctx.fail(f"groups={g} does not divide the {c} channels of Input {fmt(x.shape)} "
                 f"(Filter {fmt(f.shape)})")
    return x, shape, f, params


def _axis_names(rank: int) -> tuple[str, ...]:
    return _AXES[3 - rank:]


def _conv_infer(ctx: InferContext, rank: int) -> None:
    x, shape, f, params = _operands(ctx, rank, _NAMES[rank][1])
    strides, pads, dils, g = params
    n, c, *sizes = shape
    o, cg, *kernel = f.shape
    if o >= 0 and o % g:
        ctx.fail(f"groups={g} does not divide the {o} output channels of Filter "
                 f"{fmt(f.shape)} (Input {fmt(x.shape)})")
    if c >= 0 and cg >= 0 and cg * g != c:
        ctx.fail(f"Input {fmt(x.shape)} has {c} channels but Filter {fmt(f.shape)} "
                 f"expects {cg} per group x groups {g} = {cg * g}")
    outs = []
    for i, what in enumerate(_axis_names(rank)):
        size, k, d, p0, p1 = sizes[i], kernel[i], dils[i], pads[2 * i], pads[2 * i + 1]
        if size >= 0 and k >= 0 and size + p0 + p1 < d * (k - 1) + 1:
            ctx.fail(f"the kernel of Filter {fmt(f.shape)} (dilated {what} "
                     f"{d * (k - 1) + 1}) is larger than the padded Input {fmt(x.shape)} "
                     f"({what} {size} + padding {p0 + p1})")
        outs.append(_conv_out_dim(size, k, strides[i], p0, p1, d))
    ctx.set_output("Output", to_layout((n, o, *outs), _layout(ctx, rank)), x.dtype)


#: The column layout of every conv kernel: None chooses by cost; tests force each.
BATCH_INNER: bool | None = None


def _conv_geometry(ctx: KernelContext, image: Sequence[int], response: Sequence[int],
                   filt: Sequence[int], scratch_key: Hashable | None = None) -> ConvGeometry:
    """The geometry of a relation between ``image`` and ``response``, both given in the
    op's layout. The paddings (SAME) follow the sizes of the op's Input. With
    ``scratch_key``, its columns are blocks of the plan's per-call scratch under that key
    (shared by every size of the method's family)."""
    rank = len(filt) - 2
    layout = _layout(ctx, rank)
    sizes = from_layout(ctx.input("Input").shape, layout)[2:]
    strides, pads, dils, g = conv_params(ctx, sizes, filt[2:])
    return ConvGeometry(ctx.xp, ctx.input("Filter").dtype, from_layout(image, layout),
                        from_layout(response, layout), filt[2:], strides, pads, dils, g,
                        batch_inner=BATCH_INNER, layout=layout,
                        scratch=None if scratch_key is None else (ctx.state.scratch,
                                                                  scratch_key))


def _shared_conv_geometry(ctx: KernelContext, image: Sequence[int], response: Sequence[int],
                          filt: Sequence[int]) -> ConvGeometry:
    """One geometry for a conv and its gradient op over the same Input and Filter vars, so
    the gradient reads the columns the forward op left (`ConvGeometry.columns_of`)."""
    relation = ("conv", ctx.input_name("Input"), ctx.input_name("Filter"),
                repr(sorted(ctx.attrs.items())), BATCH_INNER)
    key = (*relation, tuple(image), tuple(response), tuple(filt))
    # the columns by the relation alone: every batch size's plan takes the same blocks
    return ctx.shared(ConvGeometry, key,
                      lambda: _conv_geometry(ctx, image, response, filt, relation))


def _col2im(ctx: KernelContext, geo: ConvGeometry, out: Any) -> Callable[[Any], Any]:
    """``geo.make_col2im(out)``, or where the compiled tier has a form of it
    (`kernels/col2im.py`: batch-innermost 2-D images, float32/64, on the host) a kernel
    that runs that once the plan switched to it."""
    numpy_col2im = geo.make_col2im(out)
    if not geo.chwn or len(geo.k) != 2:   # the compiled form is for 2-D images only
        return numpy_col2im
    (kh, kw), (sh, sw), (dh, dw), (pt, pl) = geo.k, geo.s, geo.d, geo.p0
    handle = compiled_kernel(ctx, geo.dtype, lambda: col2im_source(
        (kh, kw), (sh, sw), (dh, dw), (pt, pl), geo.dtype))
    if handle is None:
        return numpy_col2im
    shape6 = (geo.c,) + geo.k + geo.outs + (geo.n,)

    def col2im(dcols: Any) -> Any:
        dst = out if out is not None else geo.xp.empty(geo.image_shape(), geo.dtype)
        if run_compiled(handle, lambda: (dcols.reshape(shape6), dst)):
            return dst
        return numpy_col2im(dcols)
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

    def conv(a, k):
        return from_columns(geo.forward_gemm(k, geo.im2col(a), geo.yt()))
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
    return grad


def _conv_grad(g: GradContext, grad_type: str) -> None:
    emit_default_grad(g, ("Input", "Filter"), grad_type, ("Input", "Filter"), ("Output",))


def _layout_rule(images: tuple[str, ...], image: str, response: str,
                 gradient: bool) -> LayoutRule:
    """Runs in CHWN; ``image`` and ``response`` name the slots of the relation's sides."""
    def gain(attrs: Any, shapes: Any) -> float:
        return layout_gain(shapes[image], shapes[response], shapes["Filter"][2:], gradient)
    return LayoutRule(images, (CHWN,), "data_format", gain=gain)


# --- the transposed convolutions ---------------------------------------------------------------

def _transpose_out_dim(size: int, k: int, s: int, p0: int, p1: int, d: int) -> int:
    if size < 0 or k < 0:
        return -1
    return (size - 1) * s - p0 - p1 + d * (k - 1) + 1


def _conv_t_infer(ctx: InferContext, rank: int) -> None:
    x, shape, f, params = _operands(ctx, rank, _NAMES[rank][2])
    strides, pads, dils, g = params
    n, c, *sizes = shape
    ci, og, *kernel = f.shape
    if c >= 0 and ci >= 0 and ci != c:
        ctx.fail(f"Input {fmt(x.shape)} has {c} channels but Filter {fmt(f.shape)} "
                 f"(layout {_NAMES[rank][2]}) expects {ci}")
    outs = [_transpose_out_dim(sizes[i], kernel[i], strides[i], pads[2 * i], pads[2 * i + 1],
                               dils[i]) for i in range(rank)]
    if any(o < 1 for o, size in zip(outs, sizes) if size >= 0):
        ctx.fail(f"Input {fmt(x.shape)} with Filter {fmt(f.shape)}, strides {list(strides)} "
                 f"and paddings {list(pads)} gives an empty output {outs}; use less padding")
    size = list(ctx.attrs["output_size"] or [])
    if size:
        want = ints(ctx, "output_size", size, rank, 1)
        for got, computed, s, what in zip(want, outs, strides, _axis_names(rank)):
            if computed >= 0 and not computed <= got < computed + s:
                ctx.fail(f"output_size {list(want)}: the {what} must lie in [{computed}, "
                         f"{computed + s - 1}] for Input {fmt(x.shape)}, Filter "
                         f"{fmt(f.shape)} and stride {s}")
        outs = [w if o >= 0 else -1 for w, o in zip(want, outs)]
    out_c = og * g if og >= 0 else -1
    ctx.set_output("Output", to_layout((n, out_c, *outs), _layout(ctx, rank)), x.dtype)


def _conv_t_kernel(ctx: KernelContext):
    x, f, y = ctx.input("Input"), ctx.input("Filter"), ctx.output("Output")
    # The relation: image side = Output, response side = Input.
    geo = _conv_geometry(ctx, y.shape, x.shape, f.shape)
    col2im = _col2im(ctx, geo, ctx.buffer("Output"))

    def conv_transpose(a, k):
        return col2im(geo.data_gemm(k, geo.to_columns(a), geo.cols()))
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


# --- registration: one family of four ops per spatial rank ---------------------------------------

def _conv_doc(rank: int) -> str:
    dims = ("H", "W") if rank == 2 else ("D", "H", "W")
    return (f"{rank}-D convolution (cross-correlation) of Input [N, C, {', '.join(dims)}] "
            f"({LAYOUTS[rank][0]}; {LAYOUTS[rank][1]} with data_format) with Filter "
            f"{_NAMES[rank][1]}; each output dim (size + pads - dilation*(k-1) - 1) / stride "
            f"+ 1. Attrs strides, paddings (one per dim, or before and after each), "
            f"dilations, groups, padding_algorithm (EXPLICIT, SAME, VALID).")


def _conv_t_doc(rank: int) -> str:
    return (f"Transposed {rank}-D convolution (the gradient of conv{rank}d w.r.t. its input) "
            f"with Filter {_NAMES[rank][2]}; each output dim (size-1)*stride - pads + "
            f"dilation*(k-1) + 1, or output_size when given (it may add up to stride-1).")


def _register_pair(op: str, rank: int, infer: Callable, kernel: Callable,
                   grad_kernel: Callable, attrs: dict, image: str, doc: str) -> None:
    """An op and its gradient op; ``image`` names the slot of the relation's image side
    (Input for a convolution, Output for a transposed one), the other is its response."""
    response = "Output" if image == "Input" else "Input"

    def rule(images: tuple[str, ...], gradient: bool, grad_op: bool) -> LayoutRule | None:
        if rank != 2:   # the layout plan pass runs 4-D images only
            return None
        side = {"Output": "Output@GRAD"} if grad_op else {}
        return _layout_rule(images, side.get(image, image), side.get(response, response),
                            gradient)

    transposed = image == "Output"
    register(OpSpec(op, slots("Input", "Filter"), slots("Output"), partial(infer, rank=rank),
                    kernel, partial(_conv_grad, grad_type=f"{op}_grad"), attrs=attrs,
                    layout=rule(("Input", "Output"), transposed, False), doc=doc))
    register(OpSpec(f"{op}_grad", slots("Input", "Filter", "Output@GRAD"),
                    slots("Input@GRAD?", "Filter@GRAD?"),
                    infer_like({"Input@GRAD": "Input", "Filter@GRAD": "Filter"}), grad_kernel,
                    attrs=attrs,
                    layout=rule(("Input", "Output@GRAD", "Input@GRAD"), True, True)))


def _register_family(rank: int) -> None:
    attrs = _conv_attrs(rank)
    _register_pair(f"conv{rank}d", rank, _conv_infer, _conv_kernel, _conv_grad_kernel, attrs,
                   "Input", _conv_doc(rank))
    _register_pair(f"conv{rank}d_transpose", rank, _conv_t_infer, _conv_t_kernel,
                   _conv_t_grad_kernel, {**attrs, "output_size": []}, "Output",
                   _conv_t_doc(rank))


_register_family(2)
_register_family(3)
