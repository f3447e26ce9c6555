"""Import rules of shape nodes: Flatten, Reshape, Transpose, Concat, Split, Slice, Squeeze,
Unsqueeze, the reductions, ArgMax and Expand."""
from __future__ import annotations

from .import_index import reshape_by_tensor, slice_node
from .import_registry import NodeImport, Pending, import_rule


def _axis(n: NodeImport, axis: int, rank: int, what: str) -> int:
    if not -rank <= axis < rank:
        n.fail(f"has {what} {axis}, out of range for a rank-{rank} input")
    return axis + rank if axis < 0 else axis


@import_rule("Flatten")
def _flatten(n: NodeImport) -> None:
    x = n.var(0)
    rank = len(n.shape(x))
    axis = int(n.attr("axis", 1))
    axis = axis + rank if axis < 0 else axis
    n.bind(Pending("flatten", x, {"axis": axis}))


@import_rule("Reshape")
def _reshape(n: NodeImport) -> None:
    """A reshape to a fixed shape. torch.onnx.export writes the batch size of its example
    input into such shapes (``[2, 64]`` to flatten a batch of 2); where the first entry is
    that size and the input's first dim is the batch, it becomes 0 (keep the batch dim),
    so the model takes any batch size, as it did in PyTorch."""
    if n.has_input(1) and n.static(1) is None:   # computed: the op reads it when it runs
        reshape_by_tensor(n)
        return
    shape = n.ints(1, "shape", "shape")
    if shape is None:
        n.fail("has no shape")
    if n.attr("allowzero", 0) and 0 in shape:
        n.fail("has allowzero=1 with a 0 in its shape (a real empty dim)")
    x = n.var(0)
    batches = {i.exported_batch for i in n.replay.graph.inputs}
    if shape and len(batches) == 1 and shape[0] in batches and n.shape(x)[:1] == (-1,):
        shape = [0] + shape[1:]
    n.bind(Pending("reshape", x, {"shape": shape}))


@import_rule("Transpose")
def _transpose(n: NodeImport) -> None:
    x = n.var(0)
    perm = n.attr("perm") or list(reversed(range(len(n.shape(x)))))
    n.op("transpose", {"X": x}, {"axis": [int(p) for p in perm]})


@import_rule("Concat")
def _concat(n: NodeImport) -> None:
    n.op("concat", {"X": [n.var(i) for i in range(len(n.node.inputs))]},
         {"axis": int(n.attr("axis"))})


@import_rule("Split")
def _split(n: NodeImport) -> None:
    x = n.var(0)
    shape = n.shape(x)
    axis = _axis(n, int(n.attr("axis", 0)), len(shape), "axis")
    parts = len(n.node.outputs)
    sections = n.ints(1, "split", "split sizes")
    if sections is None:
        size = shape[axis]
        if size < 0:
            n.fail("splits an unknown dim into equal parts; give the sizes")
        step = -(-size // parts)   # ONNX: equal parts, the last one smaller
        sections = [min(step, size - i * step) for i in range(parts)]
    outs = [n.replay.new_name(o or f"{n.node.outputs[0]}.part{i}")
            for i, o in enumerate(n.node.outputs)]
    n.append("split", {"X": [x]}, {"Out": outs}, {"axis": axis, "sections": sections})
    for i, out in enumerate(outs):
        if n.node.outputs[i]:
            n.bind(out, i)


@import_rule("Slice")
def _slice(n: NodeImport) -> None:
    """reverse where it takes whole dims backwards; else slice, or strided_slice where a
    step is not 1 (`import_index.slice_node`)."""
    steps = n.ints(4, "", "steps") if n.opset >= 10 else None
    if steps is not None and any(s != 1 for s in steps):
        starts, ends, axes = n.ints(1, "", "starts"), n.ints(2, "", "ends"), n.ints(3, "", "axes")
        if starts is not None and ends is not None and _reverses(n, n.var(0), starts, ends,
                                                                axes, steps):
            return
    slice_node(n)


def _reverses(n: NodeImport, x: str, starts, ends, axes, steps) -> bool:
    """A Slice taking whole dims backwards (step -1 from the last element past the first)
    is a reverse of those dims: appended, True."""
    shape = n.shape(x)
    axes = [_axis(n, int(a), len(shape), "axis")
            for a in (axes if axes is not None else range(len(starts)))]

    def backwards(start: int, end: int, size: int) -> bool:
        from_last = start == -1 or (size >= 0 and start >= size - 1)
        past_first = end <= -2 ** 31 or (size >= 0 and end < -size)
        return from_last and past_first
    if not all(s == -1 for s in steps) or not all(
            backwards(int(b), int(e), shape[a]) for b, e, a in zip(starts, ends, axes)):
        return False
    n.op("reverse", {"X": x}, {"axis": axes})
    return True


@import_rule("Squeeze")
def _squeeze(n: NodeImport) -> None:
    x = n.var(0)
    shape = n.shape(x)
    axes = n.ints(1, "axes", "axes")
    if axes is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    axes = sorted(_axis(n, a, len(shape), "axis") for a in axes)
    n.bind(Pending("squeeze", x, {"axes": axes}))


@import_rule("Unsqueeze")
def _unsqueeze(n: NodeImport) -> None:
    """ONNX's axes index the output; inserting them in ascending order one at a time (as
    unsqueeze does) gives the same shape. Axes that only append trailing 1s are noted, so
    an elementwise op can take the input with an ``axis`` instead."""
    x = n.var(0)
    rank = len(n.shape(x))
    axes = n.ints(1, "axes", "axes")
    if not axes:
        n.fail("has no axes")
    out_rank = rank + len(axes)
    axes = sorted(_axis(n, a, out_rank, "axis") for a in axes)
    trailing = axes == list(range(rank, out_rank))
    n.bind(Pending("unsqueeze", x, {"axes": axes}, {"trailing": trailing}))


_REDUCE = {"ReduceSum": "reduce_sum", "ReduceMean": "reduce_mean", "ReduceMax": "reduce_max",
           "ReduceMin": "reduce_min"}


@import_rule(*_REDUCE)
def _reduce(n: NodeImport) -> None:
    reduce_op(n, _REDUCE[n.node.op_type])


def reduce_op(n: NodeImport, op_type: str) -> None:
    """An ONNX reduction as the reduce op ``op_type`` (attrs dim, keep_dim, reduce_all)."""
    x = n.var(0)
    rank = len(n.shape(x))
    axes = n.ints(1, "axes", "axes") or []
    keep = bool(n.attr("keepdims", 1))
    if not axes and n.attr("noop_with_empty_axes", 0):
        n.bind(x)
        return
    every = sorted(_axis(n, a, rank, "axis") for a in axes) in ([], list(range(rank)))
    n.op(op_type, {"X": x}, {"dim": [] if every else list(axes), "keep_dim": keep,
                             "reduce_all": every})


@import_rule("ArgMax", "ArgMin")
def _argmax(n: NodeImport) -> None:
    op = n.node.op_type.lower()
    if n.attr("select_last_index", 0):
        n.fail(f"has select_last_index=1; {op} picks the first one")
    x = n.var(0)
    axis = _axis(n, int(n.attr("axis", 0)), len(n.shape(x)), "axis")
    if not n.attr("keepdims", 1):
        n.op(op, {"X": x}, {"axis": axis})
        return
    flat = n.op(op, {"X": x}, {"axis": axis}, name=f"{n.node.outputs[0]}.flat")
    n.op("unsqueeze", {"X": flat}, {"axes": [axis]})


@import_rule("Expand")
def _expand(n: NodeImport) -> None:
    """ONNX broadcasts X to a shape: a dim of size 1 takes the shape's size there, any
    other stays (and X gains leading dims up to the shape's length). That is expand,
    tiling the dims of size 1: by the shape's sizes when the file fixes them
    (``expand_times``), else by the computed shape itself (``ExpandTimes``), which needs
    every dim of X to be 1."""
    x = n.var(0)
    static = n.static(1)
    size = len(static.reshape(-1)) if static is not None else (n.shape(n.var(1)) or (-1,))[0]
    shape = n.shape(x)
    if size < 0 or size < len(shape):
        n.fail(f"broadcasts a rank-{len(shape)} input to a shape of {size} entries; the "
               f"import takes a shape of known length, at least the input's rank")
    if size > len(shape):
        x = n.op("unsqueeze", {"X": x}, {"axes": list(range(size - len(shape)))},
                 name=f"{n.node.outputs[0]}.ranked")
        shape = (1,) * (size - len(shape)) + tuple(shape)
    if static is None:
        if any(d != 1 for d in shape):
            n.fail(f"broadcasts an input of shape {list(shape)} to a computed shape; the "
                   f"import takes a computed shape only for an input of 1s")
        n.op("expand", {"X": x, "ExpandTimes": n.var(1)}, {"expand_times": []})
        return
    target = [int(t) for t in static.reshape(-1)]
    if any(d != 1 and t not in (1, d) for d, t in zip(shape, target)):
        n.fail(f"cannot broadcast an input of shape {list(shape)} to {target}")
    n.op("expand", {"X": x}, {"expand_times": [t if d == 1 else 1
                                               for d, t in zip(shape, target)]})
