"""``gru``: a whole padded batch of sequences through a GRU in one op, and ``gru_grad``.

Input [B, T, 3H] is already projected; its columns and those of Bias [1, 3H] are in
Paddle's order: update gate u, reset gate r, candidate c~. Weight [H, 3H] holds, as
Paddle's does, two matrices one after the other in its row-major values: the first 2H*H
are W_ur [H, 2H] (u's and r's columns), the last H*H are W_c [H, H] (`weight_parts`). Per
step, with ``act_g`` the gate activation and ``act`` the candidate's:

    [u r] = act_g(Input[:, t, :2H] + h @ W_ur + Bias[:2H])
    c~ = act(Input[:, t, 2H:] + (r * h) @ W_c + Bias[2H:])
    h_t = (1 - u) * h + u * c~            (origin_mode=False, the default)
    h_t = u * h + (1 - u) * c~            (origin_mode=True: Cho et al., and PyTorch)

As in Paddle's GRU kernel, a sigmoid's input is clipped to [-40, 13] first
(`rnn.SIGMOID_RANGE`); ``gru_unit``, whose Paddle kernel does not clip, runs these
kernels without it.

``linear_before_reset=True`` applies the reset gate after the hidden product instead,
``c~ = act(Input[:, t, 2H:] + r * (h @ W_c + Bias[2H:]))``, as PyTorch's ``nn.GRU``,
cuDNN and ONNX's attribute of that name do.

H0 [B, H] (default zeros) starts the state, ``is_reverse`` walks each row backwards, and
with Lengths [B] positions at or past a row's length leave its state unchanged and give
zero Hidden (see `rnn.py`). The op keeps, in processing order, BatchGate [T, B, 3H] (the
activated gates), BatchResetHiddenPrev [T, B, H] (r * h, or with ``linear_before_reset``
the hidden product h @ W_c + Bias[2H:]) and BatchHidden [T, B, H] for its gradient; no
gradient flows through them.

With the compiled kernel tier, each forward step's gates and candidate around tanh
(gru_exact.py: sigmoid and tanh activations, with or without linear_before_reset) and the
backward's factors run as compiled passes with these kernels' bits
(kernels/rnn_passes.py). With ``FLUID_KERNELS=fast`` the whole sequence runs as one
compiled call each way instead (kernels/recurrent.py: a loop over the steps around BLAS
calls), within float rounding of these kernels' values.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels.rnn_passes import ACT_CODES, rnn_source
from .compiled import compiled_kernel, run_compiled, sequence_kernel
from .gru_exact import (
    GATE_ACTS,
    ExactLbrStep,
    ExactStep,
    add_reset_product,
    hidden_product,
    state_update,
)
from .registry import register
from .rnn import (
    PRE_SCALE,
    Steps,
    Unpack,
    activation,
    check_activations,
    check_lengths_input,
    check_param,
    check_sequence,
    check_weight,
    copy_into,
    derivative,
    new_or,
    scale_vector,
    zero,
)
from .spec import GradContext, InferContext, KernelContext, OpSpec, slots
from .value_layouts import register_layout_change

_ATTRS = {"is_reverse": False, "gate_activation": "sigmoid", "activation": "tanh",
          "origin_mode": False, "linear_before_reset": False}
_INTERNAL = ("BatchGate", "BatchResetHiddenPrev", "BatchHidden")


# --- the weight's layout -------------------------------------------------------------------------

def weight_parts(w: Any) -> tuple[Any, Any]:
    """W_ur [H, 2H] and W_c [H, H] of a Weight [H, 3H] in Paddle's layout: its first 2H*H
    values in row-major order, then the last H*H. Views of a C-contiguous ``w`` (NumPy or
    CuPy), so that writing them writes ``w``."""
    h = w.shape[0]
    flat = w.reshape(-1)
    return flat[:2 * h * h].reshape(h, 2 * h), flat[2 * h * h:].reshape(h, h)


def weight_from_blocks(w: np.ndarray) -> np.ndarray:
    """A Weight in Paddle's layout from one [H, 3H] whose columns hold [W_ur | W_c] (the
    layout of checkpoints of format 1, and of the matrices PyTorch and ONNX hold
    transposed)."""
    h = w.shape[0]
    return np.concatenate([w[:, :2 * h].reshape(-1), w[:, 2 * h:].reshape(-1)]).reshape(w.shape)


def weight_to_blocks(w: np.ndarray) -> np.ndarray:
    """The inverse of `weight_from_blocks`: [W_ur | W_c] side by side, [H, 3H]."""
    return np.concatenate(weight_parts(np.ascontiguousarray(w)), axis=1)


def _infer(ctx: InferContext) -> None:
    x = check_sequence(ctx, "Input", "gru")
    b, t, _ = x.shape
    h = check_weight(ctx, x, 3, "gru")
    check_param(ctx, "Bias", (1, 3 * h), x.dtype, "gru")
    check_param(ctx, "H0", (b, h), x.dtype, "gru")
    check_lengths_input(ctx, b, "gru")
    check_activations(ctx, ("gate_activation", "activation"), "gru")
    ctx.set_output("Hidden", (b, t, h), x.dtype)
    ctx.set_output("BatchGate", (t, b, 3 * h), x.dtype)
    ctx.set_output("BatchResetHiddenPrev", (t, b, h), x.dtype)
    ctx.set_output("BatchHidden", (t, b, h), x.dtype)


class _Forward:
    """The forward kernel; ``clip``: sigmoid inputs clipped as Paddle's GRU kernel does
    (``gru_unit`` runs it without)."""

    def __init__(self, ctx: KernelContext, clip: bool = True):
        xp = self.xp = ctx.xp
        self.B, self.T, g = ctx.input("Input").shape
        B, H = self.B, g // 3
        self.H = H
        dt = self.dtype = ctx.input("Input").dtype
        a = ctx.attrs
        gate, cand = a["gate_activation"], a["activation"]
        self.origin, self.lbr = a["origin_mode"], a["linear_before_reset"]
        self.s_gate, self.s_cand = PRE_SCALE[gate], PRE_SCALE[cand]
        sv = scale_vector([gate, gate, cand], H, dt)
        self.scale = None if sv is None else xp.asarray(sv)
        self.steps = Steps(xp, B, self.T, a["is_reverse"])
        self.unpack = Unpack(ctx, ("Input", "H0", "Weight", "Bias", "Lengths"))
        self.act_ur = activation(xp, [(0, 2 * H, gate)], clip)
        self.act_c = activation(xp, [(0, H, cand)], clip)
        self.w_ur = xp.empty((H, 2 * H), dt)
        self.w_c = xp.empty((H, H), dt)
        self.w_all = xp.empty((H, 3 * H), dt)
        self.hw = xp.empty((B, 3 * H), dt)
        self.tmp = xp.empty((B, H), dt)
        self.zeros = xp.zeros((B, H), dt)
        self.bufs = [ctx.buffer(s) for s in ("Hidden",) + _INTERNAL]
        self.seq = sequence_kernel(ctx, dt, "gru_forward", {"gate": gate, "cand": cand},
                                   _modes(self.origin, self.lbr, cand, clip))
        if self.seq is not None:
            self.never = xp.zeros((self.T, B), bool)   # no row frozen
            self.no_bias = xp.zeros(H, dt)
            self.hw_ur = xp.empty((B, 2 * H), dt)
        # the steps' exact passes, where the whole sequence's kernel is not allowed
        self.exact = None
        if self.seq is None and {gate, cand} <= set(GATE_ACTS):
            step = ExactLbrStep if self.lbr else ExactStep
            exact = step(ctx, gate, cand, self.origin, clip)
            self.exact = exact if exact.available else None

    def __call__(self, *args):
        v = self.unpack(args)
        xp, T, B, H, dt = self.xp, self.T, self.B, self.H, self.dtype
        st = self.steps
        st.begin(v.get("Lengths"))
        gates = new_or(self.bufs[1], xp, (T, B, 3 * H), dt)
        resets = new_or(self.bufs[2], xp, (T, B, H), dt)
        hids = new_or(self.bufs[3], xp, (T, B, H), dt)
        bias = v.get("Bias")
        self._load(v["Input"], bias, gates)
        self._weights(v["Weight"])
        b_c = None if bias is None or not self.lbr else bias[0, 2 * H:]
        h = v.get("H0", self.zeros)
        if not self._sequence(gates, h, b_c, resets, hids):
            for t in range(T):
                self._one_step(gates[t], h, resets[t], hids[t], b_c)
                st.freeze(t, hids[t], h)
                h = hids[t]
        return st.to_batch(hids, self.bufs[0]), gates, resets, hids

    def _one_step(self, g: Any, h: Any, reset: Any, out: Any, b_c: Any) -> None:
        if self.exact is not None:   # its passes (gru_exact.py)
            if self.lbr:
                self.exact(g, h, self.w_all, b_c, reset, out)
            else:
                self.exact(g, h, self.w_ur, self.w_c, reset, out)
            return
        if self.lbr:
            self._step_lbr(g, h, reset, b_c)
        else:
            self._step(g, h, reset)
        self._update(g, h, out)

    def _sequence(self, gates, h0, b_c, resets, hids) -> bool:
        """Every step in one compiled call, once the plan switched to it (True: it ran)."""
        frozen = self.steps.frozen
        return run_compiled(self.seq, lambda: (
            gates, self.w_ur, self.w_c, self.w_all, self.xp.ascontiguousarray(h0),
            self.no_bias if b_c is None else b_c,
            self.never if frozen is None else frozen[..., 0], int(b_c is not None), self.hw,
            self.hw_ur, self.tmp, resets, hids))

    def _load(self, x: Any, bias: Any, gates: Any) -> None:
        """gates = (Input + Bias) * pre-scale in processing order, zero at padding; with
        linear_before_reset the candidate's bias is added to the hidden product instead."""
        xp, st, H = self.xp, self.steps, self.H
        view = st.time_view(x)
        if bias is None:
            xp.copyto(gates, view)
        elif self.lbr:
            xp.add(view[..., :2 * H], bias[0, :2 * H], out=gates[..., :2 * H])
            xp.copyto(gates[..., 2 * H:], view[..., 2 * H:])
        else:
            xp.add(view, bias[0], out=gates)
        if self.scale is not None:
            xp.multiply(gates, self.scale, out=gates)
        if st.frozen is not None:
            xp.copyto(gates, 0, where=st.frozen)

    def _weights(self, w: Any) -> None:
        """Contiguous, pre-scaled copies of the weight's gate and candidate parts (with
        linear_before_reset, side by side in one [H, 3H], the candidate's not scaled)."""
        xp, H = self.xp, self.H
        w_ur, w_c = weight_parts(w)
        if self.lbr:
            xp.multiply(w_ur, self.s_gate, out=self.w_all[:, :2 * H])
            xp.copyto(self.w_all[:, 2 * H:], w_c)
            return
        xp.multiply(w_ur, self.s_gate, out=self.w_ur)
        xp.multiply(w_c, self.s_cand, out=self.w_c)

    def _step(self, g: Any, h: Any, reset: Any) -> None:
        """A step up to the candidate's activation."""
        xp, H = self.xp, self.H
        hw = self.hw[:, :2 * H]
        xp.matmul(h, self.w_ur, out=hw)
        xp.add(g[:, :2 * H], hw, out=g[:, :2 * H])
        self.act_ur(g)
        xp.multiply(g[:, H:2 * H], h, out=reset)
        xp.matmul(reset, self.w_c, out=self.tmp)
        xp.add(g[:, 2 * H:], self.tmp, out=g[:, 2 * H:])
        self.act_c(g[:, 2 * H:])

    def _step_lbr(self, g: Any, h: Any, product: Any, b_c: Any) -> None:
        """As `_step`, with linear_before_reset."""
        xp, H = self.xp, self.H
        xp.matmul(h, self.w_all, out=self.hw)
        xp.add(g[:, :2 * H], self.hw[:, :2 * H], out=g[:, :2 * H])
        hidden_product(xp, self.hw, b_c, product)
        self.act_ur(g)
        add_reset_product(xp, g, product, self.tmp, self.s_cand)
        self.act_c(g[:, 2 * H:])

    def _update(self, g: Any, h: Any, out: Any) -> None:
        """h_t = h + u * (c~ - h), or c~ + u * (h - c~) in origin mode."""
        state_update(self.xp, g, h, out, self.origin)


def forward_kernel(ctx: KernelContext, clip: bool = True) -> Any:
    """The gru kernel; ``clip=False``: sigmoids unclipped (``gru_unit``'s)."""
    return _Forward(ctx, clip)


def _modes(origin: bool, lbr: bool, cand: str, clip: bool) -> dict[str, bool]:
    """The compiled sequence's modes (kernels/recurrent.py)."""
    return {"ORIGIN": origin, "LBR": lbr, "SCALE_CAND": lbr and PRE_SCALE[cand] != 1.0,
            "CLIP": clip}


def _grad(g: GradContext) -> None:
    dh = g.flowing("Hidden")
    wanted = [s for s in ("Input", "H0", "Weight", "Bias") if g.wants(s)]
    if dh is None or not wanted:
        return
    inputs = {s: g.input(s) for s in ("H0", "Weight", "Lengths")}
    inputs.update({s: g.output(s) for s in _INTERNAL})
    inputs["Hidden@GRAD"] = [dh]
    g.emit("gru_grad", inputs, {s + "@GRAD": [n for n in g.in_grad(s) if n] for s in wanted},
           g.attrs)


def _grad_infer(ctx: InferContext) -> None:
    t, b, g = ctx.input("BatchGate").shape
    dtype = ctx.input("BatchGate").dtype
    ctx.set_output("Input@GRAD", (b, t, g), dtype)
    ctx.set_output("H0@GRAD", (b, g // 3), dtype)
    ctx.set_output("Weight@GRAD", ctx.input("Weight").shape, dtype)
    ctx.set_output("Bias@GRAD", (1, g), dtype)


class _Backward:
    """The gradient kernel; ``clip`` as `_Forward`'s (the compiled sequence's module is
    then the forward's)."""

    def __init__(self, ctx: KernelContext, clip: bool = True):
        xp = self.xp = ctx.xp
        self.T, self.B, g = ctx.input("BatchGate").shape
        T, B, H = self.T, self.B, g // 3
        self.H = H
        dt = self.dtype = ctx.input("BatchGate").dtype
        a = ctx.attrs
        self.gate, self.cand = a["gate_activation"], a["activation"]
        self.origin, self.lbr = a["origin_mode"], a["linear_before_reset"]
        self.steps = Steps(xp, B, T, a["is_reverse"])
        self.unpack = Unpack(ctx, ("H0", "Weight", "Lengths") + _INTERNAL + ("Hidden@GRAD",))
        self.wants = {s: ctx.has_output(s + "@GRAD") for s in ("Input", "H0", "Weight",
                                                                "Bias")}
        self.bufs = {s: ctx.buffer(s + "@GRAD") for s in self.wants}
        self.per_call = ctx.scratch_arrays("BatchGate", dt, {
            "factors": (T, B, 4 * H), "keep": (T, B, H), "dgates": (T, B, 3 * H),
            "dh_seq": (T, B, H)})    # T-sized arrays of one call (ops/scratch.py)
        # bound by per_call for the duration of a call (arrays then), None between calls
        self.factors: Any = None
        self.keep: Any = None
        self.dgates: Any = None
        self.dh_seq: Any = None
        self.dh_next = xp.empty((B, H), dt)
        self.drh = xp.empty((B, H), dt)
        self.tmp = xp.empty((B, H), dt)
        self.zeros = xp.zeros((B, H), dt)
        self.w_all = xp.empty((H, 3 * H), dt) if self.lbr else None
        self.seq = sequence_kernel(ctx, dt, "gru_backward", {
            "gate": self.gate, "cand": self.cand}, _modes(self.origin, self.lbr, self.cand, clip))
        # the factors' exact pass, where the whole sequence's kernel is not allowed
        self.factors_pass = None if self.seq is not None else compiled_kernel(
            ctx, dt, lambda: rnn_source("gru_factors", dt))
        self.acts_code = 10 * ACT_CODES[self.gate] + ACT_CODES[self.cand]
        if self.seq is not None:
            self.dgc = xp.empty((B, 3 * H), dt)
            self.dg_ur = xp.empty((B, 2 * H), dt)
            self.dg_c = xp.empty((B, H), dt)

    def __call__(self, *args):
        return self.per_call.run(self, self._run, args)

    def _run(self, args: tuple) -> Any:
        v = self.unpack(args)
        xp, T = self.xp, self.T
        st = self.steps
        st.begin(v.get("Lengths"))
        gates = v["BatchGate"]
        h_prev = self._h_prev(v.get("H0", self.zeros), v["BatchHidden"])
        keep = self._factors(gates, h_prev, v["BatchResetHiddenPrev"])
        dh_in = st.time_view(v["Hidden@GRAD"])
        if st.valid is not None:
            dh_in = xp.multiply(dh_in, st.valid, out=self.dh_seq)
        w_t, w_ur_t, w_c_t = self._weights(v["Weight"])
        if self._sequence(dh_in, keep, gates, (w_ur_t, w_c_t, w_t)):
            return self._results(v, h_prev)
        for t in range(T - 1, -1, -1):
            dh = self.dh_seq[t]
            if t == T - 1:
                xp.copyto(dh, dh_in[t])
            else:
                xp.add(self.dh_next, dh_in[t], out=dh)
            if self.lbr:
                self._step_lbr(t, dh, keep[t], w_t)
            else:
                self._step(t, dh, keep[t], gates[t], w_ur_t, w_c_t)
        return self._results(v, h_prev)

    def _weights(self, w: Any) -> tuple[Any, Any, Any]:
        """[W_ur | W_c]^T (with linear_before_reset, else None), W_ur^T and W_c^T."""
        xp, H = self.xp, self.H
        w_ur, w_c = weight_parts(w)
        if self.w_all is None:
            return None, w_ur.T, w_c.T
        xp.copyto(self.w_all[:, :2 * H], w_ur)
        xp.copyto(self.w_all[:, 2 * H:], w_c)
        return self.w_all.T, w_ur.T, w_c.T

    def _sequence(self, dh_in, keep, gates, weights) -> bool:
        """Every step in one compiled call, once the plan switched to it (True: it ran)."""
        xp = self.xp
        w_ur_t, w_c_t, w_t = weights
        if w_t is None:   # read only with linear_before_reset: any matrix will do
            weights = (w_ur_t, w_c_t, w_c_t)
        return run_compiled(self.seq, lambda: (
            dh_in, self.factors, keep, gates, *(xp.ascontiguousarray(w) for w in weights),
            self.dh_seq, self.dh_next, self.drh, self.dgc, self.dg_ur, self.dg_c,
            self.dgates))

    def _h_prev(self, h0: Any, hids: Any) -> Any:
        xp = self.xp
        return xp.concatenate([h0.reshape(1, *h0.shape), hids[:-1]])

    def _factors(self, gates: Any, h_prev: Any, resets: Any) -> Any:
        """P = [+-(c~ - h) * g'(u), r-factor, take * act'(c~), ...] for every step; returns
        keep, the factor of h in h_t (1 - u, or u in origin mode)."""
        xp, H = self.xp, self.H
        p = self.factors
        u, r, cand = gates[..., :H], gates[..., H:2 * H], gates[..., 2 * H:]
        if run_compiled(self.factors_pass, lambda: (
                gates, h_prev, resets, self.acts_code, int(self.origin) | 2 * int(self.lbr),
                p, self.keep)):
            return u if self.origin else self.keep
        derivative(xp, gates[..., :2 * H], self.gate, p[..., :2 * H])
        derivative(xp, cand, self.cand, p[..., 2 * H:3 * H])
        one_minus_u = xp.subtract(1, u, out=self.keep)
        keep, take = (u, one_minus_u) if self.origin else (one_minus_u, u)
        xp.multiply(p[..., 2 * H:3 * H], take, out=p[..., 2 * H:3 * H])    # P_c
        diff = (xp.subtract(h_prev, cand, out=self.dgates[..., :H]) if self.origin else
                xp.subtract(cand, h_prev, out=self.dgates[..., :H]))
        xp.multiply(p[..., :H], diff, out=p[..., :H])                        # P_u
        if self.lbr:   # P = [P_u, P_c * N * g'(r), P_c * r, P_c]
            xp.multiply(p[..., H:2 * H], p[..., 2 * H:3 * H], out=p[..., H:2 * H])
            xp.multiply(p[..., H:2 * H], resets, out=p[..., H:2 * H])
            xp.copyto(p[..., 3 * H:], p[..., 2 * H:3 * H])
            xp.multiply(p[..., 2 * H:3 * H], r, out=p[..., 2 * H:3 * H])
        else:          # P = [P_u, h * g'(r), P_c]
            xp.multiply(p[..., H:2 * H], h_prev, out=p[..., H:2 * H])
        return keep

    def _step(self, t, dh, keep, gates_t, w_ur_t, w_c_t) -> None:
        """A step back."""
        xp, B, H = self.xp, self.B, self.H
        dg, p = self.dgates[t], self.factors[t]
        xp.multiply(p[:, :3 * H].reshape(B, 3, H)[:, ::2], dh.reshape(B, 1, H),
                    out=dg.reshape(B, 3, H)[:, ::2])
        xp.matmul(dg[:, 2 * H:], w_c_t, out=self.drh)
        xp.multiply(self.drh, p[:, H:2 * H], out=dg[:, H:2 * H])
        xp.matmul(dg[:, :2 * H], w_ur_t, out=self.dh_next)
        xp.add(self.dh_next, xp.multiply(dh, keep, out=self.tmp), out=self.dh_next)
        xp.multiply(self.drh, gates_t[:, H:2 * H], out=self.tmp)
        xp.add(self.dh_next, self.tmp, out=self.dh_next)

    def _step_lbr(self, t, dh, keep, w_t) -> None:
        xp, B, H = self.xp, self.B, self.H
        dg = self.dgates[t]
        xp.multiply(self.factors[t][:, :3 * H].reshape(B, 3, H), dh.reshape(B, 1, H),
                    out=dg.reshape(B, 3, H))
        xp.matmul(dg, w_t, out=self.dh_next)
        xp.add(self.dh_next, xp.multiply(dh, keep, out=self.tmp), out=self.dh_next)

    def _results(self, v: dict, h_prev: Any) -> Any:
        xp, T, B, H, dt = self.xp, self.T, self.B, self.H, self.dtype
        dg, out = self.dgates, []
        if self.wants["Input"]:
            out.append(self._dinput())
        if self.wants["H0"]:
            dh0 = new_or(self.bufs["H0"], xp, (B, H), dt)
            out.append(copy_into(xp, dh0, self.dh_next) if T else zero(dh0))
        if self.wants["Weight"]:
            out.append(self._dweight(v, h_prev))
        if self.wants["Bias"]:
            db = new_or(self.bufs["Bias"], xp, (1, 3 * H), dt)
            dg.reshape(-1, 3 * H).sum(axis=0, out=db[0])
            out.append(db)
        return out[0] if len(out) == 1 else tuple(out)

    def _dweight(self, v: dict, h_prev: Any) -> Any:
        """dW_ur = sum of h^T dG_ur, dW_c = sum of (r * h)^T dG_c (h^T dN with
        linear_before_reset), written into Weight@GRAD's parts in Paddle's layout."""
        xp, H, dg = self.xp, self.H, self.dgates
        dw = new_or(self.bufs["Weight"], xp, (H, 3 * H), self.dtype)
        if not dw.flags.c_contiguous:   # its parts would not be views
            dw = xp.empty((H, 3 * H), self.dtype)
        dw_ur, dw_c = weight_parts(dw)
        flat_h = h_prev.reshape(-1, H).T
        xp.matmul(flat_h, dg[..., :2 * H].reshape(-1, 2 * H), out=dw_ur)
        xp.matmul(flat_h if self.lbr else v["BatchResetHiddenPrev"].reshape(-1, H).T,
                  dg[..., 2 * H:].reshape(-1, H), out=dw_c)
        return dw

    def _dinput(self) -> Any:
        """The gradient of the projected input; with linear_before_reset its candidate
        part is dh * P_c (the hidden side's holds dN)."""
        xp, st, H = self.xp, self.steps, self.H
        dx = new_or(self.bufs["Input"], xp, (self.B, self.T, 3 * H), self.dtype)
        if not self.lbr:
            return st.to_batch(self.dgates, dx)
        st.to_batch(self.dgates[..., :2 * H], dx[..., :2 * H])
        cand = xp.multiply(self.dh_seq, self.factors[..., 3 * H:], out=self.dh_seq)
        st.to_batch(cand, dx[..., 2 * H:])
        return dx


def backward_kernel(ctx: KernelContext, clip: bool = True) -> Any:
    """The gru_grad kernel; ``clip`` as `forward_kernel`'s."""
    return _Backward(ctx, clip)


register(OpSpec(
    "gru", slots("Input", "H0?", "Weight", "Bias?", "Lengths?"),
    slots("Hidden", *_INTERNAL), _infer, forward_kernel, _grad, attrs=_ATTRS,
    doc="A GRU over a padded batch Input [B, T, 3H] (projected; gates u, r, c~) with "
        "optional Lengths [B]: Hidden [B, T, H], zero past each row's length."))
register(OpSpec(
    "gru_grad", slots("H0?", "Weight", "Lengths?", *_INTERNAL, "Hidden@GRAD"),
    slots("Input@GRAD?", "H0@GRAD?", "Weight@GRAD?", "Bias@GRAD?"),
    _grad_infer, backward_kernel, attrs=_ATTRS))
# Weights saved before Paddle's layout (value_layouts.py's version 1) held [W_ur | W_c].
register_layout_change("gru", "Weight", 2, weight_from_blocks)
