"""pool2d and pool3d: max or average over windows of images with 2 or 3 spatial dims,
with Paddle's ``ksize``, ``strides``, ``paddings``, ``global_pooling``, ``ceil_mode``,
``exclusive``, ``adaptive``, ``padding_algorithm`` and ``data_format``.

Output sizes are Paddle's: (size + pads - k) / stride + 1, rounded up with ``ceil_mode``
(Paddle keeps a last window that starts in the padding); ``adaptive`` makes ``ksize`` the
output size, window i of a dim of n spanning [floor(i*n/k), ceil((i+1)*n/k)) (see
`pool_index.py`, which pools such windows). Avg divides by a window's non-padding count
when ``exclusive`` (always when adaptive), else by the window's size.

``data_format`` CHWN (set by the layout plan pass, never by a layer) pools batch-innermost
images [C, H, W, N]: each window position is then a view whose runs are N contiguous
values instead of single values a stride apart. A max pooling of disjoint, unpadded
windows there has a compiled form in the kernel tier (`kernels/pool.py`): one pass for the
forward, one for the gradient. Channel-last images (NHWC, NDHWC) are pooled through the
same window views: their spatial dims are adjacent, as in every layout."""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from itertools import product
from math import prod
from typing import Any

from .layouts import (
    CHWN,
    NCDHW,
    NCHW,
    NDHWC,
    NHWC,
    TRANSFER_NS,
    LayoutRule,
    axis_of,
    from_layout,
    image_layout,
    to_layout,
)
from .pool_index import adaptive_grad_kernel, adaptive_kernel
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
from .window import check_float, check_rank, fmt, ints, resolved_paddings, spatial_paddings

LAYOUTS = {2: (NCHW, NHWC, CHWN), 3: (NCDHW, NDHWC)}
_AXES = ("depth", "height", "width")


def pool_attrs(rank: int) -> dict[str, Any]:
    return {"pooling_type": "max", "ksize": [], "strides": [1] * rank,
            "paddings": [0] * rank, "global_pooling": False, "ceil_mode": False,
            "exclusive": True, "adaptive": False, "padding_algorithm": "EXPLICIT",
            "use_cudnn": True, "data_format": LAYOUTS[rank][0]}


def _layout(ctx: Any, rank: int) -> str:
    return image_layout(ctx, "data_format", rank, (CHWN,) if rank == 2 else ())


def _out_dim(size: int, k: int, s: int, p0: int, p1: int, ceil: bool) -> int:
    if size < 0:
        return -1
    span = size + p0 + p1 - k
    return (span + s - 1) // s + 1 if ceil else span // s + 1


def pool_params(ctx: Any, sizes: tuple[int, ...]) -> tuple:
    """(type, ksize, strides, paddings (before, after per dim), output sizes) of a pooling
    of images of spatial ``sizes``; unknown sizes give -1."""
    rank = len(sizes)
    ptype = ctx.attrs["pooling_type"]
    if ptype not in ("max", "avg"):
        ctx.fail(f"pooling_type must be 'max' or 'avg', got {ptype!r}")
    adaptive = bool(ctx.attrs.get("adaptive"))
    if ctx.attrs["global_pooling"]:
        k = tuple(sizes)
        outs = tuple(sizes) if adaptive else tuple(1 if d >= 0 else -1 for d in sizes)
        return ptype, k, (1,) * rank, (0,) * (2 * rank), outs
    if not ctx.attrs["ksize"]:
        ctx.fail(f"ksize (the pooling window, {rank} ints) is required unless "
                 f"global_pooling")
    k = ints(ctx, "ksize", ctx.attrs["ksize"], rank, 1)
    if adaptive:   # ksize is the output size; the windows follow from it
        return ptype, k, k, (0,) * (2 * rank), k
    s = ints(ctx, "strides", ctx.attrs["strides"], rank, 1)
    p = resolved_paddings(ctx, spatial_paddings(ctx, ctx.attrs["paddings"], rank), sizes, k, s)
    if any(max(p[2 * i], p[2 * i + 1]) >= k[i] for i in range(rank)):
        ctx.fail(f"paddings {list(p)} must be smaller than the pooling window {list(k)}")
    ceil = bool(ctx.attrs["ceil_mode"])
    outs = tuple(_out_dim(sizes[i], k[i], s[i], p[2 * i], p[2 * i + 1], ceil)
                 for i in range(rank))
    return ptype, k, s, p, outs


def _pool_infer(ctx: InferContext, rank: int) -> None:
    layout = _layout(ctx, rank)
    check_rank(ctx, "X", rank + 2, f"{layout} image batch")
    check_float(ctx, "X")
    x = ctx.input("X")
    n, c, *sizes = from_layout(x.shape, layout)
    _, k, _, p, outs = pool_params(ctx, tuple(sizes))
    if not ctx.attrs["global_pooling"] and not ctx.attrs.get("adaptive"):
        for i, what in enumerate(_AXES[3 - rank:]):
            if sizes[i] >= 0 and sizes[i] + p[2 * i] + p[2 * i + 1] < k[i]:
                ctx.fail(f"the pooling window {list(k)} is larger than X {fmt(x.shape)} "
                         f"padded by {[p[2 * i], p[2 * i + 1]]} in {what}")
    ctx.set_output("Out", to_layout((n, c, *outs), layout), x.dtype)


class PoolGeometry:
    """Window views of a pooling, over X itself or over a padded scratch copy of it, in
    the op's layout (the spatial axes are adjacent in each)."""

    def __init__(self, ctx: KernelContext):
        xp = ctx.xp
        x = ctx.input("X")
        rank = x.rank - 2
        self.xp, self.dtype, self.rank = xp, x.dtype, rank
        self.layout = _layout(ctx, rank)
        self.axis0 = axis_of(self.layout, 2)   # the first spatial axis
        self.n, self.c, *sizes = from_layout(x.shape, self.layout)
        self.sizes = tuple(sizes)
        self.type, self.k, self.s, pads, self.outs = pool_params(ctx, self.sizes)
        self.p0, self.p1 = pads[0::2], pads[1::2]
        self.is_global = bool(ctx.attrs["global_pooling"])
        self.padded_sizes = tuple(max(size + a + b, (o - 1) * s + k) for size, a, b, o, s, k
                                  in zip(self.sizes, self.p0, self.p1, self.outs, self.s,
                                         self.k))
        self.padded = any(self.p0) or self.padded_sizes != self.sizes
        self.overlap = any(s < k for s, k in zip(self.s, self.k))
        self.positions = list(product(*(range(k) for k in self.k)))
        self._pad: Any | None = None

    def shape(self, sizes: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of an [N, C, *sizes] array in the op's layout."""
        return to_layout((self.n, self.c) + tuple(sizes), self.layout)

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.shape(self.outs)

    def region(self, image: Any, spans: tuple[slice, ...]) -> Any:
        """``image`` sliced by ``spans`` along its spatial axes."""
        index: list[slice] = [slice(None)] * image.ndim
        index[self.axis0:self.axis0 + self.rank] = spans
        return image[tuple(index)]

    def windows(self, image: Any) -> list[Any]:
        """The strided views of the output's shape, one per window offset, in row-major
        order of the offsets."""
        return [self.region(image, tuple(slice(i, i + (o - 1) * s + 1, s) for i, o, s
                                         in zip(offset, self.outs, self.s)))
                for offset in self.positions]

    def padded_image(self, fill: float) -> tuple[Any, Any]:
        """(scratch [N, C, *padded] (in the layout) whose border holds ``fill``, its
        interior view)."""
        if self._pad is None:
            self._pad = self.xp.full(self.shape(self.padded_sizes), fill, self.dtype)
        return self._pad, self.region(self._pad, tuple(
            slice(a, a + size) for a, size in zip(self.p0, self.sizes)))

    def planes(self, rows: int) -> tuple[int, ...]:
        """The shape that merges the spatial axes into one of ``rows``."""
        full = self.shape(self.sizes)
        return full[:self.axis0] + (rows,) + full[self.axis0 + self.rank:]

    def reciprocal_counts(self) -> Any:
        """1 / (number of non-padding elements) of each window, [*out]. A window of
        padding alone (ceil_mode's last one may be) averages to 0, where Paddle's 0 / 0
        gives NaN."""
        xp = self.xp
        counts: Any = 1
        for i in range(self.rank):
            start = xp.arange(self.outs[i]) * self.s[i] - self.p0[i]
            valid = xp.minimum(start + self.k[i], self.sizes[i]) - xp.maximum(start, 0)
            counts = counts * xp.maximum(valid, 1).reshape((-1,) + (1,) * (self.rank - 1 - i))
        return (1.0 / counts).astype(self.dtype)

    def divisor(self, exclusive: bool) -> Any:
        """What an avg pool's window sums are multiplied by: a scalar, or an array of the
        output's spatial shape made to broadcast against the output in its layout."""
        if exclusive and self.padded:
            r = self.reciprocal_counts()
            first = r.reshape(-1)[0]
            if bool((r == first).all()):
                return float(first)
            trailing = len(self.out_shape) - self.axis0 - self.rank
            return r.reshape(self.outs + (1,) * trailing)
        return 1.0 / prod(self.k)


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


def _split_windows(ctx: KernelContext, geo: PoolGeometry) -> _SplitWindows | None:
    """The state a max pool2d shares with its gradient op, or None where windows overlap,
    are padded or cover whole planes (the strided loops are then kept), or the images
    are batch innermost: their window views are runs of N values already, and the split
    copy would cost X's size twice over (measured on LeNet's first pool: 0.07 ms a step
    saved, 2.9 MB held)."""
    if geo.type != "max" or geo.is_global or geo.padded or geo.overlap or \
            geo.layout != NCHW:
        return None
    key = (ctx.input_name("X"), (geo.n, geo.c) + geo.sizes, repr(sorted(ctx.attrs.items())))
    return ctx.shared(_SplitWindows, key)


def _global_pool(ctx: KernelContext, geo: PoolGeometry) -> Callable:
    """Max or mean over each whole plane: the spatial axes merged into one."""
    xp, out = ctx.xp, ctx.buffer("Out")
    hw, axis = prod(geo.sizes), geo.axis0
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
    if ctx.attrs["adaptive"]:
        return adaptive_kernel(ctx, PoolGeometry(ctx))
    geo = PoolGeometry(ctx)
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
    geo = PoolGeometry(ctx)
    if ctx.attrs["adaptive"]:
        return adaptive_grad_kernel(ctx, geo)
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


def _global_pool_grad(ctx: KernelContext, geo: PoolGeometry) -> Callable:
    """dX of a pool over the whole image: the mean's share everywhere, or the gradient at
    each plane's first maximum."""
    xp, dx_buf = ctx.xp, ctx.buffer("X@GRAD")
    hw, axis = prod(geo.sizes), geo.axis0
    shape, planes, one = geo.shape(geo.sizes), geo.planes(hw), geo.planes(1)
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
    no zeroing except the rows (or planes) that no window reaches."""

    def __init__(self, ctx: KernelContext, geo: PoolGeometry):
        xp = self.xp = ctx.xp
        self.geo, self.dx_buf = geo, ctx.buffer("X@GRAD")
        self.shape = geo.shape(geo.sizes)
        if geo.padded:
            self.acc, self.acc_inner = geo.padded_image(0.0)
            self.acc_views = geo.windows(self.acc)
        self.covered = [(o - 1) * s + k for o, s, k in zip(geo.outs, geo.s, geo.k)]
        self.stores = not geo.overlap
        self.direct = self.stores and not geo.padded   # each window stored straight in dX
        # rows or columns between windows
        self.gaps = any(s > k for s, k in zip(geo.s, geo.k))
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
            for i, (covered, size) in enumerate(zip(self.covered, geo.sizes)):
                if covered < size:
                    spans = [slice(None)] * geo.rank
                    spans[i] = slice(covered, None)
                    geo.region(dst, tuple(spans))[...] = 0

    def finish(self, dst: Any) -> Any:
        if self.geo.padded:
            self.xp.copyto(dst, self.acc_inner)
        return dst

    def put(self, view: Any, value: Any) -> None:
        if self.direct:
            self.xp.copyto(view, value)
        else:
            self.xp.add(view, value, out=view)


def _max_pool_grad(ctx: KernelContext, geo: PoolGeometry, target: _GradTarget) -> Callable:
    """Each window's gradient goes to its first maximum in row-major order, as in Paddle's
    and PyTorch's kernels; `free` marks the windows whose maximum is not found yet (bool
    masks: cheaper than carrying the unserved gradient along)."""
    xp = ctx.xp
    if geo.padded:   # a private -inf-bordered copy (the forward's scratch may be shared)
        xpad = xp.full(geo.shape(geo.padded_sizes), -xp.inf, geo.dtype)
        x_inner = geo.region(xpad, tuple(slice(a, a + size) for a, size
                                         in zip(geo.p0, geo.sizes)))
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


def _pool_grad(g: GradContext, grad_type: str) -> None:
    emit_default_grad(g, ("X", "Out"), grad_type, ("X",))


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


def _fixed_windows(attrs: Any, layout: str, shapes: Any) -> dict[str, Any] | None:
    """An adaptive pooling keeps to NCHW (its windows are index arrays, not views)."""
    return None if attrs.get("adaptive") else dict(attrs)


def _layout_rule(images: tuple[str, ...]) -> LayoutRule:
    return LayoutRule(images, (CHWN,), "data_format", adapt=_fixed_windows, gain=_layout_gain)


def _doc(rank: int) -> str:
    return (f"Max or average pooling over ksize windows of X ({LAYOUTS[rank][0]}, or "
            f"{LAYOUTS[rank][1]} with data_format), {rank} spatial dims. Each output dim "
            f"(size + pads - k) / stride + 1, rounded up with ceil_mode; global_pooling pools "
            f"each whole plane; adaptive makes ksize the output size. Avg divides by the "
            f"window's non-padding count when exclusive, else by its size. The max gradient "
            f"goes to each window's first maximum.")


def _register(rank: int) -> None:
    op = f"pool{rank}d"
    attrs = pool_attrs(rank)
    two_d = rank == 2   # the layout plan pass runs 4-D images only
    register(OpSpec(op, slots("X"), slots("Out"), partial(_pool_infer, rank=rank),
                    _pool_kernel, partial(_pool_grad, grad_type=f"{op}_grad"), attrs=attrs,
                    layout=_layout_rule(("X", "Out")) if two_d else None, doc=_doc(rank)))
    register(OpSpec(f"{op}_grad", slots("X", "Out", "Out@GRAD"), slots("X@GRAD"),
                    infer_like({"X@GRAD": "X"}), _pool_grad_kernel, attrs=attrs,
                    layout=_layout_rule(("X", "Out", "Out@GRAD", "X@GRAD")) if two_d
                    else None))


_register(2)
_register(3)
