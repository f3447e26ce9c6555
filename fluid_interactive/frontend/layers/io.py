"""`data`: declare an input of the method being traced."""
from __future__ import annotations

from typing import Optional, Sequence

from ...errors import OpArgumentError
from ...ir.records import VarDesc, canonical_dtype
from ..tracing import current_trace, error_at
from ..variable import Variable


def data(name: str, shape: Sequence[Optional[int]], dtype: str = "float32",
         append_batch_size: bool = True, stop_gradient: bool = True,
         lod_level: int = 0) -> Variable:
    """Declare the data var ``name`` of the traced method.

    A batch dimension is prepended (``[13]`` becomes ``[?, 13]``) unless
    ``append_batch_size=False`` or the shape already has an unknown (None or -1) dim. A
    method argument mapped to ``name`` feeds this var when the compiled method is called.
    """
    trace = current_trace("fluid.layers.data")
    if lod_level:
        raise error_at(OpArgumentError, "lod_level > 0 (variable-length sequences) is not "
                                        "supported; pad sequences to a fixed length")
    dims = [-1 if d is None else int(d) for d in shape]
    if append_batch_size and all(d >= 0 for d in dims):
        dims = [-1] + dims
    try:
        dtype = canonical_dtype(dtype)
    except TypeError as e:
        raise error_at(OpArgumentError, f"data({name!r}): {e}") from None
    existing = trace.block.vars.get(name)
    if existing is not None:
        if existing.is_data and existing.shape == tuple(dims) and existing.dtype == dtype:
            return Variable(trace, name)
        raise error_at(OpArgumentError, f"data var {name!r} is already declared in "
                                        f"{trace.method}() with another shape or dtype")
    trace.declare(VarDesc(name, tuple(dims), dtype, is_data=True, stop_gradient=stop_gradient))
    var = Variable(trace, name)
    placeholder = trace.placeholders.get(name)
    if placeholder is not None:
        placeholder.bound = var
    return var


__all__ = ['data']
