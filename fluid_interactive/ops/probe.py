"""Ops that look at a tensor rather than compute with it.

``print``     Out is In, and In is printed to stdout (a message, its name, dtype, shape and
              the first ``summarize`` values) each time the op runs, at most ``first_n``
              times (-1: every time). Its gradient is a ``print`` of the gradient, marked
              ``is_forward=False``; ``print_phase`` ('forward', 'backward' or 'both') says
              which of the two print. Never dropped from a plan, never run as a constant
``is_empty``  Out bool [1]: whether X has no elements (its shape alone is read)
"""
from __future__ import annotations

from typing import Any

from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, slots

PHASES = ("FORWARD", "BACKWARD", "BOTH")


def _print_infer(ctx: InferContext) -> None:
    phase = str(ctx.attrs["print_phase"]).upper()
    if phase not in PHASES:
        ctx.fail(f"print: print_phase must be one of 'forward', 'backward', 'both', got "
                 f"{ctx.attrs['print_phase']!r}")
    x = ctx.input("In")
    ctx.set_output("Out", x.shape, x.dtype)


def describe(name: str, value: Any, attrs: Any) -> str:
    """The text one run of ``print`` writes for ``value``."""
    lines = [str(attrs["message"])] if attrs["message"] else []
    if attrs["print_tensor_name"]:
        lines.append(f"Variable: {name}")
    if attrs["print_tensor_lod"]:
        lines.append("  - lod: {}")
    if attrs["print_tensor_shape"]:
        lines.append(f"  - shape: {list(value.shape)}")
    if attrs["print_tensor_type"]:
        lines.append(f"  - dtype: {value.dtype}")
    flat = value.reshape(-1)
    n = int(attrs["summarize"])
    shown = flat if n < 0 else flat[:n]
    lines.append(f"  - data: [{' '.join(str(v) for v in shown.tolist())}]")
    return "\n".join(lines)


def _print_kernel(ctx: KernelContext):
    attrs = dict(ctx.attrs)
    phase = str(attrs["print_phase"]).upper()
    forward = bool(attrs["is_forward"])
    prints = phase == "BOTH" or phase == ("FORWARD" if forward else "BACKWARD")
    name = ctx.input_name("In")
    budget = [int(attrs["first_n"])]

    def print_(x: Any) -> Any:
        if prints and budget[0] != 0:
            budget[0] -= 1 if budget[0] > 0 else 0
            print(describe(name, x, attrs), flush=True)
        return x
    return print_


def _print_grad(g: GradContext) -> None:
    dout, dx = g.flowing("Out"), g.in_grad("In")
    if dout is not None and dx and dx[0]:
        g.emit("print", {"In": [dout]}, {"Out": dx}, {**g.attrs, "is_forward": False})


register(OpSpec("print", slots("In"), slots("Out"), _print_infer, _print_kernel, _print_grad,
                attrs={"first_n": -1, "message": "", "summarize": 20,
                       "print_tensor_name": True, "print_tensor_type": True,
                       "print_tensor_shape": True, "print_tensor_lod": True,
                       "print_phase": "BOTH", "is_forward": True},
                aliases=True, effects=True, host_access="io",
                doc="Out = In, printing In (name, dtype, shape, first values) each run"))


def _empty_infer(ctx: InferContext) -> None:
    ctx.set_output("Out", (1,), "bool")


def _empty_kernel(ctx: KernelContext):
    xp, out = ctx.xp, ctx.buffer("Out")
    empty = 0 in ctx.input("X").shape   # X is read for its shape only (shape_only)

    def is_empty(x: Any) -> Any:
        o = xp.empty((1,), "bool") if out is None else out
        o.fill(empty)
        return o
    return is_empty


register(OpSpec("is_empty", slots("X"), slots("Out"), _empty_infer, _empty_kernel,
                shape_only=("X",), doc="Out [1] bool: whether X has no elements"))
