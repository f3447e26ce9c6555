"""Step 2: cutting parameters (and their gradients and accumulators) into row blocks.

The rule is Paddle's ``slice_variable``: a var of ``numel`` elements is cut into at most
``slice_count`` parts (the number of parameter servers, or 1 without ``slice_var_up``), and
into fewer when a part would hold less than ``min_block_size`` elements; a part is a whole
number of rows (rows = the first dimension). A gradient is cut exactly like its parameter,
so gradient block i always pairs with parameter block i.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import ceil, prod


def slice_rows(shape: tuple[int, ...], slice_count: int, min_block_size: int) -> list[int]:
    """Rows per block for a var of ``shape``: ``[shape[0]]`` (or ``[1]`` for a scalar)
    when it stays whole."""
    numel = prod(shape) if shape else 1
    rows_total = shape[0] if shape else 1
    max_parts = max(1, numel // min_block_size)
    parts = min(slice_count, max_parts, rows_total)
    if parts <= 1 or not shape:
        return [rows_total]
    row_width = numel // rows_total if rows_total else 1
    block = ceil(numel / parts)
    rows_per_block = ceil(block / row_width) if row_width else rows_total
    parts = ceil(rows_total / rows_per_block)
    rows = [rows_per_block] * (parts - 1)
    rows.append(rows_total - rows_per_block * (parts - 1))
    return rows


def block_name(name: str, index: int, count: int) -> str:
    """A var keeps its name when it is not split; block i of a split var is
    ``<name>.block<i>``."""
    return name if count == 1 else f"{name}.block{index}"


@dataclass(frozen=True)
class VarBlock:
    """Rows ``[start, start + rows)`` of the var ``origin``, known as ``name``."""
    origin: str
    name: str
    index: int
    count: int
    start: int
    rows: int
    shape: tuple[int, ...]   # the block's own shape

    @property
    def is_whole(self) -> bool:
        return self.count == 1


def make_blocks(name: str, shape: tuple[int, ...], rows: list[int]) -> list[VarBlock]:
    blocks, start = [], 0
    for i, r in enumerate(rows):
        block_shape = (r,) + tuple(shape[1:]) if shape else tuple(shape)
        blocks.append(VarBlock(name, block_name(name, i, len(rows)), i, len(rows), start, r,
                               block_shape))
        start += r
    return blocks
