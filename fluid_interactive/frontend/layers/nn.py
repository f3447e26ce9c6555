"""Layers with parameters: `fc`."""
from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any

from ...errors import OpArgumentError, ShapeError
from ...ir.text import short_type
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable


def _per_input(attr: Any, n: int) -> list:
    if isinstance(attr, (list, tuple)):
        if len(attr) != n:
            raise error_at(OpArgumentError, f"fc got {n} inputs but {len(attr)} param_attrs")
        return list(attr)
    return [attr] * n


def _inner_dims(x: Variable, num_flatten_dims: int) -> tuple[int, ...]:
    """The dims that fc flattens into the weight's rows; they must be known."""
    shape = f"{x.name}:{short_type(x.desc)}"
    if isinstance(num_flatten_dims, bool) or not isinstance(num_flatten_dims, int) or \
            not 1 <= num_flatten_dims < len(x.shape):
        raise error_at(ShapeError, f"fc: num_flatten_dims={num_flatten_dims!r} does not fit "
                                   f"input {shape}; it must be an int from 1 to "
                                   f"{len(x.shape) - 1} (the dims before it are kept)")
    inner = x.shape[num_flatten_dims:]
    if any(d < 0 for d in inner):
        raise error_at(ShapeError, f"fc: input {shape} has unknown dims after "
                                   f"num_flatten_dims={num_flatten_dims}; they must be known "
                                   f"to size the weight")
    return tuple(inner)


def fc(input: Variable | Sequence[Variable], size: int, num_flatten_dims: int = 1,
       param_attr: Any = None, bias_attr: Any = None, act: str | None = None,
       name: str | None = None) -> Variable:
    """Fully connected layer: ``act(sum_i flatten(input_i) @ W_i + b)``.

    Each input is flattened to 2-D at ``num_flatten_dims`` and gets its own weight
    ``[prod(input.shape[num_flatten_dims:]), size]`` (Xavier-uniform by default); the bias
    ``[size]`` starts at zero (``bias_attr=False``: none).
    """
    helper = LayerHelper("fc", name)
    inputs = list(input) if isinstance(input, (list, tuple)) else [input]
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise error_at(OpArgumentError, f"fc: size must be a positive int, got {size!r}")
    if not inputs:
        raise error_at(OpArgumentError, "fc: input is an empty list; give at least one var")
    attrs = _per_input(param_attr, len(inputs))
    products = []
    for x, attr in zip(inputs, attrs):
        x = as_variable(x, "fc input")
        inner = _inner_dims(x, num_flatten_dims)
        pattr = helper.param_attr(attr, "param_attr")
        if pattr is None:
            raise error_at(OpArgumentError, "fc needs a weight; param_attr=False is not allowed")
        helper.context = f" (input {x.name}:{short_type(x.desc)}, size={size})"
        w = helper.create_parameter(pattr, [prod(inner), size], x.dtype)
        products.append(helper.append_one("mul", {"X": x, "Y": w},
                                          {"x_num_col_dims": num_flatten_dims,
                                           "y_num_col_dims": 1}, final=False))
    battr = helper.param_attr(bias_attr, "bias_attr")
    last_is_pre = battr is None and act is None
    pre = products[0] if len(products) == 1 else helper.append_one(
        "sum", {"X": products}, final=last_is_pre)
    if battr is not None:
        b = helper.create_parameter(battr, [size], pre.dtype, is_bias=True)
        pre = helper.append_one("elementwise_add", {"X": pre, "Y": b},
                                {"axis": num_flatten_dims}, final=act is None)
    return helper.activation(pre, act)


__all__ = ['fc']
