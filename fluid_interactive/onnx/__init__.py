"""ONNX in and out.

`export_onnx(compiled, path, method='infer')` writes one method of a compiled program as an
ONNX model that any ONNX runtime runs; `import_onnx(path)` gives a compiled program whose
``infer`` method is an ONNX graph, with its initializers as trainable parameters, and
`onnx_program(path)` the `fluid.Program` subclass behind it, to extend with training
methods. This package sits above the runtime and the frontend; nothing in the engine
imports it, and the `onnx` package itself is imported only when a function here runs.
"""
from .export import export_onnx
from .export_registry import EXPORT_RULES, export_rule
from .import_program import OnnxProgram, import_onnx, onnx_program
from .import_registry import IMPORT_RULES, import_rule

__all__ = ["export_onnx", "import_onnx", "onnx_program", "OnnxProgram", "EXPORT_RULES",
           "IMPORT_RULES", "export_rule", "import_rule"]
