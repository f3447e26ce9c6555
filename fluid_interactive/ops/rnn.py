"""What the recurrent ops (`lstm.py`, `gru.py`, `rnn_unit.py`) share: gate activations,
the processing order of a padded batch, and shape checks.

A batch of sequences is a dense ``[B, T, K]`` array plus optional int ``Lengths [B]``;
positions at or past a row's length are padding. A fused recurrent op walks the batch in
*processing order*: time-major ``[T, B, K]`` arrays (each step's rows contiguous, so one
step is one BLAS call and a few ufuncs), with each row's valid prefix reversed first when
the op runs backwards in time (`Steps`). Padding then always sits at the end of a row,
after every valid position, so it can never reach a valid one: the ops run it like any
other position but freeze the row's state there, and zero its outputs. Gradients reaching
padding are zero, so no gradient reaches a valid position from it either.

Sigmoid gates are computed as ``0.5 * tanh(x / 2) + 0.5``: the ops fold the ``1/2`` into
the weights and the input once per call (`PRE_SCALE`), so all gates of a step take one
``tanh`` call. Paddle's fused RNN kernels (``gru``, ``lstm``) clip a sigmoid's input to
`SIGMOID_RANGE` first, and so do ours (the ``clip`` argument of `activation` and
`activate_unscaled`); Paddle's one-step ops (``gru_unit``, ``lstm_unit``) do not clip.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ir.records import FLOAT_DTYPES
from ..ir.text import format_shape as _fmt
from ..kernels.recurrent import SIGMOID_RANGE
from .spec import InferContext, KernelContext, TensorType, dims_compatible

ACTIVATIONS = ("sigmoid", "tanh", "relu", "identity")
LENGTH_DTYPES = ("int32", "int64")
#: The factor a gate's pre-activation is scaled by before `activate` runs on it.
PRE_SCALE = {"sigmoid": 0.5, "tanh": 1.0, "relu": 1.0, "identity": 1.0}
#: The top bound on a pre-scaled sigmoid input when it is clipped to `SIGMOID_RANGE`, the
#: one bound that needs applying (see kernels/recurrent.py, which runs the same clip).
_SIGMOID_TOP = SIGMOID_RANGE[1] * PRE_SCALE["sigmoid"]


# --- activations ---------------------------------------------------------------------------------

def activation(xp: Any, spans: Sequence[tuple[int, int, str]], clip: bool = False
               ) -> Callable[[Any], None]:
    """An in-place activation of the columns of a ``[B, K]`` view: ``spans`` lists ``(lo,
    hi, act)`` column ranges, each pre-scaled by ``PRE_SCALE[act]``. When every act is
    sigmoid or tanh and the spans are adjacent, one tanh covers them all. ``clip``: the
    sigmoids' inputs are clipped to `SIGMOID_RANGE` first, as Paddle's fused RNN kernels
    do."""
    lo, hi = spans[0][0], spans[-1][1]
    adjacent = all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    if adjacent and all(act in ("sigmoid", "tanh") for _, _, act in spans):
        fixes = [(a, b) for a, b, act in spans if act == "sigmoid"]
        clips = fixes if clip else []
        columns = _ColumnFix(xp, lo, hi, fixes, clip) if 0 < len(fixes) < len(spans) else None

        def tanh_all(v):
            w = v[:, lo:hi]
            if columns is not None and w.flags.c_contiguous:
                columns(w)
                return
            for a, b in clips:
                _clip_sigmoid(xp, v[:, a:b])
            xp.tanh(w, out=w)
            for a, b in fixes:
                _tanh_to_sigmoid(xp, v[:, a:b])
        return tanh_all
    steps = [(a, b, act) for a, b, act in spans if act != "identity"]

    def each(v):
        for a, b, act in steps:
            _activate(xp, v[:, a:b], act, clip)
    return each


class _ColumnFix:
    """`activation` of tanh and sigmoid spans over whole rows ``w`` (C-contiguous), as
    one ufunc call over ``w`` per pass with a vector of each column's operand: a tanh
    column's is one that changes nothing (minimum with inf, times 1, plus -0.0), so the
    values are those of the calls on each span's strided view, which take longer."""

    def __init__(self, xp: Any, lo: int, hi: int, fixes: Sequence[tuple[int, int]],
                 clip: bool):
        self.xp, self.clip = xp, clip
        self.vectors = {dt: column_operands(xp, lo, hi, fixes, dt) for dt in FLOAT_DTYPES}

    def __call__(self, w: Any) -> None:
        xp = self.xp
        top, half, shift = self.vectors[w.dtype.name]
        if self.clip:
            xp.minimum(w, top, out=w)
        xp.tanh(w, out=w)
        xp.multiply(w, half, out=w)
        xp.add(w, shift, out=w)


def column_operands(xp: Any, lo: int, hi: int, fixes: Sequence[tuple[int, int]],
                    dtype: str) -> tuple[Any, Any, Any]:
    """The per-column operands (top, half, shift) of columns ``lo:hi`` of gates whose
    sigmoid spans are ``fixes``: the minimum with ``top``, after tanh the product with
    ``half`` and the sum with ``shift`` make a sigmoid column clipped, then sigmoid, and
    leave a tanh column as it is (inf, 1 and -0.0 change no value, NaN and -0 included)."""
    top, half, shift = (np.full(hi - lo, v, np.float64) for v in (np.inf, 1.0, -0.0))
    for a, b in fixes:
        top[a - lo:b - lo], half[a - lo:b - lo], shift[a - lo:b - lo] = \
            _SIGMOID_TOP, 0.5, 0.5
    top, half, shift = (xp.asarray(v.astype(dtype)) for v in (top, half, shift))
    return top, half, shift


def _clip_sigmoid(xp: Any, v: Any) -> None:
    """A pre-scaled sigmoid input clipped as Paddle's fused RNN kernels do (NaN stays)."""
    xp.minimum(v, _SIGMOID_TOP, out=v)


def _tanh_to_sigmoid(xp: Any, v: Any) -> None:
    xp.multiply(v, 0.5, out=v)
    xp.add(v, 0.5, out=v)


def _activate(xp: Any, v: Any, act: str, clip: bool = False) -> None:
    if act == "sigmoid":            # v holds x / 2
        if clip:
            _clip_sigmoid(xp, v)
        xp.tanh(v, out=v)
        _tanh_to_sigmoid(xp, v)
    elif act == "tanh":
        xp.tanh(v, out=v)
    elif act == "relu":
        xp.maximum(v, 0, out=v)


def activate_unscaled(xp: Any, v: Any, act: str, clip: bool = False) -> None:
    """``act`` in place on a view holding the true pre-activation (not pre-scaled);
    ``clip`` as `activation`'s."""
    if act == "sigmoid":
        xp.multiply(v, 0.5, out=v)
    _activate(xp, v, act, clip)


def derivative(xp: Any, y: Any, act: str, out: Any) -> Any:
    """d act(x) / dx from the activated value ``y``, written into ``out``."""
    if act == "sigmoid":
        xp.subtract(1, y, out=out)
        return xp.multiply(out, y, out=out)
    if act == "tanh":
        xp.multiply(y, y, out=out)
        return xp.subtract(1, out, out=out)
    if act == "relu":
        xp.copyto(out, y > 0)
        return out
    out.fill(1)
    return out


def scale_vector(acts: Sequence[str], width: int, dtype: str) -> np.ndarray | None:
    """The per-column pre-scale of gate blocks of ``width`` columns with these acts, or
    None when every factor is 1."""
    factors = [PRE_SCALE[a] for a in acts]
    if all(f == 1.0 for f in factors):
        return None
    return np.repeat(np.asarray(factors, dtype), width)


# --- the processing order of a padded batch ---------------------------------------------------

class Steps:
    """Maps ``[B, T, K]`` arrays to processing order ``[T, B, K]`` and back, for one plan's
    ``B`` and ``T``. `begin(lengths)` sets up one call: the mask of valid positions
    (``valid`` ``[T, B, 1]``, ``frozen`` its negation) and, for a reversed op with lengths,
    where each processing position reads from (each row's valid prefix reversed)."""

    def __init__(self, xp: Any, batch: int, time: int, reverse: bool):
        self.xp, self.batch, self.time, self.reverse = xp, batch, time, reverse
        self.t_col = xp.arange(time).reshape(time, 1)
        self.b_row = xp.arange(batch).reshape(1, batch)
        self.b_col = xp.arange(batch).reshape(batch, 1)
        self.on_host = xp.__name__ == "numpy"
        self.valid: Any = None
        self.frozen: Any = None
        self.valid_bt: Any = None
        self.src: Any = None

    def begin(self, lengths: Any | None) -> None:
        if lengths is None:
            self.valid = self.frozen = self.valid_bt = self.src = None
            return
        xp = self.xp
        lengths = lengths.reshape(1, self.batch)
        if self.on_host and lengths.size:
            check_lengths(lengths, self.time)
        valid = self.t_col < lengths                         # [T, B]
        self.valid = valid.reshape(self.time, self.batch, 1)
        self.frozen = xp.logical_not(self.valid)
        self.valid_bt = valid.T.reshape(self.batch, self.time, 1)
        self.src = (xp.where(valid, lengths - 1 - self.t_col, self.t_col)
                    if self.reverse else None)

    def time_view(self, x: Any) -> Any:
        """``x [B, T, K]`` in processing order (a view where no gather is needed)."""
        if self.src is not None:
            return x[self.b_row, self.src]
        if self.reverse:
            x = x[:, ::-1]
        return x.transpose(1, 0, 2)

    def batch_view(self, y: Any) -> Any:
        """``y [T, B, K]`` (processing order) back in ``[B, T, K]`` order."""
        if self.src is not None:
            return y[self.src.T, self.b_col]
        y = y.transpose(1, 0, 2)
        return y[:, ::-1] if self.reverse else y

    def to_batch(self, y: Any, out: Any | None) -> Any:
        """`batch_view` of ``y`` copied into ``out`` (or a new array), padding zeroed."""
        view = self.batch_view(y)
        if self.valid_bt is not None:
            return self.xp.multiply(view, self.valid_bt, out=out)
        if out is None:
            return self.xp.ascontiguousarray(view)
        self.xp.copyto(out, view)
        return out

    def freeze(self, t: int, new: Any, old: Any) -> None:
        """Rows whose sequence ended before step ``t`` keep their previous state."""
        if self.frozen is not None:
            self.xp.copyto(new, old, where=self.frozen[t])


def check_lengths(lengths: Any, time: int) -> None:
    lo, hi = int(lengths.min()), int(lengths.max())
    if lo < 0 or hi > time:
        raise ValueError(f"sequence lengths must lie in [0, {time}] (the padded length T "
                         f"of the input), got lengths from {lo} to {hi}")


def new_or(out: Any | None, xp: Any, shape: tuple[int, ...], dtype: str) -> Any:
    return xp.empty(shape, dtype) if out is None else out


def zero(a: Any) -> Any:
    a.fill(0)
    return a


def copy_into(xp: Any, dst: Any, src: Any) -> Any:
    xp.copyto(dst, src)
    return dst


class Unpack:
    """A kernel's positional arguments by slot name (optional slots may be absent)."""

    def __init__(self, ctx: KernelContext, names: Sequence[str]):
        self.present = [n for n in names if ctx.has_input(n)]

    def __call__(self, args: tuple) -> dict[str, Any]:
        return dict(zip(self.present, args))


# --- shape rules ---------------------------------------------------------------------------------

def check_sequence(ctx: InferContext, slot: str, what: str) -> TensorType:
    """A float ``[B, T, K]`` input."""
    x = ctx.input(slot)
    if x.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"{what} {slot} must be float32 or float64, got {x.dtype}")
    if x.rank != 3:
        ctx.fail(f"{what} {slot} must be a padded batch [B, T, K], got {_fmt(x.shape)}")
    return x


def check_weight(ctx: InferContext, x: TensorType, gates: int, what: str) -> int:
    """Weight [H, gates * H] and an input with ``gates * H`` columns; returns H."""
    w = ctx.input("Weight")
    if w.rank != 2 or w.shape[1] % gates or w.shape[1] <= 0:
        ctx.fail(f"{what}: Weight must be [H, {gates}H], got {_fmt(w.shape)}")
    h = w.shape[1] // gates
    if x.shape[-1] >= 0 and x.shape[-1] != gates * h:
        ctx.fail(f"{what}: Input {_fmt(x.shape)} must have {gates}H = {gates * h} columns "
                 f"(the size of Weight {_fmt(w.shape)}): project it with "
                 f"fc(size={gates * h}, num_flatten_dims=2)")
    check_param(ctx, "Weight", (h, gates * h), x.dtype, what)
    return h


def check_step(ctx: InferContext, x_slot: str, h_slot: str, gates: int, what: str
               ) -> tuple[TensorType, TensorType]:
    """One step's input [B, gates * D] and state [B, D]."""
    x, h = ctx.input(x_slot), ctx.input(h_slot)
    if x.rank != 2 or h.rank != 2:
        ctx.fail(f"{what}: {x_slot} must be [B, {gates}D] and {h_slot} [B, D], got "
                 f"{_fmt(x.shape)} and {_fmt(h.shape)}")
    d = h.shape[1]
    if d >= 0 and x.shape[1] >= 0 and x.shape[1] != gates * d:
        ctx.fail(f"{what}: {x_slot} {_fmt(x.shape)} must have {gates}D = {gates * d} columns "
                 f"for {h_slot} {_fmt(h.shape)}")
    check_param(ctx, h_slot, (x.shape[0], d), x.dtype, what)
    return x, h


def check_lengths_input(ctx: InferContext, batch: int, what: str) -> None:
    if not ctx.has_input("Lengths"):
        return
    n = ctx.input("Lengths")
    if n.dtype not in LENGTH_DTYPES:
        ctx.fail_dtype(f"{what}: Lengths must be int64 (or int32), got {n.dtype}; declare "
                       f"it with dtype='int64'")
    if n.rank != 1 or not dims_compatible(n.shape[0], batch):
        ctx.fail(f"{what}: Lengths must be [B] with one length per row of the batch "
                 f"(B = {batch}), got {_fmt(n.shape)}")


def check_param(ctx: InferContext, slot: str, want: tuple[int, ...], dtype: str,
                what: str) -> None:
    """An input of a known shape (weights, biases, initial states)."""
    if not ctx.has_input(slot):
        return
    t = ctx.input(slot)
    if t.dtype != dtype:
        ctx.fail_dtype(f"{what}: {slot} is {t.dtype} but the input is {dtype}")
    if t.rank != len(want) or not all(dims_compatible(a, b) for a, b in zip(t.shape, want)):
        ctx.fail(f"{what}: {slot} must have shape {_fmt(want)}, got {_fmt(t.shape)}")


def check_activations(ctx: InferContext, names: Sequence[str], what: str) -> None:
    for name in names:
        if ctx.attrs[name] not in ACTIVATIONS:
            ctx.fail(f"{what}: {name}={ctx.attrs[name]!r} is not one of "
                     f"{', '.join(ACTIVATIONS)}")
