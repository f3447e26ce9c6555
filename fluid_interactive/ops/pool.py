"""pool2d on NCHW tensors: max or average over windows, with Paddle's ``ksize``,
``strides``, ``paddings``, ``global_pooling``, ``ceil_mode`` and ``exclusive``."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .registry import register
from .spec import (
    GradContext,
    InferContext,
    KeptFrom,
    KernelContext,
    OpSpec,
    emit_default_grad,
    infer_like,
    slots,
)
from .window import check_float, check_rank4, fmt, paddings, pair

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
    k = pair(ctx, "ksize", ctx.attrs["ksize"], 1)
    s = pair(ctx, "strides", ctx.attrs["strides"], 1)
    p = paddings(ctx, ctx.attrs["paddings"])
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
    check_rank4(ctx, "X", "NCHW image batch")
    check_float(ctx, "X")
    x = ctx.input("X")
    n, c, h, w = x.shape
    _, k, _, p, (oh, ow) = _pool_params(ctx, h, w)
    if not ctx.attrs["global_pooling"]:
        for size, kk, p0, p1, what in ((h, k[0], p[0], p[1], "height"),
                                       (w, k[1], p[2], p[3], "width")):
            if size >= 0 and size + p0 + p1 < kk:
                ctx.fail(f"the pooling window {list(k)} is larger than X {fmt(x.shape)} "
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
        self._pad: Any | None = None

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


class _SplitWindows:
    """The window positions of a max pooling with disjoint, unpadded windows, copied apart
    into one contiguous [kh*kw, N, C, OH, OW] buffer, shared by pool2d and its gradient op
    over the same X (`KernelContext.shared`). In NCHW the positions of a window lie a
    stride apart, so every pass over one of them walks memory in short strided runs; with
    the positions split once, the forward's maxima and the gradient's first-maximum search
    run over contiguous arrays and only the gradient's final stores stay strided. The
    forward op splits only when a gradient op in its plan asked for it (``wanted``)."""

    def __init__(self) -> None:
        self.wanted = False
        self.buffer: Any | None = None
        self._kept = KeptFrom()   # the parts, with the array they were split from

    def split(self, xp: Any, a: Any, views: list[Any]) -> list[Any]:
        if self.buffer is None:
            self.buffer = xp.empty((len(views),) + views[0].shape, a.dtype)
        for part, view in zip(self.buffer, views):
            xp.copyto(part, view)
        return self._kept.keep(a, list(self.buffer))

    def parts_of(self, xp: Any, a: Any, views: list[Any]) -> list[Any]:
        """`split` of ``a``, reusing the parts when they were split from this very array;
        for the gradient op only (see `KeptFrom`)."""
        parts = self._kept.get(a)
        return parts if parts is not None else self.split(xp, a, views)


def _split_windows(ctx: KernelContext, geo: _PoolGeometry) -> _SplitWindows | None:
    """The state a max pool2d shares with its gradient op, or None where windows overlap,
    are padded or cover whole planes (the strided loops are then kept)."""
    if geo.type != "max" or geo.is_global or geo.padded or geo.overlap:
        return None
    key = ("pool2d", ctx.input_name("X"), (geo.n, geo.c, geo.h, geo.w),
           repr(sorted(ctx.attrs.items())))
    return ctx.shared(key, _SplitWindows)


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
    split = _split_windows(ctx, geo)

    def pool(a):
        if fixed is not None:
            xp.copyto(inner, a)
            views = fixed
        elif split is not None and split.wanted:
            views = split.split(xp, a, geo.windows(a))
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
    if geo.is_global:
        return _global_pool_grad(ctx, geo)
    target = _GradTarget(ctx, geo)
    if geo.type == "max":
        return _max_pool_grad(ctx, geo, target)
    scale = geo.divisor(bool(ctx.attrs["exclusive"]))
    xp, tmp = ctx.xp, target.tmp

    def avg_grad(a, y, g):
        dst = target.output()
        share = xp.multiply(g, scale, out=tmp)
        target.start(dst)
        for view in target.views(dst):
            target.put(view, share)
        return target.finish(dst)
    return avg_grad


def _global_pool_grad(ctx: KernelContext, geo: _PoolGeometry) -> Callable:
    """dX of a pool over the whole image: the mean's share everywhere, or the gradient at
    each channel's first maximum."""
    xp, dx_buf = ctx.xp, ctx.buffer("X@GRAD")
    n, c, hw = geo.n, geo.c, geo.h * geo.w
    shape = (n, c, geo.h, geo.w)
    if geo.type != "max":
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


class _GradTarget:
    """Where a pooling gradient's windows write: a zeroed padded scratch (cropped at the
    end), or dX itself. Non-overlapping windows write disjoint parts: plain stores, and
    no zeroing except rows or columns that no window reaches."""

    def __init__(self, ctx: KernelContext, geo: _PoolGeometry):
        xp = self.xp = ctx.xp
        self.geo, self.dx_buf = geo, ctx.buffer("X@GRAD")
        self.shape = (geo.n, geo.c, geo.h, geo.w)
        if geo.padded:
            self.acc, self.acc_inner = geo.padded_image(0.0)
            self.acc_views = geo.windows(self.acc)
        self.covered_h = (geo.oh - 1) * geo.sh + geo.kh
        self.covered_w = (geo.ow - 1) * geo.sw + geo.kw
        self.stores = not geo.overlap
        self.direct = self.stores and not geo.padded   # each window stored straight in dX
        self.tmp = xp.empty((geo.n, geo.c, geo.oh, geo.ow), geo.dtype)

    def output(self) -> Any:
        return self.dx_buf if self.dx_buf is not None else \
            self.xp.empty(self.shape, self.geo.dtype)

    def views(self, dst: Any) -> list[Any]:
        return self.acc_views if self.geo.padded else self.geo.windows(dst)

    def start(self, dst: Any) -> None:
        geo = self.geo
        if geo.padded:
            self.acc.fill(0)
        elif not self.stores:
            dst.fill(0)
        else:
            if self.covered_h < geo.h:
                dst[:, :, self.covered_h:, :] = 0
            if self.covered_w < geo.w:
                dst[:, :, :, self.covered_w:] = 0

    def finish(self, dst: Any) -> Any:
        if self.geo.padded:
            self.xp.copyto(dst, self.acc_inner)
        return dst

    def put(self, view: Any, value: Any) -> None:
        if self.direct:
            self.xp.copyto(view, value)
        else:
            self.xp.add(view, value, out=view)


def _max_pool_grad(ctx: KernelContext, geo: _PoolGeometry, target: _GradTarget) -> Callable:
    """Each window's gradient goes to its first maximum in row-major order, as in Paddle's
    and PyTorch's kernels; `free` marks the windows whose maximum is not found yet (bool
    masks: cheaper than carrying the unserved gradient along)."""
    xp = ctx.xp
    n, c, h, w, oh, ow = geo.n, geo.c, geo.h, geo.w, geo.oh, geo.ow
    if geo.padded:
        xpad = xp.full((n, c, geo.hp, geo.wp), -xp.inf, geo.dtype)
        x_inner = xpad[:, :, geo.pt:geo.pt + h, geo.pl:geo.pl + w]
        x_views = geo.windows(xpad)
    eq = xp.empty((n, c, oh, ow), bool)
    free = xp.empty((n, c, oh, ow), bool)
    last = len(geo.positions) - 1
    tmp = target.tmp
    split = _split_windows(ctx, geo)
    if split is not None:
        split.wanted = True

    def windows_of(a: Any) -> list[Any]:
        if geo.padded:
            xp.copyto(x_inner, a)
            return x_views
        if split is not None:
            return split.parts_of(xp, a, geo.windows(a))
        return geo.windows(a)

    def max_grad(a, y, g):
        dst = target.output()
        xs = windows_of(a)
        target.start(dst)
        for k, (xv, view) in enumerate(zip(xs, target.views(dst))):
            xp.equal(xv, y, out=eq)
            if k == 0:
                if last:
                    xp.logical_not(eq, out=free)
            else:
                xp.logical_and(eq, free, out=eq)
                if k < last:
                    xp.logical_xor(free, eq, out=free)
            if target.direct:
                xp.multiply(g, eq, out=view)
            else:
                xp.add(view, xp.multiply(g, eq, out=tmp), out=view)
        return target.finish(dst)
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
