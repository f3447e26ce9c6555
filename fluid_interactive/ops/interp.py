"""Resizing images by interpolation: bilinear_interp, nearest_interp (4-D) and
trilinear_interp (5-D), Paddle's ops behind image_resize and its kin.

X [N, C, *S] (``data_layout`` NCHW; NHWC puts C last, for volumes too) -> Out [N, C,
*out]. The output size: SizeTensor (one int32 [1] per dim) if given; else OutSize (int32
[rank]) if given; else ``int(size * scale)`` with the Scale input or the ``scale`` attr
when it is above 0; else the ``out_d`` / ``out_h`` / ``out_w`` attrs. Sizes given by
tensors are known only when the op runs (-1 while tracing and planning), and the kernel
reads them back each call.

Each spatial dim is resampled on its own (the methods are separable). Output index k of
a dim takes ``ratio = (in - 1) / (out - 1)`` with ``align_corners``, else ``in / out``
(0 for an output of 1), and

* nearest: input ``int(ratio * k + 0.5)`` with align_corners, else ``int(ratio * k)``;
* linear (bilinear, trilinear): source ``s = max(ratio * (k + 0.5) - 0.5, 0)`` when
  ``align_mode`` is 0 and not align_corners (half-pixel centres), else ``ratio * k``; the
  value is ``(1 - l) * x[i] + l * x[i + 1]`` with ``i = int(s)``, ``l = s - i``, and
  ``i + 1`` held at ``in - 1``.

A dim whose size does not change is left as it is. The gradient is the adjoint: each
input position adds the output gradients that read it, weighted; since the read indices
never decrease along a dim, the outputs reading one input are a run, and the adjoint is
one gather per position of the longest run (no scattered writes).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ..ir.records import FLOAT_DTYPES
from ..ir.text import format_shape as fmt
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, Slot, slots

_SIZE_ATTRS = ("out_d", "out_h", "out_w")


def axis_taps(xp: Any, method: str, size: int, out: int, align_corners: bool,
              align_mode: int) -> list[tuple[Any, Any]]:
    """(input index [out], weight [out] or None for 1) of each tap resampling one dim,
    computed with the array module (a size read back when the op runs needs no copy)."""
    k = xp.arange(out, dtype="float64")
    ratio = 0.0 if out <= 1 else ((size - 1) / (out - 1) if align_corners else size / out)
    if method == "nearest":
        src = ratio * k + 0.5 if align_corners else ratio * k
        return [(xp.minimum(src.astype("int64"), size - 1), None)]
    if align_mode == 0 and not align_corners:
        src = xp.maximum(ratio * (k + 0.5) - 0.5, 0.0)
    else:
        src = ratio * k
    i0 = xp.minimum(src.astype("int64"), size - 1)
    lam = src - i0
    return [(i0, 1.0 - lam), (xp.minimum(i0 + 1, size - 1), lam)]


class AxisResampler:
    """One dim's resampling: a weighted sum of gathers along ``axis``, and its adjoint."""

    def __init__(self, xp: Any, taps: list[tuple[Any, Any]], size: int, axis: int,
                 ndim: int, dtype: str):
        self.xp, self.axis, self.size = xp, axis, size
        trail = (1,) * (ndim - axis - 1)
        self.taps = [(i, None if w is None else w.astype(dtype).reshape((-1,) + trail))
                     for i, w in taps]
        self.runs = [self._runs(i, trail, dtype) for i, _ in taps]

    def _runs(self, index: Any, trail: tuple, dtype: str) -> list:
        """For the adjoint of a gather by ``index`` (non-decreasing): input j is read by
        the outputs [first_j, first_j + count_j); per position t of the longest run,
        (outputs read, 1 where that output reads j)."""
        xp, out = self.xp, len(index)
        j = xp.arange(self.size)
        first = xp.searchsorted(index, j, "left")
        count = xp.searchsorted(index, j, "right") - first
        steps = []
        for t in range(int(count.max())):   # the longest run: a few positions
            rows = xp.minimum(first + t, out - 1)
            steps.append((rows, (t < count).astype(dtype).reshape((-1,) + trail)))
        return steps

    def forward(self, a: Any, out: Any | None = None) -> Any:
        """The resampled ``a`` (into ``out`` when given)."""
        xp = self.xp
        result = None
        for index, weight in self.taps:
            if result is None:
                result = xp.take(a, index, axis=self.axis) if out is None else \
                    xp.take(a, index, axis=self.axis, out=out)
                part = result
            else:
                part = xp.take(a, index, axis=self.axis)
            if weight is not None:
                part *= weight
            if part is not result:
                result += part
        return result

    def adjoint(self, g: Any) -> Any:
        xp = self.xp
        shape = list(g.shape)
        shape[self.axis] = self.size
        dx = xp.zeros(shape, g.dtype)
        for (_, weight), steps in zip(self.taps, self.runs):
            share = g if weight is None else g * weight
            for rows, hit in steps:
                dx += xp.take(share, rows, axis=self.axis) * hit
        return dx


def _rank(ctx: Any) -> int:
    return 3 if ctx.spec.attrs["interp_method"] == "trilinear" else 2


def _first_spatial(ctx: Any, rank: int) -> int:
    layout = ctx.attrs["data_layout"]
    if layout not in ("NCHW", "NHWC", "NCDHW", "NDHWC"):
        ctx.fail(f"data_layout must be 'NCHW' or 'NHWC', got {layout!r}")
    return 1 if layout in ("NHWC", "NDHWC") else 2


def _sizes_by_attrs(ctx: Any, sizes: Sequence[int]) -> tuple[int, ...] | None:
    """The output size the attrs give (None: it comes from an input tensor)."""
    if ctx.has_input("SizeTensor") or ctx.has_input("OutSize") or ctx.has_input("Scale"):
        return None
    scale = float(ctx.attrs["scale"] or 0.0)
    if scale > 0:
        return tuple(int(s * scale) if s >= 0 else -1 for s in sizes)
    outs = tuple(int(ctx.attrs[a]) for a in _SIZE_ATTRS[3 - len(sizes):])
    if any(o <= 0 for o in outs):
        ctx.fail(f"the output size {list(outs)} ({', '.join(_SIZE_ATTRS[3 - len(sizes):])}) "
                 f"must be positive; give out_shape or scale")
    return outs


def _interp_infer(ctx: InferContext) -> None:
    rank = _rank(ctx)
    x = ctx.input("X")
    if x.rank != rank + 2:
        ctx.fail(f"X must be a {rank + 2}-D image batch for {ctx.attrs['interp_method']} "
                 f"interpolation, got {fmt(x.shape)}")
    if x.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"X must be float16/32/64, got {x.dtype}{fmt(x.shape)}")
    if ctx.attrs["interp_method"] != ctx.spec.attrs["interp_method"]:
        ctx.fail(f"interp_method must be {ctx.spec.attrs['interp_method']!r}, got "
                 f"{ctx.attrs['interp_method']!r}")
    if ctx.attrs["align_mode"] not in (0, 1):
        ctx.fail(f"align_mode must be 0 or 1, got {ctx.attrs['align_mode']!r}")
    first = _first_spatial(ctx, rank)
    outs = _sizes_by_attrs(ctx, x.shape[first:first + rank]) or (-1,) * rank
    shape = list(x.shape)
    shape[first:first + rank] = outs
    ctx.set_output("Out", shape, x.dtype)


class _Resize:
    """The resamplers of one op for each output size met, made on first use."""

    def __init__(self, ctx: KernelContext, x_shape: Sequence[int]):
        self.xp, self.dtype = ctx.xp, ctx.input("X").dtype
        self.method = ctx.attrs["interp_method"]
        self.align = (bool(ctx.attrs["align_corners"]), int(ctx.attrs["align_mode"]))
        rank = _rank(ctx)
        self.first = _first_spatial(ctx, rank)
        self.ndim = len(x_shape)
        self.sizes = tuple(x_shape[self.first:self.first + rank])
        self._made: dict[tuple[int, ...], list[AxisResampler]] = {}

    def axes(self, outs: tuple[int, ...]) -> list[AxisResampler]:
        """The resamplers of the dims that change size, for output ``outs``."""
        if outs not in self._made:
            if any(o <= 0 for o in outs):
                raise ValueError(f"interpolation to size {list(outs)}: every size must be "
                                 f"positive")
            self._made[outs] = [
                AxisResampler(self.xp, axis_taps(self.xp, self.method, s, o, *self.align),
                              s, self.first + i, self.ndim, self.dtype)
                for i, (s, o) in enumerate(zip(self.sizes, outs)) if s != o]
        return self._made[outs]

    def out_shape(self, shape: Sequence[int], outs: tuple[int, ...]) -> tuple[int, ...]:
        full = list(shape)
        full[self.first:self.first + len(outs)] = outs
        return tuple(full)


def _read_sizes(resize: _Resize, ctx: KernelContext) -> Callable[..., tuple]:
    """fn(*size inputs) -> the output size, read back from the tensors (Paddle's order:
    SizeTensor, else OutSize, else Scale)."""
    n_list = len(ctx.inputs("SizeTensor"))
    has_out, has_scale = ctx.has_input("OutSize"), ctx.has_input("Scale")
    scale_attr = float(ctx.attrs["scale"] or 0.0)

    def sizes(*tensors: Any) -> tuple[int, ...]:
        # the inputs come in slot order: OutSize, SizeTensor..., Scale. Each value read
        # back is one wait for the device, no array copy.
        rest = list(tensors)
        out_size = rest.pop(0) if has_out else None
        listed, rest = rest[:n_list], rest[n_list:]
        if listed:
            return tuple(int(t.reshape(-1)[0]) for t in listed)
        if out_size is not None:
            flat = out_size.reshape(-1)
            return tuple(int(flat[i]) for i in range(len(resize.sizes)))
        scale = float(rest[0].reshape(-1)[0]) if has_scale else scale_attr
        return tuple(int(s * scale) for s in resize.sizes)
    return sizes


def _interp_kernel(ctx: KernelContext) -> Callable:
    xp, x = ctx.xp, ctx.input("X")
    resize = _Resize(ctx, x.shape)
    fixed = _sizes_by_attrs(ctx, resize.sizes)
    out_buf = ctx.buffer("Out")
    reader = None if fixed is not None else _read_sizes(resize, ctx)
    if fixed is not None:
        resize.axes(fixed)   # made now, when the plan is built

    def interpolate(a: Any, *size_inputs: Any) -> Any:
        outs = reader(*size_inputs) if reader is not None else fixed
        assert outs is not None
        steps = resize.axes(outs)
        if not steps:   # the same size: a copy, as in Paddle
            if out_buf is None:
                return a.copy()
            xp.copyto(out_buf, a)
            return out_buf
        for step in steps[:-1]:
            a = step.forward(a)
        return steps[-1].forward(a, out_buf if fixed is not None else None)
    return interpolate


def _interp_grad_kernel(ctx: KernelContext) -> Callable:
    x = ctx.input("X")
    resize = _Resize(ctx, x.shape)
    dy = ctx.input("Out@GRAD").shape
    if all(d >= 0 for d in dy):
        resize.axes(tuple(dy[resize.first:resize.first + len(resize.sizes)]))

    def interpolate_grad(a: Any, g: Any) -> Any:
        outs = tuple(g.shape[resize.first:resize.first + len(resize.sizes)])
        for step in reversed(resize.axes(outs)):
            g = step.adjoint(g)
        return g if g.shape == tuple(x.shape) else g.copy()
    return interpolate_grad


def _interp_grad(g: GradContext, grad_type: str) -> None:
    if not g.wants("X") or g.flowing("Out") is None:
        return
    g.emit(grad_type, {"X": g.input("X"), "Out@GRAD": [g.flowing("Out")]},
           {"X@GRAD": [n for n in g.in_grad("X") if n]}, g.attrs)


def _grad_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.set_output("X@GRAD", x.shape, x.dtype)


def _attrs(method: str) -> dict[str, Any]:
    return {"out_d": -1, "out_h": -1, "out_w": -1, "scale": 0.0, "interp_method": method,
            "align_corners": True, "align_mode": 1, "data_layout": "NCHW"}


_DOC = ("{m} interpolation of X [N, C, {dims}] (NCHW; NHWC: C last) to the size given by "
        "SizeTensor, OutSize, scale (Scale or the attr) or the out_* attrs, in that order; "
        "align_corners and align_mode as Paddle's.")


def _register(method: str, dims: str) -> None:
    op = f"{method}_interp"
    attrs = _attrs(method)
    inputs = slots("X", "OutSize?") + (Slot("SizeTensor", duplicable=True, optional=True),) \
        + slots("Scale?")
    register(OpSpec(op, inputs, slots("Out"),
                    _interp_infer, _interp_kernel, partial(_interp_grad, grad_type=f"{op}_grad"),
                    attrs=attrs, host_access="reads",
                    doc=_DOC.format(m=method.capitalize(), dims=dims)))
    register(OpSpec(f"{op}_grad", slots("X", "Out@GRAD"), slots("X@GRAD"), _grad_infer,
                    _interp_grad_kernel, attrs=attrs, shape_only=("X",),
                    host_access="reads"))


_register("bilinear", "H, W")
_register("nearest", "H, W")
_register("trilinear", "D, H, W")
