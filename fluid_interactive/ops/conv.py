"""Convolution and pooling ops on NCHW tensors: conv2d, conv2d_transpose, pool2d.

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
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from ..ir.records import FLOAT_DTYPES
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, emit_default_grad, \
    infer_like, slots


def _fmt(shape: Sequence[int]) -> str:
    return "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"


def _pair(ctx: Any, name: str, value: Any, minimum: int) -> tuple[int, int]:
    """A 2-int attr (an int means both), each at least ``minimum``."""
    vals = list(value) if isinstance(value, (list, tuple)) else [value, value]
    if len(vals) == 1:
        vals = vals * 2
    if len(vals) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        ctx.fail(f"{name} must be two ints [h, w], got {value!r}")
    if any(v < minimum for v in vals):
        ctx.fail(f"{name} must be at least {minimum}, got {list(vals)}")
    return int(vals[0]), int(vals[1])


def _paddings(ctx: Any, value: Any) -> tuple[int, int, int, int]:
    """``paddings`` as (top, bottom, left, right) from [ph, pw] or 4 values."""
    vals = list(value) if isinstance(value, (list, tuple)) else [value, value]
    if len(vals) == 1:
        vals = vals * 2
    if len(vals) not in (2, 4) or not all(isinstance(v, int) and not isinstance(v, bool)
                                          for v in vals):
        ctx.fail(f"paddings must be [pad_h, pad_w] or [top, bottom, left, right] ints, got "
                 f"{value!r}")
    if any(v < 0 for v in vals):
        ctx.fail(f"paddings must not be negative, got {list(vals)}")
    if len(vals) == 2:
        return vals[0], vals[0], vals[1], vals[1]
    return vals[0], vals[1], vals[2], vals[3]


def _check_float(ctx: InferContext, slot: str) -> None:
    t = ctx.input(slot)
    if t.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"{slot} must be float16/32/64, got {t.dtype}{_fmt(t.shape)}")


def _check_rank4(ctx: InferContext, slot: str, what: str) -> None:
    t = ctx.input(slot)
    if t.rank != 4:
        ctx.fail(f"{slot} must be a 4-D {what}, got {_fmt(t.shape)}")


def _strided_view(xp: Any, a: Any, shape: Sequence[int], strides: Sequence[int]) -> Any:
    return xp.lib.stride_tricks.as_strided(a, shape=tuple(shape), strides=tuple(strides))


def _zeros(xp: Any, shape: Sequence[int], dtype: str) -> Any:
    return xp.zeros(tuple(shape), dtype=dtype)


class _ConvGeometry:
    """Shapes, scratch buffers and column layout of one convolution relation (see the
    module doc).

    Columns are ordered (n, oh, ow) ("batch outer") or (oh, ow, n) ("batch inner"). The
    im2col copy and the col2im adds run over contiguous stretches of the column order: a
    whole output row (OW values) batch-outer, OW * N values batch-inner. Batch-inner costs
    two transposing copies (the image and the response side to and from [..., N]), so it
    pays off for short output rows, like LeNet's second conv (8-wide rows: its im2col is
    ~10x faster batch-inner) but not its first (24-wide rows, a response side 10x larger).
    `_prefers_batch_inner` weighs the two with costs measured on NumPy.
    """

    def __init__(self, xp: Any, dtype: str, image: Sequence[int], response: Sequence[int],
                 kernel: Sequence[int], strides: tuple[int, int],
                 pads: tuple[int, int, int, int], dilations: tuple[int, int], groups: int,
                 batch_inner: Optional[bool] = None):
        self.xp, self.dtype = xp, dtype
        self.n, self.c, self.h, self.w = image
        _, self.o, self.oh, self.ow = response
        self.kh, self.kw = kernel
        self.sh, self.sw = strides
        self.pt, self.pb, self.pl, self.pr = pads
        self.dh, self.dw = dilations
        self.g = groups
        self.l = self.oh * self.ow                  # output positions per image
        self.nl = self.n * self.l
        self.ckk = self.c * self.kh * self.kw
        self.cg_kk = self.ckk // groups
        self.og = self.o // groups
        # The padded image must hold every window; it may be larger than the windows need.
        self.hp = max(self.h + self.pt + self.pb, (self.oh - 1) * self.sh
                      + self.dh * (self.kh - 1) + 1)
        self.wp = max(self.w + self.pl + self.pr, (self.ow - 1) * self.sw
                      + self.dw * (self.kw - 1) + 1)
        self.padded = (self.hp, self.wp) != (self.h, self.w)
        self.batch_inner = self._prefers_batch_inner() if batch_inner is None else (
            batch_inner and self.n > 1)
        self._cols: Optional[Any] = None
        self._image: Optional[tuple[Any, Any, Any]] = None
        self._yt: Optional[Any] = None

    def _prefers_batch_inner(self) -> bool:
        if self.n == 1:
            return False
        # Per image: batch-outer copies C*kh*kw*OH rows of OW values, ~8 ns of overhead
        # each; batch-inner transposes the image and the response, ~1.5 ns a value.
        rows = self.c * self.kh * self.kw * self.oh
        transposed = self.c * self.h * self.w + self.o * self.l
        return 8 * rows > 1.5 * transposed

    # --- scratch -------------------------------------------------------------------------

    def cols(self) -> Any:
        if self._cols is None:
            self._cols = self.xp.empty((self.ckk, self.nl), self.dtype)
        return self._cols

    def yt(self) -> Any:
        """Scratch for the response side in column order, [O, N*L]."""
        if self._yt is None:
            self._yt = self.xp.empty((self.o, self.nl), self.dtype)
        return self._yt

    def _cols6(self, cols: Any) -> Any:
        if self.batch_inner:
            return cols.reshape(self.c, self.kh, self.kw, self.oh, self.ow, self.n)
        return cols.reshape(self.c, self.kh, self.kw, self.n, self.oh, self.ow)

    def _windows_of(self, a: Any) -> Any:
        """The windows of a padded image ([N, C, Hp, Wp] batch-outer, [C, Hp, Wp, N]
        batch-inner) as a view in the layout of `_cols6`."""
        if self.batch_inner:
            sc, sh_, sw_, sn = a.strides
            shape = (self.c, self.kh, self.kw, self.oh, self.ow, self.n)
            strides = (sc, sh_ * self.dh, sw_ * self.dw, sh_ * self.sh, sw_ * self.sw, sn)
        else:
            sn, sc, sh_, sw_ = a.strides
            shape = (self.c, self.kh, self.kw, self.n, self.oh, self.ow)
            strides = (sc, sh_ * self.dh, sw_ * self.dw, sn, sh_ * self.sh, sw_ * self.sw)
        return _strided_view(self.xp, a, shape, strides)

    def _image_scratch(self) -> tuple[Any, Any, Any]:
        """(zeroed padded image, its interior as an [N, C, H, W] view, its windows): the
        padding stays zero because only the interior is ever written."""
        if self._image is None:
            if self.batch_inner:
                img = _zeros(self.xp, (self.c, self.hp, self.wp, self.n), self.dtype)
                inner = img[:, self.pt:self.pt + self.h, self.pl:self.pl + self.w, :]
                inner = inner.transpose(3, 0, 1, 2)
            else:
                img = _zeros(self.xp, (self.n, self.c, self.hp, self.wp), self.dtype)
                inner = img[:, :, self.pt:self.pt + self.h, self.pl:self.pl + self.w]
            self._image = (img, inner, self._windows_of(img))
        return self._image

    # --- the three primitives -----------------------------------------------------------

    def im2col(self, x: Any) -> Any:
        """cols [C*kh*kw, N*L] of image ``x`` [N, C, H, W] (a scratch buffer)."""
        xp, cols = self.xp, self.cols()
        if self.padded or self.batch_inner:
            _, inner, windows = self._image_scratch()
            xp.copyto(inner, x)
        else:
            windows = self._windows_of(x)
        xp.copyto(self._cols6(cols), windows)
        return cols

    def make_col2im(self, out: Optional[Any]) -> Callable[[Any], Any]:
        """fn(dcols [C*kh*kw, N*L]) -> image [N, C, H, W], the adjoint of im2col: kh*kw
        strided adds into a zeroed image; it writes into ``out`` when given."""
        xp = self.xp
        shape = (self.n, self.c, self.h, self.w)
        scratch = self.padded or self.batch_inner
        if scratch:   # accumulate in a private padded image, then copy its interior out
            acc = self.xp.empty((self.c, self.hp, self.wp, self.n) if self.batch_inner else
                                (self.n, self.c, self.hp, self.wp), self.dtype)
            if self.batch_inner:
                inner = acc[:, self.pt:self.pt + self.h, self.pl:self.pl + self.w, :]
                inner = inner.transpose(3, 0, 1, 2)
            else:
                inner = acc[:, :, self.pt:self.pt + self.h, self.pl:self.pl + self.w]
        hs, ws = (self.oh - 1) * self.sh + 1, (self.ow - 1) * self.sw + 1
        offsets = [(i, j, i * self.dh, j * self.dw) for i in range(self.kh)
                   for j in range(self.kw)]

        def targets(image: Any) -> list[tuple[Any, int, int]]:
            if self.batch_inner:
                return [(image[:, h0:h0 + hs:self.sh, w0:w0 + ws:self.sw, :], i, j)
                        for i, j, h0, w0 in offsets]
            return [(image[:, :, h0:h0 + hs:self.sh, w0:w0 + ws:self.sw], i, j)
                    for i, j, h0, w0 in offsets]

        fixed = targets(acc) if scratch else (targets(out) if out is not None else None)
        batch_inner = self.batch_inner

        def col2im(dcols: Any) -> Any:
            d6 = self._cols6(dcols)
            image = acc if scratch else (out if out is not None else xp.empty(shape,
                                                                              self.dtype))
            image.fill(0)
            for view, i, j in (fixed if fixed is not None else targets(image)):
                src = d6[:, i, j] if batch_inner else d6[:, i, j].transpose(1, 0, 2, 3)
                xp.add(view, src, out=view)
            if not scratch:
                return image
            if out is None:
                return inner.copy()
            xp.copyto(out, inner)
            return out
        return col2im

    # --- response side layout ------------------------------------------------------------

    def to_columns(self, y: Any) -> Any:
        """Response [N, O, OH, OW] in column order [O, N*L] (a view when N == 1, else a
        scratch copy)."""
        if self.n == 1:
            return y.reshape(self.o, self.l)
        yt = self.yt()
        y3 = y.reshape(self.n, self.o, self.l)
        if self.batch_inner:
            self.xp.copyto(yt.reshape(self.o, self.l, self.n), y3.transpose(1, 2, 0))
        else:
            self.xp.copyto(yt.reshape(self.o, self.n, self.l), y3.transpose(1, 0, 2))
        return yt

    def make_from_columns(self, out: Optional[Any]) -> Callable[[Any], Any]:
        """fn(yt [O, N*L]) -> response [N, O, OH, OW] (into ``out`` when given)."""
        xp, n, o, l = self.xp, self.n, self.o, self.l
        shape = (n, o, self.oh, self.ow)
        batch_inner = self.batch_inner

        def from_columns(yt: Any) -> Any:
            dst = out if out is not None else xp.empty(shape, self.dtype)
            src = (yt.reshape(o, l, n).transpose(2, 0, 1) if batch_inner
                   else yt.reshape(o, n, l).transpose(1, 0, 2))
            xp.copyto(dst.reshape(n, o, l), src)
            return dst
        return from_columns

    # --- GEMMs (one per group) ----------------------------------------------------------

    def forward_gemm(self, k: Any, cols: Any, out: Any) -> Any:
        """out [O, N*L] = K [O, C/G*kh*kw] @ cols, per group."""
        if self.g == 1:
            return self.xp.matmul(k.reshape(self.o, self.ckk), cols, out=out)
        self.xp.matmul(k.reshape(self.g, self.og, self.cg_kk),
                       cols.reshape(self.g, self.cg_kk, self.nl),
                       out=out.reshape(self.g, self.og, self.nl))
        return out

    def data_gemm(self, k: Any, yt: Any, out: Any) -> Any:
        """out (dcols) [C*kh*kw, N*L] = K^T @ yt, per group."""
        if self.g == 1:
            return self.xp.matmul(k.reshape(self.o, self.ckk).T, yt, out=out)
        self.xp.matmul(k.reshape(self.g, self.og, self.cg_kk).transpose(0, 2, 1),
                       yt.reshape(self.g, self.og, self.nl),
                       out=out.reshape(self.g, self.cg_kk, self.nl))
        return out

    def filter_gemm(self, yt: Any, cols: Any, out: Optional[Any]) -> Any:
        """dK [O, C/G, kh, kw] = yt @ cols^T, per group."""
        xp = self.xp
        shape = (self.o, self.c // self.g, self.kh, self.kw)
        dst = out if out is not None else xp.empty(shape, self.dtype)
        if self.g == 1:
            xp.matmul(yt, cols.T, out=dst.reshape(self.o, self.ckk))
        else:
            xp.matmul(yt.reshape(self.g, self.og, self.nl),
                      cols.reshape(self.g, self.cg_kk, self.nl).transpose(0, 2, 1),
                      out=dst.reshape(self.g, self.og, self.cg_kk))
        return dst


# --- conv2d ------------------------------------------------------------------------------------

_CONV_ATTRS = {"strides": [1, 1], "paddings": [0, 0], "dilations": [1, 1], "groups": 1,
               "use_cudnn": True}
_CONV_T_ATTRS = {**_CONV_ATTRS, "output_size": []}


def _conv_params(ctx: Any) -> tuple:
    strides = _pair(ctx, "strides", ctx.attrs["strides"], 1)
    pads = _paddings(ctx, ctx.attrs["paddings"])
    dils = _pair(ctx, "dilations", ctx.attrs["dilations"], 1)
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


def _conv_infer(ctx: InferContext) -> None:
    _check_rank4(ctx, "Input", "NCHW image batch")
    _check_rank4(ctx, "Filter", "filter [out_c, in_c/groups, kh, kw]")
    _check_float(ctx, "Input")
    x, f = ctx.input("Input"), ctx.input("Filter")
    if x.dtype != f.dtype:
        ctx.fail_dtype(f"Input is {x.dtype} but Filter is {f.dtype}")
    (sh, sw), (pt, pb, pl, pr), (dh, dw), g = _conv_params(ctx)
    n, c, h, w = x.shape
    o, cg, kh, kw = f.shape
    if c >= 0 and c % g:
        ctx.fail(f"groups={g} does not divide the {c} channels of Input {_fmt(x.shape)} "
                 f"(Filter {_fmt(f.shape)})")
    if o >= 0 and o % g:
        ctx.fail(f"groups={g} does not divide the {o} output channels of Filter "
                 f"{_fmt(f.shape)} (Input {_fmt(x.shape)})")
    if c >= 0 and cg >= 0 and cg * g != c:
        ctx.fail(f"Input {_fmt(x.shape)} has {c} channels but Filter {_fmt(f.shape)} "
                 f"expects {cg} per group x groups {g} = {cg * g}")
    for size, k, d, p0, p1, what in ((h, kh, dh, pt, pb, "height"), (w, kw, dw, pl, pr,
                                                                       "width")):
        if size >= 0 and k >= 0 and size + p0 + p1 < d * (k - 1) + 1:
            ctx.fail(f"the kernel of Filter {_fmt(f.shape)} (dilated {what} "
                     f"{d * (k - 1) + 1}) is larger than the padded Input {_fmt(x.shape)} "
                     f"({what} {size} + padding {p0 + p1})")
    ctx.set_output("Output", (n, o, _conv_out_dim(h, kh, sh, pt, pb, dh),
                              _conv_out_dim(w, kw, sw, pl, pr, dw)), x.dtype)


#: The column layout of every conv kernel: None chooses by cost; tests force each.
BATCH_INNER: Optional[bool] = None


def _conv_geometry(ctx: KernelContext, image: Sequence[int], response: Sequence[int],
                   filt: Sequence[int]) -> _ConvGeometry:
    strides, pads, dils, g = _conv_params(ctx)
    return _ConvGeometry(ctx.xp, ctx.input("Filter").dtype, image, response, filt[2:],
                         strides, pads, dils, g, batch_inner=BATCH_INNER)


def _conv_kernel(ctx: KernelContext):
    x, f, y = ctx.input("Input"), ctx.input("Filter"), ctx.output("Output")
    geo = _conv_geometry(ctx, x.shape, y.shape, f.shape)
    out = ctx.buffer("Output")
    if geo.n == 1:   # [O, 1*L] is already the NCHW layout: the GEMM writes Output
        def conv_one(a, k):
            dst = out if out is not None else geo.xp.empty(y.shape, geo.dtype)
            geo.forward_gemm(k, geo.im2col(a), dst.reshape(geo.o, geo.l))
            return dst
        return conv_one
    from_columns = geo.make_from_columns(out)
    yt = geo.yt()

    def conv(a, k):
        return from_columns(geo.forward_gemm(k, geo.im2col(a), yt))
    return conv


def _conv_grad_kernel(ctx: KernelContext):
    x, f = ctx.input("Input"), ctx.input("Filter")
    dy = ctx.input("Output@GRAD")
    geo = _conv_geometry(ctx, x.shape, dy.shape, f.shape)
    want_x, want_f = ctx.has_output("Input@GRAD"), ctx.has_output("Filter@GRAD")
    col2im = geo.make_col2im(ctx.buffer("Input@GRAD")) if want_x else None
    dcols = geo.xp.empty((geo.ckk, geo.nl), geo.dtype) if want_x else None
    dfilter = ctx.buffer("Filter@GRAD")

    def grad(a, k, g):
        gt = geo.to_columns(g)
        res = []
        if want_x:
            res.append(col2im(geo.data_gemm(k, gt, dcols)))
        if want_f:
            res.append(geo.filter_gemm(gt, geo.im2col(a), dfilter))
        return res[0] if len(res) == 1 else tuple(res)
    return grad


def _conv_grad(g: GradContext) -> None:
    emit_default_grad(g, ("Input", "Filter"), "conv2d_grad", ("Input", "Filter"), ("Output",))


register(OpSpec("conv2d", slots("Input", "Filter"), slots("Output"), _conv_infer,
                _conv_kernel, _conv_grad, attrs=_CONV_ATTRS,
                doc="2-D convolution (cross-correlation) of NCHW Input with Filter [O, C/groups, "
                    "kh, kw]; Output [N, O, (H + pads - dilation*(kh-1) - 1) / stride + 1, "
                    "...]. Attrs strides, paddings ([h, w] or [top, bottom, left, right]), "
                    "dilations, groups."))
register(OpSpec("conv2d_grad", slots("Input", "Filter", "Output@GRAD"),
                slots("Input@GRAD?", "Filter@GRAD?"),
                infer_like({"Input@GRAD": "Input", "Filter@GRAD": "Filter"}),
                _conv_grad_kernel, attrs=_CONV_ATTRS))


# --- conv2d_transpose --------------------------------------------------------------------------

def _transpose_out_dim(size: int, k: int, s: int, p0: int, p1: int, d: int) -> int:
    if size < 0 or k < 0:
        return -1
    return (size - 1) * s - p0 - p1 + d * (k - 1) + 1


def _conv_t_infer(ctx: InferContext) -> None:
    _check_rank4(ctx, "Input", "NCHW image batch")
    _check_rank4(ctx, "Filter", "filter [in_c, out_c/groups, kh, kw]")
    _check_float(ctx, "Input")
    x, f = ctx.input("Input"), ctx.input("Filter")
    if x.dtype != f.dtype:
        ctx.fail_dtype(f"Input is {x.dtype} but Filter is {f.dtype}")
    (sh, sw), (pt, pb, pl, pr), (dh, dw), g = _conv_params(ctx)
    n, c, h, w = x.shape
    ci, og, kh, kw = f.shape
    if c >= 0 and c % g:
        ctx.fail(f"groups={g} does not divide the {c} channels of Input {_fmt(x.shape)} "
                 f"(Filter {_fmt(f.shape)})")
    if c >= 0 and ci >= 0 and ci != c:
        ctx.fail(f"Input {_fmt(x.shape)} has {c} channels but Filter {_fmt(f.shape)} "
                 f"(layout [in_c, out_c/groups, kh, kw]) expects {ci}")
    oh = _transpose_out_dim(h, kh, sh, pt, pb, dh)
    ow = _transpose_out_dim(w, kw, sw, pl, pr, dw)
    if (oh >= 0 and oh < 1) or (ow >= 0 and ow < 1):
        ctx.fail(f"Input {_fmt(x.shape)} with Filter {_fmt(f.shape)}, strides {[sh, sw]} and "
                 f"paddings {[pt, pb, pl, pr]} gives an empty output ({oh} x {ow}); use less "
                 f"padding")
    size = list(ctx.attrs["output_size"] or [])
    if size:
        want = _pair(ctx, "output_size", size, 1)
        for got, computed, s, what in ((want[0], oh, sh, "height"), (want[1], ow, sw,
                                                                      "width")):
            if computed >= 0 and not computed <= got < computed + s:
                ctx.fail(f"output_size {list(want)}: the {what} must lie in [{computed}, "
                         f"{computed + s - 1}] for Input {_fmt(x.shape)}, Filter "
                         f"{_fmt(f.shape)} and stride {s}")
        oh = want[0] if oh >= 0 else -1
        ow = want[1] if ow >= 0 else -1
    ctx.set_output("Output", (n, og * g if og >= 0 else -1, oh, ow), x.dtype)


def _conv_t_kernel(ctx: KernelContext):
    x, f, y = ctx.input("Input"), ctx.input("Filter"), ctx.output("Output")
    # The relation: image side = Output, response side = Input.
    geo = _conv_geometry(ctx, y.shape, x.shape, f.shape)
    col2im = geo.make_col2im(ctx.buffer("Output"))
    dcols = geo.xp.empty((geo.ckk, geo.nl), geo.dtype)

    def conv_transpose(a, k):
        return col2im(geo.data_gemm(k, geo.to_columns(a), dcols))
    return conv_transpose


def _conv_t_grad_kernel(ctx: KernelContext):
    x, f = ctx.input("Input"), ctx.input("Filter")
    dy = ctx.input("Output@GRAD")
    geo = _conv_geometry(ctx, dy.shape, x.shape, f.shape)
    want_x, want_f = ctx.has_output("Input@GRAD"), ctx.has_output("Filter@GRAD")
    dx_buf, df_buf = ctx.buffer("Input@GRAD"), ctx.buffer("Filter@GRAD")
    from_columns = geo.make_from_columns(dx_buf) if geo.n > 1 else None
    xt = geo.xp.empty((geo.o, geo.nl), geo.dtype) if want_x and geo.n > 1 else None

    def grad(a, k, g):
        cols = geo.im2col(g)
        res = []
        if want_x:
            if from_columns is not None:
                res.append(from_columns(geo.forward_gemm(k, cols, xt)))
            else:   # one image: the GEMM writes Input@GRAD
                dst = dx_buf if dx_buf is not None else geo.xp.empty(x.shape, geo.dtype)
                geo.forward_gemm(k, cols, dst.reshape(geo.o, geo.l))
                res.append(dst)
        if want_f:
            res.append(geo.filter_gemm(geo.to_columns(a), cols, df_buf))
        return res[0] if len(res) == 1 else tuple(res)
    return grad


def _conv_t_grad(g: GradContext) -> None:
    emit_default_grad(g, ("Input", "Filter"), "conv2d_transpose_grad", ("Input", "Filter"),
                      ("Output",))


register(OpSpec("conv2d_transpose", slots("Input", "Filter"), slots("Output"), _conv_t_infer,
                _conv_t_kernel, _conv_t_grad, attrs=_CONV_T_ATTRS,
                doc="Transposed 2-D convolution (the gradient of conv2d w.r.t. its input) of "
                    "NCHW Input with Filter [C_in, C_out/groups, kh, kw]; Output [N, C_out, "
                    "(H-1)*stride - pads + dilation*(kh-1) + 1, ...], or output_size when "
                    "given (it may add up to stride-1 rows/cols)."))
register(OpSpec("conv2d_transpose_grad", slots("Input", "Filter", "Output@GRAD"),
                slots("Input@GRAD?", "Filter@GRAD?"),
                infer_like({"Input@GRAD": "Input", "Filter@GRAD": "Filter"}),
                _conv_t_grad_kernel, attrs=_CONV_T_ATTRS))


# --- pool2d ------------------------------------------------------------------------------------

_POOL_ATTRS = {"pooling_type": "max", "ksize": [], "strides": [1, 1], "paddings": [0, 0],
               "global_pooling": False, "ceil_mode": False, "exclusive": True,
               "use_cudnn": True}


def _pool_params(ctx: Any, h: int, w: int) -> tuple:
    """(type, (kh, kw), (sh, sw), (pt, pb, pl, pr), (oh, ow)); unknown sizes give -1."""
    ptype = ctx.attrs["pooling_type"]
    if ptype not in ("max", "avg"):
        ctx.fail(f"pooling_type must be 'max' or 'avg', got {ptype!r}")
    if ctx.attrs["global_pooling"]:
        return ptype, (h, w), (1, 1), (0, 0, 0, 0), (1 if h >= 0 else -1, 1 if w >= 0 else -1)
    if not ctx.attrs["ksize"]:
        ctx.fail("ksize (the pooling window [kh, kw]) is required unless global_pooling")
    k = _pair(ctx, "ksize", ctx.attrs["ksize"], 1)
    s = _pair(ctx, "strides", ctx.attrs["strides"], 1)
    p = _paddings(ctx, ctx.attrs["paddings"])
    if max(p[0], p[1]) >= k[0] or max(p[2], p[3]) >= k[1]:
        ctx.fail(f"paddings {list(p)} must be smaller than the pooling window {list(k)}")
    outs = []
    for size, kk, ss, p0, p1 in ((h, k[0], s[0], p[0], p[1]), (w, k[1], s[1], p[2], p[3])):
        if size < 0:
            outs.append(-1)
            continue
        span = size + p0 + p1 - kk
        if ctx.attrs["ceil_mode"]:
            o = -(-span // ss) + 1
            if (o - 1) * ss >= size + p0:   # a last window holding padding only is dropped
                o -= 1
        else:
            o = span // ss + 1
        outs.append(o)
    return ptype, k, s, p, tuple(outs)


def _pool_infer(ctx: InferContext) -> None:
    _check_rank4(ctx, "X", "NCHW image batch")
    _check_float(ctx, "X")
    x = ctx.input("X")
    n, c, h, w = x.shape
    _, k, _, p, (oh, ow) = _pool_params(ctx, h, w)
    if not ctx.attrs["global_pooling"]:
        for size, kk, p0, p1, what in ((h, k[0], p[0], p[1], "height"),
                                       (w, k[1], p[2], p[3], "width")):
            if size >= 0 and size + p0 + p1 < kk:
                ctx.fail(f"the pooling window {list(k)} is larger than X {_fmt(x.shape)} "
                         f"padded by {[p0, p1]} in {what}")
    ctx.set_output("Out", (n, c, oh, ow), x.dtype)


class _PoolGeometry:
    """Window views of a pooling, over X itself or over a padded scratch copy of it."""

    def __init__(self, ctx: KernelContext):
        xp = ctx.xp
        x = ctx.input("X")
        self.xp, self.dtype = xp, x.dtype
        self.n, self.c, self.h, self.w = x.shape
        self.type, (self.kh, self.kw), (self.sh, self.sw), pads, (self.oh, self.ow) = \
            _pool_params(ctx, self.h, self.w)
        self.pt, self.pb, self.pl, self.pr = pads
        self.is_global = bool(ctx.attrs["global_pooling"])
        self.hp = max(self.h + self.pt + self.pb, (self.oh - 1) * self.sh + self.kh)
        self.wp = max(self.w + self.pl + self.pr, (self.ow - 1) * self.sw + self.kw)
        self.padded = (self.pt, self.pl, self.hp, self.wp) != (0, 0, self.h, self.w)
        self.overlap = self.sh < self.kh or self.sw < self.kw
        self.positions = [(i, j) for i in range(self.kh) for j in range(self.kw)]
        self._pad: Optional[Any] = None

    def windows(self, image: Any) -> list[Any]:
        """The kh*kw strided [N, C, OH, OW] views, window offset (i, j) in row-major order."""
        hs, ws = (self.oh - 1) * self.sh + 1, (self.ow - 1) * self.sw + 1
        return [image[:, :, i:i + hs:self.sh, j:j + ws:self.sw] for i, j in self.positions]

    def padded_image(self, fill: float) -> tuple[Any, Any]:
        """(scratch [N, C, Hp, Wp] whose border holds ``fill``, its interior view)."""
        if self._pad is None:
            self._pad = self.xp.full((self.n, self.c, self.hp, self.wp), fill, self.dtype)
        return self._pad, self._pad[:, :, self.pt:self.pt + self.h, self.pl:self.pl + self.w]

    def reciprocal_counts(self) -> Any:
        """1 / (number of non-padding elements) of each window, [OH, OW]."""
        xp = self.xp

        def valid(o: int, s: int, k: int, p: int, size: int) -> Any:
            start = xp.arange(o) * s - p
            return xp.minimum(start + k, size) - xp.maximum(start, 0)
        counts = (valid(self.oh, self.sh, self.kh, self.pt, self.h)[:, None]
                  * valid(self.ow, self.sw, self.kw, self.pl, self.w)[None, :])
        return (1.0 / counts).astype(self.dtype)

    def divisor(self, exclusive: bool) -> Any:
        """What an avg pool's window sums are multiplied by: a scalar or an [OH, OW] array."""
        if exclusive and self.padded:
            r = self.reciprocal_counts()
            if bool((r == r[0, 0]).all()):
                return float(r[0, 0])
            return r
        return 1.0 / (self.kh * self.kw)


def _pool_kernel(ctx: KernelContext):
    geo = _PoolGeometry(ctx)
    xp, out = ctx.xp, ctx.buffer("Out")
    n, c, oh, ow = geo.n, geo.c, geo.oh, geo.ow
    is_max = geo.type == "max"
    if geo.is_global:
        hw = geo.h * geo.w
        if is_max:
            def global_max(a):
                dst = out if out is not None else xp.empty((n, c, 1, 1), geo.dtype)
                return xp.max(a.reshape(n, c, hw), axis=2, out=dst.reshape(n, c))
            return lambda a: global_max(a).reshape(n, c, 1, 1)
        weights = xp.full((hw,), 1.0 / hw, geo.dtype)

        def global_avg(a):
            dst = out.reshape(n, c) if out is not None else None
            return xp.matmul(a.reshape(n, c, hw), weights, out=dst).reshape(n, c, 1, 1)
        return global_avg
    combine = xp.maximum if is_max else xp.add
    scale = None if is_max else geo.divisor(bool(ctx.attrs["exclusive"]))
    if geo.padded:   # windows over a scratch copy of X whose border never wins
        padded, inner = geo.padded_image(-xp.inf if is_max else 0.0)
        fixed = geo.windows(padded)
    else:
        fixed = None

    def pool(a):
        if fixed is not None:
            xp.copyto(inner, a)
            views = fixed
        else:
            views = geo.windows(a)
        dst = out if out is not None else xp.empty((n, c, oh, ow), geo.dtype)
        if len(views) == 1:
            xp.copyto(dst, views[0])
        else:
            combine(views[0], views[1], out=dst)
            for v in views[2:]:
                combine(dst, v, out=dst)
        if scale is not None:
            xp.multiply(dst, scale, out=dst)
        return dst
    return pool


def _pool_grad_kernel(ctx: KernelContext):
    geo = _PoolGeometry(ctx)
    xp, dx_buf = ctx.xp, ctx.buffer("X@GRAD")
    n, c, h, w, oh, ow = geo.n, geo.c, geo.h, geo.w, geo.oh, geo.ow
    is_max = geo.type == "max"
    shape = (n, c, h, w)

    if geo.is_global:
        hw = h * w
        if not is_max:
            def global_avg_grad(a, y, g):
                dst = dx_buf if dx_buf is not None else xp.empty(shape, geo.dtype)
                xp.multiply(g.reshape(n, c, 1), 1.0 / hw, out=dst.reshape(n, c, hw))
                return dst
            return global_avg_grad
        rows = xp.arange(n * c)

        def global_max_grad(a, y, g):
            dst = dx_buf if dx_buf is not None else xp.empty(shape, geo.dtype)
            idx = xp.argmax(a.reshape(n * c, hw), axis=1)   # the first maximum
            flat = dst.reshape(n * c, hw)
            flat.fill(0)
            flat[rows, idx] = g.reshape(n * c)
            return dst
        return global_max_grad

    # Where the windows write: a zeroed padded scratch (cropped at the end), or dX itself.
    if geo.padded:
        acc, acc_inner = geo.padded_image(0.0)
        acc_views = geo.windows(acc)
        if is_max:
            xpad = xp.full((n, c, geo.hp, geo.wp), -xp.inf, geo.dtype)
            x_inner = xpad[:, :, geo.pt:geo.pt + h, geo.pl:geo.pl + w]
            x_views = geo.windows(xpad)
    covered_h = (oh - 1) * geo.sh + geo.kh
    covered_w = (ow - 1) * geo.sw + geo.kw
    # Non-overlapping windows write disjoint parts: plain stores, no zeroing except any
    # rows/columns that no window reaches.
    stores = not geo.overlap
    tmp = xp.empty((n, c, oh, ow), geo.dtype)
    scale = None if is_max else geo.divisor(bool(ctx.attrs["exclusive"]))

    def targets(dst: Any) -> list[Any]:
        if geo.padded:
            return acc_views
        return geo.windows(dst)

    def start(dst: Any) -> None:
        if geo.padded:
            acc.fill(0)
        elif not stores:
            dst.fill(0)
        else:
            if covered_h < h:
                dst[:, :, covered_h:, :] = 0
            if covered_w < w:
                dst[:, :, :, covered_w:] = 0

    def finish(dst: Any) -> Any:
        if geo.padded:
            xp.copyto(dst, acc_inner)
        return dst

    def put(view: Any, value: Any) -> None:
        if stores and not geo.padded:
            xp.copyto(view, value)
        else:
            xp.add(view, value, out=view)

    if not is_max:
        def avg_grad(a, y, g):
            dst = dx_buf if dx_buf is not None else xp.empty(shape, geo.dtype)
            share = xp.multiply(g, scale, out=tmp)
            start(dst)
            for view in targets(dst):
                put(view, share)
            return finish(dst)
        return avg_grad

    eq = xp.empty((n, c, oh, ow), bool)
    free = xp.empty((n, c, oh, ow), bool)
    last = len(geo.positions) - 1
    direct = stores and not geo.padded

    def max_grad(a, y, g):
        # Each window's gradient goes to its first maximum in row-major order, as in
        # Paddle's and PyTorch's kernels; `free` marks the windows whose maximum is not
        # found yet. (Bool masks: cheaper than carrying the unserved gradient along.)
        dst = dx_buf if dx_buf is not None else xp.empty(shape, geo.dtype)
        if geo.padded:
            xp.copyto(x_inner, a)
            xs = x_views
        else:
            xs = geo.windows(a)
        start(dst)
        for k, (xv, view) in enumerate(zip(xs, targets(dst))):
            xp.equal(xv, y, out=eq)
            if k == 0:
                if last:
                    xp.logical_not(eq, out=free)
            else:
                xp.logical_and(eq, free, out=eq)
                if k < last:
                    xp.logical_xor(free, eq, out=free)
            if direct:
                xp.multiply(g, eq, out=view)
            else:
                xp.add(view, xp.multiply(g, eq, out=tmp), out=view)
        return finish(dst)
    return max_grad


def _pool_grad(g: GradContext) -> None:
    emit_default_grad(g, ("X", "Out"), "pool2d_grad", ("X",))


register(OpSpec("pool2d", slots("X"), slots("Out"), _pool_infer, _pool_kernel, _pool_grad,
                attrs=_POOL_ATTRS,
                doc="Max or average pooling of NCHW X over ksize windows. Out [N, C, (H + "
                    "pads - kh) / stride + 1, ...] (rounded up with ceil_mode, a last window "
                    "of padding only dropped); global_pooling pools each whole plane. Avg "
                    "divides by the window's non-padding count when exclusive, else by "
                    "kh*kw. The max gradient goes to each window's first maximum."))
register(OpSpec("pool2d_grad", slots("X", "Out", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "X"}), _pool_grad_kernel, attrs=_POOL_ATTRS))
