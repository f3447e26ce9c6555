"""Matrix products: ``mul`` (Paddle's flatten-then-matmul) and ``matmul``."""
from __future__ import annotations

from math import prod

from ..backend.rows import for_rows
from ..ir.text import format_shape
from .registry import register
from .spec import (
    GradContext,
    InferContext,
    KernelContext,
    OpSpec,
    TensorType,
    dims_compatible,
    infer_like,
    present,
    slots,
)


def _flat2d(shape: tuple[int, ...], k: int) -> tuple[int, int]:
    return prod(shape[:k]), prod(shape[k:])


def _mul_infer(ctx: InferContext) -> None:
    x, y = ctx.input("X"), ctx.input("Y")
    xk, yk = ctx.attrs["x_num_col_dims"], ctx.attrs["y_num_col_dims"]
    if not (1 <= xk <= x.rank - 1 and 1 <= yk <= y.rank - 1):
        ctx.fail(f"x_num_col_dims={xk} / y_num_col_dims={yk} do not fit X "
                 f"{format_shape(x.shape)} and Y {format_shape(y.shape)}")
    if x.dtype != y.dtype:
        ctx.fail_dtype(f"X is {x.dtype} but Y is {y.dtype}")
    inner_x = x.shape[xk:]
    inner_y = y.shape[:yk]
    kx = -1 if any(d < 0 for d in inner_x) else prod(inner_x)
    ky = -1 if any(d < 0 for d in inner_y) else prod(inner_y)
    if not dims_compatible(kx, ky):
        ctx.fail(f"X {format_shape(x.shape)} flattened at {xk} gives {kx} columns but Y "
                 f"{format_shape(y.shape)} flattened at {yk} gives {ky} rows; they must be equal")
    ctx.set_output("Out", x.shape[:xk] + y.shape[yk:], x.dtype)


def _mul_kernel(ctx: KernelContext):
    matmul = ctx.xp.matmul
    x, y, o = ctx.input("X"), ctx.input("Y"), ctx.output("Out")
    xk, yk = ctx.attrs["x_num_col_dims"], ctx.attrs["y_num_col_dims"]
    x2, y2 = _flat2d(x.shape, xk), _flat2d(y.shape, yk)
    out = ctx.buffer("Out")
    if x.rank == 2 and y.rank == 2:
        return lambda a, b: matmul(a, b, out=out)
    out2 = out.reshape(x2[0], y2[1]) if out is not None else None
    return lambda a, b: matmul(a.reshape(x2), b.reshape(y2), out=out2).reshape(o.shape)


def _mul_grad(g: GradContext) -> None:
    dout = g.out_grad("Out")
    if not dout or not present(dout) or not (g.wants("X") or g.wants("Y")):
        return
    g.emit("mul_grad", {"X": g.input("X"), "Y": g.input("Y"), "Out@GRAD": dout},
           {"X@GRAD": [n for n in g.in_grad("X") if n],
            "Y@GRAD": [n for n in g.in_grad("Y") if n]}, g.attrs)


def _mul_grad_kernel(ctx: KernelContext):
    xp = ctx.xp
    x, y = ctx.input("X"), ctx.input("Y")
    xk, yk = ctx.attrs["x_num_col_dims"], ctx.attrs["y_num_col_dims"]
    x2, y2 = _flat2d(x.shape, xk), _flat2d(y.shape, yk)
    o2 = (x2[0], y2[1])
    want_x, want_y = ctx.has_output("X@GRAD"), ctx.has_output("Y@GRAD")
    bx, by = ctx.buffer("X@GRAD"), ctx.buffer("Y@GRAD")
    matmul = xp.matmul
    if x.rank == 2 and y.rank == 2:
        if want_x and want_y:
            return lambda a, b, g: (matmul(g, b.T, out=bx), matmul(a.T, g, out=by))
        if want_x:
            return lambda a, b, g: matmul(g, b.T, out=bx)
        return lambda a, b, g: matmul(a.T, g, out=by)
    bx2 = bx.reshape(x2) if bx is not None else None
    by2 = by.reshape(y2) if by is not None else None

    def fn(a, b, g):
        g2 = g.reshape(o2)
        res = []
        if want_x:
            res.append(xp.matmul(g2, b.reshape(y2).T, out=bx2).reshape(x.shape))
        if want_y:
            res.append(xp.matmul(a.reshape(x2).T, g2, out=by2).reshape(y.shape))
        return res[0] if len(res) == 1 else tuple(res)
    return fn


_MUL_ATTRS = {"x_num_col_dims": 1, "y_num_col_dims": 1}
register(OpSpec("mul", slots("X", "Y"), slots("Out"), _mul_infer, _mul_kernel, _mul_grad,
                attrs=_MUL_ATTRS,
                doc="Flattens X to 2-D at x_num_col_dims and Y at y_num_col_dims, then "
                    "multiplies them; Out has X's leading dims and Y's trailing dims."))
register(OpSpec("mul_grad", slots("X", "Y", "Out@GRAD"), slots("X@GRAD?", "Y@GRAD?"),
                infer_like({"X@GRAD": "X", "Y@GRAD": "Y"}), _mul_grad_kernel,
                attrs=_MUL_ATTRS))


# --- matmul ------------------------------------------------------------------------------------

def _mm_shapes(x: tuple[int, ...], y: tuple[int, ...], tx: bool, ty: bool):
    """Shapes as matmul sees them: 1-D operands are promoted like NumPy does."""
    xs = (1,) + x if len(x) == 1 else x
    ys = y + (1,) if len(y) == 1 else y
    if tx:
        xs = xs[:-2] + (xs[-1], xs[-2])
    if ty:
        ys = ys[:-2] + (ys[-1], ys[-2])
    return xs, ys


def _matmul_infer(ctx: InferContext) -> None:
    from .broadcast import broadcast_shape
    x, y = ctx.input("X"), ctx.input("Y")
    if x.dtype != y.dtype:
        ctx.fail_dtype(f"X is {x.dtype} but Y is {y.dtype}")
    tx, ty = ctx.attrs["transpose_X"], ctx.attrs["transpose_Y"]
    xs, ys = _mm_shapes(x.shape, y.shape, tx, ty)
    if not dims_compatible(xs[-1], ys[-2]):
        ctx.fail(f"matmul of X {format_shape(x.shape)} (transpose_X={tx}) and Y "
                 f"{format_shape(y.shape)} "
                 f"(transpose_Y={ty}): inner dims {xs[-1]} and {ys[-2]} differ")
    batch = broadcast_shape(xs[:-2], ys[:-2])
    if batch is None:
        ctx.fail(f"matmul batch dims of X {format_shape(x.shape)} and Y "
                 f"{format_shape(y.shape)} do not "
                 f"broadcast")
    out = batch + (xs[-2], ys[-1])
    if x.rank == 1:
        out = out[:-2] + out[-1:]
    if y.rank == 1:
        out = out[:-1]
    ctx.set_output("Out", out, x.dtype)


def _swap(a):
    return a.swapaxes(-1, -2)


#: The largest product (M·N·K) OpenBLAS runs on one thread (interface/gemm.c: four times
#: 65,536): a batch of such products runs one matrix after another, on one core, whatever
#: the thread count, so its matrices are what splits over the threads (backend/rows.py).
SERIAL_GEMM = 1 << 18


def _batch_of_small(xp, x: TensorType, y: TensorType, tx: bool, ty: bool) -> bool:
    """Whether a matmul of X and Y is a batch of small products over the same batch dims
    (an attention's heads, nothing broadcast): one whose matrices can be split over
    threads."""
    if xp.__name__ != "numpy" or x.rank < 3 or x.shape[:-2] != y.shape[:-2]:
        return False
    xs, ys = _mm_shapes(x.shape, y.shape, tx, ty)
    return xs[-2] * xs[-1] * ys[-1] <= SERIAL_GEMM


def _matmul_kernel(ctx: KernelContext):
    xp = ctx.xp
    tx, ty, alpha = ctx.attrs["transpose_X"], ctx.attrs["transpose_Y"], ctx.attrs["alpha"]
    x, y = ctx.input("X"), ctx.input("Y")
    fx = _swap if tx and x.rank > 1 else (lambda a: a)
    fy = _swap if ty and y.rank > 1 else (lambda a: a)
    out = ctx.buffer("Out")

    def product(a, b, r):
        r = xp.matmul(fx(a), fy(b), out=r)
        return r if alpha == 1.0 else xp.multiply(r, alpha, out=r)
    if not _batch_of_small(xp, x, y, tx, ty):
        return lambda a, b: product(a, b, out)
    o = ctx.output("Out")
    work = prod(o.shape)

    def split(a, b):
        r = out if out is not None else xp.empty(o.shape, o.dtype)
        for_rows(lambda lo, hi: product(a[lo:hi], b[lo:hi], r[lo:hi]), x.shape[0], work)
        return r
    return split


def _matmul_grad(g: GradContext) -> None:
    """Written with matmul ops: for Out = a·X·Y, dX = a·dOut·Yᵀ and dY = a·Xᵀ·dOut
    (transposes folded into the flags); batch broadcasting is summed away."""
    dout = g.out_grad("Out")
    if not dout or not present(dout) or not (g.wants("X") or g.wants("Y")):
        return
    g.emit("matmul_grad", {"X": g.input("X"), "Y": g.input("Y"), "Out@GRAD": dout},
           {"X@GRAD": [n for n in g.in_grad("X") if n],
            "Y@GRAD": [n for n in g.in_grad("Y") if n]}, g.attrs)


def sum_to(xp, a, shape):
    """Sum a gradient of a broadcast matmul down to an operand's shape."""
    extra = a.ndim - len(shape)
    if extra > 0:
        a = a.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, (da, ds) in enumerate(zip(a.shape, shape)) if ds == 1 and da != 1)
    if axes:
        a = a.sum(axis=axes, keepdims=True)
    return a.reshape(shape)


def _matmul_grad_kernel(ctx: KernelContext):
    xp = ctx.xp
    tx, ty, alpha = ctx.attrs["transpose_X"], ctx.attrs["transpose_Y"], ctx.attrs["alpha"]
    x, y = ctx.input("X"), ctx.input("Y")
    want_x, want_y = ctx.has_output("X@GRAD"), ctx.has_output("Y@GRAD")

    def promote(a, b, g):
        # Treat 1-D operands as matrices so one formula covers every case.
        a2 = a.reshape((1,) + a.shape) if a.ndim == 1 else a
        b2 = b.reshape(b.shape + (1,)) if b.ndim == 1 else b
        if a.ndim == 1:
            g = xp.expand_dims(g, -2)
        if b.ndim == 1:
            g = xp.expand_dims(g, -1)
        return a2, b2, g

    product = xp.matmul
    if _batch_of_small(xp, x, y, tx, ty):   # each matrix's gradients from its own alone
        def product(p, q):
            r = xp.empty(p.shape[:-1] + q.shape[-1:], xp.result_type(p, q))
            for_rows(lambda lo, hi: xp.matmul(p[lo:hi], q[lo:hi], out=r[lo:hi]),
                     r.shape[0], r.size)
            return r

    def fn(a, b, g):
        a2, b2, g2 = promote(a, b, g)
        if alpha != 1.0:
            g2 = g2 * alpha
        res = []
        if want_x:
            # Out = op(X)·op(Y); d op(X) = g·op(Y)ᵀ
            opy = _swap(b2) if ty else b2
            dx = product(g2, _swap(opy))
            dx = _swap(dx) if tx else dx
            res.append(sum_to(xp, dx, x.shape))
        if want_y:
            opx = _swap(a2) if tx else a2
            dy = product(_swap(opx), g2)
            dy = _swap(dy) if ty else dy
            res.append(sum_to(xp, dy, y.shape))
        return res[0] if len(res) == 1 else tuple(res)
    return fn


_MM_ATTRS = {"transpose_X": False, "transpose_Y": False, "alpha": 1.0}
register(OpSpec("matmul", slots("X", "Y"), slots("Out"), _matmul_infer, _matmul_kernel,
                _matmul_grad, attrs=_MM_ATTRS,
                doc="Batched matrix product with optional transposes and a scale alpha; "
                    "batch dims broadcast like NumPy."))
register(OpSpec("matmul_grad", slots("X", "Y", "Out@GRAD"), slots("X@GRAD?", "Y@GRAD?"),
                infer_like({"X@GRAD": "X", "Y@GRAD": "Y"}), _matmul_grad_kernel,
                attrs=_MM_ATTRS))
