"""Ops that make tensors from numbers: fill_any_like, range, linspace, eye.

``fill_any_like``  Out = ``value`` in X's shape; in ``dtype`` ('' keeps X's). X is read for
                   its type only. A value the dtype cannot hold (1e100 in int32) is an error.
``range``          Out = start, start + step, ... up to but excluding end (NumPy's arange):
                   ``ceil(|end - start| / |step|)`` values. The three numbers are attrs, or
                   one-element inputs Start, End and Step; then the length is known only
                   when the op runs (a -1 dim), and the kernel reads the three values back.
``linspace``       Out = ``num`` evenly spaced values from start to stop, both included
                   (``[start]`` when num is 1); attrs, or inputs Start, Stop and Num.
``eye``            Out = the [num_rows, num_columns] identity (num_columns -1: square).

None of these has a gradient: their values come from attrs or from numbers that nothing
trains.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..ir.records import FLOAT_DTYPES, INT_DTYPES
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, slots

NUMERIC = FLOAT_DTYPES | INT_DTYPES


def check_fits(ctx: InferContext, value: Any, dtype: str, what: str = "value") -> None:
    """``value`` must be representable in ``dtype`` (Paddle refuses 1e100 for an int32)."""
    if dtype == "bool":
        return
    v = float(value)
    if dtype in INT_DTYPES:
        info = np.iinfo(dtype)
        if not (math.isfinite(v) and info.min <= v <= info.max):
            ctx.fail(f"{what}={value!r} does not fit {dtype} (its range is [{info.min}, "
                     f"{info.max}]); give a smaller value or a wider dtype")
    elif math.isfinite(v) and abs(v) > float(np.finfo(dtype).max):
        ctx.fail(f"{what}={value!r} overflows {dtype} (largest {np.finfo(dtype).max:g}); "
                 f"give a smaller value or float64")


def constant_kernel(make: Callable[[], Any]) -> Callable[..., Any]:
    """A kernel returning one array made at plan time on every call (never written:
    kernels do not write their inputs, and the planner gives its output no buffer)."""
    value = make()
    return lambda *inputs: value


# --- fill_any_like ------------------------------------------------------------------------------

def _fill_any_like_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    dtype = ctx.attrs["dtype"] or x.dtype
    if dtype not in NUMERIC | {"bool"}:
        ctx.fail_dtype(f"dtype must be a numeric or bool dtype, got {dtype!r}")
    check_fits(ctx, ctx.attrs["value"], dtype)
    ctx.set_output("Out", x.shape, dtype)


def _fill_any_like_kernel(ctx: KernelContext):
    o = ctx.output("Out")
    return constant_kernel(lambda: ctx.xp.full(o.shape, ctx.attrs["value"], dtype=o.dtype))


register(OpSpec("fill_any_like", slots("X"), slots("Out"), _fill_any_like_infer,
                _fill_any_like_kernel, shape_only=("X",), attrs={"value": 0.0, "dtype": ""},
                doc="Out = value in X's shape, in dtype ('' keeps X's)"))


# --- range --------------------------------------------------------------------------------------

def range_length(start: float, end: float, step: float, integer: bool) -> int:
    """How many values NumPy's arange(start, end, step) gives; errors as ValueError."""
    if step == 0:
        raise ValueError("range: step must not be 0")
    if (end - start) * step < 0:
        raise ValueError(f"range: step={step} never reaches end={end} from start={start}; "
                         f"give a step of the sign of end - start")
    if integer:
        return int((abs(end - start) + abs(step) - 1) // abs(step))
    return int(math.ceil(abs((end - start) / step)))


def _tensor_args(ctx: InferContext, names: tuple[str, ...]) -> bool:
    """Whether the op takes its numbers as inputs (all of them) rather than attrs."""
    given = [n for n in names if ctx.has_input(n)]
    if given and len(given) != len(names):
        ctx.fail(f"give all of the inputs {', '.join(names)} or none (then attrs), got "
                 f"only {', '.join(given)}")
    for n in given:
        t = ctx.input(n)
        if any(d not in (1, -1) for d in t.shape):
            ctx.fail(f"input {n} must hold one value, got shape {list(t.shape)}")
    return bool(given)


def _range_infer(ctx: InferContext) -> None:
    a = ctx.attrs
    if _tensor_args(ctx, ("Start", "End", "Step")):
        dtype = ctx.input("Start").dtype
        if dtype not in NUMERIC:
            ctx.fail_dtype(f"Start must be an int or float, got {dtype}")
        ctx.set_output("Out", (-1,), dtype)
        return
    dtype = a["dtype"]
    if dtype not in NUMERIC:
        ctx.fail_dtype(f"dtype must be an int or float dtype, got {dtype!r}")
    try:
        n = range_length(a["start"], a["end"], a["step"], dtype in INT_DTYPES)
    except ValueError as e:
        ctx.fail(str(e).removeprefix("range: "))
    ctx.set_output("Out", (n,), dtype)


def arange(xp: Any, start: float, end: float, step: float, dtype: str) -> Any:
    integer = dtype in INT_DTYPES
    n = range_length(start, end, step, integer)
    if integer:
        return xp.arange(int(start), int(start) + n * int(step), int(step), dtype=dtype)
    return (xp.arange(n, dtype="float64") * float(step) + float(start)).astype(dtype)


def _one(a: Any) -> float:
    """The single value of a one-element array, read back as a Python number."""
    return a.reshape(-1)[0].item()


def _range_kernel(ctx: KernelContext):
    xp, dtype, a = ctx.xp, ctx.output("Out").dtype, ctx.attrs
    if not ctx.has_input("Start"):
        return constant_kernel(lambda: arange(xp, a["start"], a["end"], a["step"], dtype))
    return lambda s, e, t: arange(xp, _one(s), _one(e), _one(t), dtype)


register(OpSpec("range", slots("Start?", "End?", "Step?"), slots("Out"), _range_infer,
                _range_kernel, host_access="reads",
                attrs={"start": 0.0, "end": 1.0, "step": 1.0, "dtype": "float32"},
                doc="Out = start, start + step, ... (excluding end); attrs or one-value "
                    "inputs Start, End, Step"))


# --- linspace -----------------------------------------------------------------------------------

def _linspace_infer(ctx: InferContext) -> None:
    a = ctx.attrs
    if _tensor_args(ctx, ("Start", "Stop", "Num")):
        dtype = ctx.input("Start").dtype
        if ctx.input("Num").dtype not in INT_DTYPES:
            ctx.fail_dtype(f"Num must be an integer, got {ctx.input('Num').dtype}")
        if dtype not in FLOAT_DTYPES:
            ctx.fail_dtype(f"Start must be float32 or float64, got {dtype}")
        ctx.set_output("Out", (-1,), dtype)
        return
    if a["dtype"] not in FLOAT_DTYPES:
        ctx.fail_dtype(f"dtype must be float32 or float64, got {a['dtype']!r}")
    if int(a["num"]) < 1:
        ctx.fail(f"num must be a positive number of values, got {a['num']}")
    ctx.set_output("Out", (int(a["num"]),), a["dtype"])


def linspace(xp: Any, start: float, stop: float, num: int, dtype: str) -> Any:
    if num < 1:
        raise ValueError(f"linspace: Num must be positive, got {num}")
    return xp.linspace(float(start), float(stop), int(num), dtype="float64").astype(dtype)


def _linspace_kernel(ctx: KernelContext):
    xp, dtype, a = ctx.xp, ctx.output("Out").dtype, ctx.attrs
    if not ctx.has_input("Start"):
        return constant_kernel(lambda: linspace(xp, a["start"], a["stop"], a["num"], dtype))
    return lambda s, e, n: linspace(xp, _one(s), _one(e), int(_one(n)), dtype)


register(OpSpec("linspace", slots("Start?", "Stop?", "Num?"), slots("Out"), _linspace_infer,
                _linspace_kernel, host_access="reads",
                attrs={"start": 0.0, "stop": 1.0, "num": 1, "dtype": "float32"},
                doc="Out = num evenly spaced values from start to stop (both included)"))


# --- eye ----------------------------------------------------------------------------------------

def _eye_shape(ctx: InferContext | KernelContext) -> tuple[int, int]:
    rows, cols = int(ctx.attrs["num_rows"]), int(ctx.attrs["num_columns"])
    return rows, rows if cols == -1 else cols


def _eye_infer(ctx: InferContext) -> None:
    rows, cols = _eye_shape(ctx)
    if rows < 0 or cols < 0:
        ctx.fail(f"num_rows={rows} and num_columns={cols} must be >= 0 (num_columns -1: "
                 f"num_rows)")
    if ctx.attrs["dtype"] not in NUMERIC | {"bool"}:
        ctx.fail_dtype(f"dtype must be a numeric dtype, got {ctx.attrs['dtype']!r}")
    ctx.set_output("Out", (rows, cols), ctx.attrs["dtype"])


def _eye_kernel(ctx: KernelContext):
    rows, cols = _eye_shape(ctx)
    return constant_kernel(lambda: ctx.xp.eye(rows, cols, dtype=ctx.attrs["dtype"]))


register(OpSpec("eye", (), slots("Out"), _eye_infer, _eye_kernel,
                attrs={"num_rows": 1, "num_columns": -1, "dtype": "float32"},
                doc="Out = the identity matrix [num_rows, num_columns]"))
