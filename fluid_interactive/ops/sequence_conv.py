"""Convolutions along the time axis of a padded batch X [B, T, D] plus int Lengths [B].

``sequence_conv``          Out [B, T, N] = the context of each valid step (steps
                           t + contextStart ... t + contextStart + contextLength - 1, each
                           [D]) concatenated, times Filter [contextLength * D, N]. A context
                           step outside the row is zero, or with ``paddingTrainable`` a row
                           of PaddingData [up + down, D]: before the row, row
                           (step + up); after it, row (up + step - length)
``row_conv``               Out[b, t] = sum_k X[b, t + k] * Filter[k] (elementwise, Filter
                           [F, D]) over the steps t + k inside the row: lookahead
``add_position_encoding``  Out = alpha * X + beta * the sinusoid encoding of t

Outputs are zero at padding; what padding holds reaches no output and no gradient.
"""
from __future__ import annotations

import math
from typing import Any

from ..ir.records import FLOAT_DTYPES
from ..ir.text import format_shape as _fmt
from .registry import register
from .rnn import Unpack, new_or
from .sequence_edit import (
    check_len_slot,
    masked,
    one_or_tuple,
    padded_input,
    row_lengths,
    time_mask,
    wanted,
)
from .spec import (
    InferContext,
    KernelContext,
    OpSpec,
    dims_compatible,
    emit_default_grad,
    infer_like,
    slots,
)


def _float_batch(ctx: InferContext, what: str):
    x = padded_input(ctx, what)
    if x.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"{what}: X must be float32 or float64, got {x.dtype}")
    if x.rank != 3 or x.shape[2] < 1:
        ctx.fail(f"{what}: X must be [B, T, D] with D known, got {_fmt(x.shape)}")
    check_len_slot(ctx, "Lengths", x.shape[0], what)
    return x


def _param(ctx: InferContext, slot: str, want: tuple[int, ...], dtype: str, what: str):
    t = ctx.input(slot)
    if t.dtype != dtype or t.rank != len(want) or not all(
            dims_compatible(a, b) for a, b in zip(t.shape, want)):
        ctx.fail(f"{what}: {slot} must be {dtype}{_fmt(want)}, got {t.dtype}{_fmt(t.shape)}")


# --- sequence_conv -------------------------------------------------------------------------------

def _context_pads(attrs) -> tuple[int, int]:
    """Rows of PaddingData before and after a row: (up, down)."""
    start, length = int(attrs["contextStart"]), int(attrs["contextLength"])
    return max(0, -start), max(0, start + length - 1)


def _conv_infer(ctx: InferContext) -> None:
    x = _float_batch(ctx, "sequence_conv")
    length, stride = int(ctx.attrs["contextLength"]), int(ctx.attrs["contextStride"])
    if length < 1:
        ctx.fail(f"sequence_conv: contextLength must be >= 1, got {length}")
    if stride != 1:
        ctx.fail(f"sequence_conv: contextStride must be 1 (the only stride Paddle supports), "
                 f"got {stride}")
    d = x.shape[2]
    w = ctx.input("Filter")
    if w.rank != 2:
        ctx.fail(f"sequence_conv: Filter must be [contextLength * D, N], got {_fmt(w.shape)}")
    _param(ctx, "Filter", (length * d, w.shape[1]), x.dtype, "sequence_conv")
    up, down = _context_pads(ctx.attrs)
    if ctx.attrs["paddingTrainable"]:
        if not ctx.has_input("PaddingData"):
            ctx.fail("sequence_conv: paddingTrainable needs PaddingData [up + down, D]")
        _param(ctx, "PaddingData", (up + down, d), x.dtype, "sequence_conv")
    ctx.set_output("Out", (x.shape[0], x.shape[1], w.shape[1]), x.dtype)


class _Context:
    """Where each (row, step, tap) of the context matrix reads from, for one call: a row
    of the table [X's B * T steps; PaddingData; one zero row]."""

    def __init__(self, ctx: KernelContext):
        xp = self.xp = ctx.xp
        x = ctx.input("X")
        self.batch, self.time, self.d = x.shape
        self.taps = int(ctx.attrs["contextLength"])
        self.up, self.down = _context_pads(ctx.attrs)
        self.trainable = bool(ctx.attrs["paddingTrainable"])
        self.n_pad = self.up + self.down if self.trainable else 0
        self.zero_row = self.batch * self.time + self.n_pad
        self.at = (xp.arange(self.time).reshape(1, self.time, 1) + int(ctx.attrs["contextStart"])
                   + xp.arange(self.taps).reshape(1, 1, self.taps))
        self.base = (xp.arange(self.batch) * self.time).reshape(-1, 1, 1)
        self.t_col = xp.arange(self.time).reshape(1, self.time, 1)

    def index(self, lengths: Any) -> Any:
        """[B, T, taps] rows of the table."""
        xp, at = self.xp, self.at
        n = row_lengths(xp, lengths, self.batch, self.time).reshape(-1, 1, 1)
        idx = xp.where((at >= 0) & (at < n), self.base + at, self.zero_row)
        if self.trainable:
            first_pad = self.batch * self.time
            idx = xp.where(at < 0, first_pad + at + self.up, idx)
            idx = xp.where(at >= n, first_pad + self.up + at - n, idx)
        return xp.where(self.t_col < n, idx, self.zero_row)

    def columns(self, x: Any, pad: Any, idx: Any) -> Any:
        """The context matrix [B * T, taps * D]."""
        xp = self.xp
        parts = [x.reshape(-1, self.d)] + ([pad] if self.trainable else []) + \
            [xp.zeros((1, self.d), x.dtype)]
        return xp.concatenate(parts)[idx].reshape(self.batch * self.time, self.taps * self.d)


def _conv_kernel(ctx: KernelContext):
    xp, c, out = ctx.xp, _Context(ctx), ctx.buffer("Out")
    unpack = Unpack(ctx, ("X", "Filter", "PaddingData", "Lengths"))
    t = ctx.output("Out")

    def conv(*args):
        a = unpack(args)
        col = c.columns(a["X"], a.get("PaddingData"), c.index(a.get("Lengths")))
        o = new_or(out, xp, t.shape, t.dtype)
        xp.matmul(col, a["Filter"], out=o.reshape(-1, t.shape[2]))
        return o
    return conv


def _conv_grad_kernel(ctx: KernelContext):
    xp, c = ctx.xp, _Context(ctx)
    unpack = Unpack(ctx, ("X", "Filter", "PaddingData", "Lengths", "Out@GRAD"))
    wants = wanted(ctx, ("X@GRAD", "Filter@GRAD", "PaddingData@GRAD"))

    def conv_grad(*args):
        a = unpack(args)
        idx = c.index(a.get("Lengths"))
        dout = a["Out@GRAD"].reshape(c.batch * c.time, -1)
        grads = {}
        if "Filter@GRAD" in wants:
            grads["Filter@GRAD"] = c.columns(a["X"], a.get("PaddingData"), idx).T @ dout
        dcol = (dout @ a["Filter"].T).reshape(-1, c.d)
        if "X@GRAD" in wants:
            grads["X@GRAD"] = _scatter_rows(xp, c, idx, dcol)
        if "PaddingData@GRAD" in wants:
            rel = idx.reshape(-1) - c.batch * c.time
            onehot = xp.arange(c.n_pad).reshape(-1, 1) == rel.reshape(1, -1)
            grads["PaddingData@GRAD"] = onehot.astype(dcol.dtype) @ dcol
        return one_or_tuple([grads[s] for s in wants])
    return conv_grad


def _scatter_rows(xp: Any, c: _Context, idx: Any, dcol: Any) -> Any:
    """dX: each tap's column gradient added back at the step it read. Within one tap the
    steps read are distinct, so a fancy-indexed add per tap is exact."""
    table = xp.zeros((c.zero_row + 1, c.d), dcol.dtype)
    dcol = dcol.reshape(c.batch * c.time, c.taps, c.d)
    steps = c.batch * c.time
    for k in range(c.taps):
        rows = idx[:, :, k].reshape(-1)
        into_x = xp.where(rows < steps, rows, c.zero_row)    # pads: gathered apart
        table[into_x] += xp.where((rows < steps).reshape(-1, 1), dcol[:, k], 0)
    return table[:steps].reshape(c.batch, c.time, c.d)


_CONV_ATTRS = {"contextLength": 3, "contextStart": 0, "contextStride": 1,
               "paddingTrainable": False}
register(OpSpec("sequence_conv", slots("X", "Filter", "PaddingData?", "Lengths?"),
                slots("Out"), _conv_infer, _conv_kernel,
                lambda g: emit_default_grad(g, ("X", "Filter", "PaddingData", "Lengths"),
                                            "sequence_conv_grad",
                                            ("X", "Filter", "PaddingData")),
                attrs=_CONV_ATTRS,
                doc="Out [B, T, N]: each valid step's context of contextLength steps from "
                    "t + contextStart, concatenated, times Filter; zeros (or PaddingData "
                    "rows) outside the row"))
register(OpSpec("sequence_conv_grad",
                slots("X", "Filter", "PaddingData?", "Lengths?", "Out@GRAD"),
                slots("X@GRAD?", "Filter@GRAD?", "PaddingData@GRAD?"),
                infer_like({"X@GRAD": "X", "Filter@GRAD": "Filter",
                            "PaddingData@GRAD": "PaddingData"}),
                _conv_grad_kernel, attrs=_CONV_ATTRS))


# --- row_conv ------------------------------------------------------------------------------------

def _row_conv_infer(ctx: InferContext) -> None:
    x = _float_batch(ctx, "row_conv")
    w = ctx.input("Filter")
    if w.rank != 2 or w.shape[0] == 0:
        ctx.fail(f"row_conv: Filter must be [future_context_size + 1, D], got "
                 f"{_fmt(w.shape)}")
    _param(ctx, "Filter", (w.shape[0], x.shape[2]), x.dtype, "row_conv")
    ctx.set_output("Out", x.shape, x.dtype)


def _clean(ctx: KernelContext):
    """fn(x, lengths) -> X with zeros at padding (a new array)."""
    xp, x = ctx.xp, ctx.input("X")

    def clean(a, lengths):
        n = row_lengths(xp, lengths, x.shape[0], x.shape[1])
        return masked(xp, xp.empty(x.shape, x.dtype), a, time_mask(xp, n, x.shape[1], 3))
    return clean


def _row_conv_kernel(ctx: KernelContext):
    xp, t, out = ctx.xp, ctx.input("X"), ctx.buffer("Out")
    clean, time = _clean(ctx), t.shape[1]

    def row_conv(a, w, lengths=None):
        xc = clean(a, lengths)
        o = xp.multiply(xc, w[0], out=new_or(out, xp, t.shape, t.dtype))
        for k in range(1, min(w.shape[0], time)):
            o[:, :time - k] += xc[:, k:] * w[k]
        return o
    return row_conv


def _row_conv_grad_kernel(ctx: KernelContext):
    """dX[s] = sum_k dOut[s - k] * W[k] (valid s only); dW[k] = sum dOut[t] * X[t + k]."""
    xp, t = ctx.xp, ctx.input("X")
    clean, time = _clean(ctx), t.shape[1]
    wants = wanted(ctx, ("X@GRAD", "Filter@GRAD"))

    def row_conv_grad(*args):    # X, Filter, Lengths?, dOut
        a, w, dout = args[0], args[1], args[-1]
        lengths = args[2] if len(args) == 4 else None
        got = []
        if "X@GRAD" in wants:
            dx = dout * w[0]
            for k in range(1, min(w.shape[0], time)):
                dx[:, k:] += dout[:, :time - k] * w[k]
            n = row_lengths(xp, lengths, t.shape[0], time)
            got.append(xp.where(time_mask(xp, n, time, 3), dx, 0))
        if "Filter@GRAD" in wants:
            xc, dw = clean(a, lengths), xp.zeros(w.shape, w.dtype)
            for k in range(min(w.shape[0], time)):
                dw[k] = (dout[:, :time - k] * xc[:, k:]).sum(axis=(0, 1))
            got.append(dw)
        return one_or_tuple(got)
    return row_conv_grad


register(OpSpec("row_conv", slots("X", "Filter", "Lengths?"), slots("Out"), _row_conv_infer,
                _row_conv_kernel,
                lambda g: emit_default_grad(g, ("X", "Filter", "Lengths"), "row_conv_grad",
                                            ("X", "Filter")),
                doc="Out[b, t] = sum_k X[b, t + k] * Filter[k] over the steps inside row b: "
                    "a lookahead convolution"))
register(OpSpec("row_conv_grad", slots("X", "Filter", "Lengths?", "Out@GRAD"),
                slots("X@GRAD?", "Filter@GRAD?"),
                infer_like({"X@GRAD": "X", "Filter@GRAD": "Filter"}), _row_conv_grad_kernel))


# --- add_position_encoding -----------------------------------------------------------------------

def _position_infer(ctx: InferContext) -> None:
    x = _float_batch(ctx, "add_position_encoding")
    if x.shape[2] % 2:
        ctx.fail(f"add_position_encoding: the last dim of X must be even (half sines, half "
                 f"cosines), got {_fmt(x.shape)}")
    ctx.set_output("Out", x.shape, x.dtype)


def position_table(time: int, d: int) -> list[list[float]]:
    """The encoding [T, D]: sin(t / 10000^(k / (D/2 - 1))) in column k < D/2, the cosine
    in column D/2 + k (Paddle's spacing of the frequencies)."""
    half = d // 2
    rates = [1.0 / 10000.0 ** (k / (half - 1)) if half > 1 else 1e-4 for k in range(half)]
    return [[math.sin(t * r) for r in rates] + [math.cos(t * r) for r in rates]
            for t in range(time)]


def _position_kernel(ctx: KernelContext):
    xp, x, out = ctx.xp, ctx.input("X"), ctx.buffer("Out")
    alpha, beta = float(ctx.attrs["alpha"]), float(ctx.attrs["beta"])
    enc = beta * xp.asarray(position_table(x.shape[1], x.shape[2]), x.dtype).reshape(
        (1,) + x.shape[1:])

    def add_position_encoding(a, lengths=None):
        n = row_lengths(xp, lengths, x.shape[0], x.shape[1])
        m = time_mask(xp, n, x.shape[1], 3)
        o = masked(xp, new_or(out, xp, x.shape, x.dtype), a, m)
        o *= alpha
        o += enc
        xp.copyto(o, 0, where=~m)
        return o
    return add_position_encoding


def _position_grad_kernel(ctx: KernelContext):
    xp, x, alpha = ctx.xp, ctx.input("X"), float(ctx.attrs["alpha"])

    def position_grad(*args):   # X (its shape), Lengths?, dOut
        n = row_lengths(xp, args[1] if len(args) == 3 else None, x.shape[0], x.shape[1])
        return xp.where(time_mask(xp, n, x.shape[1], 3), alpha * args[-1], 0).astype(x.dtype)
    return position_grad


register(OpSpec("add_position_encoding", slots("X", "Lengths?"), slots("Out"), _position_infer,
                _position_kernel,
                lambda g: emit_default_grad(g, ("X", "Lengths"), "add_position_encoding_grad",
                                            ("X",)),
                attrs={"alpha": 1.0, "beta": 1.0},
                doc="Out = alpha * X + beta * the sinusoid position encoding [T, D], zero at "
                    "padding"))
register(OpSpec("add_position_encoding_grad", slots("X", "Lengths?", "Out@GRAD"),
                slots("X@GRAD"), infer_like({"X@GRAD": "X"}), _position_grad_kernel,
                attrs={"alpha": 1.0, "beta": 1.0}, shape_only=("X",)))
