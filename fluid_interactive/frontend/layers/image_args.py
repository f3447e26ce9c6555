"""Arguments the image layers share (convolution, pooling, resizing): spatial ints,
Paddle's padding forms, data formats and the image input itself, checked at trace time."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import OpArgumentError, ShapeError
from ...ir.records import FLOAT_DTYPES
from ...ir.text import short_type
from ...ops.layouts import USER_LAYOUTS, is_channel_last
from ..tracing import error_at
from ..variable import Variable
from .helpers import as_variable

IntOrSeq = int | Sequence[int]

_DIMS = {2: "[h, w]", 3: "[d, h, w]"}


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def spatial_ints(layer: str, what: str, value: Any, rank: int, minimum: int) -> list[int]:
    """An int (meaning every spatial dim) or ``rank`` ints, each at least ``minimum``."""
    vals = [value] * rank if is_int(value) else (list(value) if isinstance(
        value, (list, tuple)) else None)
    if vals is None or len(vals) != rank or not all(is_int(v) and v >= minimum for v in vals):
        raise error_at(OpArgumentError, f"{layer}: {what} must be an int or {rank} ints "
                                        f"{_DIMS[rank]} >= {minimum}, got {value!r}")
    return [int(v) for v in vals]


def data_format(layer: str, value: Any, rank: int) -> str:
    allowed = USER_LAYOUTS[rank]
    if value not in allowed:
        raise error_at(OpArgumentError, f"{layer}: data_format must be "
                                        f"{' or '.join(map(repr, allowed))}, got {value!r}")
    return str(value)


def channel_axis(fmt: str, rank: int) -> int:
    return rank + 1 if is_channel_last(fmt) else 1


def _nested_padding(layer: str, value: Sequence[Any], rank: int, fmt: str) -> list[int]:
    """Paddle's padding as one [before, after] pair per dim of the input, batch and channel
    pairs included (which must be [0, 0])."""
    pairs = [list(p) if isinstance(p, (list, tuple)) else None for p in value]
    c = channel_axis(fmt, rank)
    if any(p is None or len(p) != 2 for p in pairs) or pairs[0] != [0, 0] or \
            pairs[c] != [0, 0]:
        raise error_at(OpArgumentError, f"{layer}: padding as pairs must give [before, after] "
                                        f"for each of the {rank + 2} dims of a {fmt} input, "
                                        f"[0, 0] for the batch and the channel, got {value!r}")
    spatial = [p for i, p in enumerate(pairs) if i not in (0, c)]
    return [v for p in spatial for v in p]   # type: ignore[union-attr]


def padding(layer: str, value: Any, rank: int, fmt: str, what: str = "padding"
            ) -> tuple[list[int], str]:
    """(paddings attr, padding_algorithm) from Paddle's forms: 'SAME' or 'VALID' (any
    case), an int, one int per spatial dim, a before and an after for each, or a
    [before, after] pair for every dim of the input."""
    if isinstance(value, str):
        algorithm = value.upper()
        if algorithm not in ("SAME", "VALID"):
            raise error_at(OpArgumentError, f"{layer}: {what} as a string must be 'SAME' or "
                                            f"'VALID', got {value!r}")
        return [0] * rank, algorithm
    if isinstance(value, (list, tuple)) and len(value) == rank + 2 and \
            any(isinstance(v, (list, tuple)) for v in value):
        vals = _nested_padding(layer, value, rank, fmt)
    elif isinstance(value, (list, tuple)) and len(value) == 2 * rank:
        vals = list(value)
    else:
        return spatial_ints(layer, what, value, rank, 0), "EXPLICIT"
    if not all(is_int(v) and v >= 0 for v in vals):
        raise error_at(OpArgumentError, f"{layer}: {what} must hold non-negative ints, got "
                                        f"{value!r}")
    if all(vals[2 * i] == vals[2 * i + 1] for i in range(rank)):
        return [int(v) for v in vals[0::2]], "EXPLICIT"
    return [int(v) for v in vals], "EXPLICIT"


def image_input(layer: str, input: Any, rank: int, fmt: str,
                channels_known: bool = True) -> Variable:
    """The image batch a layer reads: a float Variable of rank + 2 dims in ``fmt``."""
    x = as_variable(input, f"{layer} input")
    if len(x.shape) != rank + 2:
        raise error_at(ShapeError, f"{layer}: input {x.name}:{short_type(x.desc)} must be a "
                                   f"{rank + 2}-D {fmt} batch; reshape it first (e.g. declare "
                                   f"images with shape=[C, {', '.join('DHW'[3 - rank:])}])")
    if x.dtype not in FLOAT_DTYPES:
        raise error_at(OpArgumentError, f"{layer}: input {x.name} is {x.dtype}; it must be "
                                        f"float (cast it first)")
    if channels_known and x.shape[channel_axis(fmt, rank)] < 0:
        raise error_at(ShapeError, f"{layer}: input {x.name}:{short_type(x.desc)} has an "
                                   f"unknown channel count; it must be known to size the "
                                   f"filter")
    return x


def flag(layer: str, what: str, value: Any) -> bool:
    """A bool argument (Paddle rejects anything else, e.g. use_cudnn=1)."""
    if not isinstance(value, bool):
        raise error_at(OpArgumentError, f"{layer}: {what} must be True or False, got "
                                        f"{value!r}")
    return value
