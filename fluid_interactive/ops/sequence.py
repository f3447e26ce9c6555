"""Sequence ops over a padded batch: X [B, T, ...] plus optional int Lengths [B].

``sequence_mask``     Y [..., maxlen] = (t < X[...]) in ``out_dtype`` for lengths X of any
                      rank; ``maxlen=-1`` takes the longest length, a ``MaxLenTensor``
                      input the value it holds (read back from the device on a GPU)
``sequence_pool``     Out [B, ...]: SUM, AVERAGE, SQRT (sum / sqrt(length)), MAX, FIRST or
                      LAST over each row's valid positions; ``pad_value`` for an empty row
``sequence_softmax``  softmax over the valid positions of each row of X [B, T] (or
                      [B, T, 1]); zero at padding
``sequence_reverse``  each row's valid prefix reversed; padding stays where it is

Without Lengths every row is full length. Positions at or past a row's length never
change an output, and get no gradient.
"""
from __future__ import annotations

from typing import Any

from ..errors import OpArgumentError
from ..ir.records import FLOAT_DTYPES, INT_DTYPES
from ..ir.text import format_shape as _fmt
from .registry import register
from .rnn import check_lengths, check_lengths_input, new_or
from .spec import (
    GradContext,
    InferContext,
    KernelContext,
    OpSpec,
    infer_like,
    slots,
)

POOL_TYPES = ("SUM", "AVERAGE", "SQRT", "MAX", "FIRST", "LAST")


def _check_sequence(ctx: InferContext, what: str, min_rank: int = 2):
    x = ctx.input("X")
    if x.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"{what}: X must be float32 or float64, got {x.dtype}")
    if x.rank < min_rank:
        ctx.fail(f"{what}: X must be a padded batch [B, T, ...], got {_fmt(x.shape)}")
    check_lengths_input(ctx, x.shape[0], what)
    return x


class ValidPositions:
    """The valid positions of a padded batch [B, T, ...], for one call."""

    def __init__(self, xp: Any, shape: tuple[int, ...]):
        self.xp, self.shape = xp, shape
        self.batch, self.time = shape[0], shape[1]
        self.t_row = xp.arange(self.time).reshape(1, self.time)
        self.rows = xp.arange(self.batch)
        self.on_host = xp.__name__ == "numpy"

    def mask(self, lengths: Any) -> Any:
        """[B, T, 1, ...] bool: t < length."""
        if self.on_host and lengths.size:
            check_lengths(lengths, self.time)
        m = self.t_row < lengths.reshape(self.batch, 1)
        return m.reshape(m.shape + (1,) * (len(self.shape) - 2))

    def per_row(self, v: Any) -> Any:
        """A [B] array shaped to broadcast against one row's values [B, ...]."""
        return v.reshape((self.batch,) + (1,) * (len(self.shape) - 2))


# --- sequence_mask -------------------------------------------------------------------------------

def _mask_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.dtype not in INT_DTYPES:
        ctx.fail_dtype(f"sequence_mask: X must hold int lengths, got {x.dtype}{_fmt(x.shape)}")
    maxlen = int(ctx.attrs["maxlen"])
    if maxlen < -1:
        ctx.fail(f"sequence_mask: maxlen must be >= 0 (or -1: the longest length), got {maxlen}")
    if ctx.has_input("MaxLenTensor"):
        m = ctx.input("MaxLenTensor")
        if m.dtype not in INT_DTYPES or m.shape not in ((), (1,)):
            ctx.fail(f"sequence_mask: maxlen must be an int var of shape [1], got "
                     f"{m.dtype}{_fmt(m.shape)}")
        maxlen = -1
    ctx.set_output("Y", x.shape + (maxlen,), ctx.attrs["out_dtype"])


def _mask_kernel(ctx: KernelContext):
    """Y[..., t] = t < X[...]: one more dim than the lengths X, of any rank."""
    xp, maxlen, dtype = ctx.xp, int(ctx.attrs["maxlen"]), ctx.attrs["out_dtype"]
    given = ctx.has_input("MaxLenTensor")
    out = ctx.buffer("Y") if maxlen >= 0 and not given else None
    fixed = xp.arange(max(maxlen, 0))

    def fn(lengths, maxlen_var=None):
        t = fixed
        if given:
            t = xp.arange(int(maxlen_var.reshape(-1)[0]))
        elif maxlen < 0:
            t = xp.arange(int(lengths.max()) if lengths.size else 0)
        m = t < lengths[..., None]
        if out is None:
            return m.astype(dtype)
        xp.copyto(out, m)
        return out
    return fn


register(OpSpec("sequence_mask", slots("X", "MaxLenTensor?"), slots("Y"), _mask_infer,
                _mask_kernel, attrs={"maxlen": -1, "out_dtype": "int64"}, host_access="reads",
                doc="Y[..., t] = t < X[...] for int lengths X of any rank: Y has one more dim, "
                    "maxlen long (MaxLenTensor when given; maxlen=-1: the longest length), "
                    "in out_dtype."))


# --- sequence_pool -------------------------------------------------------------------------------

def _pool_infer(ctx: InferContext) -> None:
    x = _check_sequence(ctx, "sequence_pool")
    kind = ctx.attrs["pooltype"]
    if kind not in POOL_TYPES:
        ctx.fail(f"sequence_pool: pooltype {kind!r} is not one of {', '.join(POOL_TYPES)}")
    ctx.set_output("Out", (x.shape[0],) + x.shape[2:], x.dtype)
    ctx.set_output("MaxIndex", (x.shape[0],) + x.shape[2:], "int64")


class _Pool:
    def __init__(self, ctx: KernelContext):
        xp = self.xp = ctx.xp
        x = ctx.input("X")
        self.kind, self.pad = ctx.attrs["pooltype"], float(ctx.attrs["pad_value"])
        self.valid = ValidPositions(xp, x.shape)
        self.has_len = ctx.has_input("Lengths")
        self.out = ctx.buffer("Out")
        self.want_index = ctx.has_output("MaxIndex")

    def __call__(self, x, lengths=None):
        xp, kind, v = self.xp, self.kind, self.valid
        full = lengths is None
        if kind in ("FIRST", "LAST"):
            at = (0 if kind == "FIRST" else v.time - 1) if full else (
                xp.maximum(lengths - 1, 0) if kind == "LAST" else xp.zeros_like(lengths))
            r = x[v.rows, at] if not full else x[:, at]
            idx = None
        elif kind == "MAX":
            r, idx = self._max(x, lengths)
        else:
            r, idx = self._sum(x, lengths), None
        if not full:
            r = xp.where(v.per_row(lengths > 0), r, self.pad)
        r = self._into_out(r)
        if self.want_index:
            return r, (idx if idx is not None else xp.zeros(r.shape, "int64"))
        return r

    def _sum(self, x, lengths):
        xp, v = self.xp, self.valid
        s = (x if lengths is None else xp.where(v.mask(lengths), x, 0)).sum(axis=1)
        if self.kind == "SUM":
            return s
        n = x.dtype.type(v.time) if lengths is None else \
            v.per_row(xp.maximum(lengths, 1)).astype(x.dtype)   # X's dtype: sqrt keeps it
        return s / (n if self.kind == "AVERAGE" else xp.sqrt(n))

    def _max(self, x, lengths):
        xp = self.xp
        masked = x if lengths is None else xp.where(self.valid.mask(lengths), x, -xp.inf)
        idx = masked.argmax(axis=1)
        return xp.take_along_axis(masked, idx[:, None], axis=1)[:, 0], idx

    def _into_out(self, r):
        if self.out is None:
            return self.xp.ascontiguousarray(r)
        self.xp.copyto(self.out, r)
        return self.out


def _pool_kernel(ctx: KernelContext):
    return _Pool(ctx)


def _grad_of(g: GradContext, out_slot: str) -> tuple[list[str], list[str]] | None:
    """([dOut], [dX]) when a gradient flows from ``out_slot`` to X, else None."""
    dout = g.flowing(out_slot)
    dx = [n for n in g.in_grad("X") if n]
    return ([dout], dx) if dout is not None and dx else None


def _pool_grad(g: GradContext) -> None:
    grads = _grad_of(g, "Out")
    if grads is None:
        return
    inputs = {"X": g.input("X"), "Lengths": g.input("Lengths"), "Out@GRAD": grads[0]}
    if g.attrs["pooltype"] == "MAX":
        if not g.output("MaxIndex"):   # the gradient kernel reads where each max came from
            raise OpArgumentError("sequence_pool: a MAX pool's gradient needs its MaxIndex "
                                  "output; give the op one (fluid.layers.sequence_pool does)")
        inputs["MaxIndex"] = g.output("MaxIndex")
    g.emit("sequence_pool_grad", inputs, {"X@GRAD": grads[1]}, g.attrs)


def _pool_grad_kernel(ctx: KernelContext):
    """dX is dOut spread over the valid positions (SUM), divided by the length (AVERAGE)
    or its root (SQRT), or put at the one position the output came from."""
    xp, x = ctx.xp, ctx.input("X")
    kind, valid = ctx.attrs["pooltype"], ValidPositions(ctx.xp, x.shape)
    has_len, out = ctx.has_input("Lengths"), ctx.buffer("X@GRAD")
    t_grid = valid.t_row.reshape((1, valid.time) + (1,) * (len(x.shape) - 2))

    def fn(*args):                      # X (its shape only), Lengths?, MaxIndex?, dOut
        lengths = args[1] if has_len else None
        dout = args[-1]
        dx = new_or(out, xp, x.shape, x.dtype)
        if kind in ("SUM", "AVERAGE", "SQRT"):
            return _spread(xp, valid, kind, lengths, dout, dx)
        if kind == "MAX":    # one position per row and trailing element
            xp.multiply(xp.equal(t_grid, args[-2][:, None]), dout[:, None], out=dx)
            if lengths is not None:
                xp.multiply(dx, valid.per_row(lengths > 0)[:, None], out=dx)
            return dx
        dx.fill(0)           # one position per row: dOut put there (none for an empty row)
        if lengths is None:
            dx[:, 0 if kind == "FIRST" else valid.time - 1] = dout
        else:
            at = xp.maximum(lengths - 1, 0) if kind == "LAST" else 0 * lengths
            dx[valid.rows, at] = xp.where(valid.per_row(lengths > 0), dout, 0)
        return dx
    return fn


def _spread(xp, valid: ValidPositions, kind: str, lengths: Any, dout: Any, dx: Any) -> Any:
    g = dout[:, None]
    if kind != "SUM":
        n = valid.time if lengths is None else valid.per_row(
            xp.maximum(lengths, 1)).astype(dout.dtype)[:, None]
        g = g / (n if kind == "AVERAGE" else xp.sqrt(n))
    if lengths is None:
        xp.copyto(dx, xp.broadcast_to(g, dx.shape))
        return dx
    return xp.multiply(valid.mask(lengths), g, out=dx)


_POOL_ATTRS = {"pooltype": "AVERAGE", "pad_value": 0.0}
register(OpSpec("sequence_pool", slots("X", "Lengths?"), slots("Out", "MaxIndex?"),
                _pool_infer, _pool_kernel, _pool_grad, attrs=_POOL_ATTRS,
                doc="Pools each row of X [B, T, ...] over its valid positions: SUM, AVERAGE, "
                    "SQRT, MAX (MaxIndex: where), FIRST or LAST; pad_value for an empty row."))
register(OpSpec("sequence_pool_grad", slots("X", "Lengths?", "MaxIndex?", "Out@GRAD"),
                slots("X@GRAD"), infer_like({"X@GRAD": "X"}), _pool_grad_kernel,
                attrs=_POOL_ATTRS, shape_only=("X",)))


# --- sequence_softmax ---------------------------------------------------------------------------

def _softmax_infer(ctx: InferContext) -> None:
    x = _check_sequence(ctx, "sequence_softmax")
    if x.rank > 3 or (x.rank == 3 and x.shape[2] not in (1, -1)):
        ctx.fail(f"sequence_softmax: X must be [B, T] (or [B, T, 1]): one score per "
                 f"position, got {_fmt(x.shape)}")
    ctx.set_output("Out", x.shape, x.dtype)


def _softmax_kernel(ctx: KernelContext):
    xp, x = ctx.xp, ctx.input("X")
    valid, out = ValidPositions(xp, x.shape), ctx.buffer("Out")

    def fn(a, lengths=None):
        if lengths is None:
            z = xp.subtract(a, a.max(axis=1, keepdims=True), out=out)
            xp.exp(z, out=z)
            return xp.divide(z, z.sum(axis=1, keepdims=True), out=z)
        m = valid.mask(lengths)
        top = xp.where(m, a, -xp.inf).max(axis=1, keepdims=True)
        top = xp.where(xp.isfinite(top), top, 0)              # an empty row
        z = xp.subtract(a, top, out=out)
        xp.exp(xp.where(m, z, -xp.inf), out=z)
        s = z.sum(axis=1, keepdims=True)
        return xp.divide(z, xp.where(s > 0, s, 1), out=z)
    return fn


def _softmax_grad(g: GradContext) -> None:
    """softmax's gradient along the time axis: zero at padding, where Out is."""
    grads = _grad_of(g, "Out")
    if grads is not None:
        g.emit("softmax_grad", {"Out": g.output("Out"), "Out@GRAD": grads[0]},
               {"X@GRAD": grads[1]}, {"axis": 1})


register(OpSpec("sequence_softmax", slots("X", "Lengths?"), slots("Out"), _softmax_infer,
                _softmax_kernel, _softmax_grad,
                doc="Softmax over each row's valid positions of X [B, T] (or [B, T, 1]); zero "
                    "at padding."))


# --- sequence_reverse ---------------------------------------------------------------------------

def _reverse_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.rank < 2:
        ctx.fail(f"sequence_reverse: X must be a padded batch [B, T, ...], got "
                 f"{_fmt(x.shape)}")
    check_lengths_input(ctx, x.shape[0], "sequence_reverse")
    ctx.set_output("Y", x.shape, x.dtype)


def _reverse_kernel(ctx: KernelContext):
    xp, x = ctx.xp, ctx.input("X")
    valid, out = ValidPositions(xp, x.shape), ctx.buffer("Y")
    t_row, rows = valid.t_row, valid.rows.reshape(-1, 1)

    def fn(a, lengths=None):
        if lengths is None:
            view = a[:, ::-1]
        else:
            n = lengths.reshape(-1, 1)
            valid.mask(lengths)                                # checks the range on the host
            view = a[rows, xp.where(t_row < n, n - 1 - t_row, t_row)]
        if out is None:
            return xp.ascontiguousarray(view)
        xp.copyto(out, view)
        return out
    return fn


def _reverse_grad(g: GradContext) -> None:
    """Reversing is its own inverse: the gradient is the reversed output gradient."""
    grads = _grad_of(g, "Y")
    if grads is not None:
        g.emit("sequence_reverse", {"X": grads[0], "Lengths": g.input("Lengths")},
               {"Y": grads[1]})


register(OpSpec("sequence_reverse", slots("X", "Lengths?"), slots("Y"), _reverse_infer,
                _reverse_kernel, _reverse_grad,
                doc="Each row of X [B, T, ...] with its first Lengths[b] positions reversed "
                    "(all T without Lengths); padding stays in place."))
