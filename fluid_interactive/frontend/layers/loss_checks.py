"""Argument checks the loss, structured-prediction and metric layers share: each failure is
an error at the user's line naming the layer, the argument and what it accepts."""
from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from ...errors import DTypeError, OpArgumentError, ShapeError
from ...ir.records import FLOAT_DTYPES, INT_DTYPES, canonical_dtype
from ...ir.text import format_shape as dims
from ..tracing import error_at
from ..variable import Variable
from .helpers import as_variable

FLOATS = ("float32", "float64")
INTS = ("int32", "int64")


def var_of(layer: str, value: Any, what: str,
           dtypes: Collection[str] | None = None) -> Variable:
    """``value`` as a Variable (a NumPy array or a number is an `OpArgumentError`, a
    TypeError as Paddle raises), of one of ``dtypes`` when given (else a `DTypeError`)."""
    v = as_variable(value, f"{layer}: {what}")
    if dtypes is not None and v.dtype not in dtypes:
        kinds = "float" if set(dtypes) <= FLOAT_DTYPES else \
            "integer" if set(dtypes) <= INT_DTYPES else "numeric"
        raise error_at(DTypeError, f"{layer}: {what} {v.name!r} is {v.dtype}{dims(v.shape)} "
                                   f"but must be {kinds} ({', '.join(sorted(dtypes))}); "
                                   f"cast it first")
    return v


def optional_var(layer: str, value: Any, what: str,
                 dtypes: Collection[str] | None = None) -> Variable | None:
    return None if value is None else var_of(layer, value, what, dtypes)


def number(layer: str, what: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error_at(OpArgumentError, f"{layer}: {what} must be a number, got {value!r}")
    return float(value)


def integer(layer: str, what: str, value: Any, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or \
            (minimum is not None and value < minimum):
        need = "an int" if minimum is None else f"an int >= {minimum}"
        raise error_at(OpArgumentError, f"{layer}: {what} must be {need}, got {value!r}")
    return value


def flag(layer: str, what: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise error_at(OpArgumentError, f"{layer}: {what} must be True or False, got "
                                        f"{value!r}")
    return value


def choice(layer: str, what: str, value: Any, options: Sequence[str]) -> str:
    if value not in options:
        raise error_at(OpArgumentError, f"{layer}: {what} must be one of "
                                        f"{', '.join(map(repr, options))}, got {value!r}")
    return value


def int_list(layer: str, what: str, value: Any) -> list[int]:
    """None -> []; an int or a list/tuple of ints -> that list."""
    if value is None:
        return []
    items = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(items, (list, tuple)) or any(
            isinstance(v, bool) or not isinstance(v, int) for v in items):
        raise error_at(OpArgumentError, f"{layer}: {what} must be a list of ints, got "
                                        f"{value!r}")
    return list(items)


def same_shape(layer: str, a: Variable, b: Variable, what_a: str, what_b: str) -> None:
    sa, sb = a.shape, b.shape
    if len(sa) != len(sb) or any(x >= 0 and y >= 0 and x != y for x, y in zip(sa, sb)):
        raise error_at(ShapeError, f"{layer}: {what_a} {a.name!r} has shape {dims(sa)} but "
                                   f"{what_b} {b.name!r} has shape {dims(sb)}; they must "
                                   f"match")


def same_dtype(layer: str, a: Variable, b: Variable, what_a: str, what_b: str) -> None:
    if a.dtype != b.dtype:
        raise error_at(DTypeError, f"{layer}: {what_b} {b.name!r} is {b.dtype} but {what_a} "
                                   f"{a.name!r} is {a.dtype}; cast one of them")


def ids_per_row(layer: str, x: Variable, ids: Variable, what: str) -> None:
    """``ids`` holds one class (or item) id per row of scores ``x`` ``[..., C]``: its
    shape is ``x``'s with a last dim of 1."""
    want = x.shape[:-1] + (1,)
    if len(x.shape) < 2 or len(ids.shape) != len(want) or any(
            p >= 0 and q >= 0 and p != q for p, q in zip(ids.shape, want)):
        raise error_at(ShapeError, f"{layer}: {what} {ids.name!r} has shape "
                                   f"{dims(ids.shape)} but input {x.name!r} of shape "
                                   f"{dims(x.shape)} needs one id per row, {dims(want)}")


def dtype_arg(layer: str, value: Any) -> str:
    """A dtype argument by its canonical name."""
    try:
        return canonical_dtype(value)
    except TypeError as e:
        raise error_at(OpArgumentError, f"{layer}: {e}") from None
