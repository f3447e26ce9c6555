"""Turning call arguments into arrays for a block's data vars, with clear errors."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import FeedError
from ..ir.records import VarDesc, dtype_kind
from ..ops.spec import TensorType

_KIND_NAMES = {"f": "floating-point", "i": "integer", "b": "boolean"}


def _numpy_kind(dtype: np.dtype) -> str:
    if dtype.kind == "f":
        return "f"
    if dtype.kind in "iu":
        return "i"
    if dtype.kind == "b":
        return "b"
    return dtype.kind


def make_converter(method: str, var: VarDesc) -> Callable[[Any], np.ndarray]:
    """fn(value) -> ndarray of the var's dtype and a fitting shape, or `FeedError`."""
    dtype = np.dtype(var.dtype)
    declared = var.shape
    tail = declared[1:]
    simple = len(declared) > 0 and declared[0] < 0 and all(d >= 0 for d in tail)
    ndarray = np.ndarray

    def fail(problem: str, fix: str) -> FeedError:
        return FeedError(f"{method}(): argument for data var {var.name!r} {problem}; "
                         f"expected {var.dtype}{_fmt(declared)}. {fix}")

    def slow(value: Any) -> np.ndarray:
        try:
            arr = np.asarray(value)
        except Exception as e:  # ragged lists and the like
            raise fail(f"cannot be turned into an array ({e})",
                       "Pass a NumPy array or a (nested) list of numbers.") from None
        if arr.dtype == object:
            raise fail("is a ragged or non-numeric sequence",
                       "Pass a NumPy array or a rectangular (nested) list of numbers.")
        if _numpy_kind(arr.dtype) != dtype_kind(var.dtype) and not (
                _numpy_kind(arr.dtype) in "ib" and dtype_kind(var.dtype) == "f"):
            raise fail(f"has dtype {arr.dtype} ({_KIND_NAMES.get(_numpy_kind(arr.dtype), '?')})",
                       f"Values are cast within a kind only; convert explicitly, e.g. "
                       f"np.asarray(value).astype('{var.dtype}'), if that is what you mean.")
        if arr.ndim == len(declared) - 1 and declared and declared[0] < 0:
            arr = arr[np.newaxis]   # one sample: add the batch dimension
        if arr.ndim != len(declared) or any(d >= 0 and d != a for d, a in zip(declared,
                                                                              arr.shape)):
            raise fail(f"has shape {list(arr.shape)}",
                       "Give one sample of the declared shape or a batch of them.")
        return arr.astype(dtype, copy=False)

    if not simple:
        return slow

    def convert(value: Any) -> np.ndarray:
        if type(value) is ndarray and value.dtype == dtype and value.shape[1:] == tail \
                and value.ndim == len(declared):
            return value
        return slow(value)
    return convert


def _fmt(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"


def feed_type(array: Any) -> TensorType:
    return TensorType(tuple(array.shape), array.dtype.name)
