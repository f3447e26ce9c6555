"""`ConvGeometry`: im2col, the per-group GEMM and col2im for one convolution relation
(the primitives `conv.py` builds conv2d, conv3d and their transposes from), over any
number of spatial dims."""
from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from itertools import product
from math import prod
from typing import Any

from .layouts import CHWN, NCHW, TRANSFER_NS, channel_first_view, is_channel_last
from .scratch import Scratch
from .spec import KeptFrom
from .window import strided_view, zeros

#: Overhead of one strided row copy or add (batch-outer columns), in ns, on NumPy.
ROW_NS = 8.0


def _layout_work(c: int, sizes: Sequence[int], o: int, outs: Sequence[int],
                 kernel: Sequence[int]) -> tuple[int, int]:
    """Per image: the rows of output-row values a batch-outer im2col copies (C * the
    kernel's taps * the output rows), and the values a batch-inner one transposes (the
    image and the response)."""
    return c * prod(kernel) * prod(outs[:-1]), c * prod(sizes) + o * prod(outs)


def layout_gain(image: Sequence[int], response: Sequence[int], kernel: Sequence[int],
                gradient: bool) -> float:
    """ns per image a convolution relation's kernels save in CHWN over NCHW: in NCHW
    im2col either copies short rows or transposes both sides (the cheaper is taken); a
    gradient also transposes the response's gradient and runs col2im the same way. In
    CHWN none of that is left. Shapes in NCHW order (a -1 batch is fine)."""
    _, c, *sizes = image
    _, o, *outs = response
    rows, transposed = _layout_work(c, sizes, o, outs, kernel)
    layout = min(ROW_NS * rows, TRANSFER_NS * transposed)
    if not gradient:
        return layout
    return TRANSFER_NS * o * prod(outs) + min(ROW_NS * rows, TRANSFER_NS * c * prod(sizes))


class ConvGeometry:
    """Shapes, scratch buffers and column layout of one convolution relation (see the
    module doc), over the spatial dims of its images (two for conv2d, three for conv3d).

    Columns are ordered (n, *out) ("batch outer") or (*out, n) ("batch inner"). The
    im2col copy and the col2im adds run over contiguous stretches of the column order: a
    whole output row (OW values) batch-outer, OW * N values batch-inner. Batch-inner costs
    two transposing copies (the image and the response side to and from [..., N]), so it
    pays off for short output rows, like LeNet's second conv (8-wide rows: its im2col is
    ~10x faster batch-inner) but not its first (24-wide rows, a response side 10x larger).
    `_prefers_batch_inner` weighs the two with costs measured on NumPy.

    With ``layout='CHWN'`` (layouts.py) the image and the response arrays themselves are
    batch innermost, [C, H, W, N] and [O, OH, OW, N]: the columns are batch-inner, the
    response *is* the GEMM's [O, N*L] output, and col2im adds straight into the image, so
    no transposing copy is left on either side. Channel-last arrays (``'NHWC'``,
    ``'NDHWC'``, the user's choice) are read and written through channel-first views.
    Shapes are given channel-first whatever the layout.
    """

    def __init__(self, xp: Any, dtype: str, image: Sequence[int], response: Sequence[int],
                 kernel: Sequence[int], strides: Sequence[int], pads: Sequence[int],
                 dilations: Sequence[int], groups: int, batch_inner: bool | None = None,
                 layout: str = NCHW, scratch: tuple[Scratch, Hashable] | None = None):
        self.xp, self.dtype, self.layout = xp, dtype, layout
        # where the columns and the response's column order live during a call: blocks of
        # a family's `Scratch` under this key (one memory for every batch size's plan: a
        # new size touches no new pages), else arrays of this geometry's own
        self._scratch = scratch
        self.n, self.c, *sizes = (int(v) for v in image)
        self.sizes = tuple(sizes)
        _, self.o, *outs = (int(v) for v in response)
        self.outs = tuple(outs)
        self.k, self.s, self.d = tuple(kernel), tuple(strides), tuple(dilations)
        self.p0, self.p1 = tuple(pads[0::2]), tuple(pads[1::2])   # before, after each dim
        self.g = groups
        self.l = prod(self.outs)                    # output positions per image
        self.nl = self.n * self.l
        self.ckk = self.c * prod(self.k)
        self.cg_kk = self.ckk // groups
        self.og = self.o // groups
        # The padded image must hold every window; it may be larger than the windows need.
        self.padded_sizes = tuple(
            max(size + a + b, (o - 1) * s + d * (k - 1) + 1) for size, a, b, o, s, d, k
            in zip(self.sizes, self.p0, self.p1, self.outs, self.s, self.d, self.k))
        self.padded = self.padded_sizes != self.sizes
        self.chwn = layout == CHWN
        self.channel_last = is_channel_last(layout)
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
        rows, transposed = _layout_work(self.c, self.sizes, self.o, self.outs, self.k)
        return ROW_NS * rows > TRANSFER_NS * transposed

    # --- scratch -------------------------------------------------------------------------

    def cols(self) -> Any:
        """Scratch for the columns, [C*prod(kernel), N*L]."""
        if self._scratch is not None:
            return self._take("cols", (self.ckk, self.nl))
        if self._cols is None:
            self._cols = self.xp.empty((self.ckk, self.nl), self.dtype)
        return self._cols

    def yt(self) -> Any:
        """Scratch for the response side in column order, [O, N*L]."""
        if self._scratch is not None:
            return self._take("yt", (self.o, self.nl))
        if self._yt is None:
            self._yt = self.xp.empty((self.o, self.nl), self.dtype)
        return self._yt

    def _take(self, name: str, shape: tuple[int, ...]) -> Any:
        """A view of the shared scratch block ``name`` (valid for the current call: the
        plans sharing it run one call at a time)."""
        scratch, key = self._scratch  # type: ignore[misc]
        return scratch.take(self.xp, (key, name), shape, self.dtype)

    def _cols_view(self, cols: Any) -> Any:
        """The columns as [C, *kernel, *out, N] (batch inner) or [C, *kernel, N, *out]."""
        if self.batch_inner:
            return cols.reshape((self.c,) + self.k + self.outs + (self.n,))
        return cols.reshape((self.c,) + self.k + (self.n,) + self.outs)

    def _windows_of(self, a: Any) -> Any:
        """The windows of a padded image ([N, C, *padded] batch-outer, [C, *padded, N]
        batch-inner, or a view in that order) as a view in the layout of `_cols_view`."""
        if self.batch_inner:
            sc, *spatial, sn = a.strides
            shape = (self.c,) + self.k + self.outs + (self.n,)
            strides = (sc, *(t * d for t, d in zip(spatial, self.d)),
                       *(t * s for t, s in zip(spatial, self.s)), sn)
        else:
            sn, sc, *spatial = a.strides
            shape = (self.c,) + self.k + (self.n,) + self.outs
            strides = (sc, *(t * d for t, d in zip(spatial, self.d)), sn,
                       *(t * s for t, s in zip(spatial, self.s)))
        return strided_view(self.xp, a, shape, strides)

    def _interior(self) -> tuple[slice, ...]:
        return tuple(slice(a, a + size) for a, size in zip(self.p0, self.sizes))

    def _padded_scratch(self, fill_zero: bool) -> tuple[Any, Any]:
        """(a padded image, its interior as a view in channel-first order)."""
        make = zeros if fill_zero else (lambda xp, shape, dtype: xp.empty(shape, dtype))
        inner = self._interior()
        if self.batch_inner:
            img = make(self.xp, (self.c,) + self.padded_sizes + (self.n,), self.dtype)
            view = img[(slice(None),) + inner + (slice(None),)]
            if not self.chwn:
                view = view.transpose((view.ndim - 1,) + tuple(range(view.ndim - 1)))
            return img, view
        img = make(self.xp, (self.n, self.c) + self.padded_sizes, self.dtype)
        return img, img[(slice(None), slice(None)) + inner]

    def _image_scratch(self) -> tuple[Any, Any, Any]:
        """(zeroed padded image, its interior as a view in the images' layout, its windows): the
        padding stays zero because only the interior is ever written."""
        if self._image is None:
            img, inner = self._padded_scratch(True)
            self._image = (img, inner, self._windows_of(img))
        return self._image

    def _logical(self, a: Any) -> Any:
        """An image or response array of the op as a view in channel-first order (CHWN
        arrays stay as they are: the batch-inner code reads them directly)."""
        return channel_first_view(a, self.layout) if self.channel_last else a

    # --- the three primitives -----------------------------------------------------------

    def windows(self, x: Any) -> Any:
        """The windows of image ``x`` (in the op's layout) as a view in the layout of
        `_cols_view`: of ``x`` itself, or of the padded scratch it is copied into."""
        if self.padded or self.transposing:
            _, inner, windows = self._image_scratch()
            self.xp.copyto(inner, self._logical(x))
            return windows
        return self._windows_of(self._logical(x))

    def im2col(self, x: Any) -> Any:
        """cols [C*prod(kernel), N*L] of image ``x`` (in the op's layout; a scratch
        buffer)."""
        cols = self.cols()
        self.xp.copyto(self._cols_view(cols), self.windows(x))
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

    def _physical(self, logical: Sequence[int]) -> tuple[int, ...]:
        """A channel-first (N, C, *spatial) shape in the op's layout."""
        n, c, *spatial = logical
        if self.chwn:
            return (c, *spatial, n)
        if self.channel_last:
            return (n, *spatial, c)
        return tuple(logical)

    def image_shape(self) -> tuple[int, ...]:
        return self._physical((self.n, self.c) + self.sizes)

    def response_shape(self) -> tuple[int, ...]:
        return self._physical((self.n, self.o) + self.outs)

    @property
    def response_is_columns(self) -> bool:
        """Whether the response array in its layout is the [O, N*L] column order (CHWN,
        or a single channel-first image): GEMMs then read and write it as it is."""
        return self.chwn or (self.n == 1 and not self.channel_last)

    def make_col2im(self, out: Any | None) -> Callable[[Any], Any]:
        """fn(dcols [C*prod(kernel), N*L]) -> the image in its layout, the adjoint of
        im2col: one strided add per kernel tap into a zeroed image; it writes into ``out``
        when given."""
        xp, shape = self.xp, self.image_shape()
        scratch = self.padded or self.transposing
        if scratch:   # accumulate in a private padded image, then copy its interior out
            acc, inner = self._padded_scratch(False)
        taps = list(product(*(range(k) for k in self.k)))
        batch_inner = self.batch_inner
        lead = 1 if batch_inner else 2   # the dims before the spatial ones

        def targets(image: Any) -> list[tuple[Any, tuple[int, ...]]]:
            views = []
            for tap in taps:
                spans = tuple(slice(i * d, i * d + (o - 1) * s + 1, s) for i, d, o, s
                              in zip(tap, self.d, self.outs, self.s))
                views.append((image[(slice(None),) * lead + spans], tap))
            return views

        fixed = targets(acc) if scratch else (targets(self._logical(out)) if out is not None
                                              else None)

        def col2im(dcols: Any) -> Any:
            d6 = self._cols_view(dcols)
            dst = out if out is not None else xp.empty(shape, self.dtype)
            image = acc if scratch else self._logical(dst)
            image.fill(0)
            for view, tap in (fixed if fixed is not None else targets(image)):
                src = d6[(slice(None),) + tap]
                xp.add(view, src if batch_inner else src.swapaxes(0, 1), out=view)
            if scratch:
                xp.copyto(self._logical(dst), inner)
            return dst
        return col2im

    # --- response side layout ------------------------------------------------------------

    def _response3(self, y: Any) -> Any:
        """A response array (not CHWN) as a view [N, O, L]."""
        if self.channel_last:
            return y.reshape(self.n, self.l, self.o).transpose(0, 2, 1)
        return y.reshape(self.n, self.o, self.l)

    def to_columns(self, y: Any) -> Any:
        """The response (in the op's layout) in column order [O, N*L] (a view where
        `response_is_columns`, else a scratch copy)."""
        if self.response_is_columns:
            return y.reshape(self.o, self.nl)
        yt = self.yt()
        y3 = self._response3(y)
        if self.batch_inner:
            self.xp.copyto(yt.reshape(self.o, self.l, self.n), y3.transpose(1, 2, 0))
        else:
            self.xp.copyto(yt.reshape(self.o, self.n, self.l), y3.transpose(1, 0, 2))
        return yt

    def make_from_columns(self, out: Any | None) -> Callable[[Any], Any]:
        """fn(yt [O, N*L]) -> the response in the op's layout (into ``out`` when given)."""
        xp, n, o, positions = self.xp, self.n, self.o, self.l
        shape = self.response_shape()
        batch_inner = self.batch_inner

        def from_columns(yt: Any) -> Any:
            dst = out if out is not None else xp.empty(shape, self.dtype)
            src = (yt.reshape(o, positions, n).transpose(2, 0, 1) if batch_inner
                   else yt.reshape(o, n, positions).transpose(1, 0, 2))
            xp.copyto(self._response3(dst), src)
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
        """dK from the response ``y`` [N, O, *out] itself (what `filter_gemm` computes
        from ``to_columns(y)``). Where the chunked GEMM pays and the columns are batch-outer,
        the images are the chunks: one batched GEMM [N, O, L] @ [N, L, C*kh*kw] and a sum,
        with no transposing copy of ``y``."""
        if (self.g > 1 or self.batch_inner or self.channel_last or self.n == 1
                or self.l < 256 or not self._filter_chunks()):
            return self.filter_gemm(self.to_columns(y), cols, out)
        xp = self.xp
        if self._dk_images is None:
            self._dk_images = xp.empty((self.n, self.o, self.ckk), self.dtype)
        dst = out if out is not None else xp.empty((self.o, self.c) + self.k, self.dtype)
        xp.matmul(y.reshape(self.n, self.o, self.l),
                  cols.reshape(self.ckk, self.n, self.l).transpose(1, 2, 0),
                  out=self._dk_images)
        xp.sum(self._dk_images, axis=0, out=dst.reshape(self.o, self.ckk))
        return dst

    def filter_gemm(self, yt: Any, cols: Any, out: Any | None) -> Any:
        """dK [O, C/G, *kernel] = yt @ cols^T, per group. Without groups it runs as the
        faster orientation: chunked (see `_filter_chunks`) or cols @ yt^T, transposed."""
        xp = self.xp
        shape = (self.o, self.c // self.g) + self.k
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
