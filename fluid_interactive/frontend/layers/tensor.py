"""Layers that reshape, combine, convert and reduce tensors.

Each records one op (``split`` one op with several outputs); shape mistakes are reported
while the method is traced, naming the shapes and the line that called the layer.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import OpArgumentError, ShapeError
from ...ir.records import FLOAT_DTYPES, canonical_dtype
from ...ir.text import format_shape
from ...ops.spec import dims_compatible
from ..param_attr import ParamAttr
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, append_simple, as_variable
from .list_args import ListArg, list_arg
from .targets import NewTensor, append_into

IntList = Sequence[int]


def _ints(value: Any, what: str, layer: str) -> list[int]:
    """A list of Python ints from a list/tuple of ints (a single int for ``axes``-like
    arguments is accepted too)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return [int(value)]
    if isinstance(value, (list, tuple)) and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
        return [int(v) for v in value]
    raise error_at(OpArgumentError, f"{layer}: {what} must be a list of ints, got {value!r}")


def _dtype(dtype: Any, layer: str) -> str:
    try:
        return canonical_dtype(dtype)
    except TypeError as e:
        raise error_at(OpArgumentError, f"{layer}: {e}") from None


def reshape(x: Variable, shape: IntList | Variable, actual_shape: Variable | None = None,
            act: str | None = None, inplace: bool = False, name: str | None = None
            ) -> Variable:
    """``x`` with a new shape of the same element count (a view, no copy).

    In ``shape``, 0 copies x's dim at the same index and one -1 is inferred, so a batch
    dim unknown while tracing can be kept: for ``x`` of shape ``[?, 2, 3]``,
    ``reshape(x, [0, 6])`` and ``reshape(x, [-1, 6])`` both give ``[?, 6]``. Entries of
    ``shape`` may be int Variables of shape [1], or ``shape`` one int Variable; the int
    tensor ``actual_shape``, when given, decides instead of ``shape``. Dims given by a
    tensor are known when the method runs. ``act`` applies an activation to the result;
    ``inplace`` is accepted for Paddle's sake (the result is a view either way).
    """
    helper = LayerHelper("reshape", name)
    xv = as_variable(x, "reshape: x")
    arg = list_arg(shape, "shape", "reshape", every_entry=True)
    inputs: dict[str, Any] = {"X": xv, **arg.inputs("Shape", "ShapeTensor")}
    if actual_shape is not None:
        inputs["Shape"] = as_variable(actual_shape, "reshape: actual_shape")
    if not isinstance(inplace, (bool, np.bool_)):
        raise error_at(OpArgumentError, f"reshape: inplace must be True or False, got "
                                        f"{inplace!r:.40}")
    out = helper.append_one("reshape", inputs, {"shape": arg.values}, final=act is None)
    return helper.activation(out, act)


def transpose(x: Variable, perm: IntList, name: str | None = None) -> Variable:
    """``x`` with its dims permuted: dim ``i`` of the result is dim ``perm[i]`` of x.
    ``transpose(x, [1, 0])`` of a ``[3, 5]`` x is ``[5, 3]``."""
    return append_simple("transpose", {"X": x}, {"axis": _ints(perm, "perm", "transpose")},
                         name=name)


def concat(input: Sequence[Variable], axis: int = 0, name: str | None = None) -> Variable:
    """The vars of ``input`` joined along ``axis`` (negative counts from the end); their
    other dims must match. ``concat([a, b], axis=1)`` of ``[?, 2]`` and ``[?, 3]`` is
    ``[?, 5]``."""
    if not isinstance(input, (list, tuple)) or not input:
        raise error_at(OpArgumentError, "concat: input must be a non-empty list of Variables")
    return append_simple("concat", {"X": list(input)}, {"axis": int(axis)}, name=name)


def split(input: Variable, num_or_sections: int | IntList, dim: int = -1,
          name: str | None = None) -> list[Variable]:
    """Cut ``input`` along ``dim`` into ``num_or_sections`` equal parts (an int), or into
    parts of the listed sizes (one of them may be -1: the rest). Returns a list of vars,
    each a view of ``input``. ``split(x, [2, -1], dim=1)`` of a ``[?, 5]`` x gives
    ``[?, 2]`` and ``[?, 3]``."""
    helper = LayerHelper("split", name)
    if isinstance(num_or_sections, (int, np.integer)) and not isinstance(num_or_sections, bool):
        num, sections = int(num_or_sections), []
        if num <= 0:
            raise error_at(OpArgumentError, f"split: num_or_sections={num} must be positive")
        count = num
    else:
        num, sections = 0, _ints(num_or_sections, "num_or_sections", "split")
        count = len(sections)
        if not count:
            raise error_at(OpArgumentError, "split: num_or_sections is an empty list")
    outs = helper.append("split", {"X": input}, {"axis": int(dim), "num": num,
                                                "sections": sections},
                         outputs={"Out": [helper.tmp() for _ in range(count)]})
    return outs["Out"]


def slice(input: Variable, axes: IntList, starts: IntList | Variable,
          ends: IntList | Variable) -> Variable:
    """``input[starts[i]:ends[i]]`` along each dim ``axes[i]`` (a view). Negative and
    out-of-range indices are clamped as in Python, so ``ends=[10**9]`` means "to the end"
    and ``starts=[-2]`` "the last two". ``starts`` and ``ends`` may be int Variables (one
    for the list, or [1] entries of it): the bounds are then read when the method runs."""
    axes_list = _ints(axes, "axes", "slice")
    # infer_flags marks the axes a Variable decides, for starts and ends together: each
    # list given with a Variable is given whole, as Paddle does
    begin = list_arg(starts, "starts", "slice", every_entry=True)
    end = list_arg(ends, "ends", "slice", every_entry=True)
    attrs = {"axes": axes_list, "starts": begin.values, "ends": end.values,
             "infer_flags": _infer_flags(len(axes_list), begin, end)}
    return append_simple("slice", {"X": input, **begin.inputs("StartsTensor", "StartsTensorList"),
                                   **end.inputs("EndsTensor", "EndsTensorList")}, attrs)


def _infer_flags(n: int, *lists: ListArg) -> list[int]:
    """Paddle's ``infer_flags``: -1 for each entry a Variable gives (in any of the lists),
    1 for the others; none at all when every list is ints."""
    if not any(arg.given_by_tensors for arg in lists):
        return []
    flags = [1] * n
    for arg in lists:
        if arg.whole is not None:
            return [-1] * n
        for i, from_tensor in enumerate(arg.from_tensor[:n]):
            if from_tensor:
                flags[i] = -1
    return flags


def squeeze(input: Variable, axes: IntList, name: str | None = None) -> Variable:
    """``input`` without the size-1 dims listed in ``axes`` (a view); every known size-1
    dim when ``axes`` is empty. A batch dim unknown while tracing is never squeezed by an
    empty ``axes``, so a batch of 1 keeps its dim."""
    x = as_variable(input, "squeeze input")
    dims = _ints(axes, "axes", "squeeze")
    if not dims:  # resolved now: at run time a batch of 1 must not change the rank
        dims = [i for i, d in enumerate(x.shape) if d == 1]
        if not dims:
            raise error_at(ShapeError, f"squeeze: input {x.name!r} of shape "
                                       f"{format_shape(x.shape)} has no size-1 dim to remove")
    return append_simple("squeeze", {"X": x}, {"axes": dims}, name=name)


def unsqueeze(input: Variable, axes: IntList, name: str | None = None) -> Variable:
    """``input`` with size-1 dims inserted, one per entry of ``axes`` in order, each an
    index into the shape built so far (a view). ``unsqueeze(x, [0, 2])`` of a ``[3, 4]``
    x is ``[1, 3, 1, 4]``."""
    return append_simple("unsqueeze", {"X": input}, {"axes": _ints(axes, "axes", "unsqueeze")},
                         name=name)


def cast(x: Variable, dtype: Any) -> Variable:
    """``x`` converted to ``dtype`` ('float32', np.int64, ...). Floats cast to ints
    truncate toward zero; only float-to-float casts pass a gradient back."""
    return append_simple("cast", {"X": x}, {"out_dtype": _dtype(dtype, "cast")})


def _reduce(op_type: str, input: Variable, dim: int | IntList | None, keep_dim: bool,
            name: str | None) -> Variable:
    dims = [] if dim is None else _ints(dim, "dim", op_type)
    attrs = {"dim": dims, "keep_dim": bool(keep_dim), "reduce_all": dim is None}
    return append_simple(op_type, {"X": input}, attrs, name=name)


def reduce_sum(input: Variable, dim: int | IntList | None = None, keep_dim: bool = False,
               name: str | None = None) -> Variable:
    """Sum over ``dim`` (an int or a list; None: every dim, giving a 0-d var). With
    ``keep_dim`` the reduced dims stay, with size 1."""
    return _reduce("reduce_sum", input, dim, keep_dim, name)


def reduce_mean(input: Variable, dim: int | IntList | None = None, keep_dim: bool = False,
                name: str | None = None) -> Variable:
    """Mean over ``dim`` (an int or a list; None: every dim, giving a 0-d var)."""
    return _reduce("reduce_mean", input, dim, keep_dim, name)


def reduce_max(input: Variable, dim: int | IntList | None = None, keep_dim: bool = False,
               name: str | None = None) -> Variable:
    """Maximum over ``dim``. Its gradient reaches the positions holding the maximum, split
    evenly among ties."""
    return _reduce("reduce_max", input, dim, keep_dim, name)


def reduce_min(input: Variable, dim: int | IntList | None = None, keep_dim: bool = False,
               name: str | None = None) -> Variable:
    """Minimum over ``dim``. Its gradient reaches the positions holding the minimum, split
    evenly among ties."""
    return _reduce("reduce_min", input, dim, keep_dim, name)


def fill_constant(shape: IntList, dtype: Any, value: float | Variable, force_cpu: bool = False,
                  out: Variable | None = None) -> Variable:
    """A var of the given (fully known) ``shape`` and ``dtype`` filled with ``value``: a
    number, or a Variable holding one value (read when the method runs). With ``out`` the
    values are written into that var (one made by ``create_tensor``, or an existing var of
    this shape and dtype). No gradient flows from it. ``force_cpu`` is accepted for
    Paddle's signature; arrays live where the program runs.

    A constant value is computed once when the method is planned."""
    dims = _ints(shape, "shape", "fill_constant")
    if any(d < 0 for d in dims):
        raise error_at(OpArgumentError, f"fill_constant: shape {dims} must be fully known; "
                                        f"give every dim as a non-negative int (a batch dim "
                                        f"known only at run time: "
                                        f"fill_constant_batch_size_like)")
    dt = _dtype(dtype, "fill_constant")
    inputs: dict[str, Variable] = {}
    attrs: dict[str, Any] = {"shape": dims, "dtype": dt}
    if isinstance(value, Variable):
        inputs["ValueTensor"] = as_variable(value, "fill_constant value")
        attrs["value"] = 0.0
    else:
        attrs["value"] = _typed_value(value, dt, "fill_constant")
    result = append_into(LayerHelper("fill_constant"), "fill_constant", inputs, attrs, out)
    result.stop_gradient = True
    return result


def _typed_value(value: Any, dtype: str, layer: str) -> float | int | bool:
    """``value`` as a Python number of ``dtype``'s kind; an error for anything else."""
    if isinstance(value, (np.ndarray, list, tuple)) or not isinstance(
            value, (int, float, bool, np.number, np.bool_)):
        raise error_at(OpArgumentError, f"{layer}: value must be a number, got "
                                        f"{type(value).__name__}")
    if dtype in FLOAT_DTYPES:
        return float(value)
    return bool(value) if dtype == "bool" else int(value)


def fill_constant_batch_size_like(input: Variable, shape: IntList, dtype: Any, value: float,
                                  input_dim_idx: int = 0, output_dim_idx: int = 0,
                                  force_cpu: bool = False) -> Variable:
    """A var of ``shape`` filled with ``value`` whose dim ``output_dim_idx`` is the size
    of ``input``'s dim ``input_dim_idx`` (a batch size known only when the method runs):
    e.g. a loop's initial state ``[?, hidden]`` from the input ``[?, features]``.
    ``force_cpu`` is accepted for Paddle's signature."""
    dims = _ints(shape, "shape", "fill_constant_batch_size_like")
    dt = _dtype(dtype, "fill_constant_batch_size_like")
    val = _typed_value(value, dt, "fill_constant_batch_size_like")
    out = append_simple("fill_constant_batch_size_like", {"Input": input},
                        {"shape": dims, "dtype": dt, "value": val,
                         "input_dim_idx": int(input_dim_idx),
                         "output_dim_idx": int(output_dim_idx)})
    out.stop_gradient = True
    return out


def assign(input: Variable | np.ndarray, output: Variable | None = None) -> Variable:
    """A copy of ``input`` (a Variable, or a NumPy array recorded as a constant). With
    ``output`` the copy is written into that existing var (e.g. a parameter), whose shape
    and dtype must match."""
    helper = LayerHelper("assign")
    if isinstance(input, (np.ndarray, list, tuple, float, int)):
        arr = np.asarray(input)
        dt = _dtype(arr.dtype, "assign")
        op_type, inputs = "assign_value", {}
        attrs = {"shape": list(arr.shape), "dtype": dt, "values": arr.ravel().tolist()}
        shape: tuple[int, ...] = tuple(arr.shape)
    else:
        x = as_variable(input, "assign input")
        op_type, inputs, attrs, shape, dt = "assign", {"X": x}, {}, x.shape, x.dtype
    if output is None or (isinstance(output, NewTensor) and helper.trace.find(output.name)
                          is None):   # nothing or a var create_tensor left untyped
        return append_into(helper, op_type, inputs, attrs, output, "output")
    out = as_variable(output, "assign output")
    if out.dtype != dt or len(out.shape) != len(shape) or not all(
            dims_compatible(a, b) for a, b in zip(out.shape, shape)):
        raise error_at(ShapeError, f"assign: input is {dt}{format_shape(shape)} but output "
                                   f"{out.name!r} is {out.dtype}{format_shape(out.shape)}; "
                                   f"they must match (cast or reshape the input first)")
    helper.append(op_type, inputs, attrs, outputs={"Out": [out.name]})
    return out


def create_parameter(shape: IntList, dtype: Any, name: str | None = None,
                     attr: Any = None, is_bias: bool = False,
                     default_initializer: Any = None) -> Variable:
    """A trainable parameter of the given ``shape`` and ``dtype`` in the program's state
    (block 0), initialised by ``default_initializer`` (default: Xavier, or zeros for a
    bias), unless ``attr`` (a `ParamAttr` or a name) says otherwise. Calling it again
    with the same name (in the same var_scope) gives the same parameter, so methods and
    loops share it."""
    helper = LayerHelper("create_parameter", name)
    pattr = helper.param_attr(attr, "attr") or ParamAttr()
    if pattr.name is None and name is not None:
        pattr = dataclasses.replace(pattr, name=helper.user_name)
    dims = _ints(shape, "shape", "create_parameter")
    return helper.create_parameter(pattr, dims, _dtype(dtype, "create_parameter"),
                                   default_initializer, is_bias)


__all__ = ["create_parameter", "reshape", "transpose", "concat", "split", "slice", "squeeze",
           "unsqueeze", "cast", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
           "fill_constant", "fill_constant_batch_size_like", "assign"]
