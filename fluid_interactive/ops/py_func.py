"""``py_func``: a Python function as an op, and the registry of such functions by name.

The op holds the *name* of its function (attr ``func``), never code, so a program, its
JSON and its checkpoints hold names only. A name means the function registered under it in
this process (`register_py_func`) when the op runs; `fluid.layers.py_func` registers the
functions it is given. A program whose names are not registered (loaded in another
process) fails to load, naming the function to register and how.

The function receives NumPy arrays (read-only views of the op's inputs X, in order) and
returns one array, a sequence of them, or None when the op has no outputs; each is
converted to its output's declared dtype and must have its declared shape (attrs
``out_shapes`` / ``out_dtypes``, -1 for a dim the function decides, e.g. the batch).

With ``backward_func`` the op has a gradient: one more py_func op calling it with the
forward inputs, the forward outputs and the gradients of the outputs (zeros for an output
no gradient reached), less the vars named in ``backward_skip_vars``; it returns the
gradients of the forward inputs, in order (None for zeros).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import OpArgumentError
from ..ir.text import format_shape
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, TensorType, slots

_FUNCS: dict[str, Callable[..., Any]] = {}
_LOCK = threading.Lock()


def register_py_func(name: str, func: Callable[..., Any]) -> str:
    """Make ``name`` stand for ``func`` in the py_func ops of every program of this
    process, replacing an earlier function of that name; returns the name. Programs,
    their JSON and checkpoints keep only such names: `fluid.layers.py_func` registers the
    functions it is given under ``module.qualname``, and before `fluid.load` of a program
    that calls one in another process, register it again:
    ``fluid.layers.register_py_func('train.clip', clip)``."""
    if not isinstance(name, str) or not name:
        raise OpArgumentError(f"register_py_func: name must be a non-empty str, got {name!r}")
    if not callable(func):
        raise OpArgumentError(f"register_py_func: {name!r} must be given a callable, got "
                              f"{type(func).__name__}")
    with _LOCK:
        _FUNCS[name] = func
    return name


def py_func_name(func: Callable[..., Any]) -> str:
    """The name `fluid.layers.py_func` registers ``func`` under: ``module.qualname``. A
    function of that name defined again (a notebook cell run again) replaces the earlier
    one; a lambda or a nested function, whose name another could share, gets ``#2``,
    ``#3``, ... when its name is taken by another function."""
    module = getattr(func, "__module__", None) or "?"
    base = f"{module}.{getattr(func, '__qualname__', None) or type(func).__name__}"
    if "<" not in base:
        return base
    with _LOCK:
        name, k = base, 1
        while _FUNCS.get(name, func) is not func:
            k += 1
            name = f"{base}#{k}"
    return name


def registered_py_func(name: str) -> Callable[..., Any]:
    """The function registered under ``name``; an error saying how to register it."""
    func = _FUNCS.get(name)
    if func is None:
        raise OpArgumentError(
            f"py_func: no Python function is registered under {name!r} in this process. A "
            f"program keeps only the names of its py_func functions: before loading or "
            f"running it, register each one, e.g. fluid.layers.register_py_func({name!r}, "
            f"my_function)")
    return func


# --- the op -------------------------------------------------------------------------------------

def _py_func_infer(ctx: InferContext) -> None:
    a = ctx.attrs
    registered_py_func(a["func"])
    if a["backward_func"]:
        registered_py_func(a["backward_func"])
    shapes, dtypes = a["out_shapes"], a["out_dtypes"]
    if len(shapes) != len(dtypes) or len(shapes) != ctx.output_count("Out"):
        ctx.fail(f"has {ctx.output_count('Out')} output(s) but out_shapes / out_dtypes give "
                 f"{len(shapes)} / {len(dtypes)} types")
    ctx.set_outputs("Out", [TensorType(tuple(int(d) for d in s), d)
                            for s, d in zip(shapes, dtypes)])


def _host(xp: Any, a: Any) -> np.ndarray:
    """A read-only NumPy view (or copy, from a device) of an input: the function must not
    change the op's inputs."""
    view = np.asarray(a) if xp is np else a.get()
    view = view.view()
    view.flags.writeable = False
    return view


def _results(name: str, got: Any, types: Sequence[TensorType]) -> list[np.ndarray]:
    """The function's return value as one array per output, checked against the types."""
    if got is None:
        got = []
    elif not isinstance(got, (list, tuple)):
        got = [got]
    if len(got) != len(types):
        raise ValueError(f"py_func {name!r} returned {len(got)} value(s) for "
                         f"{len(types)} output(s)")
    out = []
    for k, (value, t) in enumerate(zip(got, types)):
        if value is None and all(d >= 0 for d in t.shape):   # a gradient: zeros
            value = np.zeros(t.shape, t.dtype)
        arr = np.asarray(value, dtype=t.dtype)
        if arr.ndim != t.rank or any(d >= 0 and d != g for d, g in zip(t.shape, arr.shape)):
            raise ValueError(f"py_func {name!r} returned shape {list(arr.shape)} for output "
                             f"{k}, declared {format_shape(t.shape)}")
        out.append(arr)
    return out


def _py_func_kernel(ctx: KernelContext):
    xp, name = ctx.xp, ctx.attrs["func"]
    types = ctx.out_types

    def fn(*xs: Any) -> Any:
        got = registered_py_func(name)(*[_host(xp, a) for a in xs])
        outs = [xp.asarray(a) for a in _results(name, got, types)]
        return outs[0] if len(outs) == 1 else tuple(outs)
    return fn


def _zeros_for(g: GradContext, name: str) -> str:
    zero = g.tmp("py_func_zero")
    g.emit("fill_zeros_like", {"X": [name]}, {"Out": [zero]})
    return zero


def _py_func_grad(g: GradContext) -> None:
    backward = g.attrs["backward_func"]
    wanted = [n for n in g.in_grad("X") if n is not None]
    douts = g.out_grad("Out")
    if not backward or not wanted or not any(n is not None for n in douts):
        return
    skip = set(g.attrs["backward_skip_vars"])
    ins = [n for n in g.input("X") + g.output("Out") if n not in skip]
    ins += [d if d is not None else _zeros_for(g, o) for o, d in zip(g.output("Out"), douts)]
    grads = [n if n is not None else g.tmp("py_func_unused") for n in g.in_grad("X")]
    types = [g.var_type(n) for n in g.input("X")]
    g.emit("py_func", {"X": ins}, {"Out": grads},
           {"func": backward, "backward_func": "", "backward_skip_vars": [],
            "out_shapes": [list(t.shape) for t in types], "out_dtypes": [t.dtype for t in types]})


register(OpSpec("py_func", slots("X*"), slots("Out*"), _py_func_infer, _py_func_kernel,
                _py_func_grad, host_access="python", effects=True,
                attrs={"func": "", "backward_func": "", "backward_skip_vars": [],
                       "out_shapes": [], "out_dtypes": []},
                doc="Out = the Python function registered under `func`, called on X"))
