"""Pure Program -> Program passes."""
from .backward import BackwardResult, append_backward, calc_gradient, grad_var_name

__all__ = ["BackwardResult", "append_backward", "calc_gradient", "grad_var_name"]
