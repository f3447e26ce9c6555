"""Shared pieces of the windowed ops (convolution and pooling, over 2 or 3 spatial dims):
attribute parsing, Paddle's padding algorithms, shape checks and strided views."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ir.records import FLOAT_DTYPES
from ..ir.text import format_shape as fmt
from .spec import InferContext

_AXES = {1: "[w]", 2: "[h, w]", 3: "[d, h, w]"}


def ints(ctx: Any, name: str, value: Any, rank: int, minimum: int) -> tuple[int, ...]:
    """An attr of ``rank`` ints, one per spatial dim (an int, or one of them, means all),
    each at least ``minimum``."""
    vals = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(vals) == 1:
        vals = vals * rank
    if len(vals) != rank or not all(isinstance(v, int) and not isinstance(v, bool)
                                    for v in vals):
        ctx.fail(f"{name} must be {rank} ints {_AXES.get(rank, '')}, got {value!r}")
    if any(v < minimum for v in vals):
        ctx.fail(f"{name} must be at least {minimum}, got {list(vals)}")
    return tuple(int(v) for v in vals)


def pair(ctx: Any, name: str, value: Any, minimum: int) -> tuple[int, int]:
    """A 2-int attr (an int means both), each at least ``minimum``."""
    h, w = ints(ctx, name, value, 2, minimum)
    return h, w


def spatial_paddings(ctx: Any, value: Any, rank: int) -> tuple[int, ...]:
    """``paddings`` as (before, after) per spatial dim, from one value per dim or two
    (Paddle's [top, bottom, left, right], [front, back, top, bottom, left, right])."""
    vals = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(vals) == 1:
        vals = vals * rank
    if len(vals) not in (rank, 2 * rank) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in vals):
        ctx.fail(f"paddings must be {rank} ints (one per spatial dim) or {2 * rank} (before "
                 f"and after each), got {value!r}")
    if any(v < 0 for v in vals):
        ctx.fail(f"paddings must not be negative, got {list(vals)}")
    if len(vals) == rank:
        return tuple(int(v) for v in vals for _ in (0, 1))
    return tuple(int(v) for v in vals)


def paddings(ctx: Any, value: Any) -> tuple[int, int, int, int]:
    """``paddings`` as (top, bottom, left, right) from [ph, pw] or 4 values."""
    top, bottom, left, right = spatial_paddings(ctx, value, 2)
    return top, bottom, left, right


PADDING_ALGORITHMS = ("EXPLICIT", "SAME", "VALID")


def resolved_paddings(ctx: Any, pads: Sequence[int], sizes: Sequence[int],
                      kernel: Sequence[int], strides: Sequence[int]) -> tuple[int, ...]:
    """The paddings an op's ``padding_algorithm`` attr gives (Paddle's rule): EXPLICIT
    keeps ``pads``; VALID pads nothing; SAME pads each dim by what makes the output
    ceil(size / stride) long, the odd one at the end (-1 where the size is unknown)."""
    algorithm = ctx.attrs.get("padding_algorithm", "EXPLICIT")
    if algorithm not in PADDING_ALGORITHMS:
        ctx.fail(f"padding_algorithm must be one of {', '.join(PADDING_ALGORITHMS)}, got "
                 f"{algorithm!r}")
    if algorithm == "EXPLICIT":
        return tuple(pads)
    if algorithm == "VALID":
        return (0,) * len(pads)
    out: list[int] = []
    for size, k, s in zip(sizes, kernel, strides):
        if size < 0:
            out += [-1, -1]
            continue
        total = max((-(-size // s) - 1) * s + k - size, 0)
        out += [total // 2, total - total // 2]
    return tuple(out)


def check_float(ctx: InferContext, slot: str) -> None:
    t = ctx.input(slot)
    if t.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"{slot} must be float16/32/64, got {t.dtype}{fmt(t.shape)}")


def check_rank(ctx: InferContext, slot: str, rank: int, what: str) -> None:
    t = ctx.input(slot)
    if t.rank != rank:
        ctx.fail(f"{slot} must be a {rank}-D {what}, got {fmt(t.shape)}")


def check_rank4(ctx: InferContext, slot: str, what: str) -> None:
    check_rank(ctx, slot, 4, what)


def strided_view(xp: Any, a: Any, shape: Sequence[int], strides: Sequence[int]) -> Any:
    return xp.lib.stride_tricks.as_strided(a, shape=tuple(shape), strides=tuple(strides))


def zeros(xp: Any, shape: Sequence[int], dtype: str) -> Any:
    return xp.zeros(tuple(shape), dtype=dtype)
