"""Softmax and the classification losses built on it.

``softmax``                          Out = exp(X - max) / sum(exp(X - max)) along ``axis``
``log_softmax``                      Out = X - max - log(sum(exp(X - max))) along ``axis``
``cross_entropy``                    Y = -log(X[label]) (hard) or -sum(Label * log X) (soft)
``softmax_with_cross_entropy``       Softmax and the cross entropy of Logits, fused and stable
``sigmoid_cross_entropy_with_logits`` Out = max(x, 0) - x*z + log(1 + exp(-|x|)) elementwise

Hard labels are integer class indices with a size-1 dim where the class dim is
(``[N, 1]`` for ``[N, C]`` scores); a label equal to ``ignore_index`` gives loss 0 and
gradient 0. Other labels must lie in ``[0, C)``: with NumPy a kernel checks that and
raises; with CuPy it does not (the check would stall the device every step).

Like Paddle, ``cross_entropy`` clamps -log(0) = inf to 1e20 (the dtype's largest finite
value for float16), so a zero probability gives a huge but finite loss, and 0 * log(0)
counts as 0 for soft labels. Every kernel avoids NumPy floating-point warnings.
"""
from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import Any

from ..backend.rows import for_rows
from ..ir.text import format_shape as _shape
from ..kernels.softmax import softmax_source
from .compiled import compiled_kernel, run_compiled
from .registry import register
from .spec import (
    GradContext,
    InferContext,
    KernelContext,
    OpSpec,
    TensorType,
    dims_compatible,
    emit_default_grad,
    infer_like,
    slots,
)

_FLOATS = ("float16", "float32", "float64")
_INTS = ("int8", "uint8", "int16", "int32", "int64")
_CLAMP = 1e20  # Paddle's kApproInf

def _check_float(ctx: InferContext, t: TensorType, what: str) -> None:
    if t.dtype not in _FLOATS:
        ctx.fail_dtype(f"{what} must be float16/32/64, got {t.dtype}{_shape(t.shape)}; "
                       f"cast it first")


def _axis(ctx: Any, rank: int) -> int:
    """The ``axis`` attr made non-negative; a clear error when it does not fit."""
    axis = int(ctx.attrs["axis"])
    if not -rank <= axis < rank:
        ctx.fail(f"axis={axis} is out of range for a rank-{rank} input; use an axis in "
                 f"[{-rank}, {rank - 1}]")
    return axis + rank if axis < 0 else axis


def _reduced(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return shape[:axis] + (1,) + shape[axis + 1:]


def _clamp_for(xp: Any, dtype: str) -> float:
    return min(_CLAMP, float(xp.finfo(dtype).max))


def _same_dims(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(dims_compatible(x, y) for x, y in zip(a, b))


def _check_hard_label(ctx: InferContext, x: TensorType, label: TensorType, axis: int,
                      xname: str) -> None:
    want = _reduced(x.shape, axis)
    if label.dtype not in _INTS:
        ctx.fail_dtype(f"hard labels must be an integer dtype (int64), got {label.dtype}"
                       f"{_shape(label.shape)}; declare the label with dtype='int64', or "
                       f"set soft_label=True for probability labels of {xname}'s shape")
    if not _same_dims(label.shape, want):
        ctx.fail(f"hard Label has shape {_shape(label.shape)} but {xname} "
                 f"{_shape(x.shape)} needs {_shape(want)}: one class index per row, with a "
                 f"size-1 dim at axis {axis} (declare it as shape=[1], not shape=[])")


def _check_soft_label(ctx: InferContext, x: TensorType, label: TensorType,
                      xname: str) -> None:
    if label.dtype not in _FLOATS:
        ctx.fail_dtype(f"soft labels must be float, got {label.dtype}{_shape(label.shape)}; "
                       f"pass soft_label=False for integer class indices")
    if label.dtype != x.dtype:
        ctx.fail_dtype(f"soft Label is {label.dtype} but {xname} is {x.dtype}; cast one of "
                       f"them so they match")
    if not _same_dims(label.shape, x.shape):
        ctx.fail(f"soft Label has shape {_shape(label.shape)} but {xname} has shape "
                 f"{_shape(x.shape)}; soft labels give a probability for every class, so "
                 f"the shapes must match")


# --- picking one entry per row along an axis ----------------------------------------------------

class _Picker:
    """Views arrays of ``shape`` as ``(P, D, Q)`` around ``axis`` (``(P, D)`` when nothing
    follows the axis) and indexes the one entry per ``(p, q)`` a label array selects."""

    def __init__(self, xp: Any, shape: tuple[int, ...], axis: int, ignore_index: int):
        self.P, self.D, self.Q = prod(shape[:axis]), shape[axis], prod(shape[axis + 1:])
        self.ignore = int(ignore_index)
        self.xp = xp
        # With NumPy two reductions over the labels are cheap: they check the range and
        # tell when no label is special, so the masks can be skipped. On a GPU they would
        # stall the device every step.
        self.on_host = xp.__name__ == "numpy"
        if self.Q == 1:
            self.view: tuple[int, ...] = (self.P, self.D)
            self.lab_shape: tuple[int, ...] = (self.P,)
            rows = xp.arange(self.P)
            self.index: Callable = lambda lab: (rows, lab)
        else:
            self.view = (self.P, self.D, self.Q)
            self.lab_shape = (self.P, self.Q)
            pi = xp.arange(self.P).reshape(self.P, 1)
            qi = xp.arange(self.Q).reshape(1, self.Q)
            self.index = lambda lab: (pi, lab, qi)
        # An ignore_index inside [0, D) is itself a usable index: no need to substitute it.
        self.ignore_in_range = 0 <= self.ignore < self.D

    def labels(self, label: Any) -> tuple[Any, Any]:
        """``(index, valid)``: class indices shaped ``lab_shape``, safe to index with, and
        the mask of labels that are not ``ignore_index`` (None when all of them count)."""
        xp = self.xp
        lab = label.reshape(self.lab_shape)
        if self.on_host and lab.size:
            lo, hi = int(lab.min()), int(lab.max())
            if lo >= 0 and hi < self.D:            # no label is ignore_index, unless in range
                return lab, (lab != self.ignore if self.ignore_in_range else None)
        valid = lab != self.ignore
        if self.ignore_in_range:
            return lab, valid
        if self.on_host:
            bad = lab[valid & ((lab < 0) | (lab >= self.D))]
            if bad.size:
                raise ValueError(f"label {int(bad[0])} is out of range: class labels must "
                                 f"lie in [0, {self.D}) or equal ignore_index={self.ignore}")
        return xp.where(valid, lab, 0), valid


# --- softmax ------------------------------------------------------------------------------------

def _softmax_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    _check_float(ctx, x, "softmax input X")
    if x.rank == 0:
        ctx.fail("softmax needs an input of rank >= 1, got a 0-d value")
    _axis(ctx, x.rank)
    ctx.set_output("Out", x.shape, x.dtype)


def _softmax_kernel(ctx: KernelContext):
    """Over the last axis the compiled tier runs the passes around ``exp``
    (kernels/softmax.py: the NumPy kernel's values, bit for bit)."""
    xp = ctx.xp
    x = ctx.input("X")
    ax = _axis(ctx, x.rank)
    out = ctx.buffer("Out")
    m = xp.empty(_reduced(x.shape, ax), x.dtype)   # scratch: row max, then row sum
    s = xp.empty(_reduced(x.shape, ax), x.dtype)
    shift = _last_axis_kernel(ctx, x, ax, "softmax_shift")
    scale = _last_axis_kernel(ctx, x, ax, "softmax_scale")

    def rows(a, e, lo, hi):
        a, e, mr, sr = a[lo:hi], e[lo:hi], m[lo:hi], s[lo:hi]
        if shift is not None and run_compiled(shift, lambda: (_rows_of(a), _rows_of(e))):
            xp.exp(e, out=e)
            if run_compiled(scale, lambda: (_rows_of(e),)):
                return
        else:
            a.max(axis=ax, keepdims=True, out=mr)
            xp.subtract(a, mr, out=e)
            xp.exp(e, out=e)
        e.sum(axis=ax, keepdims=True, out=sr)
        xp.divide(e, sr, out=e)

    def fn(a):
        e = out if out is not None else xp.empty(a.shape, a.dtype)
        _by_rows(xp, ax, a.shape, lambda lo, hi: rows(a, e, lo, hi), passes=4)
        return e
    return fn


def _last_axis_kernel(ctx: KernelContext, x: TensorType, ax: int, function: str) -> Any:
    """The compiled ``function`` of kernels/softmax.py where the axis is the last and no
    dim is 0, else None."""
    if ax != x.rank - 1 or not all(d > 0 for d in x.shape):
        return None
    return compiled_kernel(ctx, x.dtype, lambda: softmax_source(function, x.dtype))


def _rows_of(a: Any) -> Any:
    """``a`` as [rows, last dim]: a view, for a C-contiguous ``a`` (another layout is
    refused by the compiled kernels: Kernel.call)."""
    return a.reshape(-1, a.shape[-1]) if a.flags.c_contiguous else a


def _by_rows(xp: Any, ax: int, shape: tuple[int, ...], body: Callable[[int, int], None],
             passes: int) -> None:
    """``body(lo, hi)`` over the leading dim's rows, split over the threads in force when
    the axis reduced is another (backend/rows.py), else once over all of them; ``passes``:
    the passes over memory it makes (its work)."""
    if xp.__name__ != "numpy" or ax == 0 or not shape:
        body(0, shape[0] if shape else 1)
        return
    for_rows(body, shape[0], passes * prod(shape))


def _grad_from_out(grad_type: str) -> Callable[[GradContext], None]:
    """The gradient maker of softmax and log_softmax: one op reading Out and dOut."""
    def grad(g: GradContext) -> None:
        emit_default_grad(g, uses=("Out",), grad_type=grad_type, in_slots=("X",))
    return grad


def _out_grad_setup(ctx: KernelContext) -> tuple[Any, TensorType, int, Any, Any]:
    """(xp, Out's type, the axis, dX's buffer, a reduced scratch) for a gradient kernel
    that reads Out."""
    y = ctx.input("Out")
    ax = _axis(ctx, y.rank)
    return ctx.xp, y, ax, ctx.buffer("X@GRAD"), ctx.xp.empty(_reduced(y.shape, ax), y.dtype)


def _softmax_grad_kernel(ctx: KernelContext):
    """dX = Y * (dY - sum(dY * Y, axis)); one compiled pass over the last axis."""
    xp, y, ax, out, s = _out_grad_setup(ctx)
    compiled = _last_axis_kernel(ctx, y, ax, "softmax_grad")

    def rows(y, g, t, lo, hi):
        y, g, t, sr = y[lo:hi], g[lo:hi], t[lo:hi], s[lo:hi]
        if compiled is not None and run_compiled(
                compiled, lambda: (_rows_of(y), _rows_of(g), _rows_of(t))):
            return
        xp.multiply(y, g, out=t)
        t.sum(axis=ax, keepdims=True, out=sr)
        xp.subtract(g, sr, out=t)
        xp.multiply(t, y, out=t)

    def fn(y, g):
        t = out if out is not None else xp.empty(y.shape, y.dtype)
        _by_rows(xp, ax, y.shape, lambda lo, hi: rows(y, g, t, lo, hi), passes=3)
        return t
    return fn


register(OpSpec("softmax", slots("X"), slots("Out"), _softmax_infer, _softmax_kernel,
                _grad_from_out("softmax_grad"), attrs={"axis": -1},
                doc="Out = exp(X - max) / sum(exp(X - max)) along axis (default the last)"))
register(OpSpec("softmax_grad", slots("Out", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "Out"}), _softmax_grad_kernel, attrs={"axis": -1}))


# --- log_softmax --------------------------------------------------------------------------------

def _log_softmax_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    _check_float(ctx, x, "log_softmax input X")
    if x.rank == 0:
        ctx.fail("log_softmax needs an input of rank >= 1, got a 0-d value")
    _axis(ctx, x.rank)
    ctx.set_output("Out", x.shape, x.dtype)


def _log_softmax_kernel(ctx: KernelContext):
    xp = ctx.xp
    x = ctx.input("X")
    ax = _axis(ctx, x.rank)
    out = ctx.buffer("Out")
    m = xp.empty(_reduced(x.shape, ax), x.dtype)   # scratch: row max, then log row sum
    e = xp.empty(x.shape, x.dtype)

    def fn(a):
        dst = out if out is not None else xp.empty(x.shape, x.dtype)
        a.max(axis=ax, keepdims=True, out=m)
        xp.subtract(a, m, out=dst)
        xp.exp(dst, out=e)
        e.sum(axis=ax, keepdims=True, out=m)
        xp.log(m, out=m)
        return xp.subtract(dst, m, out=dst)
    return fn


def _log_softmax_grad_kernel(ctx: KernelContext):
    """dX = dY - exp(Y) * sum(dY, axis) (exp(Y) is the softmax)."""
    xp, y, ax, out, s = _out_grad_setup(ctx)
    p = xp.empty(y.shape, y.dtype)

    def fn(y, g):
        g.sum(axis=ax, keepdims=True, out=s)
        xp.exp(y, out=p)
        xp.multiply(p, s, out=p)
        return xp.subtract(g, p, out=out)
    return fn


register(OpSpec("log_softmax", slots("X"), slots("Out"), _log_softmax_infer,
                _log_softmax_kernel, _grad_from_out("log_softmax_grad"), attrs={"axis": -1},
                doc="Out = X - max - log(sum(exp(X - max))) along axis (default the last)"))
register(OpSpec("log_softmax_grad", slots("Out", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "Out"}), _log_softmax_grad_kernel, attrs={"axis": -1}))


# --- cross_entropy ------------------------------------------------------------------------------

_CE_ATTRS = {"soft_label": False, "ignore_index": -100}


def _ce_infer(ctx: InferContext) -> None:
    x, label = ctx.input("X"), ctx.input("Label")
    _check_float(ctx, x, "cross_entropy input X (probabilities)")
    if x.rank == 0:
        ctx.fail("cross_entropy needs X of rank >= 1 ([N, C] class probabilities)")
    if ctx.attrs["soft_label"]:
        _check_soft_label(ctx, x, label, "X")
    else:
        _check_hard_label(ctx, x, label, x.rank - 1, "X")
    ctx.set_output("Y", _reduced(x.shape, x.rank - 1), x.dtype)


def _ce_kernel(ctx: KernelContext):
    xp = ctx.xp
    x = ctx.input("X")
    out = ctx.buffer("Y")
    big = _clamp_for(xp, x.dtype)
    ax = x.rank - 1
    if ctx.attrs["soft_label"]:
        def soft(p, label):
            pos = p > 0
            logp = xp.log(xp.where(pos, p, 1))
            logp = xp.where(pos, logp, -big)       # log(0) clamped to -1e20: 0*log 0 = 0
            xp.multiply(logp, label, out=logp)
            r = logp.sum(axis=ax, keepdims=True, out=out)
            return xp.negative(r, out=r)
        return soft
    pick = _Picker(xp, x.shape, ax, ctx.attrs["ignore_index"])
    flat_out = out.reshape(pick.lab_shape) if out is not None else None
    red = _reduced(x.shape, ax)

    def hard(p, label):
        idx, valid = pick.labels(label)
        chosen = p.reshape(pick.view)[pick.index(idx)]
        pos = chosen > 0
        nll = xp.log(xp.where(pos, chosen, 1))
        xp.negative(nll, out=nll)
        nll = xp.where(pos, nll, big)              # -log(0) = inf clamped to 1e20
        if valid is not None:
            nll = xp.multiply(nll, valid, out=nll)  # ignored labels give 0
        if out is None:
            return nll.reshape(red)
        xp.copyto(flat_out, nll)
        return out
    return hard


def _ce_grad(g: GradContext) -> None:
    dy = g.out_grad("Y")
    if not dy or dy[0] is None or not g.wants("X"):
        return
    g.emit("cross_entropy_grad", {"X": g.input("X"), "Label": g.input("Label"),
                                  "Y@GRAD": dy}, {"X@GRAD": g.in_grad("X")}, g.attrs)


def _ce_grad_kernel(ctx: KernelContext):
    """dX = -dY * Label / X (soft) or -dY / X at the label, 0 elsewhere (hard); a zero
    probability is treated as 1e-20 so the gradient stays finite."""
    xp = ctx.xp
    x = ctx.input("X")
    out = ctx.buffer("X@GRAD")
    tiny = 1.0 / _clamp_for(xp, x.dtype)
    ax = x.rank - 1
    if ctx.attrs["soft_label"]:
        def soft(p, label, dy):
            safe = xp.where(p > 0, p, tiny)
            r = xp.divide(label, safe, out=out)
            xp.multiply(r, dy, out=r)
            return xp.negative(r, out=r)
        return soft
    pick = _Picker(xp, x.shape, ax, ctx.attrs["ignore_index"])

    def hard(p, label, dy):
        idx, valid = pick.labels(label)
        where = pick.index(idx)
        chosen = p.reshape(pick.view)[where]
        gy = dy.reshape(pick.lab_shape)
        if valid is not None:
            gy = xp.multiply(gy, valid)
        dx = xp.zeros(x.shape, x.dtype) if out is None else out
        if out is not None:
            dx.fill(0)
        dx.reshape(pick.view)[where] = -gy / xp.where(chosen > 0, chosen, tiny)
        return dx
    return hard


register(OpSpec("cross_entropy", slots("X", "Label"), slots("Y"), _ce_infer, _ce_kernel,
                _ce_grad, attrs=_CE_ATTRS,
                doc="Y = -log(X[label]) per row for hard int labels [..., 1] (0 where "
                    "label == ignore_index), or -sum(Label * log X) for soft labels of X's "
                    "shape; -log(0) is clamped to 1e20. Y has shape [..., 1]."))
register(OpSpec("cross_entropy_grad", slots("X", "Label", "Y@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "X"}), _ce_grad_kernel, attrs=_CE_ATTRS))


# --- softmax_with_cross_entropy -----------------------------------------------------------------

# numeric_stable_mode is Paddle's attr: the kernels here are always the stable ones
_SWCE_ATTRS = {"soft_label": False, "ignore_index": -100, "numeric_stable_mode": True,
               "axis": -1}


def _swce_infer(ctx: InferContext) -> None:
    x, label = ctx.input("Logits"), ctx.input("Label")
    _check_float(ctx, x, "Logits")
    if x.rank == 0:
        ctx.fail("softmax_with_cross_entropy needs Logits of rank >= 1 ([N, C])")
    ax = _axis(ctx, x.rank)
    if ctx.attrs["soft_label"]:
        _check_soft_label(ctx, x, label, "Logits")
    else:
        _check_hard_label(ctx, x, label, ax, "Logits")
    ctx.set_output("Softmax", x.shape, x.dtype)
    ctx.set_output("Loss", _reduced(x.shape, ax), x.dtype)


def _swce_kernel(ctx: KernelContext):
    xp = ctx.xp
    x = ctx.input("Logits")
    ax = _axis(ctx, x.rank)
    red = _reduced(x.shape, ax)
    sm_out, loss_out = ctx.buffer("Softmax"), ctx.buffer("Loss")
    m = xp.empty(red, x.dtype)   # scratch: row max, then row sum of exp
    if ctx.attrs["soft_label"]:
        def soft(logits, label):
            logits.max(axis=ax, keepdims=True, out=m)
            z = xp.subtract(logits, m, out=sm_out)              # z = logits - max
            lz = xp.multiply(label, z).sum(axis=ax, keepdims=True)
            lsum = label.sum(axis=ax, keepdims=True)
            xp.exp(z, out=z)
            z.sum(axis=ax, keepdims=True, out=m)
            # loss = -sum(label * (z - log s)) = sum(label) * log s - sum(label * z)
            loss = xp.multiply(xp.log(m), lsum, out=loss_out)
            xp.subtract(loss, lz, out=loss)
            return xp.divide(z, m, out=z), loss
        return soft
    pick = _Picker(xp, x.shape, ax, ctx.attrs["ignore_index"])

    def hard(logits, label):
        idx, valid = pick.labels(label)
        logits.max(axis=ax, keepdims=True, out=m)
        z = xp.subtract(logits, m, out=sm_out)
        z_label = z.reshape(pick.view)[pick.index(idx)].reshape(red)
        xp.exp(z, out=z)
        z.sum(axis=ax, keepdims=True, out=m)
        loss = xp.log(m, out=loss_out)
        xp.subtract(loss, z_label, out=loss)                  # log s - z[label]
        if valid is not None:
            xp.multiply(loss, valid.reshape(red), out=loss)   # ignored labels give 0
        return xp.divide(z, m, out=z), loss
    return hard


def _swce_grad(g: GradContext) -> None:
    """Gradient to Logits from the Loss (softmax - onehot) and, when one really flows,
    from the Softmax output too."""
    if not g.wants("Logits"):
        return
    dloss, dsm = g.flowing("Loss"), g.flowing("Softmax")
    if dloss is None and dsm is None:
        return
    inputs = {"Label": g.input("Label"), "Softmax": g.output("Softmax")}
    if dloss is not None:
        inputs["Loss@GRAD"] = [dloss]
    if dsm is not None:
        inputs["Softmax@GRAD"] = [dsm]
    g.emit("softmax_with_cross_entropy_grad", inputs, {"Logits@GRAD": g.in_grad("Logits")},
           g.attrs)


def _swce_grad_kernel(ctx: KernelContext):
    """dLogits = (S - onehot) * dLoss (hard), (S * sum(Label) - Label) * dLoss (soft), plus
    S * (dS - sum(dS * S)) when a gradient reaches the Softmax output."""
    xp = ctx.xp
    sm = ctx.input("Softmax")
    ax = _axis(ctx, sm.rank)
    red = _reduced(sm.shape, ax)
    out = ctx.buffer("Logits@GRAD")
    has_loss, has_sm = ctx.has_input("Loss@GRAD"), ctx.has_input("Softmax@GRAD")
    soft = ctx.attrs["soft_label"]
    pick = None if soft else _Picker(xp, sm.shape, ax, ctx.attrs["ignore_index"])
    s = xp.empty(red, sm.dtype)

    def through_softmax(y, dsm, acc):
        t = xp.multiply(y, dsm, out=out if acc is None else None)
        t.sum(axis=ax, keepdims=True, out=s)
        xp.subtract(dsm, s, out=t)
        xp.multiply(t, y, out=t)
        return t if acc is None else xp.add(acc, t, out=acc)

    def fn(*args):
        label, y = args[0], args[1]
        dloss = args[2] if has_loss else None
        dsm = args[-1] if has_sm else None
        dx = None
        if dloss is not None:
            if soft:
                dx = xp.multiply(y, label.sum(axis=ax, keepdims=True), out=out)
                xp.subtract(dx, label, out=dx)
                xp.multiply(dx, dloss, out=dx)
            else:
                idx, valid = pick.labels(label)
                gl = dloss if valid is None else xp.multiply(dloss, valid.reshape(red))
                # a C-ordered result, so the reshape below is a view we can write through
                dx = xp.multiply(y, gl, out=xp.empty(y.shape, y.dtype) if out is None else out)
                dx.reshape(pick.view)[pick.index(idx)] -= gl.reshape(pick.lab_shape)
        if dsm is not None:
            dx = through_softmax(y, dsm, dx)
        return dx
    return fn


register(OpSpec("softmax_with_cross_entropy", slots("Logits", "Label"),
                slots("Softmax", "Loss"), _swce_infer, _swce_kernel, _swce_grad,
                attrs=_SWCE_ATTRS,
                doc="Softmax of Logits along axis and its cross entropy with Label, via a "
                    "stable log-sum-exp. Loss has Logits' shape with a size-1 axis; it is 0 "
                    "where a hard label equals ignore_index."))
register(OpSpec("softmax_with_cross_entropy_grad",
                slots("Label", "Softmax", "Loss@GRAD?", "Softmax@GRAD?"),
                slots("Logits@GRAD"), infer_like({"Logits@GRAD": "Softmax"}),
                _swce_grad_kernel, attrs=_SWCE_ATTRS))


# --- sigmoid_cross_entropy_with_logits ----------------------------------------------------------

_SCE_ATTRS = {"ignore_index": -100, "normalize": False}


def _sce_infer(ctx: InferContext) -> None:
    x, label = ctx.input("X"), ctx.input("Label")
    _check_float(ctx, x, "X (logits)")
    if label.dtype != x.dtype:
        ctx.fail_dtype(f"Label is {label.dtype} but X is {x.dtype}; labels are float "
                       f"probabilities of X's dtype, cast them")
    if not _same_dims(x.shape, label.shape):
        ctx.fail(f"Label has shape {_shape(label.shape)} but X has shape {_shape(x.shape)}; "
                 f"there is one label per logit, so they must match")
    ctx.set_output("Out", x.shape, x.dtype)


def _sce_scale(xp: Any, valid: Any, normalize: bool) -> Any:
    """1 for kept elements, 0 for ignored ones (a label whose integer part is
    ignore_index, as Paddle compares them), divided by the count kept if normalize."""
    if not normalize:
        return valid
    return valid / xp.maximum(valid.sum(), 1)   # stays on the device: no sync


def _sce_kernel(ctx: KernelContext):
    xp = ctx.xp
    out = ctx.buffer("Out")
    ignore, normalize = float(ctx.attrs["ignore_index"]), bool(ctx.attrs["normalize"])

    def fn(x, z):
        t = xp.exp(-xp.abs(x))
        xp.log1p(t, out=t)                       # log(1 + exp(-|x|))
        r = xp.maximum(x, 0, out=out)
        xp.subtract(r, xp.multiply(x, z), out=r)
        xp.add(r, t, out=r)
        return xp.multiply(r, _sce_scale(xp, xp.trunc(z) != ignore, normalize), out=r)
    return fn


def _sce_grad(g: GradContext) -> None:
    dout = g.out_grad("Out")
    if not dout or dout[0] is None or not g.wants("X"):
        return
    g.emit("sigmoid_cross_entropy_with_logits_grad",
           {"X": g.input("X"), "Label": g.input("Label"), "Out@GRAD": dout},
           {"X@GRAD": g.in_grad("X")}, g.attrs)


def _sce_grad_kernel(ctx: KernelContext):
    """dX = (sigmoid(X) - Label) * dOut, 0 where Label == ignore_index."""
    xp = ctx.xp
    out = ctx.buffer("X@GRAD")
    ignore, normalize = float(ctx.attrs["ignore_index"]), bool(ctx.attrs["normalize"])

    def fn(x, z, dout):
        e = xp.exp(-xp.abs(x))                   # stable sigmoid: never exp of a large x
        sig = xp.where(x >= 0, 1, e)
        xp.divide(sig, xp.add(e, 1, out=e), out=sig)
        r = xp.subtract(sig, z, out=out)
        xp.multiply(r, dout, out=r)
        return xp.multiply(r, _sce_scale(xp, xp.trunc(z) != ignore, normalize), out=r)
    return fn


register(OpSpec("sigmoid_cross_entropy_with_logits", slots("X", "Label"), slots("Out"),
                _sce_infer, _sce_kernel, _sce_grad, attrs=_SCE_ATTRS,
                doc="Elementwise logistic loss of logits X against probabilities Label: "
                    "max(X, 0) - X * Label + log(1 + exp(-|X|)); 0 where Label == "
                    "ignore_index; divided by the number of kept labels if normalize."))
register(OpSpec("sigmoid_cross_entropy_with_logits_grad", slots("X", "Label", "Out@GRAD"),
                slots("X@GRAD"), infer_like({"X@GRAD": "X"}), _sce_grad_kernel,
                attrs=_SCE_ATTRS))
