"""Cost layers."""
from __future__ import annotations

from ...errors import ShapeError
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable


def _same_shape(layer: str, input: Variable, label: Variable) -> None:
    a, b = input.shape, label.shape
    if len(a) != len(b) or any(x >= 0 and y >= 0 and x != y for x, y in zip(a, b)):
        raise error_at(ShapeError, f"{layer}: input {input.name!r} has shape {list(a)} but "
                                   f"label {label.name!r} has shape {list(b)}; they must "
                                   f"match (declare the label as shape=[1] for one value "
                                   f"per sample)")


def square_error_cost(input: Variable, label: Variable) -> Variable:
    """Per-sample ``(input - label) ** 2`` (no 1/2 factor); average it with `mean`."""
    helper = LayerHelper("square_error_cost")
    input, label = as_variable(input, "input"), as_variable(label, "label")
    _same_shape("square_error_cost", input, label)
    diff = helper.append_one("elementwise_sub", {"X": input, "Y": label}, final=False)
    return helper.append_one("square", {"X": diff})


__all__ = ['square_error_cost']
