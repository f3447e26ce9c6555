"""Export rules of the image ops over 2 or 3 spatial dims: convolutions and their
transposes (Conv, ConvTranspose), pooling (MaxPool, AveragePool, the global pools;
adaptive pooling as one pooling where its windows are all alike, else as the Slices of
its windows reduced one spatial dim at a time), and the max pooling with an index when
nothing reads the index. Channel-last images (``data_format`` NHWC, NDHWC) go
through a Transpose to channel-first and back; Paddle's SAME padding is ONNX's
``auto_pad=SAME_UPPER`` (the odd pixel at the end), VALID no padding.

The other image ops: `export_image.py`."""
from __future__ import annotations

from typing import Any

from ..ir.records import returned_names
from ..ops.conv import conv_params
from ..ops.layouts import from_layout, image_layout, is_channel_last
from ..ops.pool import pool_params
from .export_registry import OpExport, export_rule


def rank_of(e: OpExport, name: str) -> int:
    """The spatial rank of image var ``name``."""
    return len(e.shape(name)) - 2


def to_channel_first(e: OpExport, x: str, rank: int) -> str:
    return e.node("Transpose", [x], perm=[0, rank + 1] + list(range(1, rank + 1)))[0]


def channel_last_out(e: OpExport, result: str, out: str, rank: int) -> None:
    e.node("Transpose", [result], [out], perm=[0] + list(range(2, rank + 2)) + [1])


class Images:
    """An image op's input and output as channel-first ONNX values: Transposes are added
    around the op for channel-last ones."""

    def __init__(self, e: OpExport, x: str, out: str, attr: str = "data_format"):
        self.e, self.rank = e, rank_of(e, x)
        self.layout = image_layout(e, attr, self.rank)
        self.last = is_channel_last(self.layout)
        self.x = to_channel_first(e, x, self.rank) if self.last else x
        self.shape = from_layout(e.shape(x), self.layout)     # channel-first
        self.out, self._final = (e.tmp("channel_first") if self.last else out), out

    def finish(self) -> None:
        if self.last:
            channel_last_out(self.e, self.out, self._final, self.rank)


def onnx_pads(pads: tuple[int, ...]) -> list[int]:
    """(before, after) per dim -> ONNX's [begins..., ends...]."""
    return list(pads[0::2]) + list(pads[1::2])


def _padding(e: OpExport, pads: tuple[int, ...]) -> dict[str, Any]:
    if e.attrs.get("padding_algorithm") == "SAME":
        return {"auto_pad": "SAME_UPPER"}
    return {"pads": onnx_pads(pads)}


@export_rule("conv2d", "conv3d")
def _conv(e: OpExport) -> None:
    w = e.input("Filter")
    img = Images(e, e.input("Input"), e.output("Output"))
    strides, pads, dils, groups = conv_params(e, img.shape[2:], e.shape(w)[2:])
    e.node("Conv", [img.x, w], [img.out], kernel_shape=list(e.shape(w)[2:]),
           strides=list(strides), dilations=list(dils), group=groups, **_padding(e, pads))
    img.finish()


@export_rule("conv2d_transpose", "conv3d_transpose")
def _conv_transpose(e: OpExport) -> None:
    """The output size beyond the one the strides give (Paddle's output_size) is ONNX's
    output_padding, added at the end of each dim as in Paddle."""
    w, out = e.input("Filter"), e.output("Output")
    img = Images(e, e.input("Input"), out)
    kernel = e.shape(w)[2:]
    strides, pads, dils, groups = conv_params(e, img.shape[2:], kernel)
    if min(pads) < 0:
        e.fail("pads SAME over unknown spatial dims")
    sizes, outs = img.shape[2:], from_layout(e.shape(out), img.layout)[2:]
    extra = [0] * img.rank
    if e.attrs["output_size"]:
        if min(sizes + outs) < 0:
            e.fail("has an output_size but unknown spatial dims")
        extra = [o - ((s - 1) * st - pads[2 * i] - pads[2 * i + 1] + d * (k - 1) + 1)
                 for i, (s, o, st, d, k) in enumerate(zip(sizes, outs, strides, dils, kernel))]
    e.node("ConvTranspose", [img.x, w], [img.out], kernel_shape=list(kernel),
           pads=onnx_pads(pads), strides=list(strides), dilations=list(dils), group=groups,
           output_padding=extra if any(extra) else None)
    img.finish()


def _uniform_windows(e: OpExport, sizes: tuple[int, ...], outs: tuple[int, ...]
                     ) -> list[int] | None:
    """The window (= stride) of an adaptive pooling whose windows are all alike; None
    when the output does not divide the input (`adaptive_windows` spells them out)."""
    if min(sizes) < 0:
        e.fail(f"pools adaptively from {list(sizes)} to {list(outs)}: the spatial sizes "
               f"must be known in the file (declare the image's size)")
    if any(s % o for s, o in zip(sizes, outs)):
        return None
    return [s // o for s, o in zip(sizes, outs)]


def adaptive_windows(e: OpExport, kind: str, x: str, out: str, sizes: tuple[int, ...],
                     outs: tuple[int, ...]) -> None:
    """Adaptive pooling whose windows differ in size: window i of a dim spans floor(i S /
    O) to ceil((i + 1) S / O). The pooling is separable (a max of maxima; an average of
    averages, each window's size being the product of its extents), so each spatial dim
    in turn becomes O ``Slice``s reduced (``ReduceMax`` / ``ReduceMean``) and ``Concat``-ed:
    sum(O) windows rather than prod(O)."""
    node = "ReduceMax" if kind == "max" else "ReduceMean"
    for d, (size, o) in enumerate(zip(sizes, outs)):
        axis = 2 + d
        parts = []
        for i in range(o):
            start, end = i * size // o, -(-(i + 1) * size // o)
            window = e.node("Slice", [x, e.ints([start], "start"), e.ints([end], "end"),
                                      e.ints([axis])])[0]
            parts.append(e.node(node, [window], axes=[axis], keepdims=1)[0] if e.opset < 18
                         else e.node(node, [window, e.ints([axis])], keepdims=1)[0])
        last = d == len(sizes) - 1
        x = e.node("Concat", parts, [out] if last else None, axis=axis)[0]


def _pool_node(e: OpExport, kind: str, x: str, out: str, sizes: tuple[int, ...],
               exclusive: bool = True, ceil: bool = False) -> None:
    """The ONNX pooling of ``x`` (channel-first) into ``out`` for the op's attrs."""
    _, k, s, pads, outs = pool_params(e, sizes)
    name = "MaxPool" if kind == "max" else "AveragePool"
    if e.attrs.get("global_pooling") and not e.attrs.get("adaptive"):
        e.node("Global" + name, [x], [out])
        return
    if e.attrs.get("adaptive"):
        if all(o == 1 for o in outs):
            e.node("Global" + name, [x], [out])
            return
        uniform = _uniform_windows(e, sizes, outs)
        if uniform is None:
            adaptive_windows(e, kind, x, out, sizes, outs)
            return
        k = s = tuple(uniform)
    window: dict[str, Any] = _padding(e, pads)
    if "pads" in window:
        window["pads"], ceil = pool_pads(e, sizes, outs, k, s, pads, ceil, exclusive)
    extra = {} if kind == "max" else {"count_include_pad": 0 if exclusive else 1}
    e.node(name, [x], [out], kernel_shape=list(k), strides=list(s),
           ceil_mode=int(ceil) or None, **window, **extra)


def pool_pads(e: OpExport, sizes: tuple[int, ...], outs: tuple[int, ...], k: tuple,
              s: tuple, pads: tuple, ceil: bool, exclusive: bool) -> tuple[list[int], bool]:
    """ONNX pads and ceil_mode giving the pooling's windows. ceil_mode differs in two
    places: ONNX runtimes drop a last window that starts in the padding (Paddle keeps it),
    and clip a window that reaches past the padded input where a non-exclusive average
    divides every window by its full size. Then the windows are spelled out: ceil_mode
    off, end padding that makes exactly the last window fit (padding that max ignores,
    that an exclusive average does not count, and that counts as zeros otherwise, as
    Paddle's)."""
    if not ceil:
        return onnx_pads(pads), False
    if min(sizes + outs) < 0:
        e.fail("pools with ceil_mode over unknown spatial dims")
    onnx_outs = []
    for i, size in enumerate(sizes):
        o = -(-(size + pads[2 * i] + pads[2 * i + 1] - k[i]) // s[i]) + 1
        onnx_outs.append(o - 1 if (o - 1) * s[i] >= size + pads[2 * i] else o)
    if exclusive and tuple(onnx_outs) == tuple(outs):
        return onnx_pads(pads), True
    ends = [max(pads[2 * i + 1], (o - 1) * s[i] + k[i] - size - pads[2 * i])
            for i, (size, o) in enumerate(zip(sizes, outs))]
    return list(pads[0::2]) + ends, False


@export_rule("pool2d", "pool3d")
def _pool(e: OpExport) -> None:
    kind = e.attrs["pooling_type"]
    img = Images(e, e.input("X"), e.output("Out"))
    exclusive = kind == "max" or bool(e.attrs["exclusive"]) or bool(e.attrs["adaptive"])
    _pool_node(e, kind, img.x, img.out, img.shape[2:], exclusive, bool(e.attrs["ceil_mode"]))
    img.finish()


def _is_read(e: OpExport, name: str) -> bool:
    return name in returned_names(e.block.returns) or any(
        name in op.input_names() for op in e.block.ops)


@export_rule("max_pool2d_with_index", "max_pool3d_with_index")
def _max_pool_with_index(e: OpExport) -> None:
    """The maxima as a MaxPool. The index of each maximum has no ONNX form here (ONNX's
    indices count over the whole tensor, in an order of its own): a method that uses it
    does not export."""
    if _is_read(e, e.output("Mask")):
        e.fail("has its Mask (the index of each maximum) read, which ONNX's MaxPool gives "
               "in another form; export a method that uses only the pooled values")
    x = e.input("X")
    sizes = e.shape(x)[2:]
    if not e.attrs["adaptive"]:
        if e.attrs["global_pooling"]:
            e.node("GlobalMaxPool", [x], [e.output("Out")])
            return
        pads = [int(p) for p in e.attrs["paddings"]]
        e.node("MaxPool", [x], [e.output("Out")], kernel_shape=list(e.attrs["ksize"]),
               strides=list(e.attrs["strides"]), pads=pads + pads)
        return
    outs = tuple(int(k) for k in e.attrs["ksize"])
    if all(o == 1 for o in outs):
        e.node("GlobalMaxPool", [x], [e.output("Out")])
        return
    k = _uniform_windows(e, sizes, outs)
    if k is None:
        adaptive_windows(e, "max", x, e.output("Out"), sizes, outs)
        return
    e.node("MaxPool", [x], [e.output("Out")], kernel_shape=k, strides=k)
