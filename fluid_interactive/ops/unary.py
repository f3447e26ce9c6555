"""Unary elementwise ops (activations and math functions), one table row each.

Each row gives the forward ``f(xp, x, o, attrs)`` and the gradient ``df(xp, x, y, g, o,
attrs)`` where ``y`` is the forward output, ``g`` dOut and ``o`` the output buffer (None:
allocate) that the last ufunc writes into. ``uses`` says which forward values the gradient
op reads, so the planner can free the others early.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from math import prod
from typing import Any

import numpy as np

from ..backend.rows import pointwise, pointwise_fits
from .layouts import LayoutRule
from .registry import register
from .spec import (
    GradContext,
    InferContext,
    KernelContext,
    OpSpec,
    ScalarForm,
    infer_like,
    present,
    slots,
)


def _float_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype)


def _tensor_infer(tensors: Mapping[str, str]) -> Callable[[InferContext], None]:
    """`_float_infer`, and each tensor given for an attr holds one number."""
    def infer(ctx: InferContext) -> None:
        for slot, attr in tensors.items():
            if ctx.has_input(slot):
                t = ctx.input(slot)
                if all(d >= 0 for d in t.shape) and prod(t.shape) != 1:
                    ctx.fail(f"{slot} gives the attr {attr!r} as a tensor, which must hold "
                             f"one number; got shape {list(t.shape)}")
        _float_infer(ctx)
    return infer


def _with_tensors(attrs: Mapping[str, Any], tensors: Mapping[str, str],
                  values: Mapping[str, Any], dtype: str) -> dict[str, Any]:
    """The attrs with those given as tensors replaced by their 0-d arrays (in X's dtype
    when X is float), so that the value stays on the device."""
    merged = dict(attrs)
    for slot, attr in tensors.items():
        if slot in values:
            v = values[slot].reshape(())
            merged[attr] = v.astype(dtype, copy=False) if dtype.startswith("float") else v
    return merged


def define_unary(name: str, forward: Callable, grad: Callable | None, uses: Sequence[str],
                 attrs: Mapping[str, Any] | None = None, doc: str = "",
                 linear_grad: Callable[[KernelContext], Callable | None] | None = None,
                 inplace: bool = True, scalar: Callable | None = None,
                 tensors: Mapping[str, str] | None = None,
                 infer: Callable[[InferContext], None] | None = None,
                 rows_values: bool = False) -> None:
    """Register op ``name`` and its ``<name>_grad`` from one table row.

    ``inplace``: ``forward`` writes Out with ``out=o`` after reading X, so the planner
    may hand it X's own buffer (and likewise the gradient dOut's). ``scalar``: the
    forward on one element (`OpSpec.scalar`). ``tensors``: optional input slots that give
    an attr as a 1-element tensor instead (Paddle's ``ScaleTensor`` of scale): the rules
    then see that attr as a 0-d array. ``infer``: a shape rule other than X's type."""
    attrs, tensors = dict(attrs or {}), dict(tensors or {})
    extra = tuple(s + "?" for s in tensors)
    register(OpSpec(name, slots("X", *extra), slots("Out"),
                    infer or (_tensor_infer(tensors) if tensors else _float_infer),
                    _forward_kernel(forward, tensors),
                    _grad_maker(name, uses, tensors) if grad is not None else None,
                    attrs=attrs, doc=doc, inplace=(("Out", "X"),) if inplace else (),
                    scalar=scalar, layout=LayoutRule(("X", "Out")), rows_values=rows_values))
    if grad is not None:
        grad_in = [s for s in ("X", "Out") if s in uses] + list(extra) + ["Out@GRAD"]
        like = "X" if "X" in uses else ("Out" if "Out" in uses else "Out@GRAD")
        register(OpSpec(name + "_grad", slots(*grad_in), slots("X@GRAD"),
                        infer_like({"X@GRAD": like}),
                        _grad_kernel(grad, linear_grad, tensors), attrs=attrs,
                        inplace=(("X@GRAD", "Out@GRAD"),),
                        layout=LayoutRule(("X", "Out", "Out@GRAD", "X@GRAD"))))


def _by_rows(ctx: KernelContext, out: Any, slots: Sequence[str]) -> bool:
    """Whether the kernel's rows can be split over threads (backend/rows.py): it writes
    a planned buffer of the shape of every input of ``slots`` given."""
    return pointwise_fits(ctx.xp, out, (ctx.input(s).shape for s in slots
                                        if ctx.has_input(s)))


def _forward_kernel(forward: Callable, tensors: Mapping[str, str]):
    def kernel(ctx: KernelContext):
        xp, out, a = ctx.xp, ctx.buffer("Out"), ctx.attrs
        given = [s for s in tensors if ctx.has_input(s)]
        if not given and _by_rows(ctx, out, ("X",)):
            return pointwise(lambda x, o: forward(xp, x, o, a), out)
        if not given:
            return lambda x: forward(xp, x, out, a)
        dtype = ctx.input("X").dtype
        return lambda x, *ts: forward(
            xp, x, out, _with_tensors(a, tensors, dict(zip(given, ts)), dtype))
    return kernel


def _grad_maker(name: str, uses: Sequence[str], tensors: Mapping[str, str]):
    def maker(g: GradContext) -> None:
        dout = g.out_grad("Out")
        if not dout or not present(dout) or not g.wants("X"):
            return
        inputs: dict[str, Sequence[str | None]] = {
            "X": g.input("X"), "Out": g.output("Out"), "Out@GRAD": dout}
        inputs = {k: v for k, v in inputs.items() if k in uses or k == "Out@GRAD"}
        inputs.update({s: g.input(s) for s in tensors if g.input(s)})
        g.emit(name + "_grad", inputs, {"X@GRAD": [n for n in g.in_grad("X") if n]},
               g.attrs)
    return maker


def _grad_kernel(grad: Callable, linear_grad: Callable | None, tensors: Mapping[str, str]):
    def grad_kernel(ctx: KernelContext):
        xp, out, a = ctx.xp, ctx.buffer("X@GRAD"), ctx.attrs
        has_x, has_y = ctx.has_input("X"), ctx.has_input("Out")
        special = linear_grad(ctx) if linear_grad is not None else None
        if special is not None:
            return special
        if any(ctx.has_input(s) for s in tensors):
            return _tensor_grad_kernel(ctx, grad, tensors)
        if _by_rows(ctx, out, ("X", "Out", "Out@GRAD")):
            rows = pointwise(lambda x, y, g, o: grad(xp, x, y, g, o, a), out)
            if has_x and has_y:
                return rows
            if has_x:
                return lambda x, g: rows(x, None, g)
            return (lambda y, g: rows(None, y, g)) if has_y else (lambda g: rows(None, None, g))
        if has_x and has_y:
            return lambda x, y, g: grad(xp, x, y, g, out, a)
        if has_x:
            return lambda x, g: grad(xp, x, None, g, out, a)
        if has_y:
            return lambda y, g: grad(xp, None, y, g, out, a)
        return lambda g: grad(xp, None, None, g, out, a)
    return grad_kernel


def _tensor_grad_kernel(ctx: KernelContext, grad: Callable, tensors: Mapping[str, str]):
    """A gradient kernel reading some attrs from tensors: its inputs by slot name."""
    xp, out, a = ctx.xp, ctx.buffer("X@GRAD"), ctx.attrs
    names = [s.name for s in ctx.spec.inputs if ctx.has_input(s.name)]
    dtype = ctx.input("Out@GRAD").dtype

    def fn(*args):
        v = dict(zip(names, args))
        return grad(xp, v.get("X"), v.get("Out"), v["Out@GRAD"], out,
                    _with_tensors(a, tensors, v, dtype))
    return fn


def _square_grad_of_uniform(ctx: KernelContext) -> Callable | None:
    """d(X*X) when dOut is one number c everywhere (the gradient of a mean): 2c * X."""
    c = ctx.uniform_constant("Out@GRAD")
    if c is None or ctx.input("X").shape != ctx.input("Out@GRAD").shape:
        return None
    xp, out, factor = ctx.xp, ctx.buffer("X@GRAD"), 2.0 * c
    return lambda x, g: xp.multiply(x, factor, out=out)


define_unary("square", lambda xp, x, o, a: xp.multiply(x, x, out=o),
        lambda xp, x, y, g, o, a: xp.multiply(xp.multiply(x, g, out=o), 2.0, out=o),
        ("X",), doc="Out = X * X", linear_grad=_square_grad_of_uniform)


# --- one element of each op, for the compiled chains (OpSpec.scalar) ---------------------

def _relu_one(x, zero):
    """NumPy's maximum(x, 0): +0 for -0, NaN stays NaN."""
    return x if x > zero else (x if x != x else zero)


def _sigmoid_one(x, one):
    return one / (one + np.exp(-x))


def _tanh_one(x):
    return np.tanh(x)


def _sign_one(x, one, zero):
    return one if x > zero else (-one if x < zero else (x if x != x else zero))


def _scaled_one(x, scale):
    return x * scale


def _shifted_one(x, bias):
    return x + bias


def _scaled_then_shifted_one(x, scale, bias):
    return x * scale + bias


def _shifted_then_scaled_one(x, bias, scale):
    return (x + bias) * scale


def clip_one(x, lo, hi):
    """`xp.clip` on one element (lo < hi): NaN stays NaN."""
    return hi if x > hi else (lo if x < lo else x)


define_unary("relu", lambda xp, x, o, a: xp.maximum(x, 0, out=o),
        lambda xp, x, y, g, o, a: xp.multiply(g, y > 0, out=o), ("Out",),
        doc="Out = max(X, 0)",   # NumPy's maximum: +0 for -0, NaN stays NaN
        scalar=lambda a: ScalarForm(_relu_one, (0.0,)))
define_unary("leaky_relu",
        lambda xp, x, o, a: xp.where(x > 0, x, x * a["alpha"]),
        lambda xp, x, y, g, o, a: xp.multiply(
            g, xp.where(x > 0, 1.0, a["alpha"]).astype(g.dtype), out=o), ("X",),
        attrs={"alpha": 0.02}, doc="Out = X if X > 0 else alpha * X", inplace=False)
define_unary("sigmoid",
        lambda xp, x, o, a: xp.reciprocal(1 + xp.exp(-x), out=o),
        lambda xp, x, y, g, o, a: xp.multiply(g * y, 1 - y, out=o), ("Out",),
        doc="Out = 1 / (1 + exp(-X))",
        scalar=lambda a: ScalarForm(_sigmoid_one, (1.0,)))
define_unary("tanh", lambda xp, x, o, a: xp.tanh(x, out=o),
        lambda xp, x, y, g, o, a: xp.multiply(g, 1 - y * y, out=o), ("Out",),
        doc="Out = tanh(X)", scalar=lambda a: ScalarForm(_tanh_one))
define_unary("exp", lambda xp, x, o, a: xp.exp(x, out=o),
        lambda xp, x, y, g, o, a: xp.multiply(g, y, out=o), ("Out",), doc="Out = exp(X)")
define_unary("log", lambda xp, x, o, a: xp.log(x, out=o),
        lambda xp, x, y, g, o, a: xp.divide(g, x, out=o), ("X",), doc="Out = ln(X)")
define_unary("sqrt", lambda xp, x, o, a: xp.sqrt(x, out=o),
        lambda xp, x, y, g, o, a: xp.divide(g * 0.5, y, out=o), ("Out",),
        doc="Out = sqrt(X)")
define_unary("abs", lambda xp, x, o, a: xp.abs(x, out=o),
        lambda xp, x, y, g, o, a: xp.multiply(g, xp.sign(x), out=o), ("X",),
        doc="Out = |X|")
define_unary("sign", lambda xp, x, o, a: xp.sign(x, out=o), None, (),
             doc="Out = -1, 0 or 1 by the sign of X (no gradient)",
             scalar=lambda a: ScalarForm(_sign_one, (1.0, 0.0)))


def _scale_forward(xp, x, o, a):
    scale, bias = a["scale"], a["bias"]
    if x.dtype.kind != "f":  # integer vars stay integer: compute, then cast back
        r = (x * scale + bias) if a["bias_after_scale"] else (x + bias) * scale
        return r.astype(x.dtype) if o is None else xp.copyto(o, r, casting="unsafe") or o
    if bias == 0.0:
        return xp.multiply(x, scale, out=o)
    if isinstance(scale, float) and scale == 1.0:   # not a ScaleTensor's array
        return xp.add(x, bias, out=o)
    if a["bias_after_scale"]:
        return xp.add(xp.multiply(x, scale, out=o), bias, out=o)
    return xp.multiply(xp.add(x, bias, out=o), scale, out=o)


def _scale_scalar(a: Mapping[str, Any]) -> ScalarForm:
    """`_scale_forward` on one float element, in the same order."""
    scale, bias = a["scale"], a["bias"]
    if bias == 0.0:
        return ScalarForm(_scaled_one, (scale,))
    if scale == 1.0:
        return ScalarForm(_shifted_one, (bias,))
    if a["bias_after_scale"]:
        return ScalarForm(_scaled_then_shifted_one, (scale, bias))
    return ScalarForm(_shifted_then_scaled_one, (bias, scale))


define_unary("scale", _scale_forward,
             lambda xp, x, y, g, o, a: xp.multiply(g, a["scale"], out=o), (),
             attrs={"scale": 1.0, "bias": 0.0, "bias_after_scale": True},
             scalar=_scale_scalar, tensors={"ScaleTensor": "scale"},
             doc="Out = scale * X + bias (or scale * (X + bias) when bias_after_scale is "
                 "False); ScaleTensor, a 1-element tensor, gives scale when present")


# Paddle's clip passes the gradient strictly inside (min, max).
define_unary("clip", lambda xp, x, o, a: xp.clip(x, a["min"], a["max"], out=o),
             lambda xp, x, y, g, o, a: xp.multiply(g, (x > a["min"]) & (x < a["max"]),
                                                   out=o),
             ("X",), attrs={"min": -1.0, "max": 1.0}, tensors={"Min": "min", "Max": "max"},
             scalar=lambda a: ScalarForm(clip_one, (a["min"], a["max"])), rows_values=True,
             doc="Out = min(max(X, min), max); Min and Max, 1-element tensors, give the "
                 "bounds when present. A rows-only X: its merged rows are clipped (as "
                 "Paddle's clip of SelectedRows), the other rows stay zero")
define_unary("pow", lambda xp, x, o, a: xp.power(x, a["factor"], out=o),
             lambda xp, x, y, g, o, a: xp.multiply(
                 g * a["factor"], xp.power(x, a["factor"] - 1), out=o), ("X",),
             attrs={"factor": 1.0}, tensors={"FactorTensor": "factor"},
             doc="Out = X ** factor; FactorTensor, a 1-element tensor, gives factor when "
                 "present")
