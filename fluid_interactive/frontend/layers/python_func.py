"""`py_func`: a Python function as an op, and `register_py_func`, which names one.

A program keeps only the *names* of its Python functions (ops/py_func.py), so it can be
saved as JSON and checkpointed like any other; the process that runs it must have each
name registered. ``py_func`` registers the functions it is given, under
``module.qualname`` (`py_func_name`); in another process, register them before loading::

    fluid.layers.register_py_func("mymodule.clip_grad", clip_grad)
    prog = fluid.load("checkpoint")

``func`` may also be a name registered before (``py_func("my_op", x, out)``), which keeps
the name independent of where the function is defined.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...errors import OpArgumentError
from ...ops.py_func import py_func_name, register_py_func, registered_py_func
from ..tracing import error_at
from ..variable import Variable
from .helpers import LayerHelper, as_variable
from .targets import NewTensor

Vars = Variable | Sequence[Variable] | None


def _name(func: Any, what: str) -> str:
    """The registered name of ``func`` (a callable, registered now, or a name)."""
    try:
        if isinstance(func, str):
            registered_py_func(func)
            return func
        if not callable(func):
            raise OpArgumentError(f"{what} must be a Python function or the name of a "
                                  f"registered one, got {type(func).__name__}")
        return register_py_func(py_func_name(func), func)
    except OpArgumentError as e:
        raise error_at(OpArgumentError, f"py_func: {e}") from None


def _vars(value: Vars, what: str) -> list[Variable]:
    if value is None:
        return []
    if isinstance(value, Variable):
        return [value]
    if not isinstance(value, (list, tuple)):
        raise error_at(OpArgumentError, f"py_func: {what} must be a Variable, a list of them "
                                        f"or None, got {type(value).__name__}")
    return list(value)


def _typed(out: Variable) -> Variable:
    if isinstance(out, NewTensor) and not out.declared:
        raise error_at(OpArgumentError, f"py_func: output {out.name!r} has no shape; a "
                                        f"Python function's outputs need their types "
                                        f"declared: fluid.layers.create_tensor(dtype, "
                                        f"shape=[...]) (-1 for a dim the function decides)")
    return as_variable(out, "py_func out")


def py_func(func: Callable[..., Any] | str, x: Vars, out: Vars,
            backward_func: Callable[..., Any] | str | None = None,
            skip_vars_in_backward_input: Vars = None) -> Vars:
    """Call the Python function ``func`` on NumPy arrays of ``x`` (a Variable, a list of
    them or None) each time the method runs; what it returns (an array, a list of arrays,
    or None) becomes ``out``, vars whose shapes and dtypes you declare beforehand with
    ``fluid.layers.create_tensor(dtype, shape=[...])``. The arrays it gets are read-only.

    With ``backward_func`` gradients flow through the op: it is called with the arrays of
    ``x``, of ``out`` and of the gradients of ``out`` (leaving out the vars listed in
    ``skip_vars_in_backward_input``) and returns the gradients of ``x``, in order (None
    for zeros). Without it, no gradient flows back through ``func``.

    The program stores the functions' registered names (see `register_py_func`). Returns
    ``out``."""
    helper = LayerHelper("py_func")
    xs = [as_variable(v, "py_func x") for v in _vars(x, "x")]
    outs = [_typed(v) for v in _vars(out, "out")]
    attrs: dict[str, Any] = {"func": _name(func, "func"), "backward_func": "",
                             "backward_skip_vars": [],
                             "out_shapes": [list(v.shape) for v in outs],
                             "out_dtypes": [v.dtype for v in outs]}
    if backward_func is not None:
        attrs["backward_func"] = _name(backward_func, "backward_func")
        known = {v.name for v in xs + outs}
        skip = [as_variable(v, "py_func skip_vars_in_backward_input")
                for v in _vars(skip_vars_in_backward_input, "skip_vars_in_backward_input")]
        stray = [v.name for v in skip if v.name not in known]
        if stray:
            raise error_at(OpArgumentError, f"py_func: skip_vars_in_backward_input names "
                                            f"{stray}, which are not among its inputs and "
                                            f"outputs")
        attrs["backward_skip_vars"] = sorted({v.name for v in skip})
    helper.trace.append_op("py_func", {"X": [v.name for v in xs]},
                           {"Out": [v.name for v in outs]}, attrs)
    return out


__all__ = ["py_func", "register_py_func"]
