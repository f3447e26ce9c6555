"""Export rules of the layers' ops: mul / matmul (fc), batch_norm, layer_norm, dropout and
embedding lookup (convolution and pooling: `export_vision.py`)."""
from __future__ import annotations

import numpy as np

from .export_registry import OpExport, export_rule


@export_rule("mul")
def _mul(e: OpExport) -> None:
    """X flattened to 2-D at x_num_col_dims times Y flattened at y_num_col_dims. With the
    usual fc shapes (the last dim of X against a matrix) one batched MatMul says it."""
    x, y, out = e.input("X"), e.input("Y"), e.output("Out")
    xs, ys = e.shape(x), e.shape(y)
    xn, yn = int(e.attrs["x_num_col_dims"]), int(e.attrs["y_num_col_dims"])
    if len(ys) == 2 and yn == 1 and xn == len(xs) - 1:
        e.node("MatMul", [x, y], [out])
        return
    x2 = x if (len(xs) == 2 and xn == 1) else e.node("Flatten", [x], [e.tmp("flat_x")],
                                                     axis=xn)[0]
    y2 = y if (len(ys) == 2 and yn == 1) else e.node("Flatten", [y], [e.tmp("flat_y")],
                                                     axis=yn)[0]
    out_shape = e.shape(out)
    if len(out_shape) == 2:
        e.node("MatMul", [x2, y2], [out])
        return
    if sum(d < 0 for d in out_shape) > 1:
        e.fail(f"its output {list(out_shape)} has more than one unknown dim, which a "
               f"Reshape cannot restore")
    product = e.node("MatMul", [x2, y2])[0]
    e.node("Reshape", [product, e.ints(out_shape, "shape")], [out])


@export_rule("matmul")
def _matmul(e: OpExport) -> None:
    x, y, out = e.input("X"), e.input("Y"), e.output("Out")
    tx, ty = bool(e.attrs["transpose_X"]), bool(e.attrs["transpose_Y"])
    alpha = float(e.attrs["alpha"])
    xs, ys = e.shape(x), e.shape(y)
    if len(xs) < 2 or len(ys) < 2:
        e.fail("has a 1-D operand; only matmul of matrices (or batches of them) is exported")
    if len(xs) == 2 and len(ys) == 2:
        e.node("Gemm", [x, y], [out], alpha=alpha if alpha != 1.0 else None,
               transA=int(tx) or None, transB=int(ty) or None)
        return

    def swapped(name: str, rank: int) -> str:
        perm = list(range(rank - 2)) + [rank - 1, rank - 2]
        return e.node("Transpose", [name], perm=perm)[0]
    a = swapped(x, len(xs)) if tx else x
    b = swapped(y, len(ys)) if ty else y
    if alpha == 1.0:
        e.node("MatMul", [a, b], [out])
        return
    product = e.node("MatMul", [a, b])[0]
    e.node("Mul", [product, e.scalar(alpha, x, "alpha")], [out])


@export_rule("batch_norm")
def _batch_norm(e: OpExport) -> None:
    if not (e.is_test() or e.attrs["use_global_stats"]):
        e.fail(f"runs in training mode in {e.method}(): it normalises with each batch's "
               f"statistics and updates the moving averages. Export a method that runs no "
               f"optimizer (such as infer), or pass is_test=True to the layer")
    x, y = e.input("X"), e.output("Y")
    params = [e.input(s) for s in ("Scale", "Bias", "Mean", "Variance")]
    channels_last = e.attrs["data_layout"] == "NHWC" and len(e.shape(x)) > 2
    if channels_last:
        rank = len(e.shape(x))
        x = e.node("Transpose", [x], perm=[0, rank - 1] + list(range(1, rank - 1)))[0]
    normed = y if not channels_last else e.tmp("nchw")
    e.node("BatchNormalization", [x] + params, [normed],
           epsilon=float(e.attrs["epsilon"]), momentum=float(e.attrs["momentum"]))
    if channels_last:
        rank = len(e.shape(y))
        e.node("Transpose", [normed], [y], perm=[0] + list(range(2, rank)) + [1])


@export_rule("layer_norm")
def _layer_norm(e: OpExport) -> None:
    e.require_opset(17, "LayerNormalization")
    x, y = e.input("X"), e.output("Y")
    axis = int(e.attrs["begin_norm_axis"])
    inner = e.shape(x)[axis:]
    if any(d < 0 for d in inner):
        e.fail(f"normalises over unknown dims {list(inner)}")
    scale = e.input("Scale") if e.has_input("Scale") else \
        e.const(np.ones(inner, dtype=e.dtype(x)), e.dtype(x), "scale")
    bias = [e.input("Bias")] if e.has_input("Bias") else []
    if len(inner) > 1:   # our Scale and Bias are flat [D]; ONNX wants X's normalised shape
        shape = e.ints(inner, "norm_shape")
        if e.has_input("Scale"):
            scale = e.node("Reshape", [scale, shape], [e.tmp("scale")])[0]
        bias = [e.node("Reshape", [b, shape], [e.tmp("bias")])[0] for b in bias]
    e.node("LayerNormalization", [x, scale] + bias, [y], axis=axis,
           epsilon=float(e.attrs["epsilon"]))


@export_rule("dropout")
def _dropout(e: OpExport) -> None:
    """Inference-mode dropout: the identity (upscale_in_train) or a scaling by 1 - p
    (downgrade_in_infer). The Dropout node keeps the probability for fine-tuning."""
    if not e.is_test():
        e.fail(f"runs in training mode in {e.method}(), where it draws random masks. Export "
               f"a method that runs no optimizer (such as infer), or pass is_test=True")
    x, out = e.input("X"), e.output("Out")
    p = float(e.attrs["dropout_prob"])
    downgrade = e.attrs["dropout_implementation"] == "downgrade_in_infer" and p != 0.0
    kept = e.tmp("dropped") if downgrade else out
    e.node("Dropout", [x, e.scalar(p, x, "ratio")], [kept])
    if downgrade:
        e.node("Mul", [kept, e.scalar(1.0 - p, x, "keep")], [out])


@export_rule("lookup_table")
def _lookup_table(e: OpExport) -> None:
    """Out[..., :] = W[Ids[..., 0]]: Gather over the ids with their last (size-1) dim
    squeezed. Rows of padding_idx read as zero: W is multiplied by a 0/1 row mask first."""
    w, ids, out = e.input("W"), e.input("Ids"), e.output("Out")
    vocab, dim = e.shape(w)
    pad = e.attrs["padding_idx"]
    if pad is not None and pad != -1:
        mask = np.ones((vocab, 1), dtype=e.dtype(w))
        mask[pad if pad >= 0 else pad + vocab] = 0
        w = e.node("Mul", [w, e.const(mask, e.dtype(w), "row_mask")], [e.tmp("masked")])[0]
    rank = len(e.shape(ids))
    flat = e.node("Squeeze", [ids, e.ints([rank - 1])], [e.tmp("ids")])[0]
    e.node("Gather", [w, flat], [out], axis=0)
