"""What the loss, structured-prediction and metric ops share: dtype and shape checks, the
lengths of a padded batch, a stable log-sum-exp, running maxima that CuPy runs too, and
draws from an op's generator (their gradient ops are registered by `loss_grads`).

Lengths here may be ``[B]`` or ``[B, 1]`` (Paddle's padded layers take either, depending
on the layer); kernels read them as ``[B]``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ir.records import FLOAT_DTYPES, INT_DTYPES
from ..ir.text import format_shape as fmt
from .spec import InferContext, KernelContext, TensorType, dims_compatible

LENGTH_DTYPES = ("int32", "int64")


def check_float(ctx: InferContext, t: TensorType, what: str) -> None:
    if t.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"{what} must be float (float32 or float64), got {t.dtype}"
                       f"{fmt(t.shape)}; cast it first")


def check_int(ctx: InferContext, t: TensorType, what: str) -> None:
    if t.dtype not in INT_DTYPES:
        ctx.fail_dtype(f"{what} must hold integer indices (int64), got {t.dtype}"
                       f"{fmt(t.shape)}; declare it with dtype='int64'")


def same_dims(a: Sequence[int], b: Sequence[int]) -> bool:
    return len(a) == len(b) and all(dims_compatible(x, y) for x, y in zip(a, b))


def check_same(ctx: InferContext, a: TensorType, b: TensorType, what_a: str,
               what_b: str) -> None:
    """``b`` must have ``a``'s shape (unknown dims match anything) and dtype."""
    if not same_dims(a.shape, b.shape):
        ctx.fail(f"{what_b} has shape {fmt(b.shape)} but {what_a} has shape "
                 f"{fmt(a.shape)}; they must match")
    if a.dtype != b.dtype:
        ctx.fail_dtype(f"{what_b} is {b.dtype} but {what_a} is {a.dtype}; cast one of them")


def check_lengths(ctx: InferContext, slot: str, batch: int, what: str) -> None:
    """An optional lengths input: int64 (or int32), ``[B]`` or ``[B, 1]``."""
    if not ctx.has_input(slot):
        return
    n = ctx.input(slot)
    if n.dtype not in LENGTH_DTYPES:
        ctx.fail_dtype(f"{what}: {slot} must be int64 lengths, got {n.dtype}; declare it "
                       f"with dtype='int64'")
    if not (n.rank == 1 or (n.rank == 2 and dims_compatible(n.shape[1], 1))) or \
            not dims_compatible(n.shape[0], batch):
        ctx.fail(f"{what}: {slot} must hold one length per row of the batch, [B] or [B, 1] "
                 f"with B = {batch}, got {fmt(n.shape)}")


def row_lengths(xp: Any, lengths: Any, batch: int, time: int, what: str) -> Any:
    """Lengths as ``[B]``; with NumPy, checked to lie in ``[0, time]`` (a check on the
    device would stall it every call)."""
    n = lengths.reshape(batch)
    if xp is np and n.size:
        lo, hi = int(n.min()), int(n.max())
        if lo < 0 or hi > time:
            raise ValueError(f"{what}: lengths must lie in [0, {time}] (the padded length), "
                             f"got lengths from {lo} to {hi}")
    return n


def first_values(a: Any, n: int, what: str) -> Any:
    """The first ``n`` values of ``a`` in order, ``[n, 1]``: a per-row input (one label or
    weight per row) as Paddle's kernels read it, whatever its shape, so one holding more
    values than rows gives its first ``n`` (Paddle's own tests pass such shapes)."""
    flat = a.reshape(-1)
    if flat.shape[0] < n:
        raise ValueError(f"{what} holds {flat.shape[0]} values for {n} rows: it needs one "
                         f"per row")
    return flat[:n].reshape(n, 1)


def check_range(xp: Any, values: Any, high: int, what: str, allowed: int | None = None
                ) -> None:
    """With NumPy: every value in ``[0, high)`` (or equal to ``allowed``)."""
    if xp is not np or not values.size:
        return
    bad = (values < 0) | (values >= high)
    if allowed is not None:
        bad &= values != allowed
    if bad.any():
        raise ValueError(f"{what} {int(values[bad][0])} is out of range: it must lie in "
                         f"[0, {high})")


def logsumexp(xp: Any, a: Any, axis: int) -> Any:
    """log(sum(exp(a))) along ``axis`` (removed), stable for large values; a slice that is
    all -inf gives -inf without a warning."""
    m = a.max(axis=axis, keepdims=True)
    m = xp.where(xp.isfinite(m), m, 0)
    s = xp.exp(a - m).sum(axis=axis)
    with np.errstate(divide="ignore"):
        return xp.log(s) + m.squeeze(axis)


def running_max(xp: Any, a: Any, axis: int = -1) -> Any:
    """The running maximum along ``axis``: NumPy's accumulate, else log2(n) doubling steps
    (CuPy's ufuncs lack ``accumulate``)."""
    if xp is np:
        return np.maximum.accumulate(a, axis=axis)
    out = a.copy()
    n, step = a.shape[axis], 1
    moved = xp.moveaxis(out, axis, -1)
    while step < n:
        moved[..., step:] = xp.maximum(moved[..., step:], moved[..., :-step].copy())
        step *= 2
    return out


def time_mask(xp: Any, lengths: Any, time: int) -> Any:
    """``[B, T]`` bool: t < lengths[b]."""
    return xp.arange(time).reshape(1, time) < lengths.reshape(-1, 1)


def host_generator(ctx: KernelContext) -> np.random.Generator:
    """The op's generator: its ``seed`` attr when non-zero (then every program gives the
    same draws), else the program's seeded per-op generator."""
    seed = int(ctx.attrs.get("seed", 0) or 0)
    return np.random.default_rng(seed) if seed else ctx.rng






def into(xp: Any, out: Any, value: Any) -> Any:
    """``value`` written into the output buffer ``out``, or ``value`` itself without one."""
    if out is None:
        return value
    xp.copyto(out, value.reshape(out.shape))
    return out


def scalars_into(xp: Any, bufs: Sequence[Any], values: Sequence[Any],
                 dtypes: Sequence[str]) -> tuple:
    """0-d results, each written into its output buffer or made as a device array of its
    dtype (no value crosses to the host)."""
    out = []
    for buf, v, dtype in zip(bufs, values, dtypes):
        if buf is None:
            out.append(xp.asarray(v, dtype=dtype))
        else:
            buf[...] = v
            out.append(buf)
    return tuple(out)




def check_length_pair(ctx: InferContext, pair: tuple[str, str], batch: int, what: str) -> None:
    """Two lengths inputs that come together or not at all."""
    if ctx.has_input(pair[0]) != ctx.has_input(pair[1]):
        ctx.fail(f"{what}: give both {pair[0]} and {pair[1]}, or neither")
    for slot in pair:
        check_lengths(ctx, slot, batch, what)


def check_rows(ctx: InferContext, x_slot: str, ids_slot: str, what: str
               ) -> tuple[TensorType, TensorType]:
    """Float features ``x_slot`` [N, D] and integer ids ``ids_slot`` [N] or [N, K], one
    row of ids per row of features."""
    x, ids = ctx.input(x_slot), ctx.input(ids_slot)
    check_float(ctx, x, f"{what}: {x_slot}")
    check_int(ctx, ids, f"{what}: {ids_slot}")
    if x.rank != 2 or ids.rank not in (1, 2) or not dims_compatible(ids.shape[0], x.shape[0]):
        ctx.fail(f"{what}: {x_slot} must be [N, D] and {ids_slot} [N, K] class ids, one row "
                 f"per row of {x_slot}; got {fmt(x.shape)} and {fmt(ids.shape)}")
    return x, ids
