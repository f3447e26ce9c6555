"""Import rules of image nodes over 2 or 3 spatial dims: Conv, ConvTranspose, MaxPool,
AveragePool and the global pools (conv2d / conv3d, pool2d / pool3d), Resize (the interp
ops), InstanceNormalization, LRN and GridSample."""
from __future__ import annotations

import math

import numpy as np

from .import_registry import NodeImport, import_rule


def _rank(n: NodeImport, x: str, what: str) -> int:
    rank = len(n.shape(x)) - 2
    if rank not in (2, 3):
        n.fail(f"works on {rank}-D {what}; only 2-D (NCHW) and 3-D (NCDHW) are supported")
    return rank


def _paddings(n: NodeImport, x: str, kernel: list[int], strides: list[int],
              dilations: list[int]) -> list[int]:
    """Paddle's paddings from ONNX's pads or auto_pad: one per dim when symmetric, else a
    before and an after for each."""
    rank = len(kernel)
    auto = n.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", "VALID"):
        pads = list(n.attr("pads", [0] * 2 * rank)) if auto == "NOTSET" else [0] * 2 * rank
        begins, ends = pads[:rank], pads[rank:]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        sizes = n.shape(x)[2:]
        if min(sizes) < 0:
            n.fail(f"uses auto_pad={auto} over unknown spatial dims")
        totals = [max((math.ceil(s / st) - 1) * st + (k - 1) * d + 1 - s, 0)
                  for s, st, k, d in zip(sizes, strides, kernel, dilations)]
        small, big = [p // 2 for p in totals], [p - p // 2 for p in totals]
        begins, ends = (small, big) if auto == "SAME_UPPER" else (big, small)
    else:
        n.fail(f"has auto_pad={auto!r}")
    if begins == ends:
        return list(begins)
    return [v for pair in zip(begins, ends) for v in pair]


def _window(n: NodeImport, x: str, kernel: list[int]) -> dict:
    rank = len(kernel)
    strides = list(n.attr("strides", [1] * rank))
    dilations = list(n.attr("dilations", [1] * rank))
    if n.attr("auto_pad") == "SAME_UPPER" and all(d == 1 for d in dilations):
        # Paddle's SAME: the same padding, worked out when the sizes are known
        return {"strides": strides, "paddings": [0] * rank, "dilations": dilations,
                "padding_algorithm": "SAME"}
    return {"strides": strides, "paddings": _paddings(n, x, kernel, strides, dilations),
            "dilations": dilations}


def _conv_op(n: NodeImport, op_type: str, x: str, w: str, attrs: dict) -> None:
    """The convolution, then the node's optional bias (input 2) added per channel."""
    if not n.has_input(2):
        n.op(op_type, {"Input": x, "Filter": w}, attrs)
        return
    conv = n.op(op_type, {"Input": x, "Filter": w}, attrs, name=f"{n.node.outputs[0]}.conv")
    n.op("elementwise_add", {"X": conv, "Y": n.var(2)}, {"axis": 1})


@import_rule("Conv")
def _conv(n: NodeImport) -> None:
    x, w = n.var(0), n.var(1)
    rank = _rank(n, x, "images")
    kernel = list(n.shape(w)[2:])
    attrs = _window(n, x, kernel)
    attrs["groups"] = int(n.attr("group", 1))
    _conv_op(n, f"conv{rank}d", x, w, attrs)


@import_rule("ConvTranspose")
def _conv_transpose(n: NodeImport) -> None:
    x, w = n.var(0), n.var(1)
    rank = _rank(n, x, "images")
    if n.attr("output_shape") is not None:
        n.fail("gives output_shape; give pads and output_padding instead")
    if n.attr("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        n.fail(f"has auto_pad={n.attr('auto_pad')!r}; give pads instead")
    kernel = list(n.shape(w)[2:])
    attrs = _window(n, x, kernel)
    attrs["groups"] = int(n.attr("group", 1))
    extra = list(n.attr("output_padding", [0] * rank))
    if any(extra):
        sizes = n.shape(x)[2:]
        if min(sizes) < 0:
            n.fail("has output_padding over unknown spatial dims")
        pads = attrs["paddings"]
        pads = pads if len(pads) == 2 * rank else [p for p in pads for _ in (0, 1)]
        attrs["output_size"] = [
            (size - 1) * s - pads[2 * i] - pads[2 * i + 1] + d * (k - 1) + 1 + extra[i]
            for i, (size, s, d, k) in enumerate(zip(sizes, attrs["strides"],
                                                    attrs["dilations"], kernel))]
    _conv_op(n, f"conv{rank}d_transpose", x, w, attrs)


def _pool_attrs(kind: str, ksize: list[int], strides: list[int], paddings: list[int],
                ceil: bool = False, exclusive: bool = True, global_: bool = False) -> dict:
    return {"pooling_type": kind, "global_pooling": global_, "ceil_mode": ceil,
            "exclusive": exclusive, "use_cudnn": True, "ksize": ksize, "strides": strides,
            "paddings": paddings}


@import_rule("MaxPool", "AveragePool")
def _pool(n: NodeImport) -> None:
    x = n.var(0)
    rank = _rank(n, x, "images")
    n.unused(1)
    if any(d != 1 for d in n.attr("dilations", [1] * rank)):
        n.fail("has dilations, which pooling does not support")
    kernel = list(n.attr("kernel_shape"))
    window = _window(n, x, kernel)
    ceil = bool(n.attr("ceil_mode", 0))
    is_max = n.node.op_type == "MaxPool"
    exclusive = is_max or not n.attr("count_include_pad", 0)
    if not exclusive and ceil:
        _check_no_overhang(n, x, kernel, window)
    attrs = _pool_attrs("max" if is_max else "avg", kernel, window["strides"],
                        window["paddings"], ceil, exclusive)
    if "padding_algorithm" in window:
        attrs["padding_algorithm"] = window["padding_algorithm"]
    n.op(f"pool{rank}d", {"X": x}, attrs)


def _check_no_overhang(n: NodeImport, x: str, kernel: list[int], window: dict) -> None:
    """ONNX clips a last window that reaches past the padded input and divides by what is
    left; pooling here divides by the whole window. Only a file where no window overhangs
    means the same in both."""
    pads = window["paddings"]
    pads = pads if len(pads) == 2 * len(kernel) else [p for p in pads for _ in (0, 1)]
    for i, size in enumerate(n.shape(x)[2:]):
        p0, p1, s, k = pads[2 * i], pads[2 * i + 1], window["strides"][i], kernel[i]
        if size < 0 or (size + p0 + p1 - k) % s:
            n.fail("averages with ceil_mode and count_include_pad where the last window "
                   "may reach past the padded input, which pooling averages differently")


@import_rule("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(n: NodeImport) -> None:
    x = n.var(0)
    rank = _rank(n, x, "images")
    kind = "max" if n.node.op_type == "GlobalMaxPool" else "avg"
    n.op(f"pool{rank}d", {"X": x}, _pool_attrs(kind, [1] * rank, [1] * rank, [0] * rank,
                                               global_=True))


# --- Resize --------------------------------------------------------------------------------

def _resize_attrs(n: NodeImport) -> dict:
    """The interp attrs for the node's mode and coordinate transform."""
    mode = n.attr("mode", "nearest")
    transform = n.attr("coordinate_transformation_mode", "half_pixel")
    if n.attr("antialias", 0):
        n.fail("has antialias=1, which the interp ops do not do")
    if mode == "nearest":
        rounding = n.attr("nearest_mode", "round_prefer_floor")
        known = {("align_corners", "round_prefer_ceil"): True, ("asymmetric", "floor"): False}
        if (transform, rounding) not in known:
            n.fail(f"rounds nearest positions with {transform!r} and {rounding!r}; "
                   f"nearest_interp does align_corners with round_prefer_ceil, or "
                   f"asymmetric with floor")
        return {"align_corners": known[(transform, rounding)], "align_mode": 1}
    if mode != "linear":
        n.fail(f"has mode={mode!r}; only nearest and linear are supported")
    modes = {"align_corners": (True, 1), "half_pixel": (False, 0), "asymmetric": (False, 1)}
    if transform not in modes:
        n.fail(f"has coordinate_transformation_mode={transform!r}; align_corners, half_pixel "
               f"and asymmetric are supported")
    return {"align_corners": modes[transform][0], "align_mode": modes[transform][1]}


def _resize_axes(n: NodeImport, rank: int, ndim: int) -> tuple[list[int], str]:
    """The spatial axes Resize works on, and the layout they mean."""
    axes = n.attr("axes")
    axes = list(range(ndim)) if axes is None else [a + ndim if a < 0 else a for a in axes]
    spatial = [a for a in axes if a >= 1]
    for first, layout in ((2, "NCHW"), (1, "NHWC")):
        if spatial == list(range(first, first + rank)):
            return axes, layout
    n.fail(f"resizes axes {axes}; the spatial axes of a channel-first or channel-last "
           f"image are supported")


@import_rule("Resize")
def _resize(n: NodeImport) -> None:
    x = n.var(0)
    ndim = len(n.shape(x))
    rank = ndim - 2
    if rank not in (2, 3):
        n.fail(f"resizes a {ndim}-D tensor; 4-D and 5-D images are supported")
    attrs = _resize_attrs(n)
    method = "nearest" if n.attr("mode", "nearest") == "nearest" else \
        ("bilinear" if rank == 2 else "trilinear")
    if method == "nearest" and rank == 3:
        n.fail("resizes a volume by nearest neighbour, which is not supported")
    axes, layout = _resize_axes(n, rank, ndim)
    attrs.update(interp_method=method, data_layout=layout)
    inputs = {"X": x}
    spatial = [i for i, a in enumerate(axes) if a >= 1]
    sizes, scales = n.static(3) if n.has_input(3) else None, n.static(2)
    if sizes is not None:
        values = np.asarray(sizes).reshape(-1)
        attrs.update(zip(("out_d", "out_h", "out_w")[3 - rank:],
                         (int(values[i]) for i in spatial)))
    elif n.has_input(3):
        inputs["OutSize"] = n.var(3)
    elif scales is not None and len(set(np.asarray(scales).reshape(-1)[spatial])) == 1:
        attrs["scale"] = float(np.asarray(scales).reshape(-1)[spatial[0]])
    else:
        n.fail("has no sizes and no single fixed scale for its spatial axes")
    n.op(f"{method}_interp", inputs, attrs)


# --- normalisation, sampling ------------------------------------------------------------------

@import_rule("InstanceNormalization")
def _instance_norm(n: NodeImport) -> None:
    n.op("instance_norm", {"X": n.var(0), "Scale": n.var(1), "Bias": n.var(2)},
         {"epsilon": float(n.attr("epsilon", 1e-5))})


@import_rule("LRN")
def _lrn(n: NodeImport) -> None:
    x = n.var(0)
    if len(n.shape(x)) != 4:
        n.fail("normalises a tensor that is not a 4-D image batch")
    size = int(n.attr("size"))
    n.op("lrn", {"X": x}, {"n": size, "alpha": float(n.attr("alpha", 1e-4)) / size,
                           "beta": float(n.attr("beta", 0.75)),
                           "k": float(n.attr("bias", 1.0))}, slot="Out")


@import_rule("GridSample")
def _grid_sample(n: NodeImport) -> None:
    if n.attr("mode", "linear" if n.opset >= 20 else "bilinear") not in ("linear", "bilinear") \
            or n.attr("padding_mode", "zeros") != "zeros" or not n.attr("align_corners", 0):
        n.fail("samples other than bilinearly with zero padding and align_corners=1, the "
               "only sampling grid_sampler does")
    n.op("grid_sampler", {"X": n.var(0), "Grid": n.var(1)}, {})
