"""What a Variable's operators record (``x + y``, ``x[i]``, ``x < y``,
``x._set_error_clip(...)``): the layers' own functions, handed to `variable` when the
frontend package loads (`variable.record_with`). The layers build on `variable`, so
`variable` does not import them: this module, which imports both, joins them."""
from __future__ import annotations

import sys
from typing import Any

from . import clip, indexing, variable
from .layers import compare as _compare
from .layers import helpers, tensor
from .tracing import TraceContext
from .variable import Variable


def as_variable(value: Any, what: str) -> Variable:
    return helpers.as_variable(value, what)


def append_simple(op_type: str, inputs: dict[str, Any], attrs: dict[str, Any],
                  layer: str) -> Variable:
    return helpers.append_simple(op_type, inputs, attrs, layer=layer)


def compare(layer: str, x: Variable, other: Any) -> Variable:
    """``x < y`` is ``fluid.layers.less_than(x, y)``, and so on."""
    return getattr(_compare, layer)(x, other)


def fill_constant(shape: list[int], dtype: str, value: float) -> Variable:
    return tensor.fill_constant(shape, dtype, value)


def getitem(x: Variable, key: Any) -> Variable:
    return indexing.getitem(x, key)


def set_error_clip(trace: TraceContext, name: str, error_clip: Any) -> None:
    clip.set_error_clip(trace, name, error_clip)


variable.record_with(sys.modules[__name__])
