"""Layers that count, check, compare, combine and rearrange: autoincreased_step_counter,
has_inf, has_nan, isfinite, allclose, elementwise_equal, kron, trace, argsort, shape,
size, rank, meshgrid, reverse, hash, shard_index.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import NameConflictError, OpArgumentError
from ...ir.records import OpRole, VarDesc
from ...ir.text import format_shape, short_type
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable
from .targets import append_into
from .tensor import _ints, assign

#: The default name of `autoincreased_step_counter`'s counter (Paddle's).
STEP_COUNTER = "@STEP_COUNTER@"


def _int(value: Any, what: str, layer: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise error_at(OpArgumentError, f"{layer}: {what} must be an int, got {value!r}")
    return int(value)


def autoincreased_step_counter(counter_name: str | None = None, begin: int = 1,
                               step: int = 1) -> Variable:
    """A step counter of the program's state (int64 ``[1]``), as Paddle's: it starts at
    ``begin - 1`` and the method that made it adds ``step`` first thing in every call, so
    the first call reads ``begin - 1 + step`` (``begin`` for the default step). Other
    methods asking for the same ``counter_name`` read it without incrementing. It is
    saved, loaded and rewound with the parameters."""
    helper = LayerHelper("global_step_counter")
    trace = helper.trace
    name = STEP_COUNTER if counter_name is None else counter_name
    begin, step = _int(begin, "begin", "autoincreased_step_counter"), _int(
        step, "step", "autoincreased_step_counter")
    existing = trace.program.global_block().vars.get(name)
    if existing is not None:
        if not existing.persistable or existing.is_parameter or existing.dtype != "int64" \
                or tuple(existing.shape) != (1,):
            raise error_at(NameConflictError, f"autoincreased_step_counter: {name!r} is "
                                              f"already {short_type(existing)}, not an int64 "
                                              f"[1] counter; give counter_name another name")
        return Variable(trace, name)
    trace.declare(VarDesc(name, (1,), "int64", persistable=True, stop_gradient=True),
                  in_global=True)
    trace.append_op("fill_constant", {}, {"Out": [name]},
                    {"shape": [1], "dtype": "int64", "value": float(begin - 1)},
                    in_global=True)
    trace.append_op("increment", {"X": [name]}, {"Out": [name]}, {"step": float(step)},
                    role=OpRole.FORWARD)
    trace.block.ops.insert(0, trace.block.ops.pop())   # before everything that reads it
    return Variable(trace, name)


# --- checks and comparisons ---------------------------------------------------------------------

def _check(layer: str, op_type: str, x: Variable) -> Variable:
    x = as_variable(x, f"{layer} x")
    out = LayerHelper(layer).append_one(op_type, {"X": x})
    out.stop_gradient = True
    return out


def has_inf(x: Variable) -> Variable:
    """Whether any element of ``x`` is infinite: a ``[1]`` var of x's dtype (1 or 0)."""
    return _check("has_inf", "isinf", x)


def has_nan(x: Variable) -> Variable:
    """Whether any element of ``x`` is NaN: a ``[1]`` var of x's dtype (1 or 0)."""
    return _check("has_nan", "isnan", x)


def isfinite(x: Variable) -> Variable:
    """Whether every element of ``x`` is finite (no inf, no NaN): a bool ``[1]`` var."""
    return _check("isfinite", "isfinite", x)


def allclose(input: Variable, other: Variable, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False, name: str | None = None) -> Variable:
    """Whether ``|input - other| <= atol + rtol * |other|`` everywhere (NaNs equal only
    with ``equal_nan``): a bool ``[1]`` var."""
    for what, value in (("rtol", rtol), ("atol", atol)):
        if not isinstance(value, float):
            raise error_at(OpArgumentError, f"allclose: {what} must be a float, got {value!r}")
    if not isinstance(equal_nan, bool):
        raise error_at(OpArgumentError, f"allclose: equal_nan must be a bool, got "
                                        f"{equal_nan!r}")
    out = LayerHelper("allclose", name).append_one(
        "allclose", {"Input": as_variable(input, "allclose input"),
                     "Other": as_variable(other, "allclose other")},
        {"rtol": rtol, "atol": atol, "equal_nan": equal_nan})
    out.stop_gradient = True
    return out


def elementwise_equal(x: Variable, y: Variable, name: str | None = None) -> Variable:
    """``x == y`` elementwise (broadcasting as ``equal``): a bool var."""
    out = LayerHelper("elementwise_equal", name).append_one(
        "equal", {"X": as_variable(x, "elementwise_equal x"),
                  "Y": as_variable(y, "elementwise_equal y")})
    out.stop_gradient = True
    return out


# --- products and reductions --------------------------------------------------------------------

def kron(x: Variable, y: Variable, out: Variable | None = None,
         name: str | None = None) -> Variable:
    """The Kronecker product of ``x`` and ``y`` (``np.kron``), written into ``out`` when
    given."""
    return append_into(LayerHelper("kron", name), "kron",
                       {"X": as_variable(x, "kron x"), "Y": as_variable(y, "kron y")}, {}, out)


def trace(input: Variable, offset: int = 0, dim1: int = 0, dim2: int = 1,
          out: Variable | None = None, name: str | None = None) -> Variable:
    """The sums of the diagonals ``offset`` of the planes of dims ``dim1`` and ``dim2`` of
    ``input``: its shape without those dims (``[1]`` for a matrix)."""
    x = as_variable(input, "trace input")
    rank = len(x.shape)
    if rank < 2:
        raise error_at(OpArgumentError, f"trace: input must be at least 2-D, got "
                                        f"{format_shape(x.shape)}")
    dims = [_int(d, w, "trace") for d, w in ((dim1, "dim1"), (dim2, "dim2"))]
    if any(not -rank <= d < rank for d in dims) or dims[0] % rank == dims[1] % rank:
        raise error_at(OpArgumentError, f"trace: dim1={dim1} and dim2={dim2} must be two "
                                        f"different dims of input {format_shape(x.shape)}")
    return append_into(LayerHelper("trace", name), "trace", {"Input": x},
                       {"offset": _int(offset, "offset", "trace"), "dim1": dims[0],
                        "dim2": dims[1]}, out)


def argsort(input: Variable, axis: int = -1, descending: bool = False,
            name: str | None = None) -> tuple[Variable, Variable]:
    """``input`` sorted along ``axis``, and the int64 indices it came from, as a pair
    ``(sorted, indices)``. The gradient flows through the sorted values."""
    helper = LayerHelper("argsort", name)
    x = as_variable(input, "argsort input")
    outs = helper.append("argsort", {"X": x}, {"axis": _int(axis, "axis", "argsort"),
                                               "descending": bool(descending)})
    outs["Indices"][0].stop_gradient = True
    return outs["Out"][0], outs["Indices"][0]


# --- shapes -------------------------------------------------------------------------------------

def shape(input: Variable) -> Variable:
    """``input``'s shape as an int32 ``[rank]`` var (a batch size when the method runs)."""
    out = LayerHelper("shape").append_one("shape", {"Input": as_variable(input, "shape input")})
    out.stop_gradient = True
    return out


def size(input: Variable) -> Variable:
    """``input``'s number of elements as an int64 ``[1]`` var."""
    out = LayerHelper("size").append_one("size", {"Input": as_variable(input, "size input")})
    out.stop_gradient = True
    return out


def rank(input: Variable) -> Variable:
    """``input``'s number of dims, a constant int32 0-d var (known while tracing)."""
    x = as_variable(input, "rank input")
    return assign(np.array(len(x.shape), "int32"))


def meshgrid(input: Sequence[Variable], name: str | None = None) -> list[Variable]:
    """For 1-D vars ``x0 [n0], x1 [n1], ...``, one grid ``[n0, n1, ...]`` each, grid ``i``
    holding ``xi`` along dim ``i`` (``np.meshgrid(..., indexing='ij')``)."""
    if not isinstance(input, list):
        raise error_at(OpArgumentError, f"meshgrid: input must be a list of Variables, got "
                                        f"{type(input).__name__}")
    helper = LayerHelper("meshgrid", name)
    xs = [as_variable(v, "meshgrid input") for v in input]
    outs = helper.append("meshgrid", {"X": xs}, outputs={"Out": [helper.tmp() for _ in xs]})
    return outs["Out"]


def reverse(x: Variable, axis: int | Sequence[int]) -> Variable:
    """``x`` with the order along ``axis`` (an int or a list) reversed."""
    axes = _ints(axis, "axis", "reverse")
    return LayerHelper("reverse").append_one("reverse", {"X": as_variable(x, "reverse x")},
                                             {"axis": axes})


# --- ids ----------------------------------------------------------------------------------------

def hash(input: Variable, hash_size: int, num_hash: int = 1,
         name: str | None = None) -> Variable:
    """Each row of the integer ``input`` ``[N, D]`` hashed ``num_hash`` times (XXH64 with
    seeds 0, 1, ...) into ``[0, hash_size)``: ``[N, num_hash, 1]``, Paddle's values."""
    x = as_variable(input, "hash input")
    attrs = {"mod_by": _int(hash_size, "hash_size", "hash"),
             "num_hash": _int(num_hash, "num_hash", "hash")}
    out = LayerHelper("hash", name).append_one("hash", {"X": x}, attrs)
    out.stop_gradient = True
    return out


def shard_index(input: Variable, index_num: int, nshards: int, shard_id: int,
                ignore_value: int = -1) -> Variable:
    """Indices into a table of ``index_num`` rows split into ``nshards`` shards, made
    local to shard ``shard_id``: ``input % shard_size`` where the index falls in that
    shard, ``ignore_value`` elsewhere."""
    x = as_variable(input, "shard_index input")
    nshards = _int(nshards, "nshards", "shard_index")
    shard_id = _int(shard_id, "shard_id", "shard_index")
    if not 0 <= shard_id < nshards:
        raise error_at(OpArgumentError, f"shard_index: shard_id={shard_id} must be in "
                                        f"[0, nshards={nshards})")
    out = LayerHelper("shard_index").append_one(
        "shard_index", {"X": x}, {"index_num": _int(index_num, "index_num", "shard_index"),
                                  "nshards": nshards, "shard_id": shard_id,
                                  "ignore_value": _int(ignore_value, "ignore_value",
                                                       "shard_index")})
    out.stop_gradient = True
    return out


__all__ = ["autoincreased_step_counter", "has_inf", "has_nan", "isfinite", "allclose",
           "elementwise_equal", "kron", "trace", "argsort", "shape", "size", "rank",
           "meshgrid", "reverse", "hash", "shard_index"]
