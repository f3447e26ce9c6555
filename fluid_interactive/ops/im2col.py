"""`ConvGeometry`: im2col, the per-group GEMM and col2im for one convolution relation
(the primitives `conv.py` builds conv2d and conv2d_transpose from)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .layouts import CHWN, NCHW, TRANSFER_NS
from .spec import KeptFrom
from .window import strided_view, zeros

#: Overhead of one strided row copy or add (batch-outer columns), in ns, on NumPy.
ROW_NS = 8.0


def _layout_work(c: int, h: int, w: int, o: int, oh: int, ow: int, kh: int, kw: int
                 ) -> tuple[int, int]:
    """Per image: the rows of OW values a batch-outer im2col copies (C*kh*kw*OH), and
    the values a batch-inner one transposes (the image and the response)."""
    return c * kh * kw * oh, c * h * w + o * oh * ow


def layout_gain(image: Sequence[int], response: Sequence[int], kernel: Sequence[int],
                gradient: bool) -> float:
    """ns per image a convolution relation's kernels save in CHWN over NCHW: in NCHW
    im2col either copies short rows or transposes both sides (the cheaper is taken); a
    gradient also transposes the response's gradient and runs col2im the same way. In
    CHWN none of that is left. Shapes in NCHW order (a -1 batch is fine)."""
    _, c, h, w = image
    _, o, oh, ow = response
    rows, transposed = _layout_work(c, h, w, o, oh, ow, kernel[0], kernel[1])
    layout = min(ROW_NS * rows, TRANSFER_NS * transposed)
    if not gradient:
        return layout
    return TRANSFER_NS * o * oh * ow + min(ROW_NS * rows, TRANSFER_NS * c * h * w)


class ConvGeometry:
    """Shapes, scratch buffers and column layout of one convolution relation (see the
    module doc).

    Columns are ordered (n, oh, ow) ("batch outer") or (oh, ow, n) ("batch inner"). The
    im2col copy and the col2im adds run over contiguous stretches of the column order: a
    whole output row (OW values) batch-outer, OW * N values batch-inner. Batch-inner costs
    two transposing copies (the image and the response side to and from [..., N]), so it
    pays off for short output rows, like LeNet's second conv (8-wide rows: its im2col is
    ~10x faster batch-inner) but not its first (24-wide rows, a response side 10x larger).
    `_prefers_batch_inner` weighs the two with costs measured on NumPy.

    With ``layout='CHWN'`` (layouts.py) the image and the response arrays themselves are
    batch innermost, [C, H, W, N] and [O, OH, OW, N]: the columns are batch-inner, the
    response *is* the GEMM's [O, N*L] output, and col2im adds straight into the image, so
    no transposing copy is left on either side.
    """

    def __init__(self, xp: Any, dtype: str, image: Sequence[int], response: Sequence[int],
                 kernel: Sequence[int], strides: tuple[int, int],
                 pads: tuple[int, int, int, int], dilations: tuple[int, int], groups: int,
                 batch_inner: bool | None = None, layout: str = NCHW):
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
        self.chwn = layout == CHWN
        if self.chwn:
            self.batch_inner = True
        else:
            self.batch_inner = self._prefers_batch_inner() if batch_inner is None else (
                batch_inner and self.n > 1)
        # the image and its columns differ in order: im2col and col2im go through scratch
        self.transposing = self.batch_inner and not self.chwn
        self._cols: Any | None = None
        self._kept = KeptFrom()   # the columns, with the image they were taken from
        self._image: tuple[Any, Any, Any] | None = None
        self._yt: Any | None = None
        self._dk_scratch: tuple[int, Any] | None = None
        self._dk_images: Any | None = None

    def _prefers_batch_inner(self) -> bool:
        if self.n == 1:
            return False
        rows, transposed = _layout_work(self.c, self.h, self.w, self.o, self.oh, self.ow,
                                        self.kh, self.kw)
        return ROW_NS * rows > TRANSFER_NS * transposed

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
        return strided_view(self.xp, a, shape, strides)

    def _image_scratch(self) -> tuple[Any, Any, Any]:
        """(zeroed padded image, its interior as a view in the images' layout, its windows): the
        padding stays zero because only the interior is ever written."""
        if self._image is None:
            if self.batch_inner:
                img = zeros(self.xp, (self.c, self.hp, self.wp, self.n), self.dtype)
                inner = img[:, self.pt:self.pt + self.h, self.pl:self.pl + self.w, :]
                if not self.chwn:
                    inner = inner.transpose(3, 0, 1, 2)
            else:
                img = zeros(self.xp, (self.n, self.c, self.hp, self.wp), self.dtype)
                inner = img[:, :, self.pt:self.pt + self.h, self.pl:self.pl + self.w]
            self._image = (img, inner, self._windows_of(img))
        return self._image

    # --- the three primitives -----------------------------------------------------------

    def im2col(self, x: Any) -> Any:
        """cols [C*kh*kw, N*L] of image ``x`` ([N, C, H, W], or [C, H, W, N]; a scratch
        buffer)."""
        xp, cols = self.xp, self.cols()
        if self.padded or self.transposing:
            _, inner, windows = self._image_scratch()
            xp.copyto(inner, x)
        else:
            windows = self._windows_of(x)
        xp.copyto(self._cols6(cols), windows)
        return self._kept.keep(x, cols)

    def spent_columns(self) -> Any:
        """The columns' buffer, for scratch of the same shape ([C*kh*kw, N*L]: a gradient
        op's dcols) once the columns are read for the last time: they are forgotten, so
        the next reader takes them anew (`columns_of`)."""
        self._kept.forget()
        return self.cols()

    def columns_of(self, x: Any) -> Any:
        """`im2col` of ``x``, reusing the columns when the last im2col was of this very
        array; for gradient ops only (see `KeptFrom`)."""
        cols = self._kept.get(x)
        return cols if cols is not None else self.im2col(x)

    def image_shape(self) -> tuple[int, int, int, int]:
        return (self.c, self.h, self.w, self.n) if self.chwn else (self.n, self.c, self.h,
                                                                   self.w)

    def response_shape(self) -> tuple[int, int, int, int]:
        return (self.o, self.oh, self.ow, self.n) if self.chwn else (self.n, self.o,
                                                                     self.oh, self.ow)

    @property
    def response_is_columns(self) -> bool:
        """Whether the response array in its layout is the [O, N*L] column order (CHWN,
        or a single image): GEMMs then read and write it as it is."""
        return self.chwn or self.n == 1

    def make_col2im(self, out: Any | None) -> Callable[[Any], Any]:
        """fn(dcols [C*kh*kw, N*L]) -> the image in its layout, the adjoint of im2col:
        kh*kw strided adds into a zeroed image; it writes into ``out`` when given."""
        xp = self.xp
        shape = self.image_shape()
        scratch = self.padded or self.transposing
        if scratch:   # accumulate in a private padded image, then copy its interior out
            acc = self.xp.empty((self.c, self.hp, self.wp, self.n) if self.batch_inner else
                                (self.n, self.c, self.hp, self.wp), self.dtype)
            if self.batch_inner:
                inner = acc[:, self.pt:self.pt + self.h, self.pl:self.pl + self.w, :]
                if not self.chwn:
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
        """The response ([N, O, OH, OW] or [O, OH, OW, N]) in column order [O, N*L] (a
        view where `response_is_columns`, else a scratch copy)."""
        if self.response_is_columns:
            return y.reshape(self.o, self.nl)
        yt = self.yt()
        y3 = y.reshape(self.n, self.o, self.l)
        if self.batch_inner:
            self.xp.copyto(yt.reshape(self.o, self.l, self.n), y3.transpose(1, 2, 0))
        else:
            self.xp.copyto(yt.reshape(self.o, self.n, self.l), y3.transpose(1, 0, 2))
        return yt

    def make_from_columns(self, out: Any | None) -> Callable[[Any], Any]:
        """fn(yt [O, N*L]) -> response [N, O, OH, OW] (into ``out`` when given)."""
        xp, n, o, positions = self.xp, self.n, self.o, self.l
        shape = (n, o, self.oh, self.ow)
        batch_inner = self.batch_inner

        def from_columns(yt: Any) -> Any:
            dst = out if out is not None else xp.empty(shape, self.dtype)
            src = (yt.reshape(o, positions, n).transpose(2, 0, 1) if batch_inner
                   else yt.reshape(o, n, positions).transpose(1, 0, 2))
            xp.copyto(dst.reshape(n, o, positions), src)
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

    def _filter_chunks(self) -> int:
        """How many batched chunks the group-free filter GEMM splits N*L into: BLAS runs a
        GEMM with a very long inner dimension and few rows (LeNet's first conv: 20 x 25
        over 36,864 positions) ~2x faster as chunks of ~1,024 plus a sum. 0: one GEMM."""
        if self.o * self.ckk > 4096 or self.nl < 8192:
            return 0
        for size in (1024, 768, 576, 512, 1152, 1536, 2048):
            if self.nl % size == 0:
                return self.nl // size
        return 0

    def filter_from_response(self, y: Any, cols: Any, out: Any | None) -> Any:
        """dK from the response ``y`` [N, O, OH, OW] itself (what `filter_gemm` computes
        from ``to_columns(y)``). Where the chunked GEMM pays and the columns are batch-outer,
        the images are the chunks: one batched GEMM [N, O, L] @ [N, L, C*kh*kw] and a sum,
        with no transposing copy of ``y``."""
        if (self.g > 1 or self.batch_inner or self.n == 1 or self.l < 256
                or not self._filter_chunks()):
            return self.filter_gemm(self.to_columns(y), cols, out)
        xp = self.xp
        if self._dk_images is None:
            self._dk_images = xp.empty((self.n, self.o, self.ckk), self.dtype)
        dst = out if out is not None else xp.empty((self.o, self.c, self.kh, self.kw),
                                                   self.dtype)
        xp.matmul(y.reshape(self.n, self.o, self.l),
                  cols.reshape(self.ckk, self.n, self.l).transpose(1, 2, 0),
                  out=self._dk_images)
        xp.sum(self._dk_images, axis=0, out=dst.reshape(self.o, self.ckk))
        return dst

    def filter_gemm(self, yt: Any, cols: Any, out: Any | None) -> Any:
        """dK [O, C/G, kh, kw] = yt @ cols^T, per group. Without groups it runs as the
        faster orientation: chunked (see `_filter_chunks`) or cols @ yt^T, transposed."""
        xp = self.xp
        shape = (self.o, self.c // self.g, self.kh, self.kw)
        dst = out if out is not None else xp.empty(shape, self.dtype)
        if self.g == 1:
            if self._dk_scratch is None:
                k = self._filter_chunks()
                self._dk_scratch = (k, xp.empty((k, self.o, self.ckk) if k else
                                                (self.ckk, self.o), self.dtype))
            k, scratch = self._dk_scratch
            if k:
                m = self.nl // k
                xp.matmul(yt.reshape(self.o, k, m).transpose(1, 0, 2),
                          cols.reshape(self.ckk, k, m).transpose(1, 2, 0), out=scratch)
                xp.sum(scratch, axis=0, out=dst.reshape(self.o, self.ckk))
            else:
                xp.matmul(cols, yt.T, out=scratch)
                xp.copyto(dst.reshape(self.o, self.ckk), scratch.T)
        else:
            xp.matmul(yt.reshape(self.g, self.og, self.nl),
                      cols.reshape(self.g, self.cg_kk, self.nl).transpose(0, 2, 1),
                      out=dst.reshape(self.g, self.og, self.cg_kk))
        return dst
