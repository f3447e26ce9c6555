"""The linear-chain CRF over a padded batch: its negative log-likelihood and Viterbi decoding.

Emission [B, T, D] holds the tag scores of each step, Transition [D + 2, D] is laid out as
Paddle lays it out: row 0 the start scores, row 1 the end scores, rows 2.. the score of
going from tag i (row 2 + i) to tag j (column j). Label [B, T] (or [B, T, 1]) holds the
gold tags and Length [B] (or [B, 1]) each row's length; without Length every row is full
length. Positions at or past a row's length never matter: their emissions and labels may
hold anything.

``linear_chain_crf``  LogLikelihood [B, 1] = log Z - score(gold path), the negative log
                      likelihood (Paddle's name); 0 for an empty row. Alpha [B, T, D] keeps
                      the forward variables in log space, log sum over every path of
                      positions 0..t ending in tag j (Paddle's Alpha is exp(Alpha[t])
                      normalised to sum 1). Both recursions run in log space (log-sum-exp
                      at each step), vectorised over the batch, one step at a time.
``crf_decoding``      ViterbiPath [B, T] int64: the best path, 0 past each length; with Label
                      1 where the best path agrees with it and 0 elsewhere.
"""
from __future__ import annotations

from typing import Any

from ..ir.text import format_shape as fmt
from .loss_common import (
    check_float,
    check_int,
    check_lengths,
    check_range,
    logsumexp,
    row_lengths,
    time_mask,
)
from .loss_grads import register_with_grad
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, dims_compatible, slots


def _check_crf_inputs(ctx: InferContext, what: str) -> tuple[int, int, int]:
    x, w = ctx.input("Emission"), ctx.input("Transition")
    check_float(ctx, x, f"{what}: Emission")
    if x.rank != 3:
        ctx.fail(f"{what}: Emission must be a padded batch [B, T, D] of tag scores (with "
                 f"Length for rows of different lengths), got {fmt(x.shape)}")
    b, t, d = x.shape
    if w.dtype != x.dtype:
        ctx.fail_dtype(f"{what}: Transition is {w.dtype} but Emission is {x.dtype}")
    if w.rank != 2 or not dims_compatible(w.shape[1], d) or \
            (w.shape[0] >= 0 and d >= 0 and w.shape[0] != d + 2):
        ctx.fail(f"{what}: Transition must be [D + 2, D] = {fmt((d + 2, d))} for D = {d} "
                 f"tags (start, end, then the tag-to-tag scores), got {fmt(w.shape)}")
    if ctx.has_input("Label"):
        lab = ctx.input("Label")
        check_int(ctx, lab, f"{what}: Label")
        ok = lab.rank == 2 or (lab.rank == 3 and dims_compatible(lab.shape[2], 1))
        if not ok or not dims_compatible(lab.shape[0], b) or \
                not dims_compatible(lab.shape[1], t):
            ctx.fail(f"{what}: Label must hold one tag per step, [B, T] = {fmt((b, t))} (or "
                     f"[B, T, 1]), got {fmt(lab.shape)}")
    check_lengths(ctx, "Length", b, what)
    return b, t, d


class _Batch:
    """One call's view of a padded batch: lengths, the valid mask, gold tags."""

    def __init__(self, ctx: KernelContext, what: str):
        self.xp = ctx.xp
        self.b, self.t, self.d = ctx.input("Emission").shape
        self.has_len = ctx.has_input("Length")
        self.what = what
        self.rows = ctx.xp.arange(self.b)

    def lengths(self, length: Any | None) -> Any:
        if length is None:
            return self.xp.full((self.b,), self.t, dtype="int64")
        return row_lengths(self.xp, length, self.b, self.t, self.what)

    def tags(self, label: Any, valid: Any) -> Any:
        """Gold tags [B, T], 0 at padded positions (which may hold anything)."""
        y = self.xp.where(valid, label.reshape(self.b, self.t), 0)
        check_range(self.xp, y, self.d, f"{self.what}: tag")
        return y

    def split(self, args: tuple) -> tuple[Any, Any, Any, Any, Any]:
        """(emission, transition, label, lengths, valid mask) from a kernel's leading
        arguments; the emissions are 0 at padded positions, which may hold anything (inf,
        NaN) that must not reach a sum."""
        w, label = args[1], args[2]
        n = self.lengths(args[3] if self.has_len else None)
        valid = time_mask(self.xp, n, self.t)
        x = args[0] if not self.has_len else self.xp.where(valid[:, :, None], args[0], 0)
        return x, w, label, n, valid


def _forward_alpha(xp: Any, x: Any, w: Any, n: Any, alpha: Any) -> Any:
    """Fills alpha [B, T, D] (log space); rows past their length carry their last value
    on, so alpha[:, T - 1] is each row's final forward vector. Returns log Z [B]."""
    t_len = x.shape[1]
    trans = w[2:][None]
    alpha[:, 0] = w[0] + x[:, 0]
    for t in range(1, t_len):
        new = logsumexp(xp, alpha[:, t - 1, :, None] + trans, axis=1)
        new += x[:, t]
        alpha[:, t] = xp.where((t < n)[:, None], new, alpha[:, t - 1])
    return logsumexp(xp, alpha[:, t_len - 1] + w[1], axis=1)


def _gold_score(xp: Any, x: Any, w: Any, y: Any, n: Any, valid: Any) -> Any:
    """The score of each row's gold path [B] (0 for an empty row)."""
    b = x.shape[0]
    rows = xp.arange(b)
    emit = xp.take_along_axis(x, y[:, :, None], axis=2)[:, :, 0]
    score = (emit * valid).sum(axis=1)
    step = (w[2:][y[:, :-1], y[:, 1:]] * valid[:, 1:]).sum(axis=1)
    last = y[rows, xp.maximum(n - 1, 0)]
    return xp.where(n > 0, score + step + w[0][y[:, 0]] + w[1][last], 0)


def _crf_infer(ctx: InferContext) -> None:
    if not ctx.has_input("Label"):
        ctx.fail("linear_chain_crf needs Label, the gold tags")
    b, t, d = _check_crf_inputs(ctx, "linear_chain_crf")
    dtype = ctx.input("Emission").dtype
    ctx.set_output("Alpha", (b, t, d), dtype)
    ctx.set_output("LogLikelihood", (b, 1), dtype)


def _crf_kernel(ctx: KernelContext):
    xp = ctx.xp
    batch = _Batch(ctx, "linear_chain_crf")
    a_buf, ll_buf = ctx.buffer("Alpha"), ctx.buffer("LogLikelihood")
    dtype = ctx.input("Emission").dtype

    def fn(*args):
        x, w, label, n, valid = batch.split(args)
        alpha = a_buf if a_buf is not None else xp.empty((batch.b, batch.t, batch.d), dtype)
        log_z = _forward_alpha(xp, x, w, n, alpha)
        nll = xp.where(n > 0, log_z - _gold_score(xp, x, w, batch.tags(label, valid), n,
                                                  valid), 0)
        out = ll_buf if ll_buf is not None else xp.empty((batch.b, 1), dtype)
        out[:, 0] = nll
        return alpha, out
    return fn


def _backward_beta(xp: Any, x: Any, w: Any, n: Any) -> Any:
    """beta [B, T, D]: log sum over the paths of positions t+1..n-1 (with the end score)
    given tag j at t; the end scores at t >= n - 1."""
    b, t_len, d = x.shape
    beta = xp.empty((b, t_len, d), x.dtype)
    trans = w[2:][None]
    beta[:, t_len - 1] = w[1]
    for t in range(t_len - 2, -1, -1):
        nxt = (x[:, t + 1] + beta[:, t + 1])[:, None, :]
        cand = logsumexp(xp, trans + nxt, axis=2)
        beta[:, t] = xp.where((t >= n - 1)[:, None], w[1], cand)
    return beta


def _pair_grads(xp: Any, x: Any, w: Any, alpha: Any, beta: Any, log_z: Any, weight: Any
                ) -> Any:
    """sum over rows and steps t >= 1 of weight[b, t] * P(tag i at t-1, tag j at t)."""
    d = x.shape[2]
    acc = xp.zeros((d, d), x.dtype)
    trans = w[2:][None]
    for t in range(1, x.shape[1]):
        p = alpha[:, t - 1, :, None] + trans
        p += (x[:, t] + beta[:, t] - log_z[:, None])[:, None, :]
        xp.exp(p, out=p)
        acc += (p * weight[:, t, None, None]).sum(axis=0)
    return acc


def _gold_counts(xp: Any, y: Any, weight: Any, d: int) -> Any:
    """sum of weight[b, t] over the gold transitions (y[t-1] -> y[t]), as [D, D]."""
    idx = (y[:, :-1] * d + y[:, 1:]).reshape(-1)
    counts = xp.bincount(idx, weights=weight[:, 1:].reshape(-1), minlength=d * d)
    return counts.reshape(d, d)


def _crf_grad_kernel(ctx: KernelContext):
    """d/dEmission = (marginal - onehot(gold)) * dLL on valid positions; d/dTransition
    gathers the start, end and pairwise marginals minus the gold path's counts."""
    xp = ctx.xp
    batch = _Batch(ctx, "linear_chain_crf")
    want_x, want_w = ctx.has_output("Emission@GRAD"), ctx.has_output("Transition@GRAD")
    d, rows = batch.d, batch.rows

    def fn(*args):
        x, w, label, n, valid = batch.split(args)
        alpha, g = args[-2], args[-1].reshape(batch.b)
        y = batch.tags(label, valid)
        log_z = logsumexp(xp, alpha[:, batch.t - 1] + w[1], axis=1)
        beta = _backward_beta(xp, x, w, n)
        weight = valid * g[:, None]                              # [B, T]
        marg = xp.exp(alpha + beta - log_z[:, None, None])
        dx = marg * weight[:, :, None]
        dx[rows[:, None], xp.arange(batch.t)[None, :], y] -= weight
        res = [dx] if want_x else []
        if want_w:
            dw = xp.empty(w.shape, x.dtype)
            last = xp.maximum(n - 1, 0)
            dw[0] = dx[:, 0].sum(axis=0)
            dw[1] = dx[rows, last].sum(axis=0)
            dw[2:] = _pair_grads(xp, x, w, alpha, beta, log_z, weight) - \
                _gold_counts(xp, y, weight, d)
            res.append(dw)
        return res[0] if len(res) == 1 else tuple(res)
    return fn


register_with_grad(
    "linear_chain_crf", ("Emission", "Transition", "Label", "Length?"),
    ("Alpha", "LogLikelihood"), _crf_infer, _crf_kernel, _crf_grad_kernel,
    uses=("Emission", "Transition", "Label", "Length?", "Alpha"),
    wrt=("Emission", "Transition"), out_slot="LogLikelihood",
    doc="Negative log-likelihood [B, 1] of the gold tags Label under a linear-chain CRF "
        "with emissions [B, T, D] and transitions [D + 2, D] (start, end, tag to tag), over "
        "each row's first Length steps; Alpha [B, T, D]: the log-space forward variables.")


# --- crf_decoding -------------------------------------------------------------------------------

def _decode_infer(ctx: InferContext) -> None:
    b, t, _ = _check_crf_inputs(ctx, "crf_decoding")
    ctx.set_output("ViterbiPath", (b, t), "int64")


def _viterbi(xp: Any, x: Any, w: Any, n: Any, path: Any) -> Any:
    """The best tag path of each row into path [B, T] (0 past the row's length)."""
    b, t_len, d = x.shape
    rows = xp.arange(b)
    trans = w[2:][None]
    score = w[0] + x[:, 0]
    track = xp.zeros((b, t_len, d), dtype="int64")
    for t in range(1, t_len):
        s = score[:, :, None] + trans
        best = s.argmax(axis=1)
        new = xp.take_along_axis(s, best[:, None, :], axis=1)[:, 0] + x[:, t]
        score = xp.where((t < n)[:, None], new, score)
        track[:, t] = best
    last = (score + w[1]).argmax(axis=1)
    cur = xp.zeros(b, dtype="int64")
    for t in range(t_len - 1, -1, -1):
        back = track[rows, t + 1, cur] if t + 1 < t_len else cur
        cur = xp.where(t == n - 1, last, xp.where(t < n - 1, back, 0))
        path[:, t] = cur
    return path


def _decode_kernel(ctx: KernelContext):
    xp = ctx.xp
    batch = _Batch(ctx, "crf_decoding")
    has_label = ctx.has_input("Label")
    out = ctx.buffer("ViterbiPath")

    def fn(*args):
        x, w = args[0], args[1]
        label = args[2] if has_label else None
        n = batch.lengths(args[-1] if batch.has_len else None)
        if batch.has_len:
            x = xp.where(time_mask(xp, n, batch.t)[:, :, None], x, 0)
        path = out if out is not None else xp.empty((batch.b, batch.t), dtype="int64")
        _viterbi(xp, x, w, n, path)
        if label is not None:
            agree = (label.reshape(batch.b, batch.t) == path) & time_mask(xp, n, batch.t)
            path[...] = agree
        return path
    return fn


register(OpSpec("crf_decoding", slots("Emission", "Transition", "Label?", "Length?"),
                slots("ViterbiPath"), _decode_infer, _decode_kernel,
                doc="Viterbi decoding of a linear-chain CRF: ViterbiPath [B, T] int64, the "
                    "best tags of each row's first Length steps (0 after); with Label, 1 "
                    "where they agree with it, else 0."))
