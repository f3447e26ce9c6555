"""``lstmp``: an LSTM with a recurrent projection over a padded batch, in one op, and
``lstmp_grad``, backpropagation through time in one op.

Input [B, T, 4H] is already projected, its columns in Paddle's gate order c~, i, f, o (as
``lstm``); Weight [P, 4H] multiplies the previous *projection* r (not h); ProjWeight [H, P]
makes it. Per step, with act_g the gate activation:

    [c~ i f o] = Input[:, t] + r @ Weight + Bias[:4H]   (+ peepholes W_ic * c, W_fc * c,
    c_t = f * c + i * c~      (clipped to +-cell_clip)   W_oc * c_t from Bias[4H:7H])
    h_t = o * act_cell(c_t);  r_t = act_proj(h_t @ ProjWeight)  (clipped to +-proj_clip)

H0 [B, P] and C0 [B, H] start r and c (default zeros). Outputs Projection [B, T, P] and
Cell [B, T, H]; with Lengths, a row keeps its state past its length and its outputs there
are zero. The forward op keeps, in processing order (`rnn.Steps`), the activated gates
(BatchGate), c before clipping (BatchCellPreAct), h (BatchHidden) and r (BatchProj) for
its gradient. With P = H and no projection it is ``lstm``'s cell; PyTorch's
``nn.LSTM(proj_size=P)`` is ``proj_activation='identity'`` without peepholes.
"""
from __future__ import annotations

from typing import Any

from ..ir.text import format_shape as _fmt
from .registry import register
from .rnn import (
    ACTIVATIONS,
    Steps,
    Unpack,
    activate_unscaled,
    check_lengths_input,
    check_param,
    check_sequence,
    derivative,
)
from .spec import GradContext, InferContext, KernelContext, OpSpec, slots

_ATTRS = {"use_peepholes": True, "is_reverse": False, "gate_activation": "sigmoid",
          "cell_activation": "tanh", "candidate_activation": "tanh",
          "proj_activation": "tanh", "cell_clip": 0.0, "proj_clip": 0.0}
_ACTS = ("gate_activation", "cell_activation", "candidate_activation", "proj_activation")
_KEPT = ("BatchGate", "BatchCellPreAct", "BatchHidden", "BatchProj")
_INPUTS = ("Input", "H0", "C0", "Weight", "ProjWeight", "Bias", "Lengths")


def _infer(ctx: InferContext) -> None:
    x = check_sequence(ctx, "Input", "lstmp")
    b, t, g = x.shape
    w, pw = ctx.input("Weight"), ctx.input("ProjWeight")
    if w.rank != 2 or pw.rank != 2 or w.shape[1] % 4 or w.shape[1] <= 0:
        ctx.fail(f"lstmp: Weight must be [P, 4H] and ProjWeight [H, P], got "
                 f"{_fmt(w.shape)} and {_fmt(pw.shape)}")
    h, p = w.shape[1] // 4, w.shape[0]
    if g >= 0 and g != 4 * h:
        ctx.fail(f"lstmp: Input {_fmt(x.shape)} must have 4H = {4 * h} columns")
    check_param(ctx, "ProjWeight", (h, p), x.dtype, "lstmp")
    peep = ctx.attrs["use_peepholes"]
    if peep and not ctx.has_input("Bias"):
        ctx.fail("lstmp: use_peepholes=True needs Bias [1, 7H] (it holds the peepholes)")
    check_param(ctx, "Bias", (1, (7 if peep else 4) * h), x.dtype, "lstmp")
    check_param(ctx, "H0", (b, p), x.dtype, "lstmp")
    check_param(ctx, "C0", (b, h), x.dtype, "lstmp")
    check_lengths_input(ctx, b, "lstmp")
    for name in _ACTS:
        if ctx.attrs[name] not in ACTIVATIONS:
            ctx.fail(f"lstmp: {name}={ctx.attrs[name]!r} is not one of {', '.join(ACTIVATIONS)}")
    ctx.set_output("Projection", (b, t, p), x.dtype)
    ctx.set_output("Cell", (b, t, h), x.dtype)
    for slot, width in zip(_KEPT, (4 * h, h, h, p)):
        ctx.set_output(slot, (t, b, width), x.dtype)


class _Cell:
    """What forward and backward share: sizes, attrs, the processing order."""

    def __init__(self, ctx: KernelContext):
        self.xp = ctx.xp
        self.B, self.T, g = ctx.input("Input").shape
        self.H, self.P = g // 4, ctx.input("Weight").shape[0]
        self.dtype = ctx.input("Input").dtype
        a = self.attrs = ctx.attrs
        self.peep = bool(a["use_peepholes"])
        self.cell_clip, self.proj_clip = float(a["cell_clip"]), float(a["proj_clip"])
        self.steps = Steps(self.xp, self.B, self.T, a["is_reverse"])

    def act(self, v: Any, name: str) -> Any:
        activate_unscaled(self.xp, v, self.attrs[name])
        return v

    def clip(self, v: Any, bound: float) -> Any:
        return self.xp.clip(v, -bound, bound) if bound > 0 else v

    def start(self, a: dict, slot: str, width: int) -> Any:
        return a[slot] if slot in a else self.xp.zeros((self.B, width), self.dtype)

    def peepholes(self, a: dict) -> tuple[Any, Any, Any]:
        h = self.H
        return tuple(a["Bias"][0, 4 * h + k * h:4 * h + (k + 1) * h] for k in range(3))


def _forward_kernel(ctx: KernelContext):
    c = _Cell(ctx)
    unpack = Unpack(ctx, _INPUTS)

    def lstmp(*args):
        a = unpack(args)
        xp, h, steps = c.xp, c.H, c.steps
        steps.begin(a.get("Lengths"))
        x = steps.time_view(a["Input"])
        if "Bias" in a:
            x = x + a["Bias"][0, :4 * h]
        kept = [xp.empty((c.T, c.B, w), c.dtype) for w in (4 * h, h, h, c.P)]
        r, cell = c.start(a, "H0", c.P), c.start(a, "C0", h)
        peep = c.peepholes(a) if c.peep else None
        for t in range(c.T):
            xp.matmul(r, a["Weight"], out=kept[0][t])
            kept[0][t] += x[t]
            r, cell = _step(c, t, r, cell, a["ProjWeight"], peep, kept)
        proj = steps.to_batch(kept[3], None)
        cells = steps.to_batch(c.clip(kept[1], c.cell_clip), None)
        return (proj, cells) + tuple(kept)
    return lstmp


def _step(c: _Cell, t: int, r_prev: Any, c_prev: Any, proj_w: Any, peep: Any,
          kept: list) -> tuple[Any, Any]:
    """One step on the pre-activations in ``kept[0][t]``, into ``kept`` (gates, c before
    clipping, h, r); returns the new state."""
    xp, h = c.xp, c.H
    gates = kept[0][t]
    if peep is not None:
        gates[:, h:2 * h] += peep[0] * c_prev
        gates[:, 2 * h:3 * h] += peep[1] * c_prev
    c.act(gates[:, :h], "candidate_activation")
    c.act(gates[:, h:3 * h] if peep is not None else gates[:, h:], "gate_activation")
    xp.multiply(gates[:, 2 * h:3 * h], c_prev, out=kept[1][t])
    kept[1][t] += gates[:, h:2 * h] * gates[:, :h]
    cell = c.clip(kept[1][t], c.cell_clip)
    if peep is not None:
        gates[:, 3 * h:] += peep[2] * cell
        c.act(gates[:, 3 * h:], "gate_activation")
    xp.multiply(gates[:, 3 * h:], c.act(cell.copy(), "cell_activation"), out=kept[2][t])
    xp.matmul(kept[2][t], proj_w, out=kept[3][t])
    kept[3][t] = c.clip(c.act(kept[3][t], "proj_activation"), c.proj_clip)
    if c.steps.frozen is not None:
        c.steps.freeze(t, kept[3][t], r_prev)
        c.steps.freeze(t, cell, c_prev)
    return kept[3][t], cell


def _grad(g: GradContext) -> None:
    douts = {s: g.flowing(s) for s in ("Projection", "Cell")}
    wanted = [s for s in ("Input", "H0", "C0", "Weight", "ProjWeight", "Bias") if g.wants(s)]
    if not wanted or all(d is None for d in douts.values()):
        return
    inputs = {s: g.input(s) for s in _INPUTS}
    inputs.update({s: g.output(s) for s in _KEPT})
    inputs.update({f"{s}@GRAD": [d] for s, d in douts.items() if d is not None})
    g.emit("lstmp_grad", inputs, {f"{s}@GRAD": g.in_grad(s) for s in wanted}, g.attrs)


class _Backward:
    """Backpropagation through time over the kept values, newest step first."""

    def __init__(self, c: _Cell, a: dict):
        self.c, self.a, xp, h = c, a, c.xp, c.H
        steps = c.steps
        steps.begin(a.get("Lengths"))
        self.gates, self.c_pre, self.hid, self.proj = (a[s] for s in _KEPT)
        zeros = xp.zeros((c.T, c.B, 1), c.dtype)
        self.d_proj = steps.time_view(a["Projection@GRAD"]) if "Projection@GRAD" in a \
            else zeros
        self.d_cell = steps.time_view(a["Cell@GRAD"]) if "Cell@GRAD" in a else zeros
        self.valid = steps.valid
        self.peep = c.peepholes(a) if c.peep else None
        self.dx = xp.zeros((c.T, c.B, 4 * h), c.dtype)
        self.dw = xp.zeros(a["Weight"].shape, c.dtype)
        self.dpw = xp.zeros(a["ProjWeight"].shape, c.dtype)
        self.dpeep = xp.zeros((3, h), c.dtype)

    def d(self, y: Any, name: str) -> Any:
        return derivative(self.c.xp, y, self.c.attrs[name], self.c.xp.empty_like(y))

    def previous(self, t: int) -> tuple[Any, Any]:
        c = self.c
        if t == 0:
            return c.start(self.a, "H0", c.P), c.start(self.a, "C0", c.H)
        return self.proj[t - 1], c.clip(self.c_pre[t - 1], c.cell_clip)

    def step(self, t: int, dr: Any, dc: Any) -> tuple[Any, Any]:
        """The gradients reaching r and c before step t, from those after it."""
        c, xp, h = self.c, self.c.xp, self.c.H
        v = None if self.valid is None else self.valid[t]
        dr = dr + (self.d_proj[t] if v is None else self.d_proj[t] * v)
        dc = dc + (self.d_cell[t] if v is None else self.d_cell[t] * v)
        r_prev, c_prev = self.previous(t)
        dpre = dr * self.d(self.proj[t], "proj_activation")
        if c.proj_clip > 0:
            dpre *= xp.abs(self.proj[t]) < c.proj_clip
        dpre = dpre if v is None else dpre * v
        self.dpw += self.hid[t].T @ dpre
        dh = dpre @ self.a["ProjWeight"].T
        cand, i, f, o = (self.gates[t][:, k * h:(k + 1) * h] for k in range(4))
        cell = c.clip(self.c_pre[t], c.cell_clip)
        ac = c.act(cell.copy(), "cell_activation")
        dzo = dh * ac * self.d(o, "gate_activation")
        dct = dc + dh * o * self.d(ac, "cell_activation")
        if self.peep is not None:
            dct = dct + dzo * self.peep[2]
        if c.cell_clip > 0:
            dct = dct * (xp.abs(self.c_pre[t]) < c.cell_clip)
        dz = self.dx[t]
        dz[:, :h] = dct * i * self.d(cand, "candidate_activation")
        dz[:, h:2 * h] = dct * cand * self.d(i, "gate_activation")
        dz[:, 2 * h:3 * h] = dct * c_prev * self.d(f, "gate_activation")
        dz[:, 3 * h:] = dzo
        if v is not None:
            dz *= v
        dc_prev = dct * f
        if self.peep is not None:
            dc_prev = dc_prev + dz[:, h:2 * h] * self.peep[0] + dz[:, 2 * h:3 * h] * self.peep[1]
            for k, (zk, ck) in enumerate(((dz[:, h:2 * h], c_prev), (dz[:, 2 * h:3 * h], c_prev),
                                          (dz[:, 3 * h:], cell))):
                self.dpeep[k] += (zk * ck).sum(axis=0)
        self.dw += r_prev.T @ dz
        dr_prev = dz @ self.a["Weight"].T
        if v is None:
            return dr_prev, dc_prev
        return xp.where(v, dr_prev, dr), xp.where(v, dc_prev, dc)


def _grad_kernel(ctx: KernelContext):
    c = _Cell(ctx)
    names = _INPUTS + _KEPT + ("Projection@GRAD", "Cell@GRAD")
    unpack = Unpack(ctx, names)
    wants = [s for s in ("Input@GRAD", "H0@GRAD", "C0@GRAD", "Weight@GRAD", "ProjWeight@GRAD",
                         "Bias@GRAD") if ctx.has_output(s)]

    def lstmp_grad(*args):
        a = unpack(args)
        back = _Backward(c, a)
        dr = c.xp.zeros((c.B, c.P), c.dtype)
        dc = c.xp.zeros((c.B, c.H), c.dtype)
        for t in reversed(range(c.T)):
            dr, dc = back.step(t, dr, dc)
        got = {"Input@GRAD": c.steps.to_batch(back.dx, None), "H0@GRAD": dr, "C0@GRAD": dc,
               "Weight@GRAD": back.dw, "ProjWeight@GRAD": back.dpw}
        if "Bias@GRAD" in wants:
            db = back.dx.sum(axis=(0, 1))
            if c.peep:
                db = c.xp.concatenate([db, back.dpeep.reshape(-1)])
            got["Bias@GRAD"] = db.reshape(1, -1)
        out = [got[s] for s in wants]
        return out[0] if len(out) == 1 else tuple(out)
    return lstmp_grad


def _grad_infer(ctx: InferContext) -> None:
    for s in ("Input", "H0", "C0", "Weight", "ProjWeight", "Bias"):
        if ctx.has_output(f"{s}@GRAD"):
            t = ctx.input(s)
            ctx.set_output(f"{s}@GRAD", t.shape, t.dtype)


register(OpSpec("lstmp", slots("Input", "H0?", "C0?", "Weight", "ProjWeight", "Bias?",
                               "Lengths?"),
                slots("Projection", "Cell", *_KEPT), _infer, _forward_kernel, _grad,
                attrs=_ATTRS,
                doc="An LSTM with a recurrent projection over a padded batch: Projection "
                    "[B, T, P] and Cell [B, T, H]"))
register(OpSpec("lstmp_grad", slots("Input", "H0?", "C0?", "Weight", "ProjWeight", "Bias?",
                                    "Lengths?", *_KEPT, "Projection@GRAD?", "Cell@GRAD?"),
                slots("Input@GRAD?", "H0@GRAD?", "C0@GRAD?", "Weight@GRAD?",
                      "ProjWeight@GRAD?", "Bias@GRAD?"),
                _grad_infer, _grad_kernel, attrs=_ATTRS, shape_only=("Input",)))
