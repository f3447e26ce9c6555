"""Products of Paddle 1.8: ``dot``, ``bmm``, ``addmm``, ``cross``, ``fsp`` and
``bilinear_tensor_product``.

``dot``    Out = sum(X * Y) over the last dim, kept as size 1 ([N] -> [1], [B, N] -> [B, 1])
``bmm``    Out[b] = X[b] @ Y[b] for 3-D X [B, M, K] and Y [B, K, N]
``addmm``  Out = Beta * Input + Alpha * X @ Y (Input broadcast from [1 or M, 1 or N])
``cross``  the 3-vector cross product along ``dim`` (default: the first dim of size 3)
``fsp``    Out[n] = X[n] @ Y[n]^T / (H * W) for images X [N, C1, H, W], Y [N, C2, H, W]
``bilinear_tensor_product``  Out[b, k] = X[b] @ Weight[k] @ Y[b] + Bias[0, k]
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir.records import FLOAT_DTYPES
from ..ir.text import format_shape as _fmt
from .grad_rules import check_same_float, register_grad
from .linalg import sum_to
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, dims_compatible, slots

# --- dot ---------------------------------------------------------------------------------

_NUMERIC = FLOAT_DTYPES | {"int32", "int64"}


def _dot_infer(ctx: InferContext) -> None:
    x, y = ctx.input("X"), ctx.input("Y")
    if x.dtype not in _NUMERIC or x.dtype != y.dtype:
        ctx.fail_dtype(f"X and Y must share a float or int32/int64 dtype, got {x.dtype} "
                       f"and {y.dtype}")
    if x.rank not in (1, 2) or x.rank != y.rank or \
            not all(dims_compatible(a, b) for a, b in zip(x.shape, y.shape)):
        ctx.fail(f"X {_fmt(x.shape)} and Y {_fmt(y.shape)} must have one shape, 1-D [N] or "
                 f"2-D [B, N]")
    ctx.set_output("Out", x.shape[:-1] + (1,), x.dtype)


def _dot_kernel(ctx: KernelContext) -> Callable:
    xp = ctx.xp
    if ctx.input("X").rank == 1:
        return lambda a, b: xp.dot(a, b).reshape(1)
    # einsum's row dots: no product array in between, and no BLAS call per row (a
    # batched matmul of [B, 1, N] by [B, N, 1] makes B of them)
    return lambda a, b: xp.einsum("ij,ij->i", a, b).reshape(-1, 1)


def _dot_grads(ctx: KernelContext) -> Callable[..., dict[str, Any]]:
    return lambda x, y, g: {"X": g * y, "Y": g * x}


register(OpSpec("dot", slots("X", "Y"), slots("Out"), _dot_infer, _dot_kernel,
                register_grad("dot", ("X", "Y"), ("X", "Y"), _dot_grads),
                doc="Out = sum(X * Y) over the last dim, kept as size 1."))


# --- bmm -----------------------------------------------------------------------------------

def _bmm_infer(ctx: InferContext) -> None:
    x = check_same_float(ctx, "X", "Y")
    y = ctx.input("Y")
    if x.rank != 3 or y.rank != 3 or not dims_compatible(x.shape[0], y.shape[0]) or \
            not dims_compatible(x.shape[2], y.shape[1]):
        ctx.fail(f"bmm multiplies X [B, M, K] by Y [B, K, N]; got X {_fmt(x.shape)} and Y "
                 f"{_fmt(y.shape)}")
    batch = x.shape[0] if x.shape[0] >= 0 else y.shape[0]
    ctx.set_output("Out", (batch, x.shape[1], y.shape[2]), x.dtype)


def _bmm_kernel(ctx: KernelContext) -> Callable:
    xp, out = ctx.xp, ctx.buffer("Out")
    return lambda a, b: xp.matmul(a, b, out=out)


def _bmm_grads(ctx: KernelContext) -> Callable[..., dict[str, Any]]:
    xp = ctx.xp
    return lambda x, y, g: {"X": xp.matmul(g, y.swapaxes(1, 2)),
                            "Y": xp.matmul(x.swapaxes(1, 2), g)}


register(OpSpec("bmm", slots("X", "Y"), slots("Out"), _bmm_infer, _bmm_kernel,
                register_grad("bmm", ("X", "Y"), ("X", "Y"), _bmm_grads),
                doc="Out[b] = X[b] @ Y[b] for 3-D X and Y of the same batch."))


# --- addmm -----------------------------------------------------------------------------------

_ADDMM = {"Alpha": 1.0, "Beta": 1.0}


def _addmm_infer(ctx: InferContext) -> None:
    check_same_float(ctx, "Input", "X", "Y")
    i, x, y = ctx.input("Input"), ctx.input("X"), ctx.input("Y")
    fits = i.rank == 2 and x.rank == 2 and y.rank == 2 and dims_compatible(x.shape[1],
                                                                          y.shape[0])
    if fits:
        fits = all(d in (1, -1) or dims_compatible(d, want)
                   for d, want in zip(i.shape, (x.shape[0], y.shape[1])))
    if not fits:
        ctx.fail(f"addmm needs X [M, K], Y [K, N] and Input [M or 1, N or 1]; got Input "
                 f"{_fmt(i.shape)}, X {_fmt(x.shape)}, Y {_fmt(y.shape)}")
    ctx.set_output("Out", (x.shape[0], y.shape[1]), x.dtype)


def _addmm_kernel(ctx: KernelContext) -> Callable:
    xp, out = ctx.xp, ctx.buffer("Out")
    alpha, beta = ctx.attrs["Alpha"], ctx.attrs["Beta"]

    def fn(i, a, b):
        r = xp.matmul(a, b, out=out)
        if alpha != 1.0:
            r *= alpha
        r += i if beta == 1.0 else beta * i
        return r
    return fn


def _addmm_grads(ctx: KernelContext) -> Callable[..., dict[str, Any]]:
    xp = ctx.xp
    alpha, beta = ctx.attrs["Alpha"], ctx.attrs["Beta"]
    shape = ctx.input("Input").shape

    def fn(i, x, y, g):
        return {"Input": sum_to(xp, g * beta, shape), "X": alpha * (g @ y.T),
                "Y": alpha * (x.T @ g)}
    return fn


register(OpSpec("addmm", slots("Input", "X", "Y"), slots("Out"), _addmm_infer, _addmm_kernel,
                register_grad("addmm", ("Input", "X", "Y"), ("Input", "X", "Y"),
                              _addmm_grads, _ADDMM),
                attrs=_ADDMM, doc="Out = Beta * Input + Alpha * X @ Y."))


# --- cross -----------------------------------------------------------------------------------

#: Paddle's "no dim given": the first dim of size 3 is taken.
DEFAULT_DIM = 9


def cross_dim(ctx: Any, shape: tuple[int, ...]) -> int:
    dim = int(ctx.attrs["dim"])
    if dim == DEFAULT_DIM:
        threes = [i for i, d in enumerate(shape) if d == 3]
        if not threes:
            ctx.fail(f"X {_fmt(shape)} has no dim of size 3; pass dim= naming one")
        return threes[0]
    if not -len(shape) <= dim < len(shape):
        ctx.fail(f"dim={dim} is out of range for X {_fmt(shape)}")
    dim %= len(shape)
    if shape[dim] not in (3, -1):
        ctx.fail(f"dim {dim} of X {_fmt(shape)} must have size 3 for a cross product")
    return dim


def _cross_infer(ctx: InferContext) -> None:
    x = check_same_float(ctx, "X", "Y")
    y = ctx.input("Y")
    if x.rank != y.rank or not all(dims_compatible(a, b) for a, b in zip(x.shape, y.shape)):
        ctx.fail(f"X {_fmt(x.shape)} and Y {_fmt(y.shape)} must have one shape")
    cross_dim(ctx, x.shape)
    ctx.set_output("Out", x.shape, x.dtype)


def _cross_kernel(ctx: KernelContext) -> Callable:
    xp = ctx.xp
    dim = cross_dim(ctx, ctx.input("X").shape)
    return lambda a, b: xp.cross(a, b, axisa=dim, axisb=dim, axisc=dim)


def _cross_grad(g: GradContext) -> None:
    """dX = Y x dOut and dY = dOut x X: cross products themselves."""
    dout = g.flowing("Out")
    if dout is None:
        return
    x, y = g.input("X"), g.input("Y")
    for slot, pair in (("X", (y, [dout])), ("Y", ([dout], x))):
        names = [n for n in g.in_grad(slot) if n]
        if names:
            g.emit("cross", {"X": pair[0], "Y": pair[1]}, {"Out": names}, g.attrs)


register(OpSpec("cross", slots("X", "Y"), slots("Out"), _cross_infer, _cross_kernel,
                _cross_grad, attrs={"dim": DEFAULT_DIM},
                doc="Out = X x Y, the cross product of 3-vectors along dim."))


# --- fsp ---------------------------------------------------------------------------------

def _fsp_infer(ctx: InferContext) -> None:
    x = check_same_float(ctx, "X", "Y")
    y = ctx.input("Y")
    if x.rank != 4 or y.rank != 4 or not all(
            dims_compatible(x.shape[i], y.shape[i]) for i in (0, 2, 3)):
        ctx.fail(f"fsp_matrix takes images X [N, C1, H, W] and Y [N, C2, H, W] of one batch "
                 f"and size; got X {_fmt(x.shape)} and Y {_fmt(y.shape)}")
    ctx.set_output("Out", (x.shape[0], x.shape[1], y.shape[1]), x.dtype)


def _fsp_kernel(ctx: KernelContext) -> Callable:
    xp, out = ctx.xp, ctx.buffer("Out")
    n, c1, h, w = ctx.input("X").shape
    c2 = ctx.input("Y").shape[1]
    share = 1.0 / (h * w)

    def fn(a, b):
        r = xp.matmul(a.reshape(n, c1, h * w), b.reshape(n, c2, h * w).swapaxes(1, 2),
                      out=out)
        return xp.multiply(r, share, out=r)
    return fn


def _fsp_grads(ctx: KernelContext) -> Callable[..., dict[str, Any]]:
    n, c1, h, w = ctx.input("X").shape
    c2 = ctx.input("Y").shape[1]
    share = 1.0 / (h * w)

    def fn(x, y, g):
        gs = g * share
        return {"X": (gs @ y.reshape(n, c2, h * w)).reshape(n, c1, h, w),
                "Y": (gs.swapaxes(1, 2) @ x.reshape(n, c1, h * w)).reshape(n, c2, h, w)}
    return fn


register(OpSpec("fsp", slots("X", "Y"), slots("Out"), _fsp_infer, _fsp_kernel,
                register_grad("fsp", ("X", "Y"), ("X", "Y"), _fsp_grads),
                doc="Out[n] = X[n] Y[n]^T / (H W): the flow of solution procedure matrix."))


# --- bilinear_tensor_product ---------------------------------------------------------------

def _btp_infer(ctx: InferContext) -> None:
    names = ("X", "Y", "Weight") + (("Bias",) if ctx.has_input("Bias") else ())
    x = check_same_float(ctx, *names)
    y, w = ctx.input("Y"), ctx.input("Weight")
    ok = x.rank == 2 and y.rank == 2 and w.rank == 3 and dims_compatible(x.shape[0],
                                                                        y.shape[0])
    ok = ok and dims_compatible(w.shape[1], x.shape[1]) and dims_compatible(w.shape[2],
                                                                             y.shape[1])
    if ctx.has_input("Bias"):
        ok = ok and tuple(ctx.input("Bias").shape) == (1, w.shape[0])
    if not ok:
        ctx.fail(f"bilinear_tensor_product needs X [B, M], Y [B, N], Weight [size, M, N] "
                 f"and Bias [1, size]; got X {_fmt(x.shape)}, Y {_fmt(y.shape)}, Weight "
                 f"{_fmt(w.shape)}")
    ctx.set_output("Out", (x.shape[0], w.shape[0]), x.dtype)


def _btp_kernel(ctx: KernelContext) -> Callable:
    xp = ctx.xp
    k, m, n = ctx.input("Weight").shape

    def fn(x, y, w, bias=None):
        # X @ [M, K*N]: each row's x W[k] for every k at once, then dotted with y.
        t = (x @ w.transpose(1, 0, 2).reshape(m, k * n)).reshape(-1, k, n)
        r = xp.einsum("bkn,bn->bk", t, y)
        return r if bias is None else xp.add(r, bias, out=r)
    return fn


def _btp_grads(ctx: KernelContext) -> Callable[..., dict[str, Any]]:
    xp = ctx.xp

    def fn(x, y, w, *rest):   # [Bias,] dOut: Bias is read for its shape alone
        g = rest[-1]
        return {"X": xp.einsum("bk,kmn,bn->bm", g, w, y, optimize=True),
                "Y": xp.einsum("bk,kmn,bm->bn", g, w, x, optimize=True),
                "Weight": xp.einsum("bk,bm,bn->kmn", g, x, y, optimize=True),
                "Bias": g.sum(axis=0, keepdims=True)}
    return fn


register(OpSpec("bilinear_tensor_product", slots("X", "Y", "Weight", "Bias?"), slots("Out"),
                _btp_infer, _btp_kernel,
                register_grad("bilinear_tensor_product", ("X", "Y", "Weight", "Bias?"),
                              ("X", "Y", "Weight", "Bias"), _btp_grads),
                doc="Out[b, k] = X[b] Weight[k] Y[b]^T + Bias[0, k]."))
