"""Unary elementwise ops (activations and math functions), one table row each.

Each row gives the forward ``f(xp, x, out, attrs)`` (writing into ``out`` when it is not
None) and the local gradient ``df(xp, x, y, g, attrs)`` where ``y`` is the forward output
and ``g`` dOut. ``uses`` says which forward values the gradient op reads, so the planner
can free the others early.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, infer_like, slots


def _float_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype)


def _define(name: str, forward: Callable, grad: Optional[Callable], uses: Sequence[str],
            attrs: Optional[Mapping[str, Any]] = None, doc: str = "") -> None:
    attrs = dict(attrs or {})

    def kernel(ctx: KernelContext):
        xp, out, a = ctx.xp, ctx.buffer("Out"), ctx.attrs
        return lambda x: forward(xp, x, out, a)

    def maker(g: GradContext) -> None:
        dout = g.out_grad("Out")
        if not dout or dout[0] is None or not g.wants("X"):
            return
        inputs = {"X": g.input("X"), "Out": g.output("Out"), "Out@GRAD": dout}
        g.emit(name + "_grad", {k: v for k, v in inputs.items() if k in uses or k == "Out@GRAD"},
               {"X@GRAD": g.in_grad("X")}, g.attrs)

    def grad_kernel(ctx: KernelContext):
        xp, out, a = ctx.xp, ctx.buffer("X@GRAD"), ctx.attrs
        has_x, has_y = ctx.has_input("X"), ctx.has_input("Out")

        def fn(*args):
            x = args[0] if has_x else None
            y = args[1 if has_x else 0] if has_y else None
            r = grad(xp, x, y, args[-1], a)
            if out is None:
                return r
            out[...] = r
            return out
        return fn

    register(OpSpec(name, slots("X"), slots("Out"), _float_infer, kernel,
                    maker if grad is not None else None, attrs=attrs, doc=doc))
    if grad is not None:
        grad_in = [s for s in ("X", "Out") if s in uses] + ["Out@GRAD"]
        like = "X" if "X" in uses else ("Out" if "Out" in uses else "Out@GRAD")
        register(OpSpec(name + "_grad", slots(*grad_in), slots("X@GRAD"),
                        infer_like({"X@GRAD": like}), grad_kernel, attrs=attrs))


_define("square", lambda xp, x, o, a: xp.multiply(x, x, out=o),
        lambda xp, x, y, g, a: 2 * x * g, ("X",), doc="Out = X * X")
_define("relu", lambda xp, x, o, a: xp.maximum(x, 0, out=o),
        lambda xp, x, y, g, a: g * (y > 0), ("Out",), doc="Out = max(X, 0)")
_define("leaky_relu",
        lambda xp, x, o, a: xp.where(x > 0, x, x * a["alpha"]),
        lambda xp, x, y, g, a: xp.where(x > 0, g, g * a["alpha"]), ("X",),
        attrs={"alpha": 0.02}, doc="Out = X if X > 0 else alpha * X")
_define("sigmoid",
        lambda xp, x, o, a: xp.reciprocal(1 + xp.exp(-x), out=o),
        lambda xp, x, y, g, a: g * y * (1 - y), ("Out",), doc="Out = 1 / (1 + exp(-X))")
_define("tanh", lambda xp, x, o, a: xp.tanh(x, out=o),
        lambda xp, x, y, g, a: g * (1 - y * y), ("Out",), doc="Out = tanh(X)")
_define("exp", lambda xp, x, o, a: xp.exp(x, out=o),
        lambda xp, x, y, g, a: g * y, ("Out",), doc="Out = exp(X)")
_define("log", lambda xp, x, o, a: xp.log(x, out=o),
        lambda xp, x, y, g, a: g / x, ("X",), doc="Out = ln(X)")
_define("sqrt", lambda xp, x, o, a: xp.sqrt(x, out=o),
        lambda xp, x, y, g, a: g * 0.5 / y, ("Out",), doc="Out = sqrt(X)")
_define("abs", lambda xp, x, o, a: xp.abs(x, out=o),
        lambda xp, x, y, g, a: g * xp.sign(x), ("X",), doc="Out = |X|")
_define("sign", lambda xp, x, o, a: xp.sign(x, out=o), None, (),
        doc="Out = -1, 0 or 1 by the sign of X (no gradient)")
_define("scale",
        lambda xp, x, o, a: (x * a["scale"] + a["bias"]) if a["bias_after_scale"]
        else (x + a["bias"]) * a["scale"],
        lambda xp, x, y, g, a: g * a["scale"], (),
        attrs={"scale": 1.0, "bias": 0.0, "bias_after_scale": True},
        doc="Out = scale * X + bias (or scale * (X + bias) when bias_after_scale is False)")
_define("clip", lambda xp, x, o, a: xp.clip(x, a["min"], a["max"], out=o),
        lambda xp, x, y, g, a: g * ((x >= a["min"]) & (x <= a["max"])), ("X",),
        attrs={"min": -1.0, "max": 1.0}, doc="Out = min(max(X, min), max)")
_define("pow", lambda xp, x, o, a: xp.power(x, a["factor"], out=o),
        lambda xp, x, y, g, a: g * a["factor"] * xp.power(x, a["factor"] - 1), ("X",),
        attrs={"factor": 1.0}, doc="Out = X ** factor")
