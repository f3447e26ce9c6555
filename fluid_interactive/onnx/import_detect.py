"""Import rules of ``RoiAlign``, ``MaxRoiPool`` and ``DeformConv`` (what roi_align, roi_pool
and deformable_conv export to).

Our roi ops take each image's rows of ROIs as offsets (RoisLod [N + 1]); ONNX gives each
roi's image index. The offsets are counted from the indices: offset k is the number of
rois of an image before k (the rois in image order, as the export writes them), k = 0 ..
N with N read from X's shape when the program runs.
"""
from __future__ import annotations

from .import_registry import NodeImport, import_rule


def _fill(n: NodeImport, value: int, what: str) -> str:
    return n.op("fill_constant", {}, {"shape": [1], "dtype": "int64", "value": value},
                name=f"{n.node.outputs[0]}.{what}")


def _offsets(n: NodeImport, x: str, batch: str) -> str:
    """RoisLod [N + 1] from the image index of each roi (int64 [R])."""
    stem = n.node.outputs[0]
    shape = n.op("shape", {"Input": x}, {}, name=f"{stem}.x_shape")
    images = n.op("slice", {"X": shape}, {"axes": [0], "starts": [0], "ends": [1]},
                  name=f"{stem}.images")
    images = n.op("cast", {"X": images}, {"out_dtype": "int64"}, name=f"{stem}.images64")
    end = n.op("elementwise_add", {"X": images, "Y": _fill(n, 1, "one")}, {"axis": -1},
               name=f"{stem}.end")
    k = n.op("range", {"Start": _fill(n, 0, "zero"), "End": end, "Step": _fill(n, 1, "step")},
             {}, name=f"{stem}.k")
    before = n.op("less_than", {
        "X": n.op("unsqueeze", {"X": batch}, {"axes": [0]}, name=f"{stem}.row"),
        "Y": n.op("unsqueeze", {"X": k}, {"axes": [1]}, name=f"{stem}.col")},
        {"axis": -1}, name=f"{stem}.before")
    counted = n.op("cast", {"X": before}, {"out_dtype": "int64"}, name=f"{stem}.counted")
    return n.op("reduce_sum", {"X": counted}, {"dim": [1], "keep_dim": False,
                                               "reduce_all": False}, name=f"{stem}.lod")


def _as_int64(n: NodeImport, var: str, what: str) -> str:
    if n.dtype(var) == "int64":
        return var
    return n.op("cast", {"X": var}, {"out_dtype": "int64"}, name=f"{n.node.outputs[0]}.{what}")


@import_rule("RoiAlign")
def _roi_align(n: NodeImport) -> None:
    mode = n.attr("mode", "avg")
    if mode != "avg":
        n.fail(f"pools in mode {mode!r}; roi_align averages (mode 'avg')")
    coords = n.attr("coordinate_transformation_mode", "half_pixel" if n.opset >= 16 else
                    "output_half_pixel")
    if coords != "output_half_pixel":
        n.fail(f"has coordinate_transformation_mode={coords!r}; roi_align takes the rois "
               f"as they are ('output_half_pixel', Paddle 1.8's)")
    x = n.var(0)
    batch = _as_int64(n, n.var(2), "batch")
    n.op("roi_align", {"X": x, "ROIs": n.var(1), "RoisLod": _offsets(n, x, batch)},
         {"pooled_height": int(n.attr("output_height", 1)),
          "pooled_width": int(n.attr("output_width", 1)),
          "spatial_scale": float(n.attr("spatial_scale", 1.0)),
          "sampling_ratio": int(n.attr("sampling_ratio", 0)) or -1})


@import_rule("MaxRoiPool")
def _max_roi_pool(n: NodeImport) -> None:
    x, rois = n.var(0), n.var(1)
    stem = n.node.outputs[0]
    first = n.op("slice", {"X": rois}, {"axes": [1], "starts": [0], "ends": [1]},
                 name=f"{stem}.index")
    batch = n.op("reshape", {"X": _as_int64(n, first, "index64")}, {"shape": [-1]},
                 name=f"{stem}.batch")
    boxes = n.op("slice", {"X": rois}, {"axes": [1], "starts": [1], "ends": [5]},
                 name=f"{stem}.boxes")
    height, width = (int(v) for v in n.attr("pooled_shape"))
    n.op("roi_pool", {"X": x, "ROIs": boxes, "RoisLod": _offsets(n, x, batch)},
         {"pooled_height": height, "pooled_width": width,
          "spatial_scale": float(n.attr("spatial_scale", 1.0))})


@import_rule("DeformConv")
def _deform_conv(n: NodeImport) -> None:
    x, w = n.var(0), n.var(1)
    if len(n.shape(w)) != 4:
        n.fail("convolves other than 2-D images; deformable_conv takes [N, C, H, W]")
    pads = [int(p) for p in n.attr("pads", [0, 0, 0, 0])]
    attrs = {"strides": [int(s) for s in n.attr("strides", [1, 1])],
             "paddings": [pads[0], pads[2], pads[1], pads[3]],
             "dilations": [int(d) for d in n.attr("dilations", [1, 1])],
             "groups": int(n.attr("group", 1)),
             "deformable_groups": int(n.attr("offset_group", 1))}
    inputs = {"Input": x, "Offset": n.var(2), "Filter": w}
    op_type = "deformable_conv_v1"
    if n.has_input(4):
        inputs["Mask"], op_type = n.var(4), "deformable_conv"
    if not n.has_input(3):
        n.op(op_type, inputs, attrs)
        return
    conv = n.op(op_type, inputs, attrs, name=f"{n.node.outputs[0]}.conv")
    n.op("elementwise_add", {"X": conv, "Y": n.var(3)}, {"axis": 1})
