"""Import rules of indexing and rearranging nodes: TopK, GatherND, GatherElements,
ScatterND, NonZero, Unique, Tile, DepthToSpace, Pad and Where (the other nodes
`export_index` writes, Gather, Slice, Concat, Split, Reshape..., have rules of their own).

A list a node takes as an input (TopK's k, Tile's repeats) may be fixed in the file or
computed: a computed one becomes the tensor form of the op's list (`ops/int_args.py`).
"""
from __future__ import annotations

from .import_registry import NodeImport, import_rule


def _index(n: NodeImport, i: int) -> str:
    """Input ``i`` as int indices our ops take (int32 or int64)."""
    var = n.var(i)
    if n.dtype(var) in ("int32", "int64"):
        return var
    return n.op("cast", {"X": var}, {"out_dtype": "int64"}, name=f"{n.node.outputs[0]}.index")


def _list_or_tensor(n: NodeImport, i: int) -> tuple[list[int] | None, str | None]:
    """(the values of input ``i`` when the file fixes them, else the var computing them)."""
    value = n.static(i)
    if value is not None:
        return [int(v) for v in value.reshape(-1)], None
    return None, _index(n, i)


def gather_any(n: NodeImport, axis: int) -> None:
    """Gather of slices along ``axis`` by an index of rank 0 or 1: gather (axis 0) or
    index_select; a 0-d index then drops the axis."""
    x = n.var(0)
    rank = len(n.shape(x))
    axis = axis + rank if axis < 0 else axis
    index = _index(n, 1)
    index_rank = len(n.shape(index))
    if index_rank > 1 or not 0 <= axis < rank:
        n.fail(f"gathers by a rank-{index_rank} index along axis {axis} of a rank-{rank} "
               f"tensor; only an index of rank 0 or 1 is supported")
    if index_rank == 0:
        index = n.op("reshape", {"X": index}, {"shape": [1]}, name=f"{n.node.outputs[0]}.at")
    inputs = {"X": x, "Index": index}
    name = f"{n.node.outputs[0]}.rows" if index_rank == 0 else None
    picked = n.op("gather", inputs, {"overwrite": True}, name=name) if axis == 0 else \
        n.op("index_select", inputs, {"dim": axis}, name=name)
    if index_rank == 0:
        n.op("squeeze", {"X": picked}, {"axes": [axis]})


def reshape_by_tensor(n: NodeImport) -> None:
    """Reshape to a shape the file computes: reshape with it as its Shape input."""
    if n.attr("allowzero", 0):
        n.fail("has allowzero=1 and a computed shape")
    n.op("reshape", {"X": n.var(0), "Shape": _index(n, 1)}, {"shape": []})


def slice_node(n: NodeImport) -> None:
    """Slice: slice, or strided_slice where a step is not 1; starts, ends and steps the
    file computes become the ops' tensor inputs."""
    x = n.var(0)
    if n.opset < 10:
        starts, ends = n.attr("starts"), n.attr("ends")
        n.op("slice", {"X": x}, {"axes": list(n.attr("axes") or range(len(starts))),
                                 "starts": list(starts), "ends": list(ends)})
        return
    lists = [_list_or_tensor(n, i) if n.has_input(i) else (None, None) for i in (1, 2, 4)]
    axes = n.ints(3, "", "axes")
    count = next((len(v) for v, _ in lists[:2] if v is not None), None)
    if axes is None and count is None:
        n.fail("has neither axes nor starts or ends fixed in the file")
    axes = list(axes) if axes is not None else list(range(count or 0))
    steps = lists[2][0]
    strided = lists[2][1] is not None or (steps is not None and any(s != 1 for s in steps))
    op, x_slot = ("strided_slice", "Input") if strided else ("slice", "X")
    inputs: dict[str, str] = {x_slot: x}
    attrs: dict[str, list[int]] = {"axes": axes}
    names = ("starts", "ends", "strides") if strided else ("starts", "ends")
    for (values, tensor), name in zip(lists, names):
        if tensor is not None:
            inputs[name.capitalize() + "Tensor"] = tensor
        attrs[name] = values if values is not None else ([] if tensor is not None else
                                                         [1] * len(axes))
    if any(name.capitalize() + "Tensor" in inputs for name in names):
        attrs["infer_flags"] = [-1] * len(axes)
    n.op(op, inputs, attrs)


@import_rule("TopK")
def _top_k(n: NodeImport) -> None:
    """A sorted TopK of every value along its axis is an argsort; else a top_k (the
    largest values of the last axis, sorted)."""
    if _argsort(n):
        return
    x = n.var(0)
    rank = len(n.shape(x))
    axis = int(n.attr("axis", -1))
    if axis not in (-1, rank - 1) or not n.attr("largest", 1) or not n.attr("sorted", 1):
        n.fail("selects along an axis other than the last, the smallest values, or unsorted, "
               "and not every value of its axis; top_k takes the largest values of the last "
               "axis, sorted, and argsort all of an axis")
    k, tensor = _list_or_tensor(n, 1) if n.opset >= 10 else ([int(n.attr("k"))], None)
    inputs = {"X": x} if tensor is None else {"X": x, "K": tensor}
    attrs = {"k": k[0]} if k is not None else {}
    values = n.replay.new_name(n.node.outputs[0])
    indices = n.replay.new_name(n.node.outputs[1] or f"{values}.indices")
    n.append("top_k", inputs, {"Out": [values], "Indices": [indices]}, attrs)
    n.bind(values, 0)
    if len(n.node.outputs) > 1 and n.node.outputs[1]:
        n.bind(indices, 1)


def _argsort(n: NodeImport) -> bool:
    """A sorted TopK whose k is its whole axis, appended as an argsort: True."""
    shape = n.shape(n.var(0))
    axis = int(n.attr("axis", -1)) % len(shape)
    k = n.ints(1, "k", "k") if n.opset >= 10 else [int(n.attr("k"))]
    if k is None or shape[axis] < 0 or list(k) != [shape[axis]] or not n.attr("sorted", 1):
        return False
    values = n.replay.new_name(n.node.outputs[0])
    indices = n.replay.new_name(n.node.outputs[1])
    n.append("argsort", {"X": n.var(0)}, {"Out": [values], "Indices": [indices]},
             {"axis": axis, "descending": bool(n.attr("largest", 1))})
    n.bind(values, 0)
    n.bind(indices, 1)
    return True


@import_rule("GatherND")
def _gather_nd(n: NodeImport) -> None:
    if int(n.attr("batch_dims", 0)):
        n.fail("has batch_dims; gather_nd gathers with none")
    n.op("gather_nd", {"X": n.var(0), "Index": _index(n, 1)}, {})


@import_rule("GatherElements")
def _gather_elements(n: NodeImport) -> None:
    """index_sample, which gathers along the last axis of [M, D] rows: another axis is
    moved last (transpose) and the other dims flattened into the rows, then put back."""
    x, index = n.var(0), _index(n, 1)
    rank = len(n.shape(x))
    axis = int(n.attr("axis", 0))
    if not -rank <= axis < rank or len(n.shape(index)) != rank:
        n.fail(f"gathers along axis {axis} with an index of rank {len(n.shape(index))} "
               f"from a rank-{rank} tensor")
    axis %= rank
    if rank == 2 and axis == 1:
        n.op("index_sample", {"X": x, "Index": index}, {})
        return
    stem = n.node.outputs[0]
    perm = [i for i in range(rank) if i != axis] + [axis]
    if axis != rank - 1:
        x, index = (n.op("transpose", {"X": v}, {"axis": perm}, name=f"{stem}.{what}")
                    for v, what in ((x, "x_last"), (index, "index_last")))
    rows = [n.op("flatten", {"X": v}, {"axis": rank - 1}, name=f"{stem}.{what}")
            for v, what in ((x, "x_rows"), (index, "index_rows"))]
    picked = n.op("index_sample", {"X": rows[0], "Index": rows[1]}, {}, name=f"{stem}.rows")
    shape = n.op("shape", {"Input": index}, {}, name=f"{stem}.shape")
    if axis == rank - 1:
        n.op("reshape", {"X": picked, "Shape": shape}, {"shape": []})
        return
    back = n.op("reshape", {"X": picked, "Shape": shape}, {"shape": []}, name=f"{stem}.back")
    n.op("transpose", {"X": back}, {"axis": [perm.index(i) for i in range(rank)]})


@import_rule("ScatterND")
def _scatter_nd(n: NodeImport) -> None:
    """reduction 'add': scatter_nd_add; none (replacing) with one index per row of X:
    scatter, which replaces rows."""
    x, index, updates = n.var(0), _index(n, 1), n.var(2)
    reduction = n.attr("reduction", "none")
    if isinstance(reduction, bytes):
        reduction = reduction.decode()
    if reduction == "add":
        n.op("scatter_nd_add", {"X": x, "Index": index, "Updates": updates}, {})
        return
    shape = n.shape(index)
    if reduction != "none" or len(shape) != 2 or shape[1] != 1:
        n.fail(f"replaces by index {list(shape)} (reduction {reduction!r}); only row updates "
               f"(index [N, 1]) and reduction 'add' are supported")
    rows = n.op("reshape", {"X": index}, {"shape": [-1]}, name=f"{n.node.outputs[0]}.rows")
    n.op("scatter", {"X": x, "Ids": rows, "Updates": updates}, {"overwrite": True})


@import_rule("NonZero")
def _nonzero(n: NodeImport) -> None:
    """NonZero's [rank, N] is where_index's [N, rank] transposed."""
    rows = n.op("where_index", {"Condition": n.var(0)}, {},
                name=f"{n.node.outputs[0]}.rows")
    n.op("transpose", {"X": rows}, {"axis": [1, 0]})


@import_rule("Unique")
def _unique(n: NodeImport) -> None:
    if n.attr("sorted", 1) or n.attr("axis") is not None:
        n.fail("sorts its values or works along an axis; unique keeps a flat tensor's values "
               "in the order they first appear (sorted=0, no axis)")
    n.unused(1)
    outs = [n.replay.new_name(o or f"{n.node.outputs[0]}.{slot}")
            for o, slot in zip(n.node.outputs + [""] * 4, ("out", "first", "index", "count"))]
    n.append("unique_with_counts", {"X": n.var(0)},
             {"Out": [outs[0]], "Index": [outs[2]], "Count": [outs[3]]}, {"dtype": "int64"})
    for i in (0, 2, 3):
        if i < len(n.node.outputs) and n.node.outputs[i]:
            n.bind(outs[i], i)


@import_rule("Tile")
def _tile(n: NodeImport) -> None:
    times, tensor = _list_or_tensor(n, 1)
    x = n.var(0)
    if tensor is None:
        n.op("expand", {"X": x}, {"expand_times": times})
    else:
        n.op("expand", {"X": x, "ExpandTimes": tensor}, {"expand_times": []})


@import_rule("DepthToSpace")
def _depth_to_space(n: NodeImport) -> None:
    mode = n.attr("mode", "DCR")
    if isinstance(mode, bytes):
        mode = mode.decode()
    if mode != "CRD":
        n.fail(f"has mode {mode!r}; pixel_shuffle is DepthToSpace in CRD mode")
    n.op("pixel_shuffle", {"X": n.var(0)}, {"upscale_factor": int(n.attr("blocksize"))})


@import_rule("Pad")
def _pad(n: NodeImport) -> None:
    """Padding of the height and width of a 4-D tensor (NCHW): pad2d; other constant
    paddings: pad."""
    if n.has_input(1) and n.static(1) is None and _padded_like(n):
        return
    x = n.var(0)
    rank = len(n.shape(x))
    pads = n.ints(1, "pads", "pads")
    if pads is None or len(pads) != 2 * rank or n.has_input(3):
        n.fail("needs its pads fixed in the file, one start and one end per dim, and no axes")
    mode = n.attr("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    given = n.static(2) if n.has_input(2) else None
    value = 0.0 if given is None else float(given.reshape(-1)[0])
    starts, ends = pads[:rank], pads[rank:]
    if rank == 4 and starts[:2] == [0, 0] == ends[:2] and mode in ("constant", "reflect",
                                                                    "edge"):
        n.op("pad2d", {"X": x}, {"paddings": [starts[2], ends[2], starts[3], ends[3]],
                                 "mode": mode, "pad_value": value})
        return
    if mode != "constant":
        n.fail(f"pads in mode {mode!r} other dims than a 4-D tensor's height and width")
    paddings = [p for pair in zip(starts, ends) for p in pair]
    n.op("pad", {"X": x}, {"paddings": paddings, "pad_value": value})


def _padded_like(n: NodeImport) -> bool:
    """Pads computed as no start and Shape(X) - Shape(Y) at the end, Y the padded value
    (pad_constant_like with a dim unknown in the file): pad_constant_like, appended."""
    producers = n.replay.graph.producers()
    concat = producers.get(n.input_name(1))
    if concat is None or concat.op_type != "Concat" or len(concat.inputs) != 2:
        return False
    starts = n.replay.graph.constants.get(concat.inputs[0])
    grow = producers.get(concat.inputs[1])
    if starts is None or starts.any() or grow is None or grow.op_type != "Sub" or \
            len(grow.inputs) != 2:
        return False
    like, own = (producers.get(name) for name in grow.inputs)
    if like is None or own is None or like.op_type != "Shape" or own.op_type != "Shape" or \
            own.inputs[:1] != n.node.inputs[:1]:
        return False
    value = n.static(2) if n.has_input(2) else None
    n.op("pad_constant_like",
         {"X": n.replay.var(like.inputs[0], "the value a Pad pads like"), "Y": n.var(0)},
         {"pad_value": 0.0 if value is None else float(value.reshape(-1)[0])})
    return True


@import_rule("Where")
def _where(n: NodeImport) -> None:
    """Our where selects into X's shape, its Condition and Y of X's rank with each dim X's
    or 1; ONNX broadcasts all three. The three are brought to one rank (leading 1s); where
    Y has the full shape instead of X, the two swap places under a negated condition, and
    where neither has it, X is spread to it first."""
    rank = max(len(n.shape(n.var(i))) for i in range(3))
    cond, x, y = (_ranked(n, n.var(i), rank, what)
                  for i, what in enumerate(("condition", "x", "y")))
    if not _covers(n.shape(x), n.shape(y)) or not _covers(n.shape(x), n.shape(cond)):
        if _covers(n.shape(y), n.shape(x)) and _covers(n.shape(y), n.shape(cond)):
            cond = n.op("logical_not", {"X": cond}, {}, name=f"{n.node.outputs[0]}.not")
            x, y = y, x
        else:   # X spread to the whole shape: plus zeros shaped like the others
            x = _spread(n, x, cond, y)
    n.op("where", {"Condition": cond, "X": x, "Y": y}, {})


def _spread(n: NodeImport, x: str, cond: str, y: str) -> str:
    """``x`` broadcast against ``cond`` and ``y`` (adding zeros is exact, NaN included)."""
    stem = n.node.outputs[0]
    flags = n.op("cast", {"X": cond}, {"out_dtype": n.dtype(x)}, name=f"{stem}.flags")
    for k, other in enumerate((flags, y)):
        zeros = n.op("fill_zeros_like", {"X": other}, {}, name=f"{stem}.zeros{k}")
        x = n.op("elementwise_add", {"X": x, "Y": zeros}, {"axis": -1}, name=f"{stem}.spread{k}")
    return x


def _ranked(n: NodeImport, var: str, rank: int, what: str) -> str:
    """``var`` with leading 1s up to ``rank`` dims (ONNX's broadcasting)."""
    have = len(n.shape(var))
    if have == rank:
        return var
    return n.op("unsqueeze", {"X": var}, {"axes": list(range(rank - have))},
                name=f"{n.node.outputs[0]}.{what}")


def _covers(full: tuple[int, ...], other: tuple[int, ...]) -> bool:
    """Whether a value of shape ``other`` broadcasts to ``full`` without growing it (an
    unknown dim is taken to match)."""
    return all(o == 1 or f == o or (f < 0 and o != 1) or (o < 0 and f != 1)
               for f, o in zip(full, other))
