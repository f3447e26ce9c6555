"""Adaptive elementwise update ops (role Optimize): adagrad, decayed_adagrad, rmsprop,
adadelta, adamax and ftrl, computing what Paddle 1.8's update ops compute.

Each op's arithmetic is one ``*_update`` function over whole arrays: the op's own kernel
runs it, and so does its fused form over flat arrays (ops/optim_fused.py, `FusedRule`),
whose compiled loop (kernels/loops.py) does the same arithmetic element by element in the
same order, so the three agree bit for bit. An update writes the new parameters last and
reads nothing after that; its scratch arrays are its last arguments.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .optim import update_infer
from .optim_fused import FusedRule, register_fused_rule
from .registry import register
from .sparse_update import rows_in_place, sparse_adagrad, sparse_kernel
from .spec import KernelContext, OpSpec, slots

Attrs = Mapping[str, Any]


def _kernel(rule: FusedRule, has_lr: bool) -> Callable[[KernelContext], Callable]:
    """The per-parameter kernel: the rule's update into the planner's buffers (scratches
    allocated once), then each one-element power times its attr."""
    n = len(rule.states)

    def kernel(ctx: KernelContext):
        xp, p, attrs = ctx.xp, ctx.input("Param"), ctx.attrs
        names = ["ParamOut", *(s + "Out" for s in rule.states),
                 *(q + "Out" for q, _ in rule.pows)]
        outs = [ctx.buffer(s) for s in names]
        scratch = [xp.empty(p.shape, p.dtype) for _ in range(rule.scratches)]
        update = rule.numpy(xp, attrs)
        rate = rule.rate(xp, p.dtype) if rule.rate is not None else None
        factors = [float(attrs[a]) for _, a in rule.pows]

        def fn(param, grad, *rest):
            lr, rest = (rest[0], rest[1:]) if has_lr else (None, rest)
            states, pows = rest[:n], rest[n:]
            r = rate(lr, *pows) if rate is not None else lr
            new = update(param, grad, *states, r, outs[0], *outs[1:1 + n], *scratch)
            return (*new, *(xp.multiply(a, f, out=o)
                            for a, f, o in zip(pows, factors, outs[1 + n:])))
        return fn
    return kernel


def _register(op_type: str, rule: FusedRule, attrs: dict[str, Any], doc: str,
              has_lr: bool = True, rows: Callable | None = None) -> None:
    """The op (inputs Param, Grad, LearningRate, the states, the powers; outputs ParamOut,
    then ``<slot>Out`` of each state and power) and its fused form. ``rows``: the kernel
    factory of its rows-only path (which writes the parameter and the states by rows);
    None: a rows-only gradient comes to the kernel densified."""
    pows = tuple(q for q, _ in rule.pows)
    lr = ("LearningRate",) if has_lr else ()
    kernel = _kernel(rule, has_lr)
    pairs = (("ParamOut", "Param"), *((s + "Out", s) for s in rule.states))
    register(OpSpec(op_type, slots("Param", "Grad", *lr, *rule.states, *pows),
                    slots("ParamOut", *(s + "Out" for s in rule.states + pows)),
                    update_infer(rule.states, lr + pows),
                    kernel if rows is None else sparse_kernel(kernel, rows),
                    attrs=attrs, fused="fused_" + op_type, fused_shared=lr,
                    sparse_inputs=("Grad",) if rows is not None else (),
                    row_writes=rows_in_place(*pairs) if rows is not None else None,
                    doc=doc))
    register_fused_rule(op_type, rule)


# --- adagrad ----------------------------------------------------------------------------------

def _adagrad_step(xp, eps: float, param, grad, m, lr, p_out, s):
    """ParamOut = Param - (g / (sqrt(m) + eps)) * lr, with the scratch ``s``."""
    xp.sqrt(m, out=s)
    xp.add(s, eps, out=s)
    xp.divide(grad, s, out=s)
    xp.multiply(s, lr, out=s)
    return xp.subtract(param, s, out=p_out)


def adagrad_update(xp, eps: float, param, grad, moment, lr, p_out, m_out, scratch):
    """MomentOut = Moment + g*g; ParamOut = Param - (g / (sqrt(MomentOut) + eps)) * lr."""
    m = xp.multiply(grad, grad, out=m_out)
    xp.add(moment, m, out=m)
    return _adagrad_step(xp, eps, param, grad, m, lr, p_out, scratch), m


_register("adagrad", FusedRule(
    ("Moment",), lambda xp, a: lambda *args: adagrad_update(xp, float(a["epsilon"]), *args),
    loop=lambda a: "adagrad", scalars=lambda a: (float(a["epsilon"]),)),
    {"epsilon": 1e-6},
    "MomentOut = Moment + Grad^2; ParamOut = Param - LearningRate * Grad / "
    "(sqrt(MomentOut) + epsilon); a rows-only Grad updates its rows alone, in place",
    rows=sparse_adagrad(adagrad_update))


# --- decayed_adagrad --------------------------------------------------------------------------

def decayed_adagrad_update(xp, decay: float, eps: float, param, grad, moment, lr, p_out,
                           m_out, scratch):
    """MomentOut = Moment*decay + (g*g)*(1-decay); ParamOut as adagrad's."""
    m = xp.multiply(moment, decay, out=m_out)
    s = xp.multiply(grad, grad, out=scratch)
    xp.multiply(s, 1.0 - decay, out=s)
    xp.add(m, s, out=m)
    return _adagrad_step(xp, eps, param, grad, m, lr, p_out, s), m


def _decay_eps(a: Attrs) -> tuple[float, float]:
    return float(a["decay"]), float(a["epsilon"])


_register("decayed_adagrad", FusedRule(
    ("Moment",), lambda xp, a: lambda *args: decayed_adagrad_update(xp, *_decay_eps(a), *args),
    loop=lambda a: "decayed_adagrad",
    scalars=lambda a: (float(a["decay"]), 1.0 - float(a["decay"]), float(a["epsilon"]))),
    {"decay": 0.95, "epsilon": 1e-6},
    "MomentOut = decay * Moment + (1 - decay) * Grad^2; ParamOut = Param - LearningRate * "
    "Grad / (sqrt(MomentOut) + epsilon)")


# --- rmsprop ----------------------------------------------------------------------------------

def rmsprop_update(xp, rho: float, eps: float, mu: float, centered: bool, param, grad,
                   moment, mean_square, mean_grad, lr, p_out, mom_out, ms_out, mg_out,
                   scratch):
    """MeanSquareOut = ms*rho + (g*g)*(1-rho); centered: MeanGradOut = mg*rho + g*(1-rho)
    and d = ms' - mg'*mg', else d = ms' (MeanGrad kept); MomentOut = mom*mu +
    (g / sqrt(d + eps)) * lr; ParamOut = Param - MomentOut."""
    ms = xp.multiply(mean_square, rho, out=ms_out)
    s = xp.multiply(grad, grad, out=scratch)
    xp.multiply(s, 1.0 - rho, out=s)
    xp.add(ms, s, out=ms)
    if centered:
        mg = xp.multiply(mean_grad, rho, out=mg_out)
        xp.multiply(grad, 1.0 - rho, out=s)
        xp.add(mg, s, out=mg)
        xp.multiply(mg, mg, out=s)
        xp.subtract(ms, s, out=s)
        xp.add(s, eps, out=s)
    else:
        mg = mg_out if mg_out is not None else xp.empty_like(mean_grad)
        xp.copyto(mg, mean_grad)
        xp.add(ms, eps, out=s)
    xp.sqrt(s, out=s)
    xp.divide(grad, s, out=s)
    xp.multiply(s, lr, out=s)
    mom = xp.multiply(moment, mu, out=mom_out)
    xp.add(mom, s, out=mom)
    return xp.subtract(param, mom, out=p_out), mom, ms, mg


def _rmsprop(xp: Any, a: Attrs) -> Callable:
    rho, eps, mu = float(a["decay"]), float(a["epsilon"]), float(a["momentum"])
    centered = bool(a["centered"])
    return lambda *args: rmsprop_update(xp, rho, eps, mu, centered, *args)


_register("rmsprop", FusedRule(
    ("Moment", "MeanSquare", "MeanGrad"), _rmsprop,
    loop=lambda a: "rmsprop_centered" if a["centered"] else "rmsprop",
    scalars=lambda a: (float(a["decay"]), 1.0 - float(a["decay"]), float(a["epsilon"]),
                       float(a["momentum"]))),
    {"decay": 0.9, "epsilon": 1e-10, "momentum": 0.0, "centered": False},
    "MeanSquareOut = decay * MeanSquare + (1 - decay) * Grad^2; with centered MeanGradOut "
    "= decay * MeanGrad + (1 - decay) * Grad and d = MeanSquareOut - MeanGradOut^2, else "
    "d = MeanSquareOut; MomentOut = momentum * Moment + LearningRate * Grad / sqrt(d + "
    "epsilon); ParamOut = Param - MomentOut")


# --- adadelta ---------------------------------------------------------------------------------

def adadelta_update(xp, rho: float, eps: float, param, grad, avg_sq_grad, avg_sq_update,
                    rate, p_out, g_out, u_out, scratch, scratch2):
    """AvgSquaredGradOut = a*rho + (g*g)*(1-rho); d = sqrt((u + eps) / (a' + eps)) * g;
    AvgSquaredUpdateOut = u*rho + (d*d)*(1-rho); ParamOut = Param - d. No learning rate
    (``rate`` is None), as in Paddle 1.8."""
    a = xp.multiply(avg_sq_grad, rho, out=g_out)
    s = xp.multiply(grad, grad, out=scratch)
    xp.multiply(s, 1.0 - rho, out=s)
    xp.add(a, s, out=a)
    xp.add(a, eps, out=s)
    t = xp.add(avg_sq_update, eps, out=scratch2)
    xp.divide(t, s, out=s)
    xp.sqrt(s, out=s)
    xp.multiply(s, grad, out=s)
    u = xp.multiply(avg_sq_update, rho, out=u_out)
    xp.multiply(s, s, out=t)
    xp.multiply(t, 1.0 - rho, out=t)
    xp.add(u, t, out=u)
    return xp.subtract(param, s, out=p_out), a, u


_register("adadelta", FusedRule(
    ("AvgSquaredGrad", "AvgSquaredUpdate"),
    lambda xp, a: lambda *args: adadelta_update(xp, float(a["rho"]), float(a["epsilon"]),
                                                *args),
    loop=lambda a: "adadelta",
    scalars=lambda a: (float(a["rho"]), 1.0 - float(a["rho"]), float(a["epsilon"])),
    scratches=2),
    {"rho": 0.95, "epsilon": 1e-6},
    "AvgSquaredGradOut = rho * AvgSquaredGrad + (1 - rho) * Grad^2; update = -sqrt("
    "(AvgSquaredUpdate + epsilon) / (AvgSquaredGradOut + epsilon)) * Grad; "
    "AvgSquaredUpdateOut = rho * AvgSquaredUpdate + (1 - rho) * update^2; ParamOut = "
    "Param + update (no learning rate, as in Paddle 1.8)", has_lr=False)


# --- adamax -----------------------------------------------------------------------------------

def adamax_update(xp, b1: float, b2: float, eps: float, param, grad, moment, inf_norm, rate,
                  p_out, m_out, u_out, scratch):
    """MomentOut = m*b1 + g*(1-b1); InfNormOut = max(|g|, u*b2 + eps); ParamOut = Param -
    (MomentOut / InfNormOut) * rate, with rate = lr / (1 - Beta1Pow)."""
    m = xp.multiply(moment, b1, out=m_out)
    s = xp.multiply(grad, 1.0 - b1, out=scratch)
    xp.add(m, s, out=m)
    u = xp.multiply(inf_norm, b2, out=u_out)
    xp.add(u, eps, out=u)
    xp.abs(grad, out=s)
    xp.maximum(s, u, out=u)
    xp.divide(m, u, out=s)
    xp.multiply(s, rate, out=s)
    return xp.subtract(param, s, out=p_out), m, u


def adamax_rate(xp: Any, dtype: str) -> Callable[[Any, Any], Any]:
    """``rate(lr, beta1_pow)`` = lr / (1 - beta1_pow): a Python float on the host; on a
    device a 0-d array computed there (reading it back would synchronise every step)."""
    if xp.__name__ == "numpy":
        return lambda lr, b1p: lr.item() / (1.0 - b1p.item())

    def on_device(lr, b1p):
        return xp.divide(lr, xp.subtract(1.0, b1p)).reshape(())
    return on_device


def _adamax(xp: Any, a: Attrs) -> Callable:
    b1, b2, eps = float(a["beta1"]), float(a["beta2"]), float(a["epsilon"])
    return lambda *args: adamax_update(xp, b1, b2, eps, *args)


_register("adamax", FusedRule(
    ("Moment", "InfNorm"), _adamax, loop=lambda a: "adamax",
    scalars=lambda a: (float(a["beta1"]), 1.0 - float(a["beta1"]), float(a["beta2"]),
                       float(a["epsilon"])),
    pows=(("Beta1Pow", "beta1"),), rate=adamax_rate),
    {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8},
    "MomentOut = beta1 * Moment + (1 - beta1) * Grad; InfNormOut = max(|Grad|, beta2 * "
    "InfNorm + epsilon); ParamOut = Param - LearningRate / (1 - Beta1Pow) * MomentOut / "
    "InfNormOut; Beta1PowOut = Beta1Pow * beta1")


# --- ftrl -------------------------------------------------------------------------------------

def ftrl_update(xp, l1: float, l2: float, lr_power: float, param, grad, squared, linear, lr,
                p_out, sq_out, lin_out, scratch, scratch2):
    """n = sq + g*g; LinearAccumOut = (lin + g) - ((n^-lr_power - sq^-lr_power) / lr) * p;
    ParamOut = (sign(l)*l1 - l) / (n^-lr_power / lr + 2*l2) where |l| > l1, else 0;
    SquaredAccumOut = n. (n^0.5 is sqrt(n): the usual lr_power of -0.5.)"""
    def power(x, out):
        return xp.sqrt(x, out=out) if lr_power == -0.5 else xp.power(x, -lr_power, out=out)
    n = xp.multiply(grad, grad, out=sq_out)
    xp.add(squared, n, out=n)
    s, t = power(n, scratch), power(squared, scratch2)
    xp.subtract(s, t, out=s)
    xp.divide(s, lr, out=s)
    xp.multiply(s, param, out=s)
    lin_new = xp.add(linear, grad, out=lin_out)
    xp.subtract(lin_new, s, out=lin_new)
    power(n, t)
    xp.divide(t, lr, out=t)
    xp.add(t, 2.0 * l2, out=t)               # y
    xp.sign(lin_new, out=s)
    xp.multiply(s, l1, out=s)
    xp.subtract(s, lin_new, out=s)           # x
    # |l| <= l1: the parameter is 0 (and y, 0 where no gradient ever came, is not divided by)
    drop = xp.less_equal(xp.abs(lin_new), l1)
    xp.copyto(t, 1.0, where=drop)
    out = p_out if p_out is not None else xp.empty_like(s)
    xp.divide(s, t, out=out)
    xp.copyto(out, 0.0, where=drop)
    return out, n, lin_new


def _ftrl(xp: Any, a: Attrs) -> Callable:
    l1, l2, power = float(a["l1"]), float(a["l2"]), float(a["lr_power"])
    return lambda *args: ftrl_update(xp, l1, l2, power, *args)


_register("ftrl", FusedRule(
    ("SquaredAccumulator", "LinearAccumulator"), _ftrl,
    # the compiled loop for the usual lr_power only: it computes n^0.5 as sqrt(n), as
    # the NumPy kernel does (x ** 0.5 may round differently)
    loop=lambda a: "ftrl" if float(a["lr_power"]) == -0.5 else None,
    scalars=lambda a: (float(a["l1"]), 2.0 * float(a["l2"])), scratches=2),
    {"l1": 0.0, "l2": 0.0, "lr_power": -0.5},
    "new = SquaredAccumulator + Grad^2; LinearAccumOut = LinearAccumulator + Grad - "
    "(new^-lr_power - SquaredAccumulator^-lr_power) / LearningRate * Param; ParamOut = "
    "(l1 * sign(LinearAccumOut) - LinearAccumOut) / (new^-lr_power / LearningRate + 2 * l2) "
    "where |LinearAccumOut| > l1, else 0; SquaredAccumOut = new")
