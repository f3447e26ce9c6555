"""Parameter update ops (role Optimize). Each returns new arrays and never writes into
its inputs, so a step's updates commit together only after the whole step succeeded."""
from __future__ import annotations

from .registry import register
from .spec import InferContext, KernelContext, OpSpec, slots


def _check_param_grad(ctx: InferContext) -> None:
    p, g = ctx.input("Param"), ctx.input("Grad")
    if p.shape != g.shape or p.dtype != g.dtype:
        ctx.fail(f"Param {p.dtype}{list(p.shape)} and Grad {g.dtype}{list(g.shape)} must match")


def _sgd_infer(ctx: InferContext) -> None:
    _check_param_grad(ctx)
    p = ctx.input("Param")
    ctx.set_output("ParamOut", p.shape, p.dtype)


def _sgd_kernel(ctx: KernelContext):
    xp = ctx.xp
    p = ctx.input("Param")
    step = xp.empty(p.shape, p.dtype)

    def fn(param, grad, lr):
        xp.multiply(grad, lr, out=step)
        return xp.subtract(param, step)
    return fn


register(OpSpec("sgd", slots("Param", "Grad", "LearningRate"), slots("ParamOut"), _sgd_infer,
                _sgd_kernel, doc="ParamOut = Param - LearningRate * Grad"))
