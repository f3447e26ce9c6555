"""Elementwise arithmetic, products and reductions as layers."""
from __future__ import annotations

from collections.abc import Sequence

from ..variable import Variable
from .helpers import LayerHelper, append_simple
from .targets import append_into


def _elementwise(op_type: str, x: Variable, y: Variable, axis: int, act: str | None,
                 name: str | None) -> Variable:
    helper = LayerHelper(op_type, name)
    out = helper.append_one(op_type, {"X": x, "Y": y}, {"axis": int(axis)}, final=act is None)
    return helper.activation(out, act)


def elementwise_add(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                    name: str | None = None) -> Variable:
    """``x + y``; with ``axis=k`` y's shape matches x's dims from k on (Paddle's rule),
    with the default -1 shapes broadcast like NumPy."""
    return _elementwise("elementwise_add", x, y, axis, act, name)


def elementwise_sub(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                    name: str | None = None) -> Variable:
    """``x - y`` with the broadcasting of `elementwise_add`."""
    return _elementwise("elementwise_sub", x, y, axis, act, name)


def elementwise_mul(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                    name: str | None = None) -> Variable:
    """``x * y`` with the broadcasting of `elementwise_add`."""
    return _elementwise("elementwise_mul", x, y, axis, act, name)


def elementwise_div(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                    name: str | None = None) -> Variable:
    """``x / y`` with the broadcasting of `elementwise_add`."""
    return _elementwise("elementwise_div", x, y, axis, act, name)


def elementwise_max(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                    name: str | None = None) -> Variable:
    """The larger of ``x`` and ``y``, elementwise (broadcast as in `elementwise_add`)."""
    return _elementwise("elementwise_max", x, y, axis, act, name)


def elementwise_min(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                    name: str | None = None) -> Variable:
    """The smaller of ``x`` and ``y``, elementwise (broadcast as in `elementwise_add`)."""
    return _elementwise("elementwise_min", x, y, axis, act, name)


def elementwise_pow(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                    name: str | None = None) -> Variable:
    """``x ** y``, elementwise (broadcast as in `elementwise_add`)."""
    return _elementwise("elementwise_pow", x, y, axis, act, name)


def elementwise_mod(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
                    name: str | None = None) -> Variable:
    """``x mod y`` elementwise, with the sign of ``y`` (Python's ``%``), broadcast as in
    `elementwise_add`; e.g. the step of a schedule that repeats every n steps."""
    return _elementwise("elementwise_mod", x, y, axis, act, name)


def scale(x: Variable, scale: float = 1.0, bias: float = 0.0, bias_after_scale: bool = True,
          act: str | None = None, name: str | None = None) -> Variable:
    """``scale * x + bias`` (``scale * (x + bias)`` when ``bias_after_scale=False``)."""
    helper = LayerHelper("scale", name)
    out = helper.append_one("scale", {"X": x}, {"scale": float(scale), "bias": float(bias),
                                               "bias_after_scale": bool(bias_after_scale)},
                            final=act is None)
    return helper.activation(out, act)


def mul(x: Variable, y: Variable, x_num_col_dims: int = 1, y_num_col_dims: int = 1,
        name: str | None = None) -> Variable:
    """Flatten x to 2-D at x_num_col_dims and y at y_num_col_dims, then multiply."""
    return append_simple("mul", {"X": x, "Y": y}, {"x_num_col_dims": int(x_num_col_dims),
                                                   "y_num_col_dims": int(y_num_col_dims)},
                         name=name)


def matmul(x: Variable, y: Variable, transpose_x: bool = False, transpose_y: bool = False,
           alpha: float = 1.0, name: str | None = None) -> Variable:
    """Batched matrix product ``alpha * op(x) @ op(y)``, op transposing the last two dims
    when its flag is set."""
    return append_simple("matmul", {"X": x, "Y": y}, {"transpose_X": bool(transpose_x),
                                                      "transpose_Y": bool(transpose_y),
                                                      "alpha": float(alpha)}, name=name)


def sums(input: Sequence[Variable] | Variable, out: Variable | None = None) -> Variable:
    """The sum of a list of same-shaped vars (or of one var: a copy). With ``out`` the sum
    is written into that var (one made by ``create_tensor``, or one of this type)."""
    xs = [input] if isinstance(input, Variable) else list(input)
    return append_into(LayerHelper("sum"), "sum", {"X": xs}, {}, out)


def mean(x: Variable, name: str | None = None) -> Variable:
    """Mean of every element: a 0-d var, the usual loss. Calling the compiled method gives
    a Python float for it."""
    return append_simple("mean", {"X": x}, name=name)


def clip(x: Variable, min: float, max: float, name: str | None = None) -> Variable:
    """``x`` limited to ``[min, max]``; the gradient is zero outside."""
    return append_simple("clip", {"X": x}, {"min": float(min), "max": float(max)}, name=name)


def pow(x: Variable, factor: float = 1.0, name: str | None = None) -> Variable:
    """``x ** factor``, elementwise."""
    return append_simple("pow", {"X": x}, {"factor": float(factor)}, name=name)


__all__ = ['elementwise_add', 'elementwise_sub', 'elementwise_mul', 'elementwise_div',
           'elementwise_max', 'elementwise_min', 'elementwise_pow', 'elementwise_mod',
           'scale', 'mul', 'matmul', 'sums', 'mean', 'clip', 'pow']
