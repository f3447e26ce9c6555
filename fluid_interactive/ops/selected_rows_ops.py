"""Ops on rows-only values (vars of kind ``selected_rows``, a `SelectedRows` each), as
Paddle 1.8 names them.

``merge_selected_rows``            Out = X with each row listed once, rows sorted
                                   (duplicates summed).
``get_tensor_from_selected_rows``  Out = X's values, a tensor [N, D...] (N rows, known only
                                   when it runs): what a gradient clip squares and sums
                                   for a norm, after merging.
"""
from __future__ import annotations

from ..ir.records import SELECTED_ROWS
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, slots


def _rows_input(ctx: InferContext):
    x = ctx.input("X")
    if x.kind != SELECTED_ROWS:
        ctx.fail(f"X must be rows only (a SelectedRows, such as the gradient of "
                 f"embedding(is_sparse=True)), got a {x.kind} {x.dtype}{list(x.shape)}")
    return x


def _merge_infer(ctx: InferContext) -> None:
    x = _rows_input(ctx)
    ctx.set_output("Out", x.shape, x.dtype, SELECTED_ROWS)


def _merge_kernel(ctx: KernelContext):
    xp = ctx.xp
    return lambda x: x.merged(xp)


def _values_infer(ctx: InferContext) -> None:
    x = _rows_input(ctx)
    ctx.set_output("Out", (-1,) + tuple(x.shape[1:]), x.dtype)


def _values_kernel(ctx: KernelContext):
    return lambda x: x.values


register(OpSpec("merge_selected_rows", slots("X"), slots("Out"), _merge_infer, _merge_kernel,
                sparse_inputs=("X",), host_access="reads",
                doc="Out = X (rows only) with each row once, rows sorted, duplicates summed"))
register(OpSpec("get_tensor_from_selected_rows", slots("X"), slots("Out"), _values_infer,
                _values_kernel, sparse_inputs=("X",), aliases=True,
                doc="Out = the values of X (rows only): a tensor [N, D...]"))
