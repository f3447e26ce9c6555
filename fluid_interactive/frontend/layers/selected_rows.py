"""Layers on rows-only values (`fluid.SelectedRows`, the gradient of
``embedding(is_sparse=True)``), with Paddle 1.8's names."""
from __future__ import annotations

from .helpers import Variable, append_simple

__all__ = ["merge_selected_rows", "get_tensor_from_selected_rows"]


def merge_selected_rows(x: Variable, name: str | None = None) -> Variable:
    """The rows-only ``x`` with each row listed once, rows sorted (an id's parts summed)."""
    return append_simple("merge_selected_rows", {"X": x}, name=name)


def get_tensor_from_selected_rows(x: Variable, name: str | None = None) -> Variable:
    """The values of the rows-only ``x``: a tensor ``[N, D...]``, one row per listed id
    (merge first for one row per id)."""
    return append_simple("get_tensor_from_selected_rows", {"X": x}, name=name)
