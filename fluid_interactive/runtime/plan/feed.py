"""Turning call arguments into arrays for a block's data vars, with clear errors.

Rules: lists, nested lists, scalars and arrays are accepted; values are cast within a kind
(float64 -> float32, int32 -> int64; integers and booleans may also feed a float var); a
single sample without its batch dimension gets one; anything else is a `FeedError` that
names the method, the data var, what was expected and what was given.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import Any

import numpy as np

from ...errors import FeedError
from ...ir.records import VarDesc, dtype_kind
from ...ir.text import format_shape as _fmt
from ...ops.spec import TensorType

_KIND_NAMES = {"f": "floating-point", "i": "integer", "b": "boolean", "c": "complex"}


def bind_arguments(name: str, feeds: Sequence[str], args: tuple, kwargs: dict,
                   hint: Callable[[str], str] = lambda key: "") -> tuple:
    """The values of ``feeds`` in order from a call ``name(*args, **kwargs)``, with
    Python's own TypeErrors for too many, unknown, repeated or missing arguments;
    ``hint(key)`` adds to the message of an unknown keyword."""
    if len(args) > len(feeds):
        raise TypeError(f"{name}() takes {len(feeds)} argument(s) ({', '.join(feeds)}) "
                        f"but {len(args)} were given")
    bound = dict(zip(feeds, args))
    for key, value in kwargs.items():
        if key not in feeds:
            raise TypeError(f"{name}() got an unexpected keyword argument {key!r}; "
                            f"it feeds: {', '.join(feeds) or 'nothing'}{hint(key)}")
        if key in bound:
            raise TypeError(f"{name}() got multiple values for argument {key!r}")
        bound[key] = value
    missing = [f for f in feeds if f not in bound]
    if missing:
        raise TypeError(f"{name}() is missing argument(s): {', '.join(missing)}")
    return tuple(bound[f] for f in feeds)


def _numpy_kind(dtype: np.dtype) -> str:
    if dtype.kind == "f":
        return "f"
    if dtype.kind in "iu":
        return "i"
    return dtype.kind   # 'b' bool, 'c' complex, 'U'/'S' text, 'O' objects, ...


def _kind_fits(value_kind: str, var_dtype: str) -> bool:
    want = dtype_kind(var_dtype)
    return value_kind == want or (want == "f" and value_kind in "ib")


def make_converter(method: str, var: VarDesc) -> Callable[[Any], np.ndarray]:
    """fn(value) -> ndarray of the var's dtype and a fitting shape, or `FeedError`."""
    dtype = np.dtype(var.dtype)
    declared = var.shape
    tail = declared[1:]
    batched = len(declared) > 0 and declared[0] < 0
    simple = batched and all(d >= 0 for d in tail)
    ndarray = np.ndarray

    def fail(problem: str, fix: str) -> FeedError:
        return FeedError(f"{method}(): the argument for data var {var.name!r} {problem}; "
                         f"expected {var.dtype}{_fmt(declared)}. {fix}")

    def slow(value: Any) -> np.ndarray:
        given = arr = _as_array(value, fail)
        kind = _numpy_kind(arr.dtype)
        if not _kind_fits(kind, var.dtype):
            raise fail(f"has dtype {arr.dtype} ({_KIND_NAMES.get(kind, 'not numeric')})",
                       f"Values are cast within a kind only; convert explicitly, e.g. "
                       f"np.asarray(value).astype('{var.dtype}'), if that is what you mean.")
        known: list[int] = [d for d in declared[1:] if d >= 0]
        if batched and arr.size == 0 and prod(known, start=1):
            raise fail(f"is an empty batch (shape {list(given.shape)}, 0 samples)",
                       "Pass at least one sample.")
        arr = _add_batch_dim(arr, declared) if batched else arr
        if arr.ndim != len(declared) or any(d >= 0 and d != a
                                            for d, a in zip(declared, arr.shape)):
            raise fail(f"has shape {list(given.shape)}", _shape_fix(given.shape, declared))
        return arr.astype(dtype, copy=False)

    if not simple:
        return slow

    fits = {k for k in "fiub" if _kind_fits("i" if k == "u" else k, var.dtype)}
    one = (1,) + tuple(tail)

    def convert(value: Any) -> np.ndarray:
        if type(value) is ndarray and value.dtype == dtype and value.shape[1:] == tail \
                and value.ndim == len(declared):
            return value
        if type(value) is list:   # one sample as a list (infer([...])): a short path
            try:
                arr = np.array(value)
            except Exception:
                return slow(value)
            if arr.dtype.kind in fits and arr.shape == tail:
                return arr.astype(dtype, copy=False).reshape(one)
        return slow(value)
    return convert


def _as_array(value: Any, fail: Callable[[str, str], FeedError]) -> np.ndarray:
    if value is None:
        raise fail("is None", "Pass a NumPy array, a (nested) list of numbers or a number.")
    try:
        arr = np.asarray(value)
    except Exception as e:  # ragged lists and the like
        raise fail(f"cannot be turned into an array ({e})",
                   "Pass a NumPy array or a (nested) list of numbers.") from None
    if arr.dtype == object:
        raise fail(f"is a ragged or non-numeric {type(value).__name__}",
                   "Pass a NumPy array or a rectangular (nested) list of numbers.")
    return arr


def _add_batch_dim(arr: np.ndarray, declared: tuple[int, ...]) -> np.ndarray:
    """One sample (the declared shape without its batch dim) becomes a batch of one; so
    does a scalar when one sample holds a single value."""
    if arr.ndim == len(declared) - 1:
        return arr[np.newaxis]
    sample = declared[1:]
    if arr.ndim == 0 and all(d >= 0 for d in sample) and prod(sample) == 1:
        return arr.reshape((1,) + tuple(sample))
    return arr


def _shape_fix(given: tuple[int, ...], declared: tuple[int, ...]) -> str:
    """How to turn an array of shape ``given`` into what ``declared`` asks for."""
    sample = tuple(declared[1:])
    if len(given) == 1 and sample == (1,):
        return (f"A 1-D array of {given[0]} values is ambiguous here: pass a batch of "
                f"{given[0]} samples as value.reshape(-1, 1).")
    if sample and all(d >= 0 for d in sample) and prod(given) % max(prod(sample), 1) == 0 \
            and prod(given) > 0:
        return (f"Pass one sample of shape {list(sample)} or a batch of shape "
                f"[n, {', '.join(map(str, sample))}] (value.reshape(-1, "
                f"{', '.join(map(str, sample))}) if the values are in order).")
    return "Give one sample of the declared shape or a batch of them."


def check_batch_sizes(block: Any, feed_names: list[str], arrays: list[Any]) -> None:
    """Every fed var with a batch dimension must get the same, non-zero number of rows;
    a `FeedError` naming each argument and its rows otherwise (checked once per new set of
    shapes, before any op runs). A var declared with several unknown dims (a time-major
    sequence ``[-1, -1, ...]``, whose first dim is its length) is not counted."""
    rows = {}
    for name, array in zip(feed_names, arrays):
        var = block.vars.get(name)
        if var is not None and var.shape and var.shape[0] < 0 and array.ndim and \
                sum(d < 0 for d in var.shape) == 1:
            rows[name] = int(array.shape[0])
    method = block.name or "block"
    empty = [n for n, r in rows.items() if r == 0]
    if empty:
        raise FeedError(f"{method}(): the argument for data var {empty[0]!r} is an empty "
                        f"batch (0 rows); pass at least one sample")
    if len(set(rows.values())) > 1:
        listed = ", ".join(f"{n} has {r} row{'s' if r != 1 else ''}" for n, r in rows.items())
        raise FeedError(f"{method}(): the arguments disagree on the batch size: {listed}. "
                        f"Every data var shares the batch dimension: pass the same number "
                        f"of samples for each.")


def feed_type(array: Any) -> TensorType:
    return TensorType(tuple(array.shape), array.dtype.name)
