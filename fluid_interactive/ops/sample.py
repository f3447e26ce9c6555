"""Sampling images at computed positions: affine_grid (the positions of an affine map)
and grid_sampler (bilinear sampling at given positions), a spatial transformer's parts.

``affine_grid``  Theta [N, 2, 3] -> Output [N, H, W, 2]: for each output pixel the (x, y)
its affine map takes it to, ``Theta @ (x_w, y_h, 1)`` with x_w, y_h evenly spaced in
[-1, 1] (``linspace``). H and W come from the ``output_shape`` attr [N, C, H, W], or from
the OutputShape input (int32 [4]), read when the op runs.

``grid_sampler``  X [N, C, H, W], Grid [N, Hg, Wg, 2] -> Output [N, C, Hg, Wg]: X sampled
bilinearly at each (x, y) of Grid, -1 and 1 being the centres of the first and last pixels
(x maps to (x + 1) / 2 * (W - 1)); each of the four neighbours outside X counts as 0.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir.records import FLOAT_DTYPES
from ..ir.text import format_shape as fmt
from .registry import register
from .spec import (
    GradContext,
    InferContext,
    KernelContext,
    OpSpec,
    dims_compatible,
    emit_default_grad,
    infer_like,
    slots,
)

# --- affine_grid ---------------------------------------------------------------------------------


def _affine_infer(ctx: InferContext) -> None:
    theta = ctx.input("Theta")
    if theta.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"Theta must be float, got {theta.dtype}{fmt(theta.shape)}")
    if theta.rank != 3 or theta.shape[1:] != (2, 3):
        ctx.fail(f"Theta must be [N, 2, 3], got {fmt(theta.shape)}")
    if ctx.has_input("OutputShape"):
        ctx.set_output("Output", (theta.shape[0], -1, -1, 2), theta.dtype)
        return
    size = list(ctx.attrs["output_shape"] or [])
    if len(size) != 4 or any(not isinstance(d, int) or d < 1 for d in size[2:]):
        ctx.fail(f"output_shape must be [N, C, H, W] with positive H and W, got "
                 f"{ctx.attrs['output_shape']!r}")
    ctx.set_output("Output", (theta.shape[0], size[2], size[3], 2), theta.dtype)


def _base_grid(xp: Any, h: int, w: int, dtype: str) -> Any:
    """[H*W, 3]: (x, y, 1) of every output pixel, row-major."""
    ys, xs = xp.meshgrid(xp.linspace(-1.0, 1.0, h), xp.linspace(-1.0, 1.0, w), indexing="ij")
    return xp.stack([xs.reshape(-1), ys.reshape(-1), xp.ones(h * w)], axis=1).astype(dtype)


class _Grids:
    """The base grid per output size, made on first use (once per plan for a size fixed by
    the attr); the size is read back each call when it comes from OutputShape."""

    def __init__(self, ctx: KernelContext):
        self.xp, self.dtype = ctx.xp, ctx.input("Theta").dtype
        self.fixed: tuple[int, int] | None = None
        if not ctx.has_input("OutputShape"):
            size = ctx.attrs["output_shape"]
            self.fixed = (int(size[2]), int(size[3]))
        self._made: dict[tuple[int, int], Any] = {}
        if self.fixed is not None:
            self.base(self.fixed)

    def base(self, hw: tuple[int, int]) -> Any:
        if hw not in self._made:
            self._made[hw] = _base_grid(self.xp, hw[0], hw[1], self.dtype)
        return self._made[hw]

    def size(self, shape: tuple[Any, ...]) -> tuple[int, int]:
        """H, W: the attr's, or the OutputShape input's (two values read back: a wait for
        the device, no copy)."""
        if self.fixed is not None:
            return self.fixed
        flat = shape[0].reshape(-1)
        if flat.shape[0] != 4:
            raise ValueError(f"affine_grid: OutputShape must hold 4 values [N, C, H, W], got "
                             f"{flat.shape[0]}")
        return int(flat[2]), int(flat[3])


def _affine_kernel(ctx: KernelContext) -> Callable:
    xp, grids = ctx.xp, _Grids(ctx)

    def affine_grid(theta: Any, *shape: Any) -> Any:
        h, w = grids.size(shape)
        out = xp.matmul(grids.base((h, w)), theta.transpose(0, 2, 1))   # [N, HW, 2]
        return out.reshape(theta.shape[0], h, w, 2)
    return affine_grid


def _affine_grad_kernel(ctx: KernelContext) -> Callable:
    xp, dtype = ctx.xp, ctx.input("Theta").dtype
    made: dict[tuple[int, int], Any] = {}

    def affine_grid_grad(theta: Any, g: Any) -> Any:
        n, h, w, _ = g.shape
        if (h, w) not in made:
            made[(h, w)] = _base_grid(xp, h, w, dtype)
        # dTheta[n] = dOut[n]^T [2, HW] @ base [HW, 3]
        return xp.matmul(g.reshape(n, h * w, 2).transpose(0, 2, 1), made[(h, w)])
    return affine_grid_grad


def _affine_grad(g: GradContext) -> None:
    flowing = g.flowing("Output")
    if not g.wants("Theta") or flowing is None:
        return
    g.emit("affine_grid_grad", {"Theta": g.input("Theta"), "Output@GRAD": [flowing]},
           {"Theta@GRAD": [n for n in g.in_grad("Theta") if n]}, g.attrs)


_AG_ATTRS = {"output_shape": [], "use_cudnn": True}
register(OpSpec("affine_grid", slots("Theta", "OutputShape?"), slots("Output"),
                _affine_infer, _affine_kernel, _affine_grad, attrs=_AG_ATTRS,
                host_access="reads",
                doc="The positions Theta [N, 2, 3] maps an evenly spaced [-1, 1] grid of H x W "
                    "pixels to: Output [N, H, W, 2] (x, y)."))
register(OpSpec("affine_grid_grad", slots("Theta", "Output@GRAD"), slots("Theta@GRAD"),
                infer_like({"Theta@GRAD": "Theta"}), _affine_grad_kernel, attrs=_AG_ATTRS,
                shape_only=("Theta",)))


# --- grid_sampler --------------------------------------------------------------------------------

def _gs_infer(ctx: InferContext) -> None:
    x, grid = ctx.input("X"), ctx.input("Grid")
    for name, t in (("X", x), ("Grid", grid)):
        if t.dtype not in FLOAT_DTYPES:
            ctx.fail_dtype(f"{name} must be float, got {t.dtype}{fmt(t.shape)}")
    if x.rank != 4 or grid.rank != 4 or grid.shape[3] != 2:
        ctx.fail(f"X must be [N, C, H, W] and Grid [N, Hg, Wg, 2], got X {fmt(x.shape)} and "
                 f"Grid {fmt(grid.shape)}")
    if not dims_compatible(x.shape[0], grid.shape[0]):
        ctx.fail(f"X {fmt(x.shape)} and Grid {fmt(grid.shape)} differ in batch size")
    ctx.set_output("Output", (x.shape[0], x.shape[1], grid.shape[1], grid.shape[2]), x.dtype)


class _Corners:
    """Where a grid samples: per corner (x0 y0, x0 y1, x1 y0, x1 y1) the flat index into
    an [H*W] plane (0 where outside), the bilinear weight with the outside ones zeroed,
    and the partial derivatives of the weight by x and y."""

    def __init__(self, xp: Any, grid: Any, h: int, w: int):
        x = (grid[..., 0] + 1.0) * (0.5 * (w - 1))
        y = (grid[..., 1] + 1.0) * (0.5 * (h - 1))
        x0, y0 = xp.floor(x), xp.floor(y)
        fx, fy = x - x0, y - y0
        self.scale = (0.5 * (w - 1), 0.5 * (h - 1))
        self.corners = []
        for dx, dy in ((0, 0), (0, 1), (1, 0), (1, 1)):
            cx, cy = x0 + dx, y0 + dy
            inside = (cx >= 0) & (cx <= w - 1) & (cy >= 0) & (cy <= h - 1)
            wx, wy = (fx if dx else 1.0 - fx), (fy if dy else 1.0 - fy)
            sx, sy = (1.0 if dx else -1.0), (1.0 if dy else -1.0)
            flat = xp.where(inside, cy * w + cx, 0).astype("int64")
            self.corners.append((flat.reshape(flat.shape[0], -1), inside.astype(grid.dtype),
                                 wx * wy, sx * wy, sy * wx))


def _gather(xp: Any, planes: Any, flat: Any) -> Any:
    """planes [N, C, H*W] at flat [N, P] -> [N, C, P]."""
    return xp.take_along_axis(planes, flat[:, None, :], axis=2)


def _gs_kernel(ctx: KernelContext) -> Callable:
    xp = ctx.xp
    n, c, h, w = ctx.input("X").shape

    def grid_sampler(a: Any, grid: Any) -> Any:
        planes = a.reshape(n, c, h * w)
        out = None
        for flat, inside, weight, _, _ in _Corners(xp, grid, h, w).corners:
            part = _gather(xp, planes, flat) * (weight * inside).reshape(n, 1, -1)
            out = part if out is None else xp.add(out, part, out=out)
        assert out is not None
        return out.reshape(n, c, grid.shape[1], grid.shape[2])
    return grid_sampler


def _gs_grad_kernel(ctx: KernelContext) -> Callable:
    xp = ctx.xp
    n, c, h, w = ctx.input("X").shape
    want_x, want_grid = ctx.has_output("X@GRAD"), ctx.has_output("Grid@GRAD")

    def grid_sampler_grad(a: Any, grid: Any, g: Any) -> Any:
        planes, g3 = a.reshape(n, c, h * w), g.reshape(n, c, -1)
        cs = _Corners(xp, grid, h, w)
        dx = xp.zeros((n, h * w, c), a.dtype) if want_x else None
        dgx = dgy = 0
        rows = xp.arange(n).reshape(n, 1)
        for flat, inside, weight, by_x, by_y in cs.corners:
            if dx is not None:   # corners of different positions may coincide: add
                share = (g3 * (weight * inside).reshape(n, 1, -1)).transpose(0, 2, 1)
                xp.add.at(dx, (rows, flat), share)
            if want_grid:
                seen = (g3 * _gather(xp, planes, flat)).sum(axis=1).reshape(inside.shape)
                dgx = dgx + seen * by_x * inside
                dgy = dgy + seen * by_y * inside
        res = []
        if dx is not None:
            res.append(dx.transpose(0, 2, 1).reshape(n, c, h, w))
        if want_grid:
            res.append(xp.stack([dgx * cs.scale[0], dgy * cs.scale[1]], axis=-1))
        return res[0] if len(res) == 1 else tuple(res)
    return grid_sampler_grad


def _gs_grad(g: GradContext) -> None:
    emit_default_grad(g, ("X", "Grid"), "grid_sampler_grad", ("X", "Grid"), ("Output",))


register(OpSpec("grid_sampler", slots("X", "Grid"), slots("Output"), _gs_infer, _gs_kernel,
                _gs_grad, attrs={"use_cudnn": True},
                doc="X [N, C, H, W] sampled bilinearly at the (x, y) in [-1, 1] of Grid [N, "
                    "Hg, Wg, 2] (corners on the first and last pixels' centres; outside "
                    "counts as 0): Output [N, C, Hg, Wg]."))
register(OpSpec("grid_sampler_grad", slots("X", "Grid", "Output@GRAD"),
                slots("X@GRAD?", "Grid@GRAD?"), infer_like({"X@GRAD": "X", "Grid@GRAD": "Grid"}),
                _gs_grad_kernel, attrs={"use_cudnn": True}))
