"""Op specs, one file per family, and the registry that indexes them.

Importing this package registers every op. See `spec.py` for what a spec holds.
"""
from . import (  # noqa: F401
               accumulate,
               chain,
               compare,
               control,
               conv,
               dist,
               elementwise,
               fill,
               gru,
               linalg,
               lr,
               lstm,
               mask,
               metric,
               nn_misc,
               norm,
               optim,
               optim_adaptive,
               optim_average,
               optim_fused,
               optim_norm,
               pool,
               reader,
               recurrent,
               reduce,
               rnn_unit,
               sequence,
               shape,
               softmax,
               tensor_array,
               transfer_layout,
               unary,
)
from .apply import flat_inputs, flat_outputs, infer_op, prepare_kernel
from .registry import get_spec, register, registered_ops
from .spec import (
               GradContext,
               InferContext,
               KernelContext,
               OpSpec,
               Slot,
               TensorType,
               grad_slot,
               infer_like,
               slots,
)

__all__ = ["get_spec", "register", "registered_ops", "infer_op", "prepare_kernel",
           "flat_inputs", "flat_outputs", "GradContext", "InferContext", "KernelContext",
           "OpSpec", "Slot", "TensorType", "grad_slot", "infer_like", "slots"]
