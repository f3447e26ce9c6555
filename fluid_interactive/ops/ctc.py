"""Connectionist temporal classification: the CTC loss (``warpctc``) and the collapsing of a
best path into labels (``ctc_align``), over padded batches.

``warpctc``   Logits [B, T, C] (unnormalised; the op applies the softmax), Label [B, L] int,
              LogitsLength and LabelLength [B] (or [B, 1]; without them every row is
              full). Loss [B, 1] = -log p(label | logits), summed over every alignment of
              the label with blank (``blank``) between and around its symbols. Alpha
              [B, T, 2L + 1] keeps the forward variables (log space; the lowest finite
              value where a lattice place is out of reach) for the gradient. A
              label that cannot fit its frames (length plus repeats over T) has loss 0 and
              no gradient, as warp-ctc gives. ``norm_by_times`` divides the gradient (not
              the loss) by each row's frame count, as Paddle does. Both recursions run in
              log space over every row at once, one frame at a time.
``ctc_align`` Input [B, T] int (a best path), InputLength [B]: drops repeats (with
              ``merge_repeated``) and blanks; Output [B, T] holds each row's labels then
              ``padding_value``, OutputLength [B, 1] their count.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.text import format_shape as fmt
from .loss_common import (
    check_float,
    check_int,
    check_length_pair,
    check_lengths,
    check_range,
    row_lengths,
    time_mask,
)
from .loss_grads import register_with_grad
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, dims_compatible, slots

_CTC_ATTRS = {"blank": 0, "norm_by_times": False}


def _ctc_infer(ctx: InferContext) -> None:
    x, lab = ctx.input("Logits"), ctx.input("Label")
    check_float(ctx, x, "warpctc: Logits")
    if x.rank != 3:
        ctx.fail(f"warpctc: Logits must be a padded batch [B, T, C] of class scores (C "
                 f"counting the blank), got {fmt(x.shape)}")
    check_int(ctx, lab, "warpctc: Label")
    if lab.rank != 2 or not dims_compatible(lab.shape[0], x.shape[0]):
        ctx.fail(f"warpctc: Label must be padded label sequences [B, L] for Logits "
                 f"{fmt(x.shape)}, got {fmt(lab.shape)}")
    check_length_pair(ctx, ("LogitsLength", "LabelLength"), x.shape[0], "warpctc")
    blank = int(ctx.attrs["blank"])
    if x.shape[2] >= 0 and not 0 <= blank < x.shape[2]:
        ctx.fail(f"warpctc: blank={blank} must be a class of Logits, in [0, {x.shape[2]})")
    s = 2 * lab.shape[1] + 1 if lab.shape[1] >= 0 else -1
    ctx.set_output("Alpha", (x.shape[0], x.shape[1], s), x.dtype)
    ctx.set_output("Loss", (x.shape[0], 1), x.dtype)


class _Lattice:
    """One call's CTC lattice: the label extended with blanks, per-frame log
    probabilities of its symbols, and where a step may skip a blank."""

    def __init__(self, ctx: KernelContext):
        self.xp = ctx.xp
        self.b, self.t, self.c = ctx.input("Logits").shape
        self.l_max = ctx.input("Label").shape[1]
        self.s = 2 * self.l_max + 1
        self.blank = int(ctx.attrs["blank"])
        self.has_len = ctx.has_input("LogitsLength")
        self.rows = self.xp.arange(self.b)

    def build(self, args: tuple) -> None:
        xp = self.xp
        logits, label = args[0], args[1]
        if self.has_len:
            self.n = row_lengths(xp, args[2], self.b, self.t, "warpctc: LogitsLength")
            self.m = row_lengths(xp, args[3], self.b, self.l_max, "warpctc: LabelLength")
            logits = xp.where(time_mask(xp, self.n, self.t)[:, :, None], logits, 0)
        else:
            self.n = xp.full((self.b,), self.t, dtype="int64")
            self.m = xp.full((self.b,), self.l_max, dtype="int64")
        z = logits - logits.max(axis=2, keepdims=True)
        self.logp = z - xp.log(xp.exp(z).sum(axis=2, keepdims=True))
        lab = xp.where(time_mask(xp, self.m, self.l_max), label, self.blank)
        check_range(xp, lab, self.c, "warpctc: label")
        ext = xp.full((self.b, self.s), self.blank, dtype="int64")
        ext[:, 1::2] = lab
        self.ext = ext
        self.s_valid = xp.arange(self.s)[None, :] < (2 * self.m + 1)[:, None]
        lp = xp.take_along_axis(self.logp, xp.broadcast_to(ext[:, None, :],
                                                            (self.b, self.t, self.s)), axis=2)
        self.lp = xp.where(self.s_valid[:, None, :], lp, -np.inf)
        skip = xp.zeros((self.b, self.s), dtype=bool)
        skip[:, 2:] = (ext[:, 2:] != self.blank) & (ext[:, 2:] != ext[:, :-2])
        self.skip = skip

    def shifted(self, a: Any, k: int) -> Any:
        """a moved k places to the right along the lattice (-inf coming in)."""
        out = self.xp.full(a.shape, -np.inf, dtype=a.dtype)
        out[:, k:] = a[:, :-k]
        return out

    def alpha(self, alpha: Any) -> Any:
        """Fills alpha [B, T, S]; a row past its frames carries its last column on.
        Returns each row's log-likelihood [B] (-inf where the label cannot fit)."""
        xp = self.xp
        alpha[:, 0] = -np.inf
        alpha[:, 0, :2] = self.lp[:, 0, :2]
        for t in range(1, self.t):
            a = alpha[:, t - 1]
            new = xp.logaddexp(a, self.shifted(a, 1))
            new = xp.logaddexp(new, xp.where(self.skip, self.shifted(a, 2), -np.inf))
            new += self.lp[:, t]
            alpha[:, t] = xp.where((t < self.n)[:, None], new, a)
        last = alpha[:, self.t - 1]
        end = 2 * self.m
        ll = xp.logaddexp(last[self.rows, end],
                          xp.where(self.m > 0, last[self.rows, xp.maximum(end - 1, 0)],
                                   -np.inf))
        return xp.where(self.n > 0, ll, xp.where(self.m > 0, -np.inf, 0.0))

    def beta(self) -> Any:
        """beta [B, T, S]: log p of finishing the label from lattice place s at frame t,
        the frame's own symbol included; -inf from frame n on."""
        xp = self.xp
        beta = xp.empty((self.b, self.t, self.s), self.lp.dtype)
        places = xp.arange(self.s)[None, :]
        end = 2 * self.m[:, None]
        finals = (places == end) | ((places == end - 1) & (self.m[:, None] > 0))
        skip_in = xp.zeros((self.b, self.s), dtype=bool)
        skip_in[:, :-2] = self.skip[:, 2:]
        nxt = xp.full((self.b, self.s), -np.inf, dtype=self.lp.dtype)
        for t in range(self.t - 1, -1, -1):
            lp = self.lp[:, t]
            cand = xp.logaddexp(nxt, self._left(nxt, 1))
            cand = xp.logaddexp(cand, xp.where(skip_in, self._left(nxt, 2), -np.inf)) + lp
            first = xp.where(finals, lp, -np.inf)
            at = xp.where((t == self.n - 1)[:, None], first,
                          xp.where((t < self.n - 1)[:, None], cand, -np.inf))
            beta[:, t] = at
            nxt = at
        return beta

    def gather(self, post: Any) -> Any:
        """[B, T, S] per lattice place -> [B, T, C] per symbol, summing the places that
        hold one symbol (a scatter-add, so no [B, S, C] one-hot is made)."""
        xp = self.xp
        base = (xp.arange(self.b * self.t) * self.c).reshape(self.b, self.t, 1)
        index = (base + self.ext[:, None, :]).reshape(-1)
        sums = xp.bincount(index, weights=post.reshape(-1), minlength=self.b * self.t * self.c)
        return sums.reshape(self.b, self.t, self.c).astype(post.dtype, copy=False)

    def _left(self, a: Any, k: int) -> Any:
        out = self.xp.full(a.shape, -np.inf, dtype=a.dtype)
        out[:, :-k] = a[:, k:]
        return out


def _ctc_kernel(ctx: KernelContext):
    xp = ctx.xp
    lat = _Lattice(ctx)
    a_buf, loss_buf = ctx.buffer("Alpha"), ctx.buffer("Loss")
    dtype = ctx.input("Logits").dtype
    lowest = float(np.finfo(dtype).min)

    def fn(*args):
        lat.build(args)
        alpha = a_buf if a_buf is not None else xp.empty((lat.b, lat.t, lat.s), dtype)
        ll = lat.alpha(alpha)
        # unreachable places are kept as the lowest finite value, not -inf: a finite output
        # (a product with a zero gradient stays 0); the gradient kernel turns them back
        xp.maximum(alpha, lowest, out=alpha)
        loss = xp.where(xp.isfinite(ll), -ll, 0)
        out = loss_buf if loss_buf is not None else xp.empty((lat.b, 1), dtype)
        out[:, 0] = loss
        return alpha, out
    return fn


def _ctc_grad_kernel(ctx: KernelContext):
    """dLogits = (softmax - occupancy) * dLoss on each row's frames, where occupancy[k] is
    the posterior of the lattice places holding symbol k; 0 for a row whose label cannot
    fit; divided by the row's frame count with norm_by_times."""
    xp = ctx.xp
    lat = _Lattice(ctx)
    norm = bool(ctx.attrs["norm_by_times"])
    out = ctx.buffer("Logits@GRAD")
    lowest = float(np.finfo(ctx.input("Logits").dtype).min)

    def fn(*args):
        lat.build(args)
        alpha, g = args[-2], args[-1].reshape(lat.b)
        alpha = xp.where(alpha > lowest, alpha, -np.inf)
        last = alpha[:, lat.t - 1]
        end = 2 * lat.m
        ll = xp.logaddexp(last[lat.rows, end], xp.where(
            lat.m > 0, last[lat.rows, xp.maximum(end - 1, 0)], -np.inf))
        feasible = xp.isfinite(ll) & (lat.n > 0)
        ab = alpha + lat.beta()
        with np.errstate(invalid="ignore"):
            post = xp.where(xp.isfinite(ab), ab - lat.lp - xp.where(feasible, ll, 0)[:, None,
                                                                                      None],
                            -np.inf)
        occupancy = lat.gather(xp.exp(post))
        weight = g * feasible
        if norm:
            weight = weight / xp.maximum(lat.n, 1)
        frames = time_mask(xp, lat.n, lat.t)[:, :, None] * weight[:, None, None]
        dx = xp.exp(lat.logp) - occupancy
        dx *= frames
        if out is None:
            return dx.astype(post.dtype, copy=False)
        xp.copyto(out, dx)
        return out
    return fn


register_with_grad(
    "warpctc", ("Logits", "Label", "LogitsLength?", "LabelLength?"), ("Alpha", "Loss"),
    _ctc_infer, _ctc_kernel, _ctc_grad_kernel,
    uses=("Logits", "Label", "LogitsLength?", "LabelLength?", "Alpha"), wrt=("Logits",),
    out_slot="Loss", attrs=_CTC_ATTRS,
    doc="CTC loss [B, 1] of label sequences Label [B, L] given unnormalised class scores "
        "Logits [B, T, C] (softmax inside), over each row's first LogitsLength frames and "
        "LabelLength labels; 0 where a label cannot fit. Alpha: the log-space forward "
        "variables.")


# --- ctc_align ----------------------------------------------------------------------------------

_ALIGN_ATTRS = {"blank": 0, "merge_repeated": True, "padding_value": 0}


def _align_infer(ctx: InferContext) -> None:
    x = ctx.input("Input")
    check_int(ctx, x, "ctc_align: Input")
    if x.rank != 2:
        ctx.fail(f"ctc_align: Input must be best paths [B, T], got {fmt(x.shape)}")
    check_lengths(ctx, "InputLength", x.shape[0], "ctc_align")
    ctx.set_output("Output", x.shape, x.dtype)
    ctx.set_output("OutputLength", (x.shape[0], 1), "int64")


def _align_kernel(ctx: KernelContext):
    xp = ctx.xp
    b, t = ctx.input("Input").shape
    blank, merge = int(ctx.attrs["blank"]), bool(ctx.attrs["merge_repeated"])
    pad = int(ctx.attrs["padding_value"])
    has_len = ctx.has_input("InputLength")
    want_len = ctx.has_output("OutputLength")
    rows = xp.arange(b)[:, None]

    def fn(x, *length):
        n = row_lengths(xp, length[0], b, t, "ctc_align") if has_len else \
            xp.full((b,), t, dtype="int64")
        keep = (x != blank) & time_mask(xp, n, t)
        if merge:
            keep[:, 1:] &= x[:, 1:] != x[:, :-1]
        place = xp.where(keep, xp.cumsum(keep, axis=1) - 1, t)   # dropped ones: column t
        wide = xp.full((b, t + 1), pad, dtype=x.dtype)
        wide[rows, place] = x
        out = xp.ascontiguousarray(wide[:, :t])
        if not want_len:
            return out
        return out, keep.sum(axis=1).astype("int64").reshape(b, 1)
    return fn


register(OpSpec("ctc_align", slots("Input", "InputLength?"), slots("Output", "OutputLength?"),
                _align_infer, _align_kernel, attrs=_ALIGN_ATTRS,
                doc="Collapses best paths Input [B, T]: repeats merged (merge_repeated), "
                    "blanks dropped, over each row's first InputLength steps; Output [B, T] "
                    "padded with padding_value, OutputLength [B, 1]."))
