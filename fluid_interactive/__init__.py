"""fluid_interactive: Python calls compiled functions, not single operators.

Subclass `Program`, mark methods with `@network`, call `Compile()`, then call the methods
of the result; they share one scope of parameters. The notebook face is the `fluid`
module (``%load_ext fluid`` or ``import fluid``), which re-exports this API.
"""
from .util import blas_wait as _blas_wait  # noqa: F401  (first: it sets what OpenBLAS reads as it loads)

# isort: split
from . import distributed
from . import ops as _ops  # noqa: F401  (registers every op)
from .backend import get_device, get_threads, set_device, set_threads
from .errors import (
                     CheckpointError,
                     DTypeError,
                     EOFException,
                     FeedError,
                     FluidError,
                     FluidWarning,
                     KernelCacheWarning,
                     KernelError,
                     LoopLimitError,
                     LoopMemoryWarning,
                     NameConflictError,
                     NotCompiledError,
                     OnnxError,
                     OpArgumentError,
                     ProgramDefinitionError,
                     ReaderError,
                     RecordIOError,
                     RewindError,
                     SequenceWarning,
                     ShapeError,
                     VerifyError,
)
from .frontend import backward, clip, initializer, layers, metrics, nets, optimizer, regularizer
from .frontend.backward import gradients
from .frontend.diff import diff
from .frontend.input import data, embedding, one_hot
from .frontend.naming import var_scope
from .frontend.param_attr import ParamAttr
from .frontend.parameters import parameters
from .frontend.program import Input, Program, network
from .frontend.reader import Reader, batch_reader
from .frontend.variable import Variable
from .io import recordio
from .ir import (
                     BlockDesc,
                     OpDesc,
                     OpRole,
                     ProgramDesc,
                     VarDesc,
                     format_program,
                     program_from_json,
                     program_to_json,
)
from .ir.diff import ProgramDiff
from .ops.loop_guard import loop_saved_limit
from .passes.transpiler import TranspilePlan, transpile
from .passes.verify import check_program
from .runtime.live.compiled import CompiledMethod, CompiledProgram
from .runtime.live.history import history_defaults
from .runtime.live.load import load
from .runtime.plan.cache import plan_cache
from .util.selected_rows import SelectedRows

__version__ = "0.1.0"

__all__ = [
    "Program", "network", "Input", "var_scope", "batch_reader", "Reader", "layers", "nets",
    "data", "embedding", "one_hot",
    "optimizer", "clip", "metrics",
    "backward",
    "gradients", "parameters", "initializer", "regularizer", "ParamAttr", "Variable",
    "CompiledProgram", "CompiledMethod", "load", "set_device", "transpile", "TranspilePlan",
    "diff", "ProgramDiff", "history_defaults", "plan_cache", "loop_saved_limit",
    "distributed", "get_device", "set_threads", "get_threads",
    "ProgramDesc", "BlockDesc", "VarDesc", "OpDesc", "OpRole", "check_program",
    "program_to_json", "program_from_json", "format_program",
    "FluidError", "ShapeError", "DTypeError", "FeedError", "OpArgumentError",
    "ProgramDefinitionError", "NameConflictError", "NotCompiledError", "KernelError", "VerifyError",
    "CheckpointError", "OnnxError", "RewindError", "EOFException", "RecordIOError", "ReaderError",
    "LoopLimitError",
    "FluidWarning", "SequenceWarning", "KernelCacheWarning", "LoopMemoryWarning",
    "recordio",
    "SelectedRows",
    "__version__",
]
