"""Normalisation ops: batch_norm, layer_norm.

``batch_norm``  X [N, C, ...] (``data_layout`` NCHW; NHWC puts C last; CHWN, which only
the layout plan pass sets, puts it first and the batch last), per-channel Scale,
Bias, Mean, Variance [C] -> Y, MeanOut, VarianceOut, SavedMean, SavedVariance. An optional
MomentumTensor [1] (a float var) takes the ``momentum`` attr's place.

* Training: Y = (X - mu) / sqrt(var + epsilon) * Scale + Bias with the batch's mean mu and
  biased variance var over every axis but the channel one; MeanOut = momentum * Mean +
  (1 - momentum) * mu and likewise VarianceOut (Paddle's update, with the biased variance);
  SavedMean = mu, SavedVariance = 1 / sqrt(var + epsilon).
* Inference: the moving Mean and Variance take the batch statistics' place; MeanOut and
  VarianceOut are copies of them, SavedMean / SavedVariance hold the moving mean and its
  1 / sqrt(var + epsilon).

Which mode runs: the ``is_test`` attr when it is True or False, else the block's mode
(``ctx.is_test``: a block that runs an optimizer trains, others infer).
``use_global_stats`` normalises with the moving statistics in training too. A layer binds
MeanOut / VarianceOut to the same persistable vars as Mean / Variance, so a training step
updates the moving statistics when the runtime commits the step's writes.

``layer_norm``  X flattened to [M, D] at ``begin_norm_axis``; each row normalised by its
own mean and biased variance, then times Scale [D] plus Bias [D] (both optional). Mean and
Variance [M] are outputs for the gradient.

batch_norm's per-channel sums run as matrix-vector products (BLAS), which are much faster
in NumPy than ``sum`` over several axes. layer_norm's sums are NumPy's ``sum`` along a row
(pairwise) and over rows (in order), which its compiled kernel (kernels/norm.py) adds in
the same order, so that the two give the same bits.
"""
from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import Any

import numpy as np

from ..backend.rows import for_rows
from ..ir.records import FLOAT_DTYPES
from ..ir.text import format_shape as _fmt
from ..kernels.norm import norm_source
from .compiled import compiled_kernel, run_compiled
from .layouts import CHWN, NCHW, LayoutRule, check_layout
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, emit_default_grad, slots


def _is_test(ctx: KernelContext) -> bool:
    """The ``is_test`` attr when set (True/False), else the block's mode."""
    flag = ctx.attrs.get("is_test")
    return bool(ctx.is_test) if flag is None else bool(flag)


def _uses_moving_stats(ctx: KernelContext) -> bool:
    return _is_test(ctx) or bool(ctx.attrs["use_global_stats"])


def _channel_axis(layout: str, rank: int) -> int:
    if layout == CHWN:
        return 0
    return 1 if layout == NCHW or rank == 2 else rank - 1


class _ChannelLayout:
    """X seen as [A, C, B] (A: the dims before the channel, B: those after), with fast
    per-channel sums and broadcasting views."""

    def __init__(self, xp: Any, shape: tuple, layout: str, dtype: str):
        self.xp = xp
        axis = _channel_axis(layout, len(shape))
        self.a = prod(shape[:axis])
        self.c = shape[axis]
        self.b = prod(shape[axis + 1:])
        self.m = self.a * self.b                      # elements per channel
        self.shape3 = (self.a, self.c, self.b)
        self.ones_a = xp.ones((self.a,), dtype)
        self.ones_b = xp.ones((self.b,), dtype)
        self._tmp = xp.empty((self.a * self.c,), dtype) if self.b > 1 else None

    def column(self, v: Any) -> Any:
        """A per-channel vector [C] shaped to broadcast against [A, C, B]."""
        return v.reshape(1, self.c, 1)

    def channel_sum(self, a3: Any, out: Any | None = None) -> Any:
        """sum over A and B of a [A, C, B] array -> [C]."""
        xp = self.xp
        if self.b == 1:
            return xp.matmul(self.ones_a, a3.reshape(self.a, self.c), out=out)
        part = xp.matmul(a3.reshape(self.a * self.c, self.b), self.ones_b, out=self._tmp)
        return xp.matmul(self.ones_a, part.reshape(self.a, self.c), out=out)


def _bn_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"X must be float16/32/64, got {x.dtype}{_fmt(x.shape)}")
    layout = check_layout(ctx, "data_layout", (NCHW, "NHWC", CHWN))
    if x.rank < 2:
        ctx.fail(f"X must have a batch and a channel dim, got {_fmt(x.shape)}")
    if layout == CHWN and x.rank != 4:
        ctx.fail(f"data_layout CHWN takes a 4-D X, got {_fmt(x.shape)}")
    c = x.shape[_channel_axis(layout, x.rank)]
    for slot in ("Scale", "Bias", "Mean", "Variance"):
        t = ctx.input(slot)
        if t.rank != 1 or (c >= 0 and t.shape[0] >= 0 and t.shape[0] != c):
            ctx.fail(f"{slot} {_fmt(t.shape)} must be [C] = [{c}] for X {_fmt(x.shape)} "
                     f"({layout})")
        if t.dtype != x.dtype:
            ctx.fail_dtype(f"{slot} is {t.dtype} but X is {x.dtype}")
    if ctx.has_input("MomentumTensor"):
        m = ctx.input("MomentumTensor")
        if m.shape != (1,) or m.dtype not in FLOAT_DTYPES:
            ctx.fail(f"MomentumTensor must be a float [1], got {m.dtype}{_fmt(m.shape)}")
    ctx.set_output("Y", x.shape, x.dtype)
    for slot in ("MeanOut", "VarianceOut", "SavedMean", "SavedVariance"):
        ctx.set_output(slot, (c,), x.dtype)


def _bn_kernel(ctx: KernelContext):
    xp = ctx.xp
    x = ctx.input("X")
    eps, momentum = float(ctx.attrs["epsilon"]), float(ctx.attrs["momentum"])
    lay = _ChannelLayout(xp, x.shape, ctx.attrs["data_layout"], x.dtype)
    col = lay.column
    y_buf = ctx.buffer("Y")

    def vec(slot: str) -> Any:
        b = ctx.buffer(slot)
        return b if b is not None else xp.empty((lay.c,), x.dtype)

    if _uses_moving_stats(ctx):
        def infer(a, scale, bias, mean, var, *momentum):
            inv = vec("SavedVariance")
            xp.sqrt(var + eps, out=inv)
            xp.reciprocal(inv, out=inv)
            k = scale * inv
            shift = bias - mean * k
            y = y_buf if y_buf is not None else xp.empty(x.shape, x.dtype)
            y3 = y.reshape(lay.shape3)
            xp.multiply(a.reshape(lay.shape3), col(k), out=y3)
            xp.add(y3, col(shift), out=y3)
            saved_mean = vec("SavedMean")
            xp.copyto(saved_mean, mean)
            return y, mean.copy(), var.copy(), saved_mean, inv
        return infer

    inv_m = 1.0 / lay.m
    sq = xp.empty(lay.shape3, x.dtype)

    def train(a, scale, bias, mean, var, *tensor):
        m = tensor[0].astype(x.dtype) if tensor else momentum
        a3 = a.reshape(lay.shape3)
        y = y_buf if y_buf is not None else xp.empty(x.shape, x.dtype)
        y3 = y.reshape(lay.shape3)
        mu = vec("SavedMean")
        lay.channel_sum(a3, out=mu)
        xp.multiply(mu, inv_m, out=mu)
        xp.subtract(a3, col(mu), out=y3)                 # centred X
        xp.multiply(y3, y3, out=sq)
        batch_var = lay.channel_sum(sq)
        xp.multiply(batch_var, inv_m, out=batch_var)
        inv = vec("SavedVariance")
        xp.add(batch_var, eps, out=inv)
        xp.sqrt(inv, out=inv)
        xp.reciprocal(inv, out=inv)
        xp.multiply(y3, col(scale * inv), out=y3)
        xp.add(y3, col(bias), out=y3)
        mean_out = mean * m + mu * (1.0 - m)
        var_out = var * m + batch_var * (1.0 - m)
        return y, mean_out, var_out, mu, inv
    return train


_BN_ATTRS = {"momentum": 0.9, "epsilon": 1e-5, "is_test": None, "data_layout": "NCHW",
             "use_global_stats": False}


def _bn_grad(g: GradContext) -> None:
    emit_default_grad(g, uses=("X", "Scale", "SavedMean", "SavedVariance"),
                      grad_type="batch_norm_grad", in_slots=("X", "Scale", "Bias"),
                      out_slots=("Y",))


def _bn_grad_infer(ctx: InferContext) -> None:
    for slot, like in (("X@GRAD", "X"), ("Scale@GRAD", "Scale"), ("Bias@GRAD", "Scale")):
        if ctx.has_output(slot):
            t = ctx.input(like)
            ctx.set_output(slot, t.shape, t.dtype)


def _bn_grad_kernel(ctx: KernelContext):
    xp = ctx.xp
    x = ctx.input("X")
    lay = _ChannelLayout(xp, x.shape, ctx.attrs["data_layout"], x.dtype)
    col = lay.column
    want_x, want_s, want_b = (ctx.has_output(s) for s in ("X@GRAD", "Scale@GRAD",
                                                          "Bias@GRAD"))
    dx_buf, ds_buf, db_buf = (ctx.buffer(s) for s in ("X@GRAD", "Scale@GRAD", "Bias@GRAD"))
    frozen = _uses_moving_stats(ctx)
    xhat = xp.empty(lay.shape3, x.dtype)
    tmp = xp.empty(lay.shape3, x.dtype)
    inv_m = 1.0 / lay.m

    def grad(a, scale, mu, inv, dy):
        dy3 = dy.reshape(lay.shape3)
        xp.subtract(a.reshape(lay.shape3), col(mu), out=xhat)
        xp.multiply(xhat, col(inv), out=xhat)
        dbias = lay.channel_sum(dy3, out=db_buf)
        dscale = lay.channel_sum(xp.multiply(dy3, xhat, out=tmp), out=ds_buf)
        res = []
        if want_x:
            dx = dx_buf if dx_buf is not None else xp.empty(x.shape, x.dtype)
            dx3 = dx.reshape(lay.shape3)
            k = scale * inv
            xp.multiply(dy3, col(k), out=dx3)
            if not frozen:
                # dX = k * (dY - mean(dY) - xhat * mean(dY * xhat)), means per channel
                xp.multiply(xhat, col(k * dscale * inv_m), out=tmp)
                xp.subtract(dx3, tmp, out=dx3)
                xp.subtract(dx3, col(k * dbias * inv_m), out=dx3)
            res.append(dx)
        if want_s:
            res.append(dscale)
        if want_b:
            res.append(dbias)
        return res[0] if len(res) == 1 else tuple(res)
    return grad


register(OpSpec("batch_norm", slots("X", "Scale", "Bias", "Mean", "Variance",
                                    "MomentumTensor?"),
                slots("Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance"),
                _bn_infer, _bn_kernel, _bn_grad, attrs=_BN_ATTRS, inert_in_test=True,
                layout=LayoutRule(("X", "Y"), (CHWN,), "data_layout"),
                doc="Batch normalisation over every axis but the channel one; training "
                    "updates MeanOut/VarianceOut = momentum * old + (1 - momentum) * batch "
                    "statistics, inference uses Mean/Variance. is_test None: the block "
                    "decides."))
register(OpSpec("batch_norm_grad", slots("X", "Scale", "SavedMean", "SavedVariance", "Y@GRAD"),
                slots("X@GRAD?", "Scale@GRAD?", "Bias@GRAD?"), _bn_grad_infer,
                _bn_grad_kernel, attrs=_BN_ATTRS,
                layout=LayoutRule(("X", "Y@GRAD", "X@GRAD"), (CHWN,), "data_layout")))


# --- layer_norm --------------------------------------------------------------------------------

_LN_ATTRS = {"begin_norm_axis": 1, "epsilon": 1e-5}


def _ln_axis(ctx: Any, rank: int) -> int:
    axis = ctx.attrs["begin_norm_axis"]
    if isinstance(axis, bool) or not isinstance(axis, int) or not 1 <= axis < rank:
        ctx.fail(f"begin_norm_axis={axis!r} must be an int in [1, {rank - 1}] for a "
                 f"rank-{rank} X")
    return axis


def float_x(ctx: InferContext, what: str = "at least 2 dims") -> Any:
    """Input X, which must be float and of rank 2 or more."""
    x = ctx.input("X")
    if x.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"X must be float16/32/64, got {x.dtype}{_fmt(x.shape)}")
    if x.rank < 2:
        ctx.fail(f"X must have {what}, got {_fmt(x.shape)}")
    return x


def _ln_infer(ctx: InferContext) -> None:
    x = float_x(ctx)
    axis = _ln_axis(ctx, x.rank)
    inner = x.shape[axis:]
    d = -1 if any(v < 0 for v in inner) else prod(inner)
    outer = x.shape[:axis]
    m = -1 if any(v < 0 for v in outer) else prod(outer)
    for slot in ("Scale", "Bias"):
        if ctx.has_input(slot):
            t = ctx.input(slot)
            if t.rank != 1 or (d >= 0 and t.shape[0] >= 0 and t.shape[0] != d):
                ctx.fail(f"{slot} {_fmt(t.shape)} must be [{d}], the size of X "
                         f"{_fmt(x.shape)} from begin_norm_axis={axis} on")
            if t.dtype != x.dtype:
                ctx.fail_dtype(f"{slot} is {t.dtype} but X is {x.dtype}")
    ctx.set_output("Y", x.shape, x.dtype)
    ctx.set_output("Mean", (m,), x.dtype)
    ctx.set_output("Variance", (m,), x.dtype)


def _ln_dims(shape: tuple, axis: int) -> tuple[int, int]:
    return prod(shape[:axis]), prod(shape[axis:])


def _ln_kernel(ctx: KernelContext):
    """Each row's sums are NumPy's pairwise sums (``sum`` along the row), which the
    compiled kernel (kernels/norm.py) adds in the same order: whether a call runs it
    changes no value."""
    xp = ctx.xp
    x = ctx.input("X")
    m, d = _ln_dims(x.shape, ctx.attrs["begin_norm_axis"])
    eps = float(ctx.attrs["epsilon"])
    has_scale, has_bias = ctx.has_input("Scale"), ctx.has_input("Bias")
    y_buf, mean_buf, var_buf = ctx.buffer("Y"), ctx.buffer("Mean"), ctx.buffer("Variance")
    sq = xp.empty((m, d), x.dtype)
    inv = xp.empty((m, 1), x.dtype)
    compiled = compiled_kernel(ctx, x.dtype, lambda: norm_source("layer_norm", x.dtype))
    none, eps_t = _compiled_extras(xp, x.dtype, eps)

    def rows(a2, y2, mean, var, scale, bias, lo, hi):
        a2, y2, sq_r, inv_r = a2[lo:hi], y2[lo:hi], sq[lo:hi], inv[lo:hi]
        mean_r = xp.divide(xp.sum(a2, axis=1, out=mean[lo:hi]), d, out=mean[lo:hi])
        xp.subtract(a2, mean_r[:, None], out=y2)
        xp.multiply(y2, y2, out=sq_r)
        var_r = xp.divide(xp.sum(sq_r, axis=1, out=var[lo:hi]), d, out=var[lo:hi])
        xp.add(var_r[:, None], eps, out=inv_r)
        xp.sqrt(inv_r, out=inv_r)
        xp.reciprocal(inv_r, out=inv_r)
        xp.multiply(y2, inv_r, out=y2)
        if scale is not None:
            xp.multiply(y2, scale, out=y2)
        if bias is not None:
            xp.add(y2, bias, out=y2)

    def layer_norm(a, *params):
        params = list(params)
        scale = params.pop(0) if has_scale else None
        bias = params.pop(0) if has_bias else None
        y = y_buf if y_buf is not None else xp.empty(x.shape, x.dtype)
        mean = mean_buf if mean_buf is not None else xp.empty((m,), x.dtype)
        var = var_buf if var_buf is not None else xp.empty((m,), x.dtype)
        a2, y2 = a.reshape(m, d), y.reshape(m, d)
        flags = int(scale is not None) | 2 * int(bias is not None)
        s = none if scale is None else scale
        b = none if bias is None else bias

        def body(lo: int, hi: int) -> None:
            if not run_compiled(compiled, lambda: (a2[lo:hi], s, b, eps_t, flags, y2[lo:hi],
                                                   mean[lo:hi], var[lo:hi])):
                rows(a2, y2, mean, var, scale, bias, lo, hi)
        _by_rows(xp, m, d, body)
        return y, mean, var
    return layer_norm


def _compiled_extras(xp: Any, dtype: str, eps: float) -> tuple[Any, Any]:
    """What the compiled kernels take for an absent array (an empty vector: their flags
    say it is absent), and epsilon in the arrays' dtype (as NumPy rounds it)."""
    return xp.empty(0, dtype), np.dtype(dtype).type(eps)


def _by_rows(xp: Any, m: int, d: int, body: Callable[[int, int], None], passes: int = 1
             ) -> None:
    """``body(lo, hi)`` over rows of [M, D], split over the threads in force (each row's
    statistics are its own: backend/rows.py). ``passes``: its work, in passes over
    [M, D]."""
    if xp.__name__ != "numpy":
        body(0, m)
        return
    for_rows(body, m, passes * m * d)


def _ln_grad(g: GradContext) -> None:
    emit_default_grad(g, uses=("X", "Scale", "Mean", "Variance"),
                      grad_type="layer_norm_grad", in_slots=("X", "Scale", "Bias"),
                      out_slots=("Y",))


def _ln_grad_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    d = -1
    if ctx.has_output("X@GRAD"):
        ctx.set_output("X@GRAD", x.shape, x.dtype)
    inner = x.shape[ctx.attrs["begin_norm_axis"]:]
    if all(v >= 0 for v in inner):
        d = prod(inner)
    for slot in ("Scale@GRAD", "Bias@GRAD"):
        ctx.set_output(slot, (d,), x.dtype)


class _LayerNormGrad:
    """layer_norm's gradient kernel. Sums as `_ln_kernel`'s: a row's along the row, a
    column's over the rows (Scale's and Bias's gradients) in order, as ``sum(axis=0)``;
    the compiled kernel adds alike. dX runs row by row (split over the threads), the
    column sums over every row at once."""

    def __init__(self, ctx: KernelContext):
        xp = self.xp = ctx.xp
        x = ctx.input("X")
        self.shape, dt = x.shape, x.dtype
        m, d = self.m, self.d = _ln_dims(x.shape, ctx.attrs["begin_norm_axis"])
        self.eps = float(ctx.attrs["epsilon"])
        self.wants = [ctx.has_output(s) for s in ("X@GRAD", "Scale@GRAD", "Bias@GRAD")]
        self.bufs = [ctx.buffer(s) for s in ("X@GRAD", "Scale@GRAD", "Bias@GRAD")]
        self.xhat, self.tmp = xp.empty((m, d), dt), xp.empty((m, d), dt)
        self.gs: Any = xp.empty((m, d), dt) if ctx.has_input("Scale") else None
        self.inv = xp.empty((m, 1), dt)
        self.mg, self.mgx = xp.empty((m,), dt), xp.empty((m,), dt)
        self.compiled = compiled_kernel(ctx, dt, lambda: norm_source("layer_norm_grad", dt))
        self.none, self.eps_t = _compiled_extras(xp, dt, self.eps)

    def rows(self, a2, scale, mean, var, dy2, dx2, lo, hi) -> None:
        """xhat, and dX when wanted, for rows lo:hi (each from its own row alone)."""
        xp, d = self.xp, self.d
        inv_r, xhat_r, dy_r = self.inv[lo:hi], self.xhat[lo:hi], dy2[lo:hi]
        xp.add(var[lo:hi, None], self.eps, out=inv_r)
        xp.sqrt(inv_r, out=inv_r)
        xp.reciprocal(inv_r, out=inv_r)
        xp.subtract(a2[lo:hi], mean[lo:hi, None], out=xhat_r)
        xp.multiply(xhat_r, inv_r, out=xhat_r)
        if dx2 is None:
            return
        g2 = xp.multiply(dy_r, scale, out=self.gs[lo:hi]) if scale is not None else dy_r
        mg = xp.divide(xp.sum(g2, axis=1, out=self.mg[lo:hi]), d, out=self.mg[lo:hi])
        gx = xp.multiply(g2, xhat_r, out=self.tmp[lo:hi])
        mgx = xp.divide(xp.sum(gx, axis=1, out=self.mgx[lo:hi]), d, out=self.mgx[lo:hi])
        dx_r = dx2[lo:hi]
        # dX = inv * (g - xhat * mean(g * xhat) - mean(g))
        xp.multiply(xhat_r, mgx[:, None], out=dx_r)
        xp.subtract(g2, dx_r, out=dx_r)
        xp.subtract(dx_r, mg[:, None], out=dx_r)
        xp.multiply(dx_r, inv_r, out=dx_r)

    def input_grad(self, a2, scale, mean, var, dy2, dx2) -> None:
        sc = self.none if scale is None else scale

        def body(lo: int, hi: int) -> None:
            if not run_compiled(self.compiled, lambda: (
                    a2[lo:hi], sc, mean[lo:hi], var[lo:hi], dy2[lo:hi], self.eps_t,
                    int(scale is not None) | 4, dx2[lo:hi], self.none, self.none)):
                self.rows(a2, scale, mean, var, dy2, dx2, lo, hi)
        _by_rows(self.xp, self.m, self.d, body, passes=2)

    def column_sums(self, a2, scale, mean, var, dy2, ds, db) -> None:
        xp, none = self.xp, self.none
        flags = 8 * int(ds is not None) | 16 * int(db is not None)
        if run_compiled(self.compiled, lambda: (
                a2, none if scale is None else scale, mean, var, dy2, self.eps_t, flags,
                a2[:0], none if ds is None else ds, none if db is None else db)):
            return
        if self.compiled is not None or not self.wants[0]:   # xhat is not computed yet
            self.rows(a2, scale, mean, var, dy2, None, 0, self.m)
        if ds is not None:
            xp.sum(xp.multiply(dy2, self.xhat, out=self.tmp), axis=0, out=ds)
        if db is not None:
            xp.sum(dy2, axis=0, out=db)

    def __call__(self, a, *rest):
        *scale, mean, var, dy = rest
        xp, m, d = self.xp, self.m, self.d
        s = scale[0] if scale else None
        dy2, a2 = dy.reshape(m, d), a.reshape(m, d)
        shapes = (self.shape, (d,), (d,))
        dx, ds, db = (None if not want else buf if buf is not None else
                      xp.empty(shape, a.dtype)
                      for want, buf, shape in zip(self.wants, self.bufs, shapes))
        if dx is not None:
            self.input_grad(a2, s, mean, var, dy2, dx.reshape(m, d))
        if ds is not None or db is not None:
            self.column_sums(a2, s, mean, var, dy2, ds, db)
        res = [r for r in (dx, ds, db) if r is not None]
        return res[0] if len(res) == 1 else tuple(res)


register(OpSpec("layer_norm", slots("X", "Scale?", "Bias?"), slots("Y", "Mean", "Variance"),
                _ln_infer, _ln_kernel, _ln_grad, attrs=_LN_ATTRS,
                doc="Normalises X over the dims from begin_norm_axis on (each row of X "
                    "flattened to [M, D]), then times Scale [D] plus Bias [D]; Mean and "
                    "Variance [M] are the rows' statistics."))
register(OpSpec("layer_norm_grad", slots("X", "Scale?", "Mean", "Variance", "Y@GRAD"),
                slots("X@GRAD?", "Scale@GRAD?", "Bias@GRAD?"), _ln_grad_infer,
                _LayerNormGrad, attrs=_LN_ATTRS))
