"""Parameter update ops (role Optimize). Each returns new arrays and never writes into
its inputs, so a step's updates commit together only after the whole step succeeded.

Kernels keep their per-step work to a few ufunc calls: scratch arrays are allocated once
in the factory, and an output is written into the planner's buffer when it offers one
(``out=None`` otherwise, so NumPy allocates the new array).
"""
from __future__ import annotations

from collections.abc import Callable

from ..ir.records import SELECTED_ROWS
from .registry import register
from .sparse_update import (
    AdamArithmetic,
    lazy,
    rows_in_place,
    sparse_adam,
    sparse_kernel,
    sparse_sgd,
)
from .spec import InferContext, KernelContext, OpSpec, TensorType, slots


def _check_param_grad(ctx: InferContext) -> None:
    p, g = ctx.input("Param"), ctx.input("Grad")
    if g.kind not in ("tensor", SELECTED_ROWS):
        ctx.fail(f"Grad must be a tensor or rows of one (selected_rows), got a {g.kind}")
    if p.shape != g.shape or p.dtype != g.dtype:
        ctx.fail(f"Param {p.dtype}{list(p.shape)} and Grad {g.dtype}{list(g.shape)} must match")


def _check_like_param(ctx: InferContext, slot: str) -> None:
    p, s = ctx.input("Param"), ctx.input(slot)
    if p.shape != s.shape or p.dtype != s.dtype:
        ctx.fail(f"{slot} {s.dtype}{list(s.shape)} must have Param's shape and dtype "
                 f"{p.dtype}{list(p.shape)}")


def _check_single(ctx: InferContext, slot: str) -> TensorType:
    """``slot`` holds one value (shape [1] or []; -1 dims are allowed while tracing)."""
    t = ctx.input(slot)
    if any(d not in (1, -1) for d in t.shape):
        ctx.fail(f"{slot} must hold a single value (shape [1]), got {t.dtype}{list(t.shape)}")
    if not t.dtype.startswith("float"):
        ctx.fail_dtype(f"{slot} must be a float, got {t.dtype}")
    return t


def _set_like(ctx: InferContext, pairs: dict[str, str]) -> None:
    for out_slot, in_slot in pairs.items():
        t = ctx.input(in_slot)
        ctx.set_output(out_slot, t.shape, t.dtype)


def update_infer(states: tuple[str, ...] = (), singles: tuple[str, ...] = ("LearningRate",),
                 ) -> Callable[[InferContext], None]:
    """The shape rule of an update op: Param and Grad alike, each of ``states`` (and
    ``<slot>Out``) of Param's shape and dtype, each of ``singles`` (that is present) a
    single float; ParamOut like Param, ``<single>Out`` (when the op writes it) like its
    input."""
    def infer(ctx: InferContext) -> None:
        _check_param_grad(ctx)
        for slot in states:
            _check_like_param(ctx, slot)
        present = [s for s in singles if ctx.has_input(s)]
        for slot in present:
            _check_single(ctx, slot)
        _set_like(ctx, {"ParamOut": "Param", **{s + "Out": s for s in states + tuple(present)
                                                  if ctx.has_output(s + "Out")}})
    return infer


# --- sgd --------------------------------------------------------------------------------------

def _sgd_infer(ctx: InferContext) -> None:
    _check_param_grad(ctx)
    _check_single(ctx, "LearningRate")
    p = ctx.input("Param")
    ctx.set_output("ParamOut", p.shape, p.dtype)


def sgd_update(xp, param, grad, lr, p_out, scratch):
    """ParamOut = Param - lr * Grad into ``p_out`` (None: a new array); one place for the
    per-parameter and the fused kernels, so both compute bit-identical values."""
    xp.multiply(grad, lr, out=scratch)
    return xp.subtract(param, scratch, out=p_out)


def _sgd_kernel(ctx: KernelContext):
    xp = ctx.xp
    p = ctx.input("Param")
    step = xp.empty(p.shape, p.dtype)
    p_out = ctx.buffer("ParamOut")
    return lambda param, grad, lr: sgd_update(xp, param, grad, lr, p_out, step)


register(OpSpec("sgd", slots("Param", "Grad", "LearningRate"), slots("ParamOut"), _sgd_infer,
                sparse_kernel(_sgd_kernel, sparse_sgd(sgd_update)), fused="fused_sgd",
                fused_shared=("LearningRate",), sparse_inputs=("Grad",),
                row_writes=rows_in_place(("ParamOut", "Param")),
                doc="ParamOut = Param - LearningRate * Grad; a rows-only Grad updates its "
                    "rows alone, in place"))


# --- momentum ---------------------------------------------------------------------------------

def _momentum_infer(ctx: InferContext) -> None:
    _check_param_grad(ctx)
    _check_like_param(ctx, "Velocity")
    _check_single(ctx, "LearningRate")
    _set_like(ctx, {"ParamOut": "Param", "VelocityOut": "Velocity"})


def momentum_update(xp, mu: float, nesterov: bool, param, grad, velocity, lr, p_out, v_out,
                    scratch):
    """(ParamOut, VelocityOut) of one momentum step, written into ``p_out``, ``v_out``."""
    v = xp.multiply(velocity, mu, out=v_out)
    xp.add(v, grad, out=v)                    # v = mu * v + g
    if nesterov:
        xp.multiply(v, mu, out=scratch)
        xp.add(scratch, grad, out=scratch)
        xp.multiply(scratch, lr, out=scratch)  # lr * (g + mu * v)
    else:
        xp.multiply(v, lr, out=scratch)
    return xp.subtract(param, scratch, out=p_out), v


def _momentum_kernel(ctx: KernelContext):
    xp = ctx.xp
    p = ctx.input("Param")
    mu, nesterov = float(ctx.attrs["mu"]), bool(ctx.attrs["use_nesterov"])
    p_out, v_out = ctx.buffer("ParamOut"), ctx.buffer("VelocityOut")
    step = xp.empty(p.shape, p.dtype)
    return lambda param, grad, velocity, lr: momentum_update(
        xp, mu, nesterov, param, grad, velocity, lr, p_out, v_out, step)


register(OpSpec(
    "momentum", slots("Param", "Grad", "Velocity", "LearningRate"),
    slots("ParamOut", "VelocityOut"), _momentum_infer, _momentum_kernel,
    attrs={"mu": 0.9, "use_nesterov": False}, fused="fused_momentum",
    fused_shared=("LearningRate",),
    doc="VelocityOut = mu * Velocity + Grad; ParamOut = Param - LearningRate * VelocityOut, "
        "or with use_nesterov Param - LearningRate * (Grad + mu * VelocityOut)"))


# --- adam -------------------------------------------------------------------------------------

def _adam_infer(ctx: InferContext) -> None:
    _check_param_grad(ctx)
    _check_like_param(ctx, "Moment1")
    _check_like_param(ctx, "Moment2")
    _check_single(ctx, "LearningRate")
    _check_single(ctx, "Beta1Pow")
    _check_single(ctx, "Beta2Pow")
    for name in ("beta1", "beta2"):
        if not 0.0 <= float(ctx.attrs[name]) < 1.0:
            ctx.fail(f"{name} must lie in [0, 1), got {ctx.attrs[name]}")
    _set_like(ctx, {"ParamOut": "Param", "Moment1Out": "Moment1", "Moment2Out": "Moment2",
                    "Beta1PowOut": "Beta1Pow", "Beta2PowOut": "Beta2Pow"})


def adam_rate(xp, dtype: str):
    """``rate(lr, beta1_pow, beta2_pow)``: the corrected rate lr_t = lr * sqrt(1 - beta2_pow)
    / (1 - beta1_pow), one number. On the host it is plain Python arithmetic; on a device
    it stays there (reading it back would synchronise every step), as a 0-d view that
    broadcasts onto any shape."""
    if xp.__name__ == "numpy":
        def corrected_rate_on_host(lr, b1p, b2p):
            return lr.item() * (1.0 - b2p.item()) ** 0.5 / (1.0 - b1p.item())
        return corrected_rate_on_host
    lr_t, denom = xp.empty((1,), dtype), xp.empty((1,), dtype)
    lr_t_scalar = lr_t.reshape(())

    def corrected_rate(lr, b1p, b2p):
        corrected_rates_into(xp, lr, b1p, b2p, lr_t, denom)
        return lr_t_scalar
    return corrected_rate


def corrected_rates_into(xp, lr, b1p, b2p, out, scratch):
    """``out`` = lr * sqrt(1 - b2p) / (1 - b1p) elementwise, on the device, with no
    allocation (``scratch`` like ``out``): one rate, or one per parameter of a fused update."""
    xp.subtract(1.0, b2p, out=out)
    xp.sqrt(out, out=out)
    xp.subtract(1.0, b1p, out=scratch)
    xp.divide(out, scratch, out=out)
    xp.multiply(out, lr, out=out)
    return out


def adam_moments(xp, b1: float, b2: float, grad, m1, m2, m1_out, m2_out, scratch):
    """(Moment1Out, Moment2Out) = (b1 * m1 + (1 - b1) * g, b2 * m2 + (1 - b2) * g * g)."""
    m1n = xp.multiply(m1, b1, out=m1_out)
    xp.multiply(grad, 1.0 - b1, out=scratch)
    xp.add(m1n, scratch, out=m1n)
    m2n = xp.multiply(m2, b2, out=m2_out)
    xp.multiply(grad, grad, out=scratch)
    xp.multiply(scratch, 1.0 - b2, out=scratch)
    xp.add(m2n, scratch, out=m2n)
    return m1n, m2n


def adam_direction(xp, eps: float, m1n, m2n, out):
    """m1 / (sqrt(m2) + eps) into ``out``: the direction Adam (and Lamb) step along."""
    xp.sqrt(m2n, out=out)
    xp.add(out, eps, out=out)
    return xp.divide(m1n, out, out=out)


def adam_update(xp, b1: float, b2: float, eps: float, param, grad, m1, m2, rate, p_out,
                m1_out, m2_out, scratch):
    """(ParamOut, Moment1Out, Moment2Out) of one Adam step with the corrected rate:
    p = p - lr_t * m1 / (sqrt(m2) + eps)."""
    m1n, m2n = adam_moments(xp, b1, b2, grad, m1, m2, m1_out, m2_out, scratch)
    xp.multiply(adam_direction(xp, eps, m1n, m2n, scratch), rate, out=scratch)
    return xp.subtract(param, scratch, out=p_out), m1n, m2n


def _adam_kernel(ctx: KernelContext):
    xp = ctx.xp
    p = ctx.input("Param")
    b1, b2, eps = float(ctx.attrs["beta1"]), float(ctx.attrs["beta2"]), float(ctx.attrs["epsilon"])
    out = [ctx.buffer(s) for s in ("ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut",
                                   "Beta2PowOut")]
    p_out, m1_out, m2_out, b1p_out, b2p_out = out
    scratch = xp.empty(p.shape, p.dtype)
    corrected_rate = adam_rate(xp, p.dtype)

    def fn(param, grad, lr, m1, m2, b1p, b2p):
        rate = corrected_rate(lr, b1p, b2p)
        return adam_update(xp, b1, b2, eps, param, grad, m1, m2, rate, p_out, m1_out,
                           m2_out, scratch) + (xp.multiply(b1p, b1, out=b1p_out),
                                               xp.multiply(b2p, b2, out=b2p_out))
    return fn


register(OpSpec(
    "adam",
    slots("Param", "Grad", "LearningRate", "Moment1", "Moment2", "Beta1Pow", "Beta2Pow"),
    slots("ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut"),
    _adam_infer,
    sparse_kernel(_adam_kernel, sparse_adam(AdamArithmetic(adam_update, adam_direction,
                                                           adam_rate))),
    attrs={"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "lazy_mode": False},
    fused="fused_adam", fused_shared=("LearningRate",), sparse_inputs=("Grad",),
    row_writes=rows_in_place(("ParamOut", "Param"), ("Moment1Out", "Moment1"),
                             ("Moment2Out", "Moment2"), when=lazy),
    doc="Moment1Out = beta1 * Moment1 + (1 - beta1) * Grad; Moment2Out = beta2 * Moment2 + "
        "(1 - beta2) * Grad^2; ParamOut = Param - lr_t * Moment1Out / (sqrt(Moment2Out) + "
        "epsilon) with lr_t = LearningRate * sqrt(1 - Beta2Pow) / (1 - Beta1Pow); "
        "BetaNPowOut = BetaNPow * betaN. A rows-only Grad: with lazy_mode, the moments and "
        "parameter of its rows alone, in place; else every row, exactly as dense."))
