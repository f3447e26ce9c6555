"""The `onnx` package, imported on first use, and the dtype and shape conversions both
directions share.

`onnx` and `onnxruntime` are the optional ``onnx`` extra: importing fluid_interactive never
needs them, and the first export or import says how to install them when they are missing.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import OnnxError
from ..ir.records import VarDesc
from ..ops.tensor_array import ARRAY

#: Opsets the exporter writes: 13 brings axes as inputs (Squeeze, ReduceSum, Split), 17
#: LayerNormalization, 20 Gelu. onnxruntime runs every one of them.
MIN_OPSET, MAX_OPSET, DEFAULT_OPSET = 13, 21, 17

#: The oldest opset the importer reads (older attribute spellings are handled per node).
MIN_IMPORT_OPSET = 9

_DTYPE_TO_ONNX = {"float32": "FLOAT", "float64": "DOUBLE", "float16": "FLOAT16",
                  "int8": "INT8", "uint8": "UINT8", "int16": "INT16", "int32": "INT32",
                  "int64": "INT64", "bool": "BOOL"}


def onnx_module() -> Any:
    """``import onnx``, or an `OnnxError` that says how to install it."""
    try:
        import onnx
        import onnx.checker
        import onnx.helper
        import onnx.numpy_helper
    except ImportError:
        raise OnnxError("ONNX export and import need the onnx package: pip install "
                        "'fluid_interactive[onnx]' (or pip install onnx onnxruntime)") from None
    return onnx


def onnx_dtype(dtype: str) -> int:
    """Our dtype name -> ONNX's TensorProto element type."""
    return getattr(onnx_module().TensorProto, _DTYPE_TO_ONNX[dtype])


def value_info(name: str, var: VarDesc, dims: Sequence[Any] | None) -> Any:
    """The ONNX type of value ``name`` holding var ``var``: a tensor of ``dims`` (ints,
    symbolic names, None for unknown), or, for a tensor array, a sequence of such tensors
    (ONNX's sequences hold tensors of one element type; ``dims`` is an element's)."""
    helper = onnx_module().helper
    if var.kind == ARRAY:   # no shape yet: an array never written, its elements unknown
        return helper.make_tensor_sequence_value_info(name, onnx_dtype(var.dtype),
                                                      dims if var.shape else None)
    return helper.make_tensor_value_info(name, onnx_dtype(var.dtype), dims)


def dtype_from_onnx(elem_type: int, what: str) -> str:
    """ONNX's element type -> our dtype name; an `OnnxError` for types we do not hold."""
    proto = onnx_module().TensorProto
    for ours, theirs in _DTYPE_TO_ONNX.items():
        if getattr(proto, theirs) == elem_type:
            return ours
    known = ", ".join(_DTYPE_TO_ONNX)
    name = proto.DataType.Name(elem_type) if elem_type in proto.DataType.values() else elem_type
    raise OnnxError(f"{what} has element type {name}, which fluid_interactive cannot hold; "
                    f"supported: {known}")
