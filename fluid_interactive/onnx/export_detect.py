"""Export rules of the detection ops:

``roi_align``           ``RoiAlign`` (avg mode; ``output_half_pixel`` coordinates, Paddle
                        1.8's: no half-pixel shift; sampling_ratio <= 0 is ONNX's 0, the
                        adaptive grid)
``roi_pool``            ``MaxRoiPool`` of [batch index, x1, y1, x2, y2] rows; its Argmax
                        (the index of each maximum, which only the gradient reads) has no
                        ONNX counterpart
``psroi_pool``          no ONNX operator: each bin a 0/1 mask of its rows and columns,
                        the image's channels read as [oc, ph, pw], summed and averaged
``deformable_conv``     ``DeformConv`` (opset 19) with the Mask; ``deformable_conv_v1``
                        without one. Paddle's offsets and ONNX's share the layout (a (dy,
                        dx) pair per tap, the taps of each deformable group together)

Each roi's image index comes from RoisLod (the offsets of each image's rows in ROIs): the
number of offsets after the first that are <= the roi's row, a ``ReduceSum`` of a
comparison; without RoisLod every roi is of image 0.
"""
from __future__ import annotations

import numpy as np

from .export_registry import OpExport, export_rule


def _batch_index(e: OpExport) -> str:
    """The image index of each roi, int64 [R]."""
    rois = e.input("ROIs")
    count = e.node("Gather", [e.node("Shape", [rois])[0], e.const(0, "int64", "rows")],
                   axis=0)[0]
    rows = e.node("Range", [e.const(0, "int64", "first"), count, e.const(1, "int64", "step")])[0]
    if not e.has_input("RoisLod"):
        return e.node("Mul", [rows, e.const(0, "int64", "zero")])[0]
    lod = e.input("RoisLod")
    if e.dtype(lod) != "int64":
        lod = e.node("Cast", [lod], to=e.onnx_dtype("int64"))[0]
    ends = e.node("Slice", [lod, e.ints([1], "starts"), e.ints([2 ** 62], "ends")])[0]
    passed = e.node("LessOrEqual", [e.node("Unsqueeze", [ends, e.ints([0])])[0],
                                    e.node("Unsqueeze", [rows, e.ints([1])])[0]])[0]
    return e.node("ReduceSum", [e.node("Cast", [passed], to=e.onnx_dtype("int64"))[0],
                                e.ints([1])], keepdims=0)[0]


@export_rule("roi_align")
def _roi_align(e: OpExport) -> None:
    a = e.attrs
    mode = {} if e.opset < 16 else {"coordinate_transformation_mode": "output_half_pixel"}
    e.node("RoiAlign", [e.input("X"), e.input("ROIs"), _batch_index(e)], [e.output("Out")],
           mode="avg", output_height=int(a["pooled_height"]),
           output_width=int(a["pooled_width"]), sampling_ratio=max(int(a["sampling_ratio"]), 0),
           spatial_scale=float(a["spatial_scale"]), **mode)


@export_rule("roi_pool")
def _roi_pool(e: OpExport) -> None:
    a, rois = e.attrs, e.input("ROIs")
    index = e.node("Cast", [e.node("Unsqueeze", [_batch_index(e), e.ints([1])])[0]],
                   to=e.onnx_dtype(e.dtype(rois)))[0]
    boxes = e.node("Concat", [index, rois], axis=1)[0]
    e.node("MaxRoiPool", [e.input("X"), boxes], [e.output("Out")],
           pooled_shape=[int(a["pooled_height"]), int(a["pooled_width"])],
           spatial_scale=float(a["spatial_scale"]))


@export_rule("deformable_conv", "deformable_conv_v1")
def _deformable_conv(e: OpExport) -> None:
    e.require_opset(19, "DeformConv")
    a, w = e.attrs, e.input("Filter")
    pads = [int(p) for p in a["paddings"]]
    inputs = [e.input("Input"), w, e.input("Offset")]
    if e.has_input("Mask"):
        inputs += ["", e.input("Mask")]
    e.node("DeformConv", inputs, [e.output("Output")], kernel_shape=list(e.shape(w)[2:]),
           strides=[int(s) for s in a["strides"]], dilations=[int(d) for d in a["dilations"]],
           pads=pads + pads if len(pads) == 2 else pads[0::2] + pads[1::2],
           group=int(a["groups"] or 1), offset_group=int(a["deformable_groups"] or 1))


def _rounded(e: OpExport, v: str) -> str:
    """Rounding half away from zero (ONNX's Round rounds half to even)."""
    half = e.node("Add", [e.node("Abs", [v])[0], e.scalar(0.5, e.input("ROIs"), "half")])[0]
    return e.node("Mul", [e.node("Sign", [v])[0], e.node("Floor", [half])[0]])[0]


def _bins(e: OpExport, start: str, end: str, bins: int, size: int) -> tuple[str, str]:
    """Per roi and bin along one dim: (the 0/1 mask [R, bins, size] of the pixels in the
    bin, the bin's pixel count [R, bins]). Start and end are the roi's scaled corners."""
    rois = e.input("ROIs")
    length = e.node("Max", [e.node("Sub", [end, start])[0], e.scalar(0.1, rois, "least")])[0]
    step = e.node("Div", [length, e.scalar(float(bins), rois, "bins")])[0]        # [R]
    k = e.const(np.arange(bins + 1, dtype=e.dtype(rois))[None], e.dtype(rois), "k")
    at = e.node("Add", [e.node("Unsqueeze", [start, e.ints([1])])[0],
                        e.node("Mul", [k, e.node("Unsqueeze", [step, e.ints([1])])[0]])[0]])[0]
    limit = e.scalar(float(size), rois, "limit")
    zero = e.scalar(0.0, rois, "zero")
    lo = e.node("Min", [e.node("Max", [e.node("Floor", [at])[0], zero])[0], limit])[0]
    hi = e.node("Min", [e.node("Max", [e.node("Ceil", [at])[0], zero])[0], limit])[0]
    first = e.node("Slice", [lo, e.ints([0]), e.ints([bins]), e.ints([1])])[0]   # [R, bins]
    last = e.node("Slice", [hi, e.ints([1]), e.ints([bins + 1]), e.ints([1])])[0]
    pixels = e.const(np.arange(size, dtype=e.dtype(rois)), e.dtype(rois), "pixels")
    inside = e.node("And", [
        e.node("GreaterOrEqual", [pixels, e.node("Unsqueeze", [first, e.ints([2])])[0]])[0],
        e.node("Less", [pixels, e.node("Unsqueeze", [last, e.ints([2])])[0]])[0]])[0]
    count = e.node("Max", [e.node("Sub", [last, first])[0], zero])[0]
    return inside, count


@export_rule("psroi_pool")
def _psroi_pool(e: OpExport) -> None:
    """Output (c, i, j) of roi r averages bin (i, j) of channel (c * ph + i) * pw + j: the
    image's channels read as [oc, ph, pw] (a Reshape), each bin a 0/1 mask of its rows and
    of its columns (rounded corners, the far one a pixel further, then scaled, as the op
    has them), summed over W then H (``Where``, ``ReduceSum``) and divided by its size."""
    a, x, rois = e.attrs, e.input("X"), e.input("ROIs")
    ph, pw, oc = (int(a[k]) for k in ("pooled_height", "pooled_width", "output_channels"))
    _, _, h, w = e.shape(x)
    if h < 0 or w < 0:
        e.fail("pools an image of unknown height or width; declare them to export it")
    scale = e.scalar(float(a["spatial_scale"]), rois, "scale")
    one = e.scalar(1.0, rois, "one")
    corner = [e.node("Gather", [rois, e.const(i, "int64", "corner")], axis=1)[0]
              for i in range(4)]
    near = [e.node("Mul", [_rounded(e, c), scale])[0] for c in corner[:2]]
    far = [e.node("Mul", [e.node("Add", [_rounded(e, c), one])[0], scale])[0]
           for c in corner[2:]]
    rows, row_count = _bins(e, near[1], far[1], ph, h)           # [R, ph, H], [R, ph]
    cols, col_count = _bins(e, near[0], far[0], pw, w)           # [R, pw, W], [R, pw]
    images = e.node("Gather", [x, _batch_index(e)], axis=0)[0]
    planes = e.node("Reshape", [images, e.ints([-1, oc, ph, pw, h, w], "planes")])[0]
    zero = e.scalar(0.0, x, "zero")
    in_cols = e.node("Reshape", [cols, e.ints([-1, 1, 1, pw, 1, w], "cols")])[0]
    summed = e.node("ReduceSum", [e.node("Where", [in_cols, planes, zero])[0], e.ints([5])],
                    keepdims=0)[0]                                # [R, oc, ph, pw, H]
    in_rows = e.node("Reshape", [rows, e.ints([-1, 1, ph, 1, h], "rows")])[0]
    total = e.node("ReduceSum", [e.node("Where", [in_rows, summed, zero])[0], e.ints([4])],
                   keepdims=0)[0]                                 # [R, oc, ph, pw]
    count = e.node("Mul", [e.node("Unsqueeze", [row_count, e.ints([2])])[0],
                           e.node("Unsqueeze", [col_count, e.ints([1])])[0]])[0]
    count = e.node("Unsqueeze", [e.node("Max", [count, one])[0], e.ints([1])])[0]
    e.node("Div", [total, e.node("Cast", [count], to=e.onnx_dtype(e.dtype(x)))[0]],
           [e.output("Out")])
