"""`data`: declare an input of the method being traced."""
from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral
from typing import Any

from ...errors import OpArgumentError
from ...ir.records import VarDesc, canonical_dtype
from ...ir.source import user_location
from ...ir.text import short_type
from ..tracing import current_trace, error_at
from ..variable import Variable


def _dims(name: str, shape: Any, append_batch_size: bool) -> tuple[tuple[int, ...], bool]:
    """The declared dims, -1 for unknown, and whether a batch dim was prepended (when
    asked for and no dim is unknown)."""
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise error_at(OpArgumentError, f"data({name!r}): shape must be a list of ints, "
                                        f"got {shape!r}")
    shape = list(shape)
    dims = []
    for d in shape:
        if d is None or (isinstance(d, Integral) and not isinstance(d, bool) and int(d) >= -1):
            dims.append(-1 if d is None else int(d))
        else:
            raise error_at(OpArgumentError, f"data({name!r}): shape {list(shape)} has the "
                                            f"dim {d!r}; use ints >= 0, or None / -1 for an "
                                            f"unknown dim")
    prepended = append_batch_size and all(d >= 0 for d in dims)
    if prepended:
        dims = [-1] + dims
    return tuple(dims), prepended


def data(name: str, shape: Sequence[int | None], dtype: str = "float32",
         append_batch_size: bool = True, stop_gradient: bool = True,
         lod_level: int = 0) -> Variable:
    """Declare the data var ``name`` of the traced method.

    A batch dimension is prepended (``[13]`` becomes ``[?, 13]``) unless
    ``append_batch_size=False`` or the shape already has an unknown (None or -1) dim. A
    method argument mapped to ``name`` feeds this var when the compiled method is called.
    """
    trace = current_trace("fluid.layers.data")
    if not isinstance(name, str) or not name:
        raise error_at(OpArgumentError, f"data(name=...) must be a non-empty string, got "
                                        f"{name!r}")
    if lod_level:
        raise error_at(OpArgumentError, "lod_level > 0 (variable-length sequences) is not "
                                        "supported; pad sequences to a fixed length")
    dims, prepended = _dims(name, shape, append_batch_size)
    try:
        dtype = canonical_dtype(dtype)
    except TypeError as e:
        raise error_at(OpArgumentError, f"data({name!r}): {e}") from None
    wanted = VarDesc(name, dims, dtype, is_data=True, stop_gradient=bool(stop_gradient))
    existing = trace.block.vars.get(name)
    if existing is not None:
        if existing.is_data and existing.shape == dims and existing.dtype == dtype:
            return Variable(trace, name)
        raise error_at(OpArgumentError,
                       f"data({name!r}) asks for {short_type(wanted)} but {trace.method}() "
                       f"already declares {name}:{short_type(existing)}; declare a data var "
                       f"once, or give the second one another name")
    trace.declare(wanted)
    trace.data_locs[name] = user_location()
    if prepended:
        trace.batch_prepended.add(name)
    return Variable(trace, name)


__all__ = ['data']
