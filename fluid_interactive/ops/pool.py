"""pool2d on NCHW tensors: max or average over windows, with Paddle's ``ksize``,
``strides``, ``paddings``, ``global_pooling``, ``ceil_mode`` and ``exclusive``.

``data_format`` CHWN (set by the layout plan pass, never by a layer) pools batch-innermost
images [C, H, W, N]: each window position is then a view whose runs are N contiguous
values instead of single values a stride apart. A max pooling of disjoint, unpadded
windows there has a compiled form in the kernel tier (`kernels/pool.py`): one pass for the
forward, one for the gradient."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .layouts import (
    CHWN,
    NCHW,
    TRANSFER_NS,
    LayoutRule,
    axis_of,
    check_layout,
    from_layout,
    to_layout,
)
from .pool_tier import compiled_pool, compiled_pool_grad
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
               "use_cudnn": True, "data_format": NCHW}


def _layout(ctx: Any) -> str:
    return check_layout(ctx, "data_format", (NCHW, CHWN))


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
    layout = _layout(ctx)
    check_rank4(ctx, "X", f"{layout} image batch")
    check_float(ctx, "X")
    x = ctx.input("X")
    n, c, h, w = from_layout(x.shape, layout)
    _, k, _, p, (oh, ow) = _pool_params(ctx, h, w)
    if not ctx.attrs["global_pooling"]:
        for size, kk, p0, p1, what in ((h, k[0], p[0], p[1], "height"),
                                       (w, k[1], p[2], p[3], "width")):
            if size >= 0 and size + p0 + p1 < kk:
                ctx.fail(f"the pooling window {list(k)} is larger than X {fmt(x.shape)} "
                         f"padded by {[p0, p1]} in {what}")
    ctx.set_output("Out", to_layout((n, c, oh, ow), layout), x.dtype)


class _PoolGeometry:
    """Window views of a pooling, over X itself or over a padded scratch copy of it, in
    the op's layout (the height and width axes are adjacent in each)."""

    def __init__(self, ctx: KernelContext):
        xp = ctx.xp
        x = ctx.input("X")
        self.xp, self.dtype = xp, x.dtype
        self.layout = _layout(ctx)
        self.h_axis = axis_of(self.layout, 2)
        self.n, self.c, self.h, self.w = from_layout(x.shape, self.layout)
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

    def shape(self, h: int, w: int) -> tuple[int, ...]:
        """The shape of an [N, C, h, w] array in the op's layout."""
        return to_layout((self.n, self.c, h, w), self.layout)

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.shape(self.oh, self.ow)

    def region(self, image: Any, rows: slice, cols: slice) -> Any:
        """``image`` sliced by ``rows`` and ``cols`` along its height and width axes."""
        index: list[slice] = [slice(None)] * 4
        index[self.h_axis], index[self.h_axis + 1] = rows, cols
        return image[tuple(index)]

    def windows(self, image: Any) -> list[Any]:
        """The kh*kw strided views of the output's shape, window offset (i, j) in
        row-major order."""
        hs, ws = (self.oh - 1) * self.sh + 1, (self.ow - 1) * self.sw + 1
        return [self.region(image, slice(i, i + hs, self.sh), slice(j, j + ws, self.sw))
                for i, j in self.positions]

    def padded_image(self, fill: float) -> tuple[Any, Any]:
        """(scratch [N, C, Hp, Wp] (in the layout) whose border holds ``fill``, its
        interior view)."""
        if self._pad is None:
            self._pad = self.xp.full(self.shape(self.hp, self.wp), fill, self.dtype)
        return self._pad, self.region(self._pad, slice(self.pt, self.pt + self.h),
                                      slice(self.pl, self.pl + self.w))

    def planes(self, rows: int) -> tuple[int, ...]:
        """The shape that merges the height and width axes into one of ``rows``."""
        full = self.shape(self.h, self.w)
        return full[:self.h_axis] + (rows,) + full[self.h_axis + 2:]

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
        """What an avg pool's window sums are multiplied by: a scalar, or an [OH, OW]
        array shaped to broadcast against the output in its layout."""
        if exclusive and self.padded:
            r = self.reciprocal_counts()
            if bool((r == r[0, 0]).all()):
                return float(r[0, 0])
            return r.reshape(self.out_shape[self.h_axis:self.h_axis + 2]
                             + (1,) * (2 - self.h_axis))
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
    are padded or cover whole planes (the strided loops are then kept), or the images
    are batch innermost: their window views are runs of N values already, and the split
    copy would cost X's size twice over (measured on LeNet's first pool: 0.07 ms a step
    saved, 2.9 MB held)."""
    if geo.type != "max" or geo.is_global or geo.padded or geo.overlap or \
            geo.layout != NCHW:
        return None
    key = ("pool2d", ctx.input_name("X"), (geo.n, geo.c, geo.h, geo.w),
           repr(sorted(ctx.attrs.items())))
    return ctx.shared(key, _SplitWindows)


def _global_pool(ctx: KernelContext, geo: _PoolGeometry) -> Callable:
    """Max or mean over each whole plane: the height and width axes merged into one."""
    xp, out = ctx.xp, ctx.buffer("Out")
    hw, axis = geo.h * geo.w, geo.h_axis
    planes, shape = geo.planes(hw), geo.out_shape
    pooled = planes[:axis] + planes[axis + 1:]
    if geo.type == "max":
        def global_max(a):
            dst = out if out is not None else xp.empty(shape, geo.dtype)
            xp.max(a.reshape(planes), axis=axis, out=dst.reshape(pooled))
            return dst
        return global_max
    weights = xp.full((hw,), 1.0 / hw, geo.dtype)
    last = axis == len(planes) - 1

    def global_avg(a):
        dst = out if out is not None else xp.empty(shape, geo.dtype)
        a3 = a.reshape(planes)
        xp.matmul(a3, weights, out=dst.reshape(pooled)) if last else \
            xp.matmul(weights, a3, out=dst.reshape(pooled))
        return dst
    return global_avg


def _pool_kernel(ctx: KernelContext):
    geo = _PoolGeometry(ctx)
    xp, out = ctx.xp, ctx.buffer("Out")
    shape = geo.out_shape
    is_max = geo.type == "max"
    if geo.is_global:
        return _global_pool(ctx, geo)
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
        dst = out if out is not None else xp.empty(shape, geo.dtype)
        if len(views) == 1:
            xp.copyto(dst, views[0])
        else:
            combine(views[0], views[1], out=dst)
            for v in views[2:]:
                combine(dst, v, out=dst)
        if scale is not None:
            xp.multiply(dst, scale, out=dst)
        return dst
    return compiled_pool(ctx, geo, pool, lambda: out if out is not None else
                         xp.empty(shape, geo.dtype))


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
    each plane's first maximum."""
    xp, dx_buf = ctx.xp, ctx.buffer("X@GRAD")
    hw, axis = geo.h * geo.w, geo.h_axis
    shape, planes, one = geo.shape(geo.h, geo.w), geo.planes(geo.h * geo.w), geo.planes(1)
    if geo.type != "max":
        def global_avg_grad(a, y, g):
            dst = dx_buf if dx_buf is not None else xp.empty(shape, geo.dtype)
            xp.multiply(g.reshape(one), 1.0 / hw, out=dst.reshape(planes))
            return dst
        return global_avg_grad

    pooled = planes[:axis] + planes[axis + 1:]
    grid = list(xp.indices(pooled))   # the index of every plane, to store at its maximum

    def global_max_grad(a, y, g):
        dst = dx_buf if dx_buf is not None else xp.empty(shape, geo.dtype)
        first = xp.argmax(a.reshape(planes), axis=axis)   # the first maximum
        flat = dst.reshape(planes)
        flat.fill(0)
        flat[tuple(grid[:axis] + [first] + grid[axis:])] = g.reshape(pooled)
        return dst
    return global_max_grad


class _GradTarget:
    """Where a pooling gradient's windows write: a zeroed padded scratch (cropped at the
    end), or dX itself. Non-overlapping windows write disjoint parts: plain stores, and
    no zeroing except rows or columns that no window reaches."""

    def __init__(self, ctx: KernelContext, geo: _PoolGeometry):
        xp = self.xp = ctx.xp
        self.geo, self.dx_buf = geo, ctx.buffer("X@GRAD")
        self.shape = geo.shape(geo.h, geo.w)
        if geo.padded:
            self.acc, self.acc_inner = geo.padded_image(0.0)
            self.acc_views = geo.windows(self.acc)
        self.covered_h = (geo.oh - 1) * geo.sh + geo.kh
        self.covered_w = (geo.ow - 1) * geo.sw + geo.kw
        self.stores = not geo.overlap
        self.direct = self.stores and not geo.padded   # each window stored straight in dX
        self.gaps = geo.sh > geo.kh or geo.sw > geo.kw   # rows or columns between windows
        self.tmp = xp.empty(geo.out_shape, geo.dtype)

    def output(self) -> Any:
        return self.dx_buf if self.dx_buf is not None else \
            self.xp.empty(self.shape, self.geo.dtype)

    def views(self, dst: Any) -> list[Any]:
        return self.acc_views if self.geo.padded else self.geo.windows(dst)

    def start(self, dst: Any) -> None:
        geo = self.geo
        if geo.padded:
            self.acc.fill(0)
        elif not self.stores or self.gaps:
            dst.fill(0)
        else:
            if self.covered_h < geo.h:
                geo.region(dst, slice(self.covered_h, None), slice(None))[...] = 0
            if self.covered_w < geo.w:
                geo.region(dst, slice(None), slice(self.covered_w, None))[...] = 0

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
    if geo.padded:
        xpad = xp.full(geo.shape(geo.hp, geo.wp), -xp.inf, geo.dtype)
        x_inner = geo.region(xpad, slice(geo.pt, geo.pt + geo.h), slice(geo.pl, geo.pl + geo.w))
        x_views = geo.windows(xpad)
    eq = xp.empty(geo.out_shape, bool)
    free = xp.empty(geo.out_shape, bool)
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
    return compiled_pool_grad(ctx, geo, max_grad, target.output)


def _pool_grad(g: GradContext) -> None:
    emit_default_grad(g, ("X", "Out"), "pool2d_grad", ("X",))


def _layout_gain(attrs: Any, shapes: Any) -> float:
    """ns per image saved in CHWN: a strided window view of NCHW walks single values a
    stride apart, one of CHWN runs of N values (measured on LeNet's pools: 0.2-0.5 ns a
    value of X, forward and gradient alike). Global and stride-1 pooling read rows as
    they are in NCHW: no gain."""
    strides = attrs.get("strides") or [1, 1]
    strided = max(strides) > 1 if isinstance(strides, (list, tuple)) else strides > 1
    if attrs.get("global_pooling") or not strided:
        return 0.0
    _, c, h, w = shapes["X"]
    return 0.5 * TRANSFER_NS * c * h * w


def _layout_rule(images: tuple[str, ...]) -> LayoutRule:
    return LayoutRule(images, (CHWN,), "data_format", gain=_layout_gain)


register(OpSpec("pool2d", slots("X"), slots("Out"), _pool_infer, _pool_kernel, _pool_grad,
                attrs=_POOL_ATTRS, layout=_layout_rule(("X", "Out")),
                doc="Max or average pooling of NCHW X over ksize windows. Out [N, C, (H + "
                    "pads - kh) / stride + 1, ...] (rounded up with ceil_mode, a last window "
                    "of padding only dropped); global_pooling pools each whole plane. Avg "
                    "divides by the window's non-padding count when exclusive, else by "
                    "kh*kw. The max gradient goes to each window's first maximum."))
register(OpSpec("pool2d_grad", slots("X", "Out", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "X"}), _pool_grad_kernel, attrs=_POOL_ATTRS,
                layout=_layout_rule(("X", "Out", "Out@GRAD", "X@GRAD"))))
