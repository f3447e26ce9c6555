"""Import rules of layer-sized nodes: Gemm and MatMul, batch and layer normalisation, and
Gather as an embedding lookup (convolutions and pooling: `import_vision.py`)."""
from __future__ import annotations

import numpy as np

from ..ir.records import FLOAT_DTYPES
from .import_index import gather_any
from .import_registry import NodeImport, import_rule

# --- matrix products ---------------------------------------------------------------------------

@import_rule("Gemm")
def _gemm(n: NodeImport) -> None:
    """alpha * A' @ B' + beta * C. A plain product with a bias is fc's ``mul`` + add;
    transposes and alpha go to ``matmul``, so a PyTorch Linear weight keeps its [out, in]
    layout and its values."""
    a, b = n.var(0), n.var(1)
    ta, tb = bool(n.attr("transA", 0)), bool(n.attr("transB", 0))
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    has_c = n.has_input(2)
    product_name = f"{n.node.outputs[0]}.matmul" if has_c else None
    if has_c and not (ta or tb or alpha != 1.0):
        product = n.op("mul", {"X": a, "Y": b}, {"x_num_col_dims": 1, "y_num_col_dims": 1},
                       name=product_name)
    else:
        product = n.op("matmul", {"X": a, "Y": b}, {"transpose_X": ta, "transpose_Y": tb,
                                                    "alpha": alpha}, name=product_name)
    if not has_c:
        return
    c = n.var(2)
    if beta != 1.0:
        c = n.op("scale", {"X": c}, {"scale": beta, "bias": 0.0, "bias_after_scale": True},
                 name=f"{n.node.outputs[0]}.beta_c")
    rank_c = len(n.shape(c))
    n.op("elementwise_add", {"X": product, "Y": c}, {"axis": 1 if rank_c == 1 else -1})


@import_rule("MatMul")
def _matmul(n: NodeImport) -> None:
    """A batch of rows times a matrix is fc's ``mul`` (a Flatten at axis 1 right before it
    folds in as ``x_num_col_dims=1``); other shapes are ``matmul``."""
    flat = n.pending(0, "flatten")
    y = n.var(1)
    if flat is not None and flat.attrs["axis"] == 1 and len(n.shape(y)) == 2:
        n.op("mul", {"X": flat.base, "Y": y}, {"x_num_col_dims": 1, "y_num_col_dims": 1})
        return
    x = n.var(0)
    rx, ry = len(n.shape(x)), len(n.shape(y))
    if ry == 2 and rx >= 2:
        n.op("mul", {"X": x, "Y": y}, {"x_num_col_dims": rx - 1, "y_num_col_dims": 1})
    else:
        n.op("matmul", {"X": x, "Y": y}, {"transpose_X": False, "transpose_Y": False,
                                          "alpha": 1.0})


# --- normalisation -----------------------------------------------------------------------------

@import_rule("BatchNormalization")
def _batch_norm(n: NodeImport) -> None:
    """Inference-mode batch norm. Scale and bias become parameters, the running mean and
    variance batch_norm's moving statistics (state, updated when a method trains)."""
    if n.attr("training_mode", 0):
        n.fail("is in training mode; export the model in inference (eval) mode")
    if not n.attr("spatial", 1):
        n.fail("has spatial=0 (per-element statistics), which batch_norm does not support")
    n.unused(1, 2, 3, 4)
    mean, variance = n.state(3), n.state(4)
    inputs = {"X": n.var(0), "Scale": n.var(1), "Bias": n.var(2), "Mean": mean,
              "Variance": variance}
    attrs = {"momentum": float(n.attr("momentum", 0.9)),
             "epsilon": float(n.attr("epsilon", 1e-5)), "data_layout": "NCHW",
             "use_global_stats": False}
    out = n.replay.new_name(n.node.outputs[0])
    outputs = {"MeanOut": [mean], "VarianceOut": [variance], "Y": [out],
               "SavedMean": [n.replay.new_name(f"{out}.saved_mean")],
               "SavedVariance": [n.replay.new_name(f"{out}.saved_variance")]}
    n.append("batch_norm", inputs, outputs, attrs)
    n.bind(out)


@import_rule("LayerNormalization")
def _layer_norm(n: NodeImport) -> None:
    n.unused(1, 2)
    x = n.var(0)
    rank = len(n.shape(x))
    axis = int(n.attr("axis", -1))
    axis = axis + rank if axis < 0 else axis
    inner = n.shape(x)[axis:]
    if axis < 1 or any(d < 0 for d in inner):
        n.fail(f"normalises from axis {axis} of a {list(n.shape(x))} input; it must start "
               f"after the batch dim and cover known dims")
    size = int(np.prod(inner))
    inputs = {"X": x}
    for slot, i in (("Scale", 1), ("Bias", 2)):
        flat = _flat_param(n, i, size)
        if flat is not None:
            inputs[slot] = flat
    n.op("layer_norm", inputs, {"begin_norm_axis": axis,
                                "epsilon": float(n.attr("epsilon", 1e-5))})


def _flat_param(n: NodeImport, i: int, size: int) -> str | None:
    """Scale or bias as layer_norm wants it, [D]: an all-ones constant scale is none at all,
    a reshape of a [D] var (what the exporter writes) is that var, an initializer of the
    normalised shape is declared flat."""
    if not n.has_input(i):
        return None
    constant = n.constant(i)
    if i == 1 and constant is not None and np.all(constant == 1):
        return None
    lined = n.pending(i, "reshape")
    if lined is not None and n.shape(lined.base) == (size,):
        return lined.base
    name = n.input_name(i)
    if name in n.replay.graph.initializers and name not in n.replay.values:
        value = n.replay.graph.initializers[name].reshape(size)
        return n.replay.declare_state(name, value, parameter=True)
    var = n.var(i)
    if n.shape(var) == (size,):
        return var
    return n.op("reshape", {"X": var}, {"shape": [size]},
                name=f"{n.node.outputs[0]}.flat{i}")


# --- embedding ---------------------------------------------------------------------------------

@import_rule("Gather")
def _gather(n: NodeImport) -> None:
    """Rows of a 2-D float table: an embedding lookup (ids get lookup_table's trailing 1
    dim); any other Gather: gather or index_select (`import_index.gather_any`)."""
    axis = int(n.attr("axis", 0))
    masked = n.pending(0, "elementwise_mul")
    if masked is None and (axis != 0 or len(n.shape(n.var(0))) != 2 or
                           n.dtype(n.var(0)) not in FLOAT_DTYPES):
        gather_any(n, axis)
        return
    padding = -1
    if masked is not None and "row_mask" in masked.info:   # padding_idx, as exported
        table, padding = masked.base, masked.info["row_mask"]
    else:
        table = n.var(0)
    if len(n.shape(table)) != 2:
        n.fail(f"gathers from a {list(n.shape(table))} tensor; only 2-D tables are supported")
    squeezed = n.pending(1, "squeeze")
    if squeezed is not None and _drops_last(n, squeezed.base, squeezed.attrs["axes"]):
        ids = squeezed.base
    else:
        ids = n.var(1)
        ids = n.op("unsqueeze", {"X": ids}, {"axes": [len(n.shape(ids))]},
                   name=f"{n.node.outputs[0]}.ids")
    n.op("lookup_table", {"W": table, "Ids": ids}, {"padding_idx": padding})


def _drops_last(n: NodeImport, base: str, axes: list[int]) -> bool:
    rank = len(n.shape(base))
    return [a + rank if a < 0 else a for a in axes] == [rank - 1]
