"""Export rules of the indexing and rearranging ops (`ops/gather.py`, `scatter.py`,
`select.py`, `slicing.py`, `pad.py`, `tile.py`, `rearrange.py`).

Most map to one ONNX node: Gather, GatherND, GatherElements, ScatterND, TopK, NonZero (then
Transpose), Unique, Slice, Pad, Tile, DepthToSpace. stack is Unsqueeze + Concat, unstack
Split + Squeeze, multiplex a Where per candidate, space_to_depth and shuffle_channel
Reshape + Transpose + Reshape, roll two Slices and a Concat per dim, temporal_shift a Pad
of the time axis and three Slices. A list an op takes from tensors (`ops/int_args.py`)
becomes one int64 value: the tensor, or its entries joined. ``gather_tree`` (a loop over
time) has no rule.
"""
from __future__ import annotations

from collections.abc import Sequence
from math import prod

from ..ops.int_args import IntList
from ..ops.pad import PADDINGS
from ..ops.rearrange import regroup_of
from ..ops.shape import normalize_axis
from ..ops.slicing import (
    CROP_OFFSETS,
    CROP_SHAPE,
    STRIDED_LISTS,
)
from ..ops.tile import EXPAND_TIMES
from .export_registry import OpExport, export_rule

_BIG = 2 ** 62   # "to the end" for a Slice


def int64(e: OpExport, name: str) -> str:
    return name if e.dtype(name) == "int64" else \
        e.node("Cast", [name], to=e.onnx_dtype("int64"))[0]


def list_value(e: OpExport, arg: IntList, hint: str) -> str:
    """An op's int list (`IntList`) as one 1-D int64 ONNX value: the attr as a constant,
    the whole tensor, or the entries joined (tensor entries where they stand)."""
    values = [int(v) for v in e.attrs[arg.attr]]
    if e.has_input(arg.whole):
        return e.node("Reshape", [int64(e, e.input(arg.whole)), e.ints([-1])])[0]
    parts = e.inputs(arg.parts)
    if not parts:
        return e.ints(values, hint)
    if len(parts) >= len(values) or arg.marked is None:
        pieces = [e.node("Reshape", [int64(e, p), e.ints([1])])[0] for p in parts]
    else:
        taken = iter(parts)
        pieces = [e.node("Reshape", [int64(e, next(taken)), e.ints([1])])[0]
                  if arg.marked(e.attrs, i) else e.ints([v], hint)
                  for i, v in enumerate(values)]
    return e.node("Concat", pieces, axis=0)[0]


# --- gathering ---------------------------------------------------------------------------------

def _flat_index(e: OpExport, slot: str) -> str:
    return e.node("Reshape", [e.input(slot), e.ints([-1])])[0]


@export_rule("gather")
def _gather(e: OpExport) -> None:
    e.node("Gather", [e.input("X"), _flat_index(e, "Index")], [e.output("Out")], axis=0)


@export_rule("index_select")
def _index_select(e: OpExport) -> None:
    x = e.input("X")
    shape = e.shape(x)
    axis = normalize_axis(e, int(e.attrs["dim"]), len(shape), "index_select dim", shape)
    e.node("Gather", [x, _flat_index(e, "Index")], [e.output("Out")], axis=axis)


@export_rule("gather_nd")
def _gather_nd(e: OpExport) -> None:
    e.node("GatherND", [e.input("X"), int64(e, e.input("Index"))], [e.output("Out")])


@export_rule("index_sample")
def _index_sample(e: OpExport) -> None:
    e.node("GatherElements", [e.input("X"), e.input("Index")], [e.output("Out")], axis=1)


@export_rule("multiplex")
def _multiplex(e: OpExport) -> None:
    """One Where per candidate after the first: rows whose id names it take its row."""
    xs, ids, out = e.inputs("X"), int64(e, e.input("Ids")), e.output("Out")
    rank = len(e.shape(xs[0]))
    column = e.node("Reshape", [ids, e.ints([-1] + [1] * (rank - 1))])[0]
    current = xs[0]
    for k, x in enumerate(xs[1:], 1):
        chosen = e.node("Equal", [column, e.const(k, "int64", "candidate")])[0]
        current = e.node("Where", [chosen, x, current],
                         [out] if k == len(xs) - 1 else None)[0]


# --- scattering ------------------------------------------------------------------------------

@export_rule("scatter")
def _scatter(e: OpExport) -> None:
    """ScatterND by row; without overwrite the listed rows are zeroed first (a ScatterND of
    zeros), then the updates added (reduction 'add', opset 16)."""
    x, updates, out = e.input("X"), e.input("Updates"), e.output("Out")
    rows = e.node("Reshape", [int64(e, e.input("Ids")), e.ints([-1, 1])])[0]
    if e.attrs["overwrite"]:
        e.node("ScatterND", [x, rows, updates], [out])
        return
    e.require_opset(16, "ScatterND with reduction='add'")
    zeros = e.node("Mul", [updates, e.scalar(0.0, updates, "zero")])[0]
    cleared = e.node("ScatterND", [x, rows, zeros])[0]
    e.node("ScatterND", [cleared, rows, updates], [out], reduction="add")


@export_rule("scatter_nd_add")
def _scatter_nd_add(e: OpExport) -> None:
    e.require_opset(16, "ScatterND with reduction='add'")
    e.node("ScatterND", [e.input("X"), int64(e, e.input("Index")), e.input("Updates")],
           [e.output("Out")], reduction="add")


# --- selecting by value ------------------------------------------------------------------------

@export_rule("top_k")
def _top_k(e: OpExport) -> None:
    k = e.ints([int(e.attrs["k"])], "k") if not e.has_input("K") else \
        e.node("Reshape", [int64(e, e.input("K")), e.ints([1])])[0]
    e.node("TopK", [e.input("X"), k], [e.output("Out"), e.output("Indices")], axis=-1,
           largest=1, sorted=1)


@export_rule("where_index")
def _where_index(e: OpExport) -> None:
    """NonZero gives the coordinates as [rank, N]; Paddle's are [N, rank]."""
    found = e.node("NonZero", [e.input("Condition")])[0]
    e.node("Transpose", [found], [e.output("Out")], perm=[1, 0])


@export_rule("unique", "unique_with_counts")
def _unique(e: OpExport) -> None:
    """Unique with sorted=0 keeps the order of first appearance, as Paddle's."""
    dtype = e.attrs["dtype"]
    values, inverse, counts = e.tmp("unique"), e.tmp("inverse"), e.tmp("counts")
    e.node("Unique", [e.input("X")], [values, "", inverse, counts], sorted=0)
    e.node("Identity", [values], [e.output("Out")])
    e.node("Cast", [inverse], [e.output("Index")], to=e.onnx_dtype(dtype))
    if e.op.output("Count"):
        e.node("Cast", [counts], [e.output("Count")], to=e.onnx_dtype(dtype))


# --- slicing and cropping --------------------------------------------------------------------

def _slice(e: OpExport, x: str, axes: Sequence[int], starts: str, ends: str,
           steps: str | None = None, out: str | None = None) -> str:
    inputs = [x, starts, ends, e.ints(list(axes), "axes")] + ([steps] if steps else [])
    return e.node("Slice", inputs, [out] if out else None)[0]


@export_rule("strided_slice")
def _strided_slice(e: OpExport) -> None:
    x = e.input("Input")
    shape = e.shape(x)
    axes = [normalize_axis(e, int(a), len(shape), "strided_slice axis", shape)
            for a in e.attrs["axes"]]
    starts, ends, steps = (list_value(e, arg, arg.attr) for arg in STRIDED_LISTS)
    _slice(e, x, axes, starts, ends, steps, e.output("Out"))


def _given(e: OpExport, arg: IntList) -> list[int] | None:
    """The list's values when the attr holds them all (no tensor gives any)."""
    if e.has_input(arg.whole) or e.inputs(arg.parts):
        return None
    return [int(v) for v in e.attrs[arg.attr]]


def _crop_slice(e: OpExport, x: str, offsets: list[int] | str, shape: list[int] | str
                ) -> None:
    """X[offsets : offsets + shape] (a -1 in shape: to the end): constant bounds where
    both lists are known in the file, else computed when the graph runs."""
    rank = len(e.shape(x))
    if isinstance(offsets, list) and isinstance(shape, list):
        bounds = [_BIG if s == -1 else o + s for o, s in zip(offsets, shape)]
        _slice(e, x, range(rank), e.ints(offsets, "starts"), e.ints(bounds, "ends"),
               out=e.output("Out"))
        return
    starts = offsets if isinstance(offsets, str) else e.ints(offsets, "starts")
    sizes = shape if isinstance(shape, str) else e.ints(shape, "shape")
    sized = e.node("Greater", [sizes, e.const(-1, "int64", "rest")])[0]
    ends = e.node("Where", [sized, e.node("Add", [starts, sizes])[0],
                            e.const([_BIG], "int64", "end")])[0]
    _slice(e, x, range(rank), starts, ends, out=e.output("Out"))


def _offsets(e: OpExport, rank: int) -> list[int] | str:
    if not e.attrs["offsets"] and not e.has_input("Offsets") and not e.inputs("OffsetsTensor"):
        return [0] * rank
    given = _given(e, CROP_OFFSETS)
    return given if given is not None else list_value(e, CROP_OFFSETS, "offsets")


@export_rule("crop_tensor")
def _crop_tensor(e: OpExport) -> None:
    x = e.input("X")
    shape = _given(e, CROP_SHAPE)
    _crop_slice(e, x, _offsets(e, len(e.shape(x))),
                shape if shape is not None else list_value(e, CROP_SHAPE, "shape"))


@export_rule("crop")
def _crop(e: OpExport) -> None:
    """The box's shape: the shape attr, or Y's (its declared shape where fully known)."""
    x = e.input("X")
    shape: list[int] | str = [int(d) for d in e.attrs["shape"]]
    if e.has_input("Y"):
        declared = list(e.shape(e.input("Y")))
        shape = declared if min(declared) >= 0 else e.node("Shape", [e.input("Y")])[0]
    _crop_slice(e, x, _offsets(e, len(e.shape(x))), shape)


@export_rule("flip")
def _flip(e: OpExport) -> None:
    x = e.input("X")
    shape = e.shape(x)
    axes = [normalize_axis(e, int(a), len(shape), "flip dim", shape) for a in e.attrs["dims"]]
    n = len(axes)
    _slice(e, x, axes, e.ints([-1] * n, "starts"), e.ints([-_BIG] * n, "ends"),
           e.ints([-1] * n, "steps"), e.output("Out"))


@export_rule("roll")
def _roll(e: OpExport) -> None:
    """Per dim, the last ``shift`` entries then the others (a Concat of two Slices); the
    dims rolled must be known in the file, so that the shift can be taken modulo them."""
    x, out = e.input("X"), e.output("Out")
    shape = e.shape(x)
    dims = [normalize_axis(e, int(a), len(shape), "roll dim", shape) for a in e.attrs["dims"]]
    shifts = [int(s) for s in e.attrs["shifts"]]
    current, flat = x, not dims
    if flat:
        if any(d < 0 for d in shape):
            e.fail(f"rolls X {list(shape)} as one flat list; its size must be known")
        current, dims = e.node("Reshape", [x, e.ints([-1])])[0], [0]
        shape = (prod(shape),)
    for k, (axis, shift) in enumerate(zip(dims, shifts)):
        size = shape[axis]
        if size < 0:
            e.fail(f"rolls dim {axis} of X, whose size is unknown until run time")
        cut = size - shift % size if size else 0
        tail = _slice(e, current, [axis], e.ints([cut]), e.ints([_BIG]))
        head = _slice(e, current, [axis], e.ints([0]), e.ints([cut]))
        last = k == len(dims) - 1 and not flat
        current = e.node("Concat", [tail, head], [out] if last else None, axis=axis)[0]
    if flat:
        e.node("Reshape", [current, e.ints(list(e.shape(x)))], [out])


# --- padding ----------------------------------------------------------------------------------

@export_rule("pad2d")
def _pad2d(e: OpExport) -> None:
    """ONNX's pads: every dim's start, then every dim's end; Paddle's [top, bottom, left,
    right] go to the height and width dims of the layout."""
    x = e.input("X")
    spatial = (2, 3) if e.attrs["data_format"] == "NCHW" else (1, 2)
    known = _given(e, PADDINGS)
    if known is not None:   # constant pads
        pad_list = [0] * 8
        for axis, (first, second) in zip(spatial, ((0, 1), (2, 3))):
            pad_list[axis], pad_list[4 + axis] = known[first], known[second]
        pads = e.ints(pad_list, "pads")
    else:
        given = list_value(e, PADDINGS, "paddings")
        zero = e.ints([0], "zero")
        starts, ends = [zero] * 4, [zero] * 4
        for axis, (first, second) in zip(spatial, ((0, 1), (2, 3))):
            starts[axis] = e.node("Gather", [given, e.ints([first])], axis=0)[0]
            ends[axis] = e.node("Gather", [given, e.ints([second])], axis=0)[0]
        pads = e.node("Concat", starts + ends, axis=0)[0]
    mode = e.attrs["mode"]
    value = [e.scalar(float(e.attrs["pad_value"]), x, "pad_value")] if mode == "constant" \
        else []
    e.node("Pad", [x, pads, *value], [e.output("Out")], mode=mode)


@export_rule("pad_constant_like")
def _pad_constant_like(e: OpExport) -> None:
    """Y padded at the end of each dim by X's size less its own: constant pads where both
    shapes are known in the file, else computed from their Shapes when the graph runs
    (which imports back as pad_constant_like)."""
    y, x_shape = e.input("Y"), e.shape(e.input("X"))
    y_shape = e.shape(y)
    starts = [0] * len(y_shape)
    if min(x_shape + y_shape, default=0) >= 0:
        pads = e.ints(starts + [a - b for a, b in zip(x_shape, y_shape)], "pads")
    else:
        grow = e.node("Sub", [e.node("Shape", [e.input("X")])[0], e.node("Shape", [y])[0]])[0]
        pads = e.node("Concat", [e.ints(starts, "starts"), grow], axis=0)[0]
    e.node("Pad", [y, pads, e.scalar(float(e.attrs["pad_value"]), y, "pad_value")],
           [e.output("Out")], mode="constant")


# --- stacking and tiling ----------------------------------------------------------------------

@export_rule("stack")
def _stack(e: OpExport) -> None:
    xs = e.inputs("X")
    rank = len(e.shape(xs[0]))
    axis = int(e.attrs["axis"])
    axis = axis + rank + 1 if axis < 0 else axis
    parts = [e.node("Unsqueeze", [x, e.ints([axis])])[0] for x in xs]
    e.node("Concat", parts, [e.output("Y")], axis=axis)


@export_rule("unstack")
def _unstack(e: OpExport) -> None:
    x, outs = e.input("X"), e.outputs("Y")
    shape = e.shape(x)
    axis = normalize_axis(e, int(e.attrs["axis"]), len(shape), "unstack axis", shape)
    if len(outs) == 1:
        e.node("Squeeze", [x, e.ints([axis])], outs)
        return
    parts = e.node("Split", [x, e.ints([1] * len(outs), "split")],
                   [e.tmp(f"part{i}") for i in range(len(outs))], axis=axis)
    for part, out in zip(parts, outs):
        e.node("Squeeze", [part, e.ints([axis])], [out])


@export_rule("expand")
def _expand(e: OpExport) -> None:
    e.node("Tile", [e.input("X"), list_value(e, EXPAND_TIMES, "repeats")], [e.output("Out")])


@export_rule("expand_as")
def _expand_as(e: OpExport) -> None:
    """Tile by the target's shape over X's: constant repeats where both shapes are known
    in the file, else computed from their Shapes when the graph runs (which imports back as
    expand with its ExpandTimes computed)."""
    x, target = e.input("X"), e.input("target_tensor")
    x_shape, t_shape = e.shape(x), e.shape(target)
    if min(x_shape + t_shape, default=0) >= 0:
        times = e.ints([b // a if a else 1 for a, b in zip(x_shape, t_shape)], "repeats")
    else:
        times = e.node("Div", [e.node("Shape", [target])[0], e.node("Shape", [x])[0]])[0]
    e.node("Tile", [x, times], [e.output("Out")])


# --- image rearrangements ---------------------------------------------------------------------

@export_rule("pixel_shuffle")
def _pixel_shuffle(e: OpExport) -> None:
    """Paddle's pixel_shuffle is ONNX's DepthToSpace in CRD order."""
    e.node("DepthToSpace", [e.input("X")], [e.output("Out")],
           blocksize=int(e.attrs["upscale_factor"]), mode="CRD")


@export_rule("space_to_depth", "shuffle_channel")
def _regroup(e: OpExport) -> None:
    """Reshape, Transpose, Reshape; an unknown batch dim is copied (0) by each Reshape."""
    x = e.input("X")
    regroup = regroup_of(e.op.type, e.attrs, e.shape(x))
    split = [0] + [int(d) for d in regroup.split[1:]]
    out = [0] + [int(d) for d in regroup.out[1:]]
    if any(d < 0 for d in split + out):
        e.fail(f"rearranges X {list(e.shape(x))}, whose channels, height and width must be "
               f"known in the file")
    grouped = e.node("Reshape", [x, e.ints(split, "split")])[0]
    moved = e.node("Transpose", [grouped], perm=list(regroup.perm))[0]
    e.node("Reshape", [moved, e.ints(out, "shape")], [e.output("Out")])


@export_rule("temporal_shift")
def _temporal_shift(e: OpExport) -> None:
    """X [N*T, C, H, W] as [N, T, C, H, W], its time axis padded by a zero step at each end,
    three channel ranges sliced at three time offsets and joined."""
    x = e.input("X")
    n_t, c, h, w = e.shape(x)
    if min(c, h, w) < 0:
        e.fail(f"shifts X {list(e.shape(x))}, whose channels, height and width must be known")
    seg, ratio = int(e.attrs["seg_num"]), float(e.attrs["shift_ratio"])
    c1, c2 = int(c * ratio), int(c * 2 * ratio)
    clips = e.node("Reshape", [x, e.ints([-1, seg, c, h, w], "clips")])[0]
    padded = e.node("Pad", [clips, e.ints([0, 1, 0, 0, 0, 0, 1, 0, 0, 0], "pads")],
                    mode="constant")[0]
    ranges = ((0, 0, c1), (2, c1, c2), (1, c2, c))   # (time offset, first, last channel)
    parts = [_slice(e, padded, [1, 2], e.ints([t, lo], "starts"), e.ints([t + seg, hi], "ends"))
             for t, lo, hi in ranges]
    joined = e.node("Concat", parts, axis=2)[0]
    e.node("Reshape", [joined, e.ints([-1, c, h, w], "shape")], [e.output("Out")])
