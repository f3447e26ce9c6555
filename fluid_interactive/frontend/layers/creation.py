"""Layers that make tensors: zeros / ones / full (and their ``_like`` forms), arange,
range, linspace, eye, diag, diag_embed, tril, triu, and vars of the program's own:
`create_tensor` and `create_global_var`.

Numbers known while tracing become op attrs, so the result's shape is known too
(``arange(0, 10, 2)`` is ``[5]``); where Paddle accepts a Variable instead (range and
linspace bounds) the length is known only when the method runs (a ``?`` dim).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeGuard

import numpy as np

from ...errors import OpArgumentError, ShapeError
from ...ir.records import VarDesc
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable
from .norm import _state_var
from .targets import NewTensor, append_into
from .tensor import _dtype, _ints, assign, cast, concat, fill_constant, unsqueeze

IntList = Sequence[int]
Number = int | float
_RANGE_DTYPES = ("float32", "float64", "int32", "int64")


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))


def _stop(var: Variable, stop_gradient: bool) -> Variable:
    var.stop_gradient = bool(stop_gradient)
    return var


# --- filled -------------------------------------------------------------------------------------

def zeros(shape: IntList, dtype: Any, force_cpu: bool = False) -> Variable:
    """A var of ``shape`` and ``dtype`` filled with 0 (see `fill_constant`)."""
    return fill_constant(shape, dtype, 0.0, force_cpu)


def ones(shape: IntList, dtype: Any, force_cpu: bool = False) -> Variable:
    """A var of ``shape`` and ``dtype`` filled with 1 (see `fill_constant`)."""
    return fill_constant(shape, dtype, 1.0, force_cpu)


def full(shape: IntList, fill_value: Number | Variable, out: Variable | None = None,
         dtype: Any = None, device: str | None = None, stop_gradient: bool = True,
         name: str | None = None) -> Variable:
    """A var of ``shape`` filled with ``fill_value`` (a number, or a Variable holding one),
    in ``dtype`` (default float32), written into ``out`` when given. ``device`` is
    accepted for Paddle's signature: arrays live where the program runs."""
    _device(device, "full")
    if out is None and name is not None:
        out = create_tensor(dtype or "float32", name=name)
    return _stop(fill_constant(shape, dtype or "float32", fill_value, out=out), stop_gradient)


def _like(layer: str, x: Variable, value: Number, out: Variable | None, dtype: Any = None,
          name: str | None = None) -> Variable:
    x = as_variable(x, f"{layer} input")
    dt = "" if dtype is None else _dtype(dtype, layer)
    if not _is_number(value):
        raise error_at(OpArgumentError, f"{layer}: the fill value must be a number, got "
                                        f"{type(value).__name__}")
    return append_into(LayerHelper(layer, name), "fill_any_like", {"X": x},
                       {"value": float(value), "dtype": dt}, out)


def zeros_like(x: Variable, out: Variable | None = None) -> Variable:
    """Zeros of ``x``'s shape and dtype (written into ``out`` when given); no gradient."""
    return _stop(_like("zeros_like", x, 0.0, out), True)


def ones_like(x: Variable, out: Variable | None = None) -> Variable:
    """Ones of ``x``'s shape and dtype (written into ``out`` when given); no gradient."""
    return _stop(_like("ones_like", x, 1.0, out), True)


def full_like(input: Variable, fill_value: Number, out: Variable | None = None,
              dtype: Any = None, device: str | None = None, stop_gradient: bool = True,
              name: str | None = None) -> Variable:
    """``fill_value`` in ``input``'s shape, in ``dtype`` (default: input's), written into
    ``out`` when given. ``device`` is accepted for Paddle's signature."""
    _device(device, "full_like")
    return _stop(_like("full_like", input, fill_value, out, dtype, name), stop_gradient)


def _device(device: Any, layer: str) -> None:
    if device not in (None, "cpu", "gpu"):
        raise error_at(OpArgumentError, f"{layer}: device must be None, 'cpu' or 'gpu', got "
                                        f"{device!r}")


# --- sequences ----------------------------------------------------------------------------------

def _bound(value: Any, dtype: str, layer: str, what: str, casts: bool) -> Variable:
    """A range bound as a one-value var of ``dtype``: a number becomes a constant; a
    Variable is cast to dtype when ``casts`` (Paddle's range casts, its arange does not)."""
    if _is_number(value):
        return fill_constant([1], dtype, value)
    var = as_variable(value, f"{layer} {what}")
    if casts and var.dtype != dtype:
        return cast(var, dtype)
    return var


def _range(layer: str, start: Any, end: Any, step: Any, dtype: str, casts: bool,
           name: str | None = None) -> Variable:
    helper = LayerHelper(layer, name)
    if dtype not in _RANGE_DTYPES:
        raise error_at(OpArgumentError, f"{layer}: dtype must be float32, float64, int32 or "
                                        f"int64, got {dtype!r}")
    values = {"start": start, "end": end, "step": step}
    if all(_is_number(v) for v in values.values()):
        attrs = {k: float(v) for k, v in values.items()}
        out = helper.append_one("range", {}, {**attrs, "dtype": dtype})
    else:
        inputs = {k.title(): _bound(v, dtype, layer, k, casts) for k, v in values.items()}
        out = helper.append_one("range", inputs)
    out.stop_gradient = True
    return out


def arange(start: Number | Variable, end: Number | Variable, step: Number | Variable = 1,
           dtype: Any = None, name: str | None = None) -> Variable:
    """``start, start + step, ...`` up to but excluding ``end``, in ``dtype`` (default
    float32): ``arange(0, 5)`` is ``[0, 1, 2, 3, 4]``. Numbers give a length known while
    tracing; Variables (one value each) a length known when the method runs."""
    return _range("arange", start, end, step, "float32" if dtype is None
                  else _dtype(dtype, "arange"), False, name)


def range(start: Number | Variable, end: Number | Variable, step: Number | Variable,
          dtype: Any) -> Variable:
    """``start, start + step, ...`` up to but excluding ``end``, in ``dtype``; Variable
    bounds are cast to ``dtype``. (``arange`` with a required step and dtype.)"""
    return _range("range", start, end, step, _dtype(dtype, "range"), True)


def linspace(start: Number | Variable, stop: Number | Variable, num: int | Variable,
             dtype: Any) -> Variable:
    """``num`` evenly spaced values from ``start`` to ``stop``, both included (``[start]``
    when num is 1), in ``dtype`` (float32 or float64)."""
    dt = _dtype(dtype, "linspace")
    helper = LayerHelper("linspace")
    if _is_number(start) and _is_number(stop) and _is_number(num):
        if int(num) != num or num < 1:
            raise error_at(OpArgumentError, f"linspace: num must be a positive int, got {num!r}")
        attrs = {"start": float(start), "stop": float(stop), "num": int(num), "dtype": dt}
        return helper.append_one("linspace", {}, attrs)
    inputs = {"Start": _bound(start, dt, "linspace", "start", False),
              "Stop": _bound(stop, dt, "linspace", "stop", False),
              "Num": _bound(num, "int32", "linspace", "num", False)}
    return helper.append_one("linspace", inputs)


# --- matrices -----------------------------------------------------------------------------------

def eye(num_rows: int, num_columns: int | None = None, batch_shape: list[int] | None = None,
        dtype: Any = "float32") -> Variable:
    """The identity matrix ``[num_rows, num_columns]`` (square by default); with
    ``batch_shape`` ``[b1, b2, ...]``, that many copies: ``[b1, b2, ..., rows, cols]``."""
    for what, value in (("num_rows", num_rows), ("num_columns", num_columns)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or value < 0):
            raise error_at(OpArgumentError, f"eye: {what} must be a non-negative int, got "
                                            f"{value!r}")
    cols = num_rows if num_columns is None else num_columns
    out = LayerHelper("eye").append_one("eye", {}, {"num_rows": num_rows, "num_columns": cols,
                                                    "dtype": _dtype(dtype, "eye")})
    out.stop_gradient = True
    if batch_shape is None:
        return out
    if not isinstance(batch_shape, list) or not all(
            isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in batch_shape):
        raise error_at(OpArgumentError, f"eye: batch_shape must be a list of positive ints, "
                                        f"got {batch_shape!r}")
    for b in reversed(batch_shape):
        out = concat([unsqueeze(out, [0])] * b, axis=0)
    return out


def diag(diagonal: Variable | np.ndarray) -> Variable:
    """The square matrix with the 1-D ``diagonal`` (a Variable or a NumPy array) on its
    diagonal and zeros elsewhere."""
    if isinstance(diagonal, np.ndarray):
        diagonal = assign(diagonal)
    d = as_variable(diagonal, "diag diagonal")
    out = LayerHelper("diag").append_one("diag", {"Diagonal": d})
    out.stop_gradient = True
    return out


def diag_embed(input: Variable | np.ndarray, offset: int = 0, dim1: int = -2,
               dim2: int = -1) -> Variable:
    """A tensor of one more dim whose planes of dims ``dim1`` and ``dim2`` (of the result)
    hold ``input``'s last dim on their diagonal ``offset`` (above the main one when
    positive), zeros elsewhere: ``diag_embed(x)`` of ``[2, 3]`` is ``[2, 3, 3]``."""
    if isinstance(input, np.ndarray):
        input = assign(input)
    x = as_variable(input, "diag_embed input")
    for what, value in (("offset", offset), ("dim1", dim1), ("dim2", dim2)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise error_at(OpArgumentError, f"diag_embed: {what} must be an int, got {value!r}")
    out = LayerHelper("diag_embed").append_one(
        "diag_embed", {"Input": x}, {"offset": offset, "dim1": dim1, "dim2": dim2})
    out.stop_gradient = True
    return out


def _tril_triu(layer: str, input: Variable, diagonal: int, name: str | None) -> Variable:
    x = as_variable(input, f"{layer} input")
    if len(x.shape) < 2:
        raise error_at(ShapeError, f"{layer}: input shape must be at least 2-D, got "
                                   f"{x.name}:{short_type(x.desc)}")
    if not isinstance(diagonal, int) or isinstance(diagonal, bool):
        raise error_at(OpArgumentError, f"{layer}: diagonal must be a Python int, got "
                                        f"{diagonal!r}")
    return LayerHelper(layer, name).append_one(
        "tril_triu", {"X": x}, {"diagonal": diagonal, "lower": layer == "tril"})


def tril(input: Variable, diagonal: int = 0, name: str | None = None) -> Variable:
    """``input`` with the values above diagonal ``diagonal`` of its last two dims set to
    0 (0: the main diagonal; positive: above it)."""
    return _tril_triu("tril", input, diagonal, name)


def triu(input: Variable, diagonal: int = 0, name: str | None = None) -> Variable:
    """``input`` with the values below diagonal ``diagonal`` of its last two dims set to 0."""
    return _tril_triu("triu", input, diagonal, name)


# --- vars of the program's own ------------------------------------------------------------------

def create_tensor(dtype: Any, name: str | None = None, persistable: bool = False,
                  shape: IntList | None = None) -> Variable:
    """A var of ``dtype`` for a layer to write into (``out=`` / ``output=``). Its shape
    comes from the first layer that writes it, or from ``shape`` (a keyword beyond
    Paddle's signature; -1 for a dim known only at run time), which `py_func` outputs
    need. ``persistable`` makes it program state, kept between calls."""
    helper = LayerHelper("create_tensor", name)
    dt = _dtype(dtype, "create_tensor")
    var_name = helper.out_name()
    if shape is None:
        return NewTensor(helper.trace, var_name, dt, bool(persistable))
    dims = _ints(shape, "shape", "create_tensor")
    if any(d < -1 for d in dims):
        raise error_at(OpArgumentError, f"create_tensor: shape {dims} has a dim below -1")
    helper.trace.declare(VarDesc(var_name, tuple(dims), dt, persistable=bool(persistable)),
                         in_global=bool(persistable))
    return Variable(helper.trace, var_name)


def create_global_var(shape: IntList, value: Number, dtype: Any, persistable: bool = False,
                      force_cpu: bool = False, name: str | None = None) -> Variable:
    """A var of the program's state (block 0) of ``shape`` and ``dtype`` that starts at
    ``value`` when the program compiles, shared by every method; it is saved, loaded and
    rewound with the parameters. Calling it again with the same name gives the same var.
    Its value lives in the program's scope whatever ``persistable`` says (as in Paddle's
    global scope); ``force_cpu`` is accepted for Paddle's signature. No gradient."""
    helper = LayerHelper("create_global_var", name)
    dims = _ints(shape, "shape", "create_global_var")
    if any(d < 0 for d in dims):
        raise error_at(OpArgumentError, f"create_global_var: shape {dims} must be fully "
                                        f"known (non-negative ints)")
    dt = _dtype(dtype, "create_global_var")
    if not _is_number(value) and not isinstance(value, bool):
        raise error_at(OpArgumentError, f"create_global_var: value must be a number, got "
                                        f"{type(value).__name__}")
    name = helper.user_name or helper.trace.state_names.generate("global_var")
    return _state_var(helper, name, dims, dt, float(value))


__all__ = ["zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange", "range",
           "linspace", "eye", "diag", "diag_embed", "tril", "triu", "create_tensor",
           "create_global_var"]
