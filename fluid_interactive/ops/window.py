"""Shared pieces of the windowed NCHW ops (convolution and pooling): attribute parsing,
shape checks and strided views."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ir.records import FLOAT_DTYPES
from ..ir.text import format_shape as fmt
from .spec import InferContext


def pair(ctx: Any, name: str, value: Any, minimum: int) -> tuple[int, int]:
    """A 2-int attr (an int means both), each at least ``minimum``."""
    vals = list(value) if isinstance(value, (list, tuple)) else [value, value]
    if len(vals) == 1:
        vals = vals * 2
    if len(vals) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        ctx.fail(f"{name} must be two ints [h, w], got {value!r}")
    if any(v < minimum for v in vals):
        ctx.fail(f"{name} must be at least {minimum}, got {list(vals)}")
    return int(vals[0]), int(vals[1])


def paddings(ctx: Any, value: Any) -> tuple[int, int, int, int]:
    """``paddings`` as (top, bottom, left, right) from [ph, pw] or 4 values."""
    vals = list(value) if isinstance(value, (list, tuple)) else [value, value]
    if len(vals) == 1:
        vals = vals * 2
    if len(vals) not in (2, 4) or not all(isinstance(v, int) and not isinstance(v, bool)
                                          for v in vals):
        ctx.fail(f"paddings must be [pad_h, pad_w] or [top, bottom, left, right] ints, got "
                 f"{value!r}")
    if any(v < 0 for v in vals):
        ctx.fail(f"paddings must not be negative, got {list(vals)}")
    if len(vals) == 2:
        return vals[0], vals[0], vals[1], vals[1]
    return vals[0], vals[1], vals[2], vals[3]


def check_float(ctx: InferContext, slot: str) -> None:
    t = ctx.input(slot)
    if t.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"{slot} must be float16/32/64, got {t.dtype}{fmt(t.shape)}")


def check_rank4(ctx: InferContext, slot: str, what: str) -> None:
    t = ctx.input(slot)
    if t.rank != 4:
        ctx.fail(f"{slot} must be a 4-D {what}, got {fmt(t.shape)}")


def strided_view(xp: Any, a: Any, shape: Sequence[int], strides: Sequence[int]) -> Any:
    return xp.lib.stride_tricks.as_strided(a, shape=tuple(shape), strides=tuple(strides))


def zeros(xp: Any, shape: Sequence[int], dtype: str) -> Any:
    return xp.zeros(tuple(shape), dtype=dtype)
