"""Export rules of the other image ops: resizing (Resize, opset 18+), the normalisations
(InstanceNormalization; group_norm as an instance norm over groups; LRN; affine_channel,
data_norm and spectral_norm as arithmetic), sampling (GridSample, opset 16+; affine_grid
as a MatMul with the fixed grid), and unfold / im2sequence as a Conv whose filter picks
one tap per output channel."""
from __future__ import annotations

import math

import numpy as np

from .export_registry import OpExport, export_rule
from .export_vision import Images, channel_last_out, rank_of, to_channel_first


def _linear_mode(e: OpExport) -> dict[str, str]:
    """Resize's coordinate transform (and nearest rounding) for the op's attrs."""
    corners, mode = bool(e.attrs["align_corners"]), int(e.attrs["align_mode"])
    if e.attrs["interp_method"] == "nearest":
        if corners:
            return {"coordinate_transformation_mode": "align_corners",
                    "nearest_mode": "round_prefer_ceil"}
        return {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    if corners:
        return {"coordinate_transformation_mode": "align_corners"}
    return {"coordinate_transformation_mode": "half_pixel" if mode == 0 else "asymmetric"}


@export_rule("bilinear_interp", "nearest_interp", "trilinear_interp")
def _interp(e: OpExport) -> None:
    """A Resize of the spatial axes (``axes``, opset 18) to the output's sizes, or to an
    OutSize tensor; sizes from SizeTensor or a Scale tensor are not exported."""
    e.require_opset(18, "Resize with axes")
    x, out = e.input("X"), e.output("Out")
    rank = rank_of(e, x)
    first = 1 if e.attrs["data_layout"] in ("NHWC", "NDHWC") else 2
    axes = list(range(first, first + rank))
    if e.has_input("SizeTensor") or e.has_input("Scale"):
        e.fail("takes its size from SizeTensor or Scale; export it with out_shape (ints or "
               "an int Variable) instead")
    if e.has_input("OutSize"):
        sizes = e.node("Cast", [e.input("OutSize")], to=e.onnx_dtype("int64"))[0]
    else:
        outs = [e.shape(out)[a] for a in axes]
        if min(outs) < 0:
            e.fail("has output sizes unknown when exported")
        sizes = e.ints(outs, "sizes")
    mode = "nearest" if e.attrs["interp_method"] == "nearest" else "linear"
    e.node("Resize", [x, "", "", sizes], [out], mode=mode, axes=axes, **_linear_mode(e))


@export_rule("instance_norm")
def _instance_norm(e: OpExport) -> None:
    x, y = e.input("X"), e.output("Y")
    c = e.shape(x)[1]
    scale = e.input("Scale") if e.has_input("Scale") else e.const(np.ones(c), e.dtype(x))
    bias = e.input("Bias") if e.has_input("Bias") else e.const(np.zeros(c), e.dtype(x))
    e.node("InstanceNormalization", [x, scale, bias], [y], epsilon=float(e.attrs["epsilon"]))


def _per_channel(e: OpExport, v: str, rank: int) -> str:
    """A [C] var shaped [C, 1, ...] to broadcast against a channel-first [N, C, ...]."""
    return e.node("Reshape", [v, e.ints([-1] + [1] * (rank - 2), "channel_shape")])[0]


@export_rule("group_norm")
def _group_norm(e: OpExport) -> None:
    """An instance norm of [N, G, C/G * positions] (unit scale, no bias), reshaped back,
    then the per-channel scale and bias."""
    x, y = e.input("X"), e.output("Y")
    last = e.attrs["data_layout"] == "NHWC"
    rank = len(e.shape(x))
    cf = to_channel_first(e, x, rank - 2) if last else x
    shape = e.shape(x) if not last else (e.shape(x)[0], e.shape(x)[-1]) + e.shape(x)[1:-1]
    if min(shape[1:]) < 0:
        e.fail(f"normalises a {list(shape)} input whose non-batch dims are not all known")
    g = int(e.attrs["groups"])
    grouped = e.node("Reshape", [cf, e.ints([0, g, -1], "grouped")])[0]
    unit = e.node("InstanceNormalization", [grouped, e.const(np.ones(g), e.dtype(x)),
                                            e.const(np.zeros(g), e.dtype(x))],
                  epsilon=float(e.attrs["epsilon"]))[0]
    result = e.node("Reshape", [unit, e.ints([0] + list(shape[1:]), "image")])[0]
    for slot, node in (("Scale", "Mul"), ("Bias", "Add")):
        if e.has_input(slot):
            result = e.node(node, [result, _per_channel(e, e.input(slot), rank)])[0]
    if last:
        channel_last_out(e, result, y, rank - 2)
    else:
        e.node("Identity", [result], [y])


@export_rule("lrn")
def _lrn(e: OpExport) -> None:
    """ONNX's LRN divides alpha by the window size; Paddle's does not."""
    img = Images(e, e.input("X"), e.output("Out"))
    n = int(e.attrs["n"])
    e.node("LRN", [img.x], [img.out], size=n, alpha=float(e.attrs["alpha"]) * n,
           beta=float(e.attrs["beta"]), bias=float(e.attrs["k"]))
    img.finish()


@export_rule("affine_channel")
def _affine_channel(e: OpExport) -> None:
    x, out = e.input("X"), e.output("Out")
    rank = len(e.shape(x))
    if e.attrs["data_layout"] == "NHWC" or rank == 2:
        scale, bias = e.input("Scale"), e.input("Bias")     # broadcast on the last axis
    else:
        scale, bias = (_per_channel(e, e.input(s), rank) for s in ("Scale", "Bias"))
    e.node("Add", [e.node("Mul", [x, scale])[0], bias], [out])


@export_rule("data_norm")
def _data_norm(e: OpExport) -> None:
    """Inference: (X - BatchSum / BatchSize) * sqrt(BatchSize / BatchSquareSum)."""
    if not e.is_test():
        e.fail(f"runs in training mode in {e.method}(), where it updates its statistics. "
               f"Export a method that runs no optimizer (such as infer)")
    if int(e.attrs["slot_dim"]) > 0:
        e.fail("has slot_dim > 0 (slots not shown give zeros), which is not exported")
    size, total, square = (e.input(s) for s in ("BatchSize", "BatchSum", "BatchSquareSum"))
    means = e.node("Div", [total, size])[0]
    scales = e.node("Sqrt", [e.node("Div", [size, square])[0]])[0]
    y = e.node("Mul", [e.node("Sub", [e.input("X"), means])[0], scales])[0]
    if e.attrs["enable_scale_and_shift"]:
        y = e.node("Add", [e.node("Mul", [y, e.input("scale_w")])[0], e.input("bias")])[0]
    e.node("Identity", [y], [e.output("Y")])


def _unit(e: OpExport, v: str, eps: str) -> str:
    """v / (|v| + eps) for a column [k, 1]."""
    norm = e.node("Sqrt", [e.node("ReduceSum", [e.node("Mul", [v, v])[0]], keepdims=0)[0]])[0]
    return e.node("Div", [v, e.node("Add", [norm, eps])[0]])[0]


@export_rule("spectral_norm")
def _spectral_norm(e: OpExport) -> None:
    """The power iteration unrolled (power_iters rounds of two MatMuls)."""
    w = e.input("Weight")
    shape = e.shape(w)
    dim = int(e.attrs["dim"])
    h, rest = shape[dim], math.prod(shape) // shape[dim]
    order = [dim] + [i for i in range(len(shape)) if i != dim]
    moved = e.node("Transpose", [w], perm=order)[0] if dim else w
    m = e.node("Reshape", [moved, e.ints([h, rest], "matrix")])[0]
    mt = e.node("Transpose", [m], perm=[1, 0])[0]
    u = e.node("Reshape", [e.input("U"), e.ints([h, 1], "column")])[0]
    v = e.node("Reshape", [e.input("V"), e.ints([rest, 1], "column")])[0]
    eps = e.scalar(float(e.attrs["eps"]), w, "eps")
    for _ in range(int(e.attrs["power_iters"])):
        v = _unit(e, e.node("MatMul", [mt, u])[0], eps)
        u = _unit(e, e.node("MatMul", [m, v])[0], eps)
    sigma = e.node("ReduceSum", [e.node("Mul", [u, e.node("MatMul", [m, v])[0]])[0]],
                   keepdims=0)[0]
    e.node("Div", [w, sigma], [e.output("Out")])


@export_rule("grid_sampler")
def _grid_sampler(e: OpExport) -> None:
    e.require_opset(16, "GridSample")
    e.node("GridSample", [e.input("X"), e.input("Grid")], [e.output("Output")],
           mode="bilinear" if e.opset < 20 else "linear", padding_mode="zeros",
           align_corners=1)


@export_rule("affine_grid")
def _affine_grid(e: OpExport) -> None:
    """Output = base [H*W, 3] @ Theta^T, the base grid a constant (ONNX's AffineGrid needs
    the batch size in its size input, which a symbolic batch cannot give)."""
    if e.has_input("OutputShape"):
        e.fail("takes its size from a tensor; export it with out_shape as ints")
    theta = e.input("Theta")
    h, w = (int(d) for d in e.attrs["output_shape"][2:])
    ys, xs = np.meshgrid(np.linspace(-1.0, 1.0, h), np.linspace(-1.0, 1.0, w), indexing="ij")
    base = np.stack([xs.reshape(-1), ys.reshape(-1), np.ones(h * w)], axis=1)
    grid = e.node("MatMul", [e.const(base, e.dtype(theta), "base_grid"),
                             e.node("Transpose", [theta], perm=[0, 2, 1])[0]])[0]
    e.node("Reshape", [grid, e.ints([0, h, w, 2], "grid_shape")], [e.output("Output")])


def _patches(e: OpExport, kernel: list[int], strides: list[int], dils: list[int],
             pads: list[int]) -> str:
    """[N, C*kh*kw, OH, OW]: a Conv with groups = C whose output channel c*kh*kw + t
    reads tap t of channel c. ``pads`` in ONNX's order."""
    x = e.input("X")
    c = e.shape(x)[1]
    taps = kernel[0] * kernel[1]
    picks = np.eye(taps).reshape(taps, 1, kernel[0], kernel[1])
    filt = e.const(np.tile(picks, (c, 1, 1, 1)), e.dtype(x), "taps")
    return e.node("Conv", [x, filt], kernel_shape=kernel, strides=strides, dilations=dils,
                  pads=pads, group=c)[0]


@export_rule("unfold")
def _unfold(e: OpExport) -> None:
    top, left, bottom, right = (int(p) for p in e.attrs["paddings"])
    cols = _patches(e, list(e.attrs["kernel_sizes"]), list(e.attrs["strides"]),
                    list(e.attrs["dilations"]), [top, left, bottom, right])
    e.node("Reshape", [cols, e.ints([0, e.shape(e.output("Y"))[1], -1], "columns")],
           [e.output("Y")])


@export_rule("im2sequence")
def _im2sequence(e: OpExport) -> None:
    """Output dims are rounded up: the end padding grows by what the last window needs."""
    x, out = e.input("X"), e.output("Out")
    (h, w), (kh, kw) = e.shape(x)[2:], e.attrs["kernels"]
    sh, sw = e.attrs["strides"]
    up, left, down, right = (int(p) for p in e.attrs["paddings"])
    if min(h, w) < 0:
        e.fail("has unknown spatial dims")
    oh = (h + up + down - kh + sh - 1) // sh + 1
    ow = (w + left + right - kw + sw - 1) // sw + 1
    down = max(down, (oh - 1) * sh + kh - h - up)
    right = max(right, (ow - 1) * sw + kw - w - left)
    cols = _patches(e, [kh, kw], [sh, sw], [1, 1], [up, left, down, right])
    flat = e.node("Reshape", [cols, e.ints([0, e.shape(out)[2], -1], "columns")])[0]
    e.node("Transpose", [flat], [out], perm=[0, 2, 1])
