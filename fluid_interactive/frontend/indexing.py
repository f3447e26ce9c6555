"""``h[:, 0]``, ``h[..., 1:3]``, ``h[None]``: indexing a Variable records slice, squeeze and
unsqueeze ops (views, with gradients), as NumPy's basic indexing would give.

Supported: integers (negative ones count from the end), slices (bounds clamp as in Python;
a step other than 1, negative ones included, makes the slice a ``strided_slice``), ``...``
and ``None``. An integer on a dim known while tracing is checked against it; on the batch
dimension it is checked when the method runs.
"""
from __future__ import annotations

from numbers import Integral
from typing import Any

from ..errors import OpArgumentError
from ..ir.text import format_shape
from .tracing import error_at

_END = 2 ** 31 - 1      # "to the end" for the slice op, whose ends clamp like Python's
_BEFORE_FIRST = -_END - 1   # an end that clamps to "past index 0" when walking backwards


def _expand(key: tuple, rank: int, where: str) -> list:
    """The key with ``...`` replaced by full slices and missing trailing dims added."""
    if sum(k is Ellipsis for k in key) > 1:
        raise error_at(OpArgumentError, f"{where}: an index can have only one '...'")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > rank:
        raise error_at(OpArgumentError, f"{where}: too many indices ({used}) for a Variable "
                                        f"of rank {rank}")
    fill = [slice(None)] * (rank - used)
    # by identity: `Ellipsis in key` would compare Variables in the key with ==
    at = [i for i, k in enumerate(key) if k is Ellipsis]
    if at:
        return list(key[:at[0]]) + fill + list(key[at[0] + 1:])
    return list(key) + fill


def getitem(x: Any, key: Any) -> Any:
    """``x[key]`` for a Variable ``x`` (see the module docstring)."""
    from .layers.slicing import strided_slice
    from .layers.tensor import slice as slice_layer
    from .layers.tensor import squeeze, unsqueeze

    shape = x.shape
    where = f"indexing {x.name} {format_shape(shape)}"
    parts = _expand(key if isinstance(key, tuple) else (key,), len(shape), where)
    axes: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    steps: list[int] = []
    drop, new = [], []
    dim = out_dim = 0
    for k in parts:
        if k is None:
            new.append(out_dim)
            out_dim += 1
            continue
        if isinstance(k, slice):
            bounds = _slice_bounds(k, where)
            if bounds != (0, _END, 1):
                axes.append(dim)
                for into, v in zip((starts, ends, steps), bounds):
                    into.append(v)
            out_dim += 1
        else:                     # an integer: its dim is squeezed away
            i = _index(x, k, dim, where)
            axes.append(dim)
            starts.append(i)
            ends.append(i + 1 if i != -1 else _END)
            steps.append(1)
            drop.append(dim)
        dim += 1
    out = x
    if any(s != 1 for s in steps):
        out = strided_slice(out, axes, starts, ends, steps)
    elif axes:
        out = slice_layer(out, axes, starts, ends)
    if drop:
        out = squeeze(out, drop)
    if new:
        out = unsqueeze(out, new)
    return out


def _slice_bounds(k: slice, where: str) -> tuple[int, int, int]:
    """(start, end, step) of a slice as the slice ops take them: Python's meaning of a
    missing bound (the first or the last element, by the step's direction) as a number
    that clamps to it."""
    step = 1 if k.step is None else _integer(k.step, where)
    if step == 0:
        raise error_at(OpArgumentError, f"{where}: a slice step cannot be zero")
    first, past = (0, _END) if step > 0 else (_END, _BEFORE_FIRST)
    start = first if k.start is None else _integer(k.start, where)
    stop = past if k.stop is None else _integer(k.stop, where)
    return start, stop, step


def _index(x: Any, k: Any, dim: int, where: str) -> int:
    """An integer index into ``dim`` of ``x``, checked against a known size."""
    from .variable import Variable
    if isinstance(k, Integral) and not isinstance(k, bool):
        i, size = int(k), x.shape[dim]
        if size >= 0 and not -size <= i < size:
            raise error_at(OpArgumentError, f"{where}: index {i} is out of range for "
                                            f"dim {dim} of size {size}")
        return i
    if isinstance(k, Variable):
        raise error_at(OpArgumentError, f"{where}: indexing with a Variable (a mask or "
                                        f"indices) is not supported; to keep where a "
                                        f"mask holds, multiply: x * fluid.layers.cast("
                                        f"mask, x.dtype)")
    raise error_at(OpArgumentError, f"{where}: cannot index with "
                                    f"{type(k).__name__} {k!r:.40}; use integers, "
                                    f"slices, ... and None")


def _integer(value: Any, where: str) -> int:
    if isinstance(value, Integral) and not isinstance(value, bool):
        return int(value)
    raise error_at(OpArgumentError, f"{where}: slice bounds and steps must be integers, got "
                                    f"{type(value).__name__} {value!r:.40}")
