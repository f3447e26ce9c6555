"""Export rules of the sequence ops ONNX can express over a padded batch and its lengths,
and of Print.

``row_conv``                a depthwise ``Conv`` (group D) over [B, D, 1, T], padded at the
                            end by F - 1 steps: the lookahead reads zeros past T
``sequence_conv``           a ``Conv`` over [B, D, 1, T] with the filter [L * D, N] as
                            [N, D, 1, L], padded by the context's reach before and after
                            (zero padding only: trainable padding has no counterpart)
``sequence_unpad``          the input times its mask (``Where``)
``sequence_pad``            with a fixed ``padded_length``: ``Where`` between the input
                            (``Pad``-ded or ``Slice``-d to that length) and the pad value
``add_position_encoding``   alpha * X + beta * [sin | cos](t * rates), the positions a
                            ``Range`` of T
``print``                   ``Identity`` (ONNX has no printing)

With Lengths, what a convolution reads of each row is masked first, so that padding reads
as zeros; the mask compares ``Range(0, T)`` with the lengths as `export_mask` does, so B
and T stay dynamic in the file.
"""
from __future__ import annotations

import numpy as np

from ..ops.sequence_conv import position_table
from .export_registry import OpExport, export_rule


def _time_mask(e: OpExport, x: str, lengths: str, rank: int) -> str:
    """A bool mask [B, T, 1, ...] (``rank`` dims) of x's valid steps: t < lengths[b]."""
    if e.dtype(lengths) != "int64":
        lengths = e.node("Cast", [lengths], to=e.onnx_dtype("int64"))[0]
    shape = e.node("Shape", [x])[0]
    steps = e.node("Gather", [shape, e.const(1, "int64", "time_dim")], axis=0)[0]
    each = e.node("Range", [e.const(0, "int64", "first"), steps,
                            e.const(1, "int64", "stride")])[0]
    row = e.node("Unsqueeze", [each, e.ints([0])])[0]                     # [1, T]
    column = e.node("Unsqueeze", [lengths, e.ints([1])])[0]               # [B, 1]
    mask = e.node("Less", [row, column])[0]                               # [B, T]
    if rank == 2:
        return mask
    return e.node("Unsqueeze", [mask, e.ints(list(range(2, rank)))])[0]


def _valid_only(e: OpExport, x: str) -> str:
    """x [B, T, D] with zeros at padding (x itself without Lengths)."""
    if not e.has_input("Lengths"):
        return x
    zero = e.scalar(0.0, e.input("X"), "zero")
    return e.node("Where", [_time_mask(e, x, e.input("Lengths"), 3), x, zero])[0]


def _conv_over_time(e: OpExport, x: str, kernel: str, pads: tuple[int, int], group: int,
                    out: str) -> None:
    """out [B, T, N] = a Conv along T of x [B, T, D] with ``kernel`` [N, D/group, 1, L]."""
    images = e.node("Unsqueeze", [e.node("Transpose", [x], perm=[0, 2, 1])[0], e.ints([2])])[0]
    conv = e.node("Conv", [images, kernel], group=group, pads=[0, pads[0], 0, pads[1]])[0]
    flat = e.node("Squeeze", [conv, e.ints([2])])[0]
    e.node("Transpose", [flat], [out], perm=[0, 2, 1])


@export_rule("row_conv")
def _row_conv(e: OpExport) -> None:
    """out[t] = sum_k x[t + k] * W[k]: a depthwise Conv whose kernel [D, 1, 1, F] is W^T."""
    x, w = _valid_only(e, e.input("X")), e.input("Filter")
    taps, depth = e.shape(w)
    kernel = e.node("Reshape", [e.node("Transpose", [w], perm=[1, 0])[0],
                                e.ints([depth, 1, 1, taps], "kernel_shape")])[0]
    out = e.output("Out")
    if e.has_input("Lengths"):
        out = e.tmp("conv")
    _conv_over_time(e, x, kernel, (0, taps - 1), depth, out)
    if out != e.output("Out"):
        e.node("Identity", [_valid_only(e, out)], [e.output("Out")])


@export_rule("sequence_conv")
def _sequence_conv(e: OpExport) -> None:
    if e.attrs["paddingTrainable"]:
        e.fail("has trainable padding (paddingTrainable), which no ONNX operator reads; "
               "export a sequence_conv with zero padding")
    x, w = _valid_only(e, e.input("X")), e.input("Filter")
    taps, start = int(e.attrs["contextLength"]), int(e.attrs["contextStart"])
    depth = e.shape(e.input("X"))[2]
    filters = e.shape(w)[1]
    blocks = e.node("Reshape", [w, e.ints([taps, depth, filters], "taps")])[0]
    kernel = e.node("Reshape", [e.node("Transpose", [blocks], perm=[2, 1, 0])[0],
                                e.ints([filters, depth, 1, taps], "kernel_shape")])[0]
    out = e.output("Out")
    if e.has_input("Lengths"):
        out = e.tmp("conv")
    # A reach outside [0, T) reads zeros: the Conv pads by it on each side.
    if start > 0 or start + taps - 1 < 0:
        e.fail(f"has a context ({start} to {start + taps - 1}) that does not cover the "
               f"step itself, which a Conv's padding cannot express")
    _conv_over_time(e, x, kernel, (-start, start + taps - 1), 1, out)
    if out != e.output("Out"):
        e.node("Identity", [_valid_only(e, out)], [e.output("Out")])


@export_rule("sequence_unpad")
def _sequence_unpad(e: OpExport) -> None:
    x = e.input("X")
    mask = _time_mask(e, x, e.input("Lengths"), len(e.shape(x)))
    e.node("Where", [mask, x, e.scalar(0.0, x, "zero")], [e.output("Out")])


@export_rule("sequence_pad")
def _sequence_pad(e: OpExport) -> None:
    x, length = e.input("X"), int(e.attrs["padded_length"])
    time = e.shape(x)[1]
    if length < 0 or time < 0:
        e.fail("has a length known only when it runs (padded_length=-1, or an input of "
               "unknown T); give maxlen and a data var of fixed T to export it")
    rank = len(e.shape(x))
    if length >= time:
        pads = [0, 0] + [0] * (rank - 2) + [0, length - time] + [0] * (rank - 2)
        fitted = e.node("Pad", [x, e.ints(pads, "pads")])[0]
    else:
        fitted = e.node("Slice", [x, e.ints([0], "starts"), e.ints([length], "ends"),
                                  e.ints([1])])[0]
    pad = e.input("PadValue") if e.has_input("PadValue") else e.scalar(0.0, x, "pad")
    if e.has_input("Lengths"):
        mask = _time_mask(e, fitted, e.input("Lengths"), rank)
        lengths = e.node("Cast", [e.input("Lengths")], to=e.onnx_dtype("int64"))[0]
    else:
        steps = (np.arange(length) < time).reshape((1, length) + (1,) * (rank - 2))
        mask = e.const(steps, "bool", "steps")
        batch = e.node("Gather", [e.node("Shape", [x])[0], e.const(0, "int64", "batch_dim")],
                       axis=0)[0]
        lengths = e.node("Expand", [e.const(time, "int64", "time"),
                                    e.node("Unsqueeze", [batch, e.ints([0])])[0]])[0]
    e.node("Where", [mask, fitted, pad], [e.output("Out")])
    e.node("Identity", [lengths], [e.output("Length")])


@export_rule("add_position_encoding")
def _add_position_encoding(e: OpExport) -> None:
    """The encoding of T steps: a table of the largest T the var declares, sliced to T."""
    x = e.input("X")
    time, depth = e.shape(x)[1], e.shape(x)[2]
    if time < 0:
        e.fail("has an input of unknown T; declare the data var with a fixed T to export "
               "its position table")
    table = np.asarray(position_table(time, depth), e.dtype(x))[None]
    scaled = e.node("Mul", [x, e.scalar(float(e.attrs["alpha"]), x, "alpha")])[0]
    summed = e.node("Add", [scaled, e.const(float(e.attrs["beta"]) * table, e.dtype(x),
                                            "encoding")])[0]
    e.node("Identity", [_valid_only(e, summed)], [e.output("Out")])


@export_rule("print")
def _print(e: OpExport) -> None:
    e.node("Identity", [e.input("In")], [e.output("Out")])
