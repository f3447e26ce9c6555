"""Update ops that scale by norms of whole tensors (role Optimize): lamb, lars_momentum and
dpsgd, computing what Paddle 1.8's update ops compute.

Each reads its parameter (or gradient) whole: the norm of one row block is not the norm
of the tensor, so the spec says ``reads_whole`` and the distribute transpiler never cuts
such a parameter into blocks. They are not fused: their per-tensor norms are reductions,
not elementwise work. Norms and ratios stay on the device as 0-d arrays.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .optim import adam_direction, adam_moments, update_infer
from .registry import register
from .spec import KernelContext, OpSpec, slots


def norm(xp: Any, x: Any) -> Any:
    """The L2 norm of all of ``x`` as a 0-d array (on the device it lives on)."""
    flat = x.reshape(-1)
    return xp.sqrt(xp.dot(flat, flat))


def _ratio(xp: Any, num: Any, den: Any, otherwise: float = 1.0) -> Any:
    """num / den where both are positive, else ``otherwise`` (0-d arrays; no division by
    zero is evaluated)."""
    ok = xp.logical_and(num > 0, den > 0)
    return xp.where(ok, num / xp.where(ok, den, 1), otherwise)


# --- lamb -------------------------------------------------------------------------------------

def lamb_update(xp, b1: float, b2: float, eps: float, wd: float, param, grad, m1, m2, lr,
                p_out, m1_out, m2_out, scratch):
    """Moments as Adam's (no bias correction, as in Paddle 1.8); r = m1' / (sqrt(m2') +
    eps) + wd * Param; ParamOut = Param - (lr * ||Param|| / ||r||) * r (the ratio is 1 when
    either norm is 0)."""
    m1n, m2n = adam_moments(xp, b1, b2, grad, m1, m2, m1_out, m2_out, scratch)
    r = adam_direction(xp, eps, m1n, m2n, scratch)
    decay = xp.multiply(param, wd)
    xp.add(r, decay, out=r)
    rate = xp.multiply(lr.reshape(()), _ratio(xp, norm(xp, param), norm(xp, r)))
    xp.multiply(r, rate, out=r)
    return xp.subtract(param, r, out=p_out), m1n, m2n


def _lamb_kernel(ctx: KernelContext):
    xp, p, a = ctx.xp, ctx.input("Param"), ctx.attrs
    b1, b2, eps, wd = (float(a[k]) for k in ("beta1", "beta2", "epsilon", "weight_decay"))
    outs = [ctx.buffer(s) for s in ("ParamOut", "Moment1Out", "Moment2Out")]
    scratch = xp.empty(p.shape, p.dtype)

    def fn(param, grad, lr, m1, m2, *pows):
        return lamb_update(xp, b1, b2, eps, wd, param, grad, m1, m2, lr, *outs, scratch)
    return fn


register(OpSpec(
    "lamb", slots("Param", "Grad", "LearningRate", "Moment1", "Moment2", "Beta1Pow?",
                  "Beta2Pow?"),
    slots("ParamOut", "Moment1Out", "Moment2Out"),
    update_infer(("Moment1", "Moment2"), ("LearningRate", "Beta1Pow", "Beta2Pow")),
    _lamb_kernel, attrs={"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-6, "weight_decay": 0.01},
    reads_whole=("Param", "Grad"),
    doc="Moment1Out = beta1 * Moment1 + (1 - beta1) * Grad; Moment2Out = beta2 * Moment2 + "
        "(1 - beta2) * Grad^2; r = Moment1Out / (sqrt(Moment2Out) + epsilon) + weight_decay "
        "* Param; ParamOut = Param - LearningRate * ||Param|| / ||r|| * r (Beta1Pow and "
        "Beta2Pow are read by no formula, as in Paddle 1.8)"))


# --- lars_momentum ----------------------------------------------------------------------------

def lars_update(xp, mu: float, coeff: float, wd: float, param, grad, velocity, lr, p_out,
                v_out, scratch):
    """local_lr = lr * coeff * ||p|| / (||g|| + wd * ||p||) (lr when either norm is 0);
    VelocityOut = v*mu + local_lr * (g + wd*p); ParamOut = Param - VelocityOut."""
    p_norm, g_norm = norm(xp, param), norm(xp, grad)
    lr0 = lr.reshape(())
    scaled = _ratio(xp, lr0 * coeff * p_norm, g_norm + wd * p_norm, 0.0)
    local = xp.where(xp.logical_and(p_norm > 0, g_norm > 0), scaled, lr0)
    s = xp.multiply(param, wd, out=scratch)
    xp.add(grad, s, out=s)
    xp.multiply(s, local, out=s)
    v = xp.multiply(velocity, mu, out=v_out)
    xp.add(v, s, out=v)
    return xp.subtract(param, v, out=p_out), v


def _lars_kernel(ctx: KernelContext):
    xp, p, a = ctx.xp, ctx.input("Param"), ctx.attrs
    mu, coeff, wd = float(a["mu"]), float(a["lars_coeff"]), float(a["lars_weight_decay"])
    p_out, v_out = ctx.buffer("ParamOut"), ctx.buffer("VelocityOut")
    scratch = xp.empty(p.shape, p.dtype)
    return lambda param, grad, velocity, lr: lars_update(
        xp, mu, coeff, wd, param, grad, velocity, lr, p_out, v_out, scratch)


register(OpSpec(
    "lars_momentum", slots("Param", "Grad", "Velocity", "LearningRate"),
    slots("ParamOut", "VelocityOut"), update_infer(("Velocity",)), _lars_kernel,
    attrs={"mu": 0.9, "lars_coeff": 0.001, "lars_weight_decay": 0.0005},
    reads_whole=("Param", "Grad"),
    doc="local_lr = LearningRate * lars_coeff * ||Param|| / (||Grad|| + lars_weight_decay * "
        "||Param||); VelocityOut = mu * Velocity + local_lr * (Grad + lars_weight_decay * "
        "Param); ParamOut = Param - VelocityOut"))


# --- dpsgd ------------------------------------------------------------------------------------

def dpsgd_update(xp, clip: float, batch_size: float, noise: float, param, grad, lr, p_out,
                 scratch):
    """ParamOut = Param - lr * (Grad / scale + noise / batch_size), scale = ||Grad|| / clip
    when the norm exceeds ``clip``, else 1; ``noise`` is sigma times a standard normal
    draw (one number per step, as in Paddle 1.8)."""
    g_norm = norm(xp, grad)
    scale = xp.where(g_norm > clip, g_norm / clip, 1.0)
    s = xp.divide(grad, scale.astype(grad.dtype), out=scratch)
    xp.add(s, noise / batch_size, out=s)
    xp.multiply(s, lr, out=s)
    return xp.subtract(param, s, out=p_out)


def _dpsgd_kernel(ctx: KernelContext):
    xp, p, a = ctx.xp, ctx.input("Param"), ctx.attrs
    clip, batch, sigma = float(a["clip"]), float(a["batch_size"]), float(a["sigma"])
    seed = int(a["seed"])
    # Paddle's debugging seed gives this op a stream of its own (the same wherever it runs,
    # a parameter server included); else the program's seeded generator of this op.
    rng = np.random.default_rng(seed) if seed else ctx.rng
    out = ctx.buffer("ParamOut")
    scratch = xp.empty(p.shape, p.dtype)
    return lambda param, grad, lr: dpsgd_update(
        xp, clip, batch, sigma * float(rng.standard_normal()), param, grad, lr, out, scratch)


register(OpSpec(
    "dpsgd", slots("Param", "Grad", "LearningRate"), slots("ParamOut"), update_infer(),
    _dpsgd_kernel, attrs={"clip": 10.0, "batch_size": 16.0, "sigma": 1.0, "seed": 0},
    random=True, reads_whole=("Grad",),
    doc="ParamOut = Param - LearningRate * (Grad / max(1, ||Grad|| / clip) + sigma * N(0, 1) "
        "/ batch_size): differentially private SGD (one noise draw per step; ``seed`` != 0 "
        "gives the op a generator of its own)"))
