"""``lstm``: a whole padded batch of sequences through an LSTM in one op, and ``lstm_grad``,
backpropagation through time in one op.

Input [B, T, 4H] is already projected (``fc(x, 4 * H, num_flatten_dims=2)``); its columns
and those of Weight [H, 4H] and Bias are in Paddle's gate order: candidate c~, input i,
forget f, output o. Per step, with ``act_g`` the gate activation:

    [c~ i f o] = Input[:, t] + h @ Weight + Bias[:4H]   (+ peepholes: i += W_ic * c,
    c~ = act_cand(.), i, f = act_g(.)                      f += W_fc * c, o += W_oc * c_t,
    c_t = f * c + i * c~                                   from Bias[4H:7H])
    o = act_g(.);  h_t = o * act_cell(c_t)

As in Paddle's LSTM kernel, every sigmoid (gate, cell or candidate activation) clips its
input to [-40, 13] first (`rnn.SIGMOID_RANGE`).

H0 and C0 [B, H] (default zeros) start the state; ``is_reverse`` walks each row from its
last valid position back to 0. With Lengths [B], positions at or past a row's length
leave its state unchanged and give zero Hidden and Cell.

Besides Hidden and Cell [B, T, H], the op keeps what its gradient needs, in processing
order (``rnn.Steps``): BatchGate [T, B, 4H] (the activated gates), BatchCellPreAct and
BatchHidden [T, B, H] (c_t and h_t). No gradient flows through those three.

The backward op first computes, for all steps at once, every factor that does not depend
on the recurrence (gate derivatives times the values they multiply), so that each step is
one matrix product and five elementwise calls; then one GEMM gives the weight gradient.

With the compiled kernel tier, the load, each forward step's gates around tanh, the
factors and each backward step's elementwise work run as compiled passes around NumPy's
products and ``tanh``, with these kernels' bits (kernels/rnn_passes.py). With
``FLUID_KERNELS=fast`` the whole sequence runs as one compiled call each way instead
(kernels/recurrent.py: a loop over the steps around BLAS calls), within float rounding of
these kernels' values.
"""
from __future__ import annotations

from typing import Any

from ..kernels.rnn_passes import (
    ACT_CODES,
    BATCH_MAJOR,
    BATCH_REVERSED,
    TIME_MAJOR,
    rnn_source,
)
from .compiled import compiled_kernel, run_compiled, sequence_kernel
from .lstm_exact import GATE_ACTS, ExactStep, cell_update
from .registry import register
from .rnn import (
    PRE_SCALE,
    Steps,
    Unpack,
    activate_unscaled,
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

_ATTRS = {"use_peepholes": True, "is_reverse": False, "gate_activation": "sigmoid",
          "cell_activation": "tanh", "candidate_activation": "tanh"}
_ACT_ATTRS = ("gate_activation", "cell_activation", "candidate_activation")
_STATE = ("H0", "C0")
_INTERNAL = ("BatchGate", "BatchCellPreAct", "BatchHidden")


def _infer(ctx: InferContext) -> None:
    x = check_sequence(ctx, "Input", "lstm")
    b, t, _ = x.shape
    h = check_weight(ctx, x, 4, "lstm")
    peep = ctx.attrs["use_peepholes"]
    if peep and not ctx.has_input("Bias"):
        ctx.fail("lstm: use_peepholes=True needs Bias [1, 7H], which holds the peephole "
                 "weights")
    check_param(ctx, "Bias", (1, (7 if peep else 4) * h), x.dtype, "lstm")
    for s in _STATE:
        check_param(ctx, s, (b, h), x.dtype, "lstm")
    check_lengths_input(ctx, b, "lstm")
    check_activations(ctx, _ACT_ATTRS, "lstm")
    for slot in ("Hidden", "Cell"):
        ctx.set_output(slot, (b, t, h), x.dtype)
    ctx.set_output("BatchGate", (t, b, 4 * h), x.dtype)
    ctx.set_output("BatchCellPreAct", (t, b, h), x.dtype)
    ctx.set_output("BatchHidden", (t, b, h), x.dtype)


def _cell_fn(xp: Any, act: str):
    """``out = act_cell(c)`` without touching ``c`` (a sigmoid clipped as the gates')."""
    if act == "tanh":
        return lambda c, out: xp.tanh(c, out=out)

    def other(c, out):
        xp.copyto(out, c)
        activate_unscaled(xp, out, act, clip=True)
        return out
    return other


class _Forward:
    def __init__(self, ctx: KernelContext):
        xp = self.xp = ctx.xp
        self.B, self.T, g = ctx.input("Input").shape
        H = self.H = g // 4
        dt = self.dtype = ctx.input("Input").dtype
        a = ctx.attrs
        self.peep = a["use_peepholes"]
        gate, cand = a["gate_activation"], a["candidate_activation"]
        self.s_gate = PRE_SCALE[gate]
        sv = scale_vector([cand, gate, gate, gate], H, dt)
        self.scale = None if sv is None else xp.asarray(sv)
        self.steps = Steps(xp, self.B, self.T, a["is_reverse"])
        self.unpack = Unpack(ctx, ("Input", "H0", "C0", "Weight", "Bias", "Lengths"))
        if self.peep:
            self.act_front = activation(xp, [(0, H, cand), (H, 3 * H, gate)], clip=True)
            self.act_o = activation(xp, [(0, H, gate)], clip=True)
        else:
            self.act_front = activation(xp, [(0, H, cand), (H, 4 * H, gate)], clip=True)
        self.cell = _cell_fn(xp, a["cell_activation"])
        self.ws = xp.empty((H, 4 * H), dt)
        self.hw = xp.empty((self.B, 4 * H), dt)
        self.tmp = xp.empty((self.B, H), dt)
        self.tc = xp.empty((self.B, H), dt)
        self.pf = xp.empty((self.B, 2, H), dt)
        self.zeros = xp.zeros((self.B, H), dt)
        self.bufs = [ctx.buffer(s) for s in ("Hidden", "Cell") + _INTERNAL]
        self.seq = sequence_kernel(ctx, dt, "lstm_forward", {
            "gate": gate, "cand": cand, "cell": a["cell_activation"]},
            {"PEEP": self.peep, "CLIP": True})
        self.no_bias, self.ones = xp.zeros(4 * H, dt), xp.ones(4 * H, dt)
        self.never = xp.zeros((self.T, self.B), bool)   # no row frozen
        if self.seq is not None:
            self.no_peep = xp.zeros((3, H), dt)
        self._exact_passes(ctx, gate, cand)

    def _exact_passes(self, ctx: KernelContext, gate: str, cand: str) -> None:
        """The compiled passes with these kernels' bits (kernels/rnn_passes.py), where
        the whole sequence's kernel is not allowed: the load, and the steps around tanh
        where every gate is a sigmoid or a tanh (lstm_exact.py)."""
        dt = self.dtype
        self.load_pass, self.exact = None, None
        if self.seq is not None:
            return
        self.load_pass = compiled_kernel(ctx, dt, lambda: rnn_source("lstm_load", dt))
        if gate in GATE_ACTS and cand in GATE_ACTS:
            exact = ExactStep(ctx, gate, cand, self.peep, self.cell, self.tc)
            self.exact = exact if exact.available else None

    def __call__(self, *args):
        v = self.unpack(args)
        xp, T, B, H, dt = self.xp, self.T, self.B, self.H, self.dtype
        st = self.steps
        st.begin(v.get("Lengths"))
        gates = new_or(self.bufs[2], xp, (T, B, 4 * H), dt)
        cells = new_or(self.bufs[3], xp, (T, B, H), dt)
        hids = new_or(self.bufs[4], xp, (T, B, H), dt)
        bias = v.get("Bias")
        ws = v["Weight"] if self.scale is None else xp.multiply(v["Weight"], self.scale,
                                                                out=self.ws)
        h, c = v.get("H0", self.zeros), v.get("C0", self.zeros)
        done = self._sequence(v["Input"], gates, ws, h, c, bias, cells, hids)
        if done:
            return (*done, gates, cells, hids)
        self._load(v["Input"], bias, gates)
        peep = self._peepholes(bias) if self.peep else None
        for t in range(T):
            xp.matmul(h, ws, out=self.hw)
            self._step(gates[t], peep, h, c, cells[t], hids[t])
            st.freeze(t, cells[t], c)
            st.freeze(t, hids[t], h)
            h, c = hids[t], cells[t]
        return (st.to_batch(hids, self.bufs[0]), st.to_batch(cells, self.bufs[1]),
                gates, cells, hids)

    def _sequence(self, x, gates, ws, h0, c0, bias, cells, hids) -> tuple | None:
        """Every step in one compiled call, once the plan switched to it: (Hidden, Cell),
        or None when it did not run. It reads Input and writes Hidden and Cell in the
        op's [B, T, K] order where no gather is needed (flags: kernels/recurrent.py's
        lstm_forward); else the NumPy kernel's `_load` and `to_batch` do that part."""
        xp, H, st = self.xp, self.H, self.steps
        direct = st.valid is None   # no gather, no padding to zero
        outs: list = []

        def args() -> tuple:
            w = self.no_peep
            if self.peep:
                w = bias[0, 4 * H:].reshape(3, H)
                w = w * self.s_gate if self.s_gate != 1.0 else w
            if not direct:
                self._load(x, bias, gates)
            outs.extend(new_or(buf, xp, (self.B, self.T, H), self.dtype)
                        for buf in self.bufs[:2])
            flags = (1 | 16 | 8 * int(st.reverse)) * int(direct) | \
                2 * int(bias is not None) | 4 * int(self.scale is not None)
            return (xp.ascontiguousarray(x) if direct else x,
                    self.no_bias if bias is None else bias[0, :4 * H],
                    self.ones if self.scale is None else self.scale, gates, ws,
                    xp.ascontiguousarray(h0), xp.ascontiguousarray(c0), w,
                    self.never if st.frozen is None else st.frozen[..., 0], flags,
                    self.hw, cells, hids, *outs)
        if not run_compiled(self.seq, args):
            return None
        if not direct:
            outs = [st.to_batch(hids, outs[0]), st.to_batch(cells, outs[1])]
        return tuple(outs)

    def _load(self, x: Any, bias: Any, gates: Any) -> None:
        """gates = (Input + Bias) * pre-scale, in processing order, zero at padding."""
        xp, st = self.xp, self.steps
        if run_compiled(self.load_pass, lambda: (
                *time_source(st, x), self.no_bias if bias is None else bias[0, :4 * self.H],
                self.ones if self.scale is None else self.scale,
                self.never if st.frozen is None else st.frozen[..., 0],
                int(bias is not None) | 2 * int(self.scale is not None)
                | 4 * int(st.frozen is not None), gates)):
            return
        view = st.time_view(x)
        if bias is not None:
            xp.add(view, bias[0, :4 * self.H], out=gates)
        else:
            xp.copyto(gates, view)
        if self.scale is not None:
            xp.multiply(gates, self.scale, out=gates)
        if st.frozen is not None:
            xp.copyto(gates, 0, where=st.frozen)

    def _peepholes(self, bias: Any) -> tuple[Any, Any]:
        H, s = self.H, self.s_gate
        w_if = bias[0, 4 * H:6 * H].reshape(2, H)
        w_o = bias[0, 6 * H:7 * H]
        return (w_if * s, w_o * s) if s != 1.0 else (w_if, w_o)

    def _step(self, g, peep, h_prev, c_prev, c, h) -> None:
        """The NumPy step after the product ``self.hw = h_prev @ ws``."""
        xp, H, B = self.xp, self.H, self.B
        if self.exact is not None:
            self.exact(g, self.hw, peep, c_prev, c, h)
            return
        xp.add(g, self.hw, out=g)
        if peep is not None:
            xp.multiply(c_prev.reshape(B, 1, H), peep[0], out=self.pf)
            front = g[:, H:3 * H].reshape(B, 2, H)
            xp.add(front, self.pf, out=front)
        self.act_front(g)
        cell_update(xp, g, c_prev, c, self.tmp)
        o = g[:, 3 * H:]
        if peep is not None:
            xp.multiply(c, peep[1], out=self.tmp)
            xp.add(o, self.tmp, out=o)
            self.act_o(o)
        xp.multiply(o, self.cell(c, self.tc), out=h)


def _kernel(ctx: KernelContext):
    return _Forward(ctx)


def time_source(steps: Steps, x: Any) -> tuple[Any, int]:
    """``x [B, T, K]`` for a compiled pass that reads it in processing order: the array
    and how it lies (kernels/rnn_passes.py's `time_row`), a gathered copy for a reversed
    op with lengths."""
    if steps.src is not None:
        return steps.time_view(x), TIME_MAJOR
    return x, BATCH_REVERSED if steps.reverse else BATCH_MAJOR


def _grad(g: GradContext) -> None:
    dh, dc = g.flowing("Hidden"), g.flowing("Cell")
    wanted = [s for s in ("Input", "H0", "C0", "Weight", "Bias") if g.wants(s)]
    if (dh is None and dc is None) or not wanted:
        return
    inputs = {s: g.input(s) for s in ("H0", "C0", "Weight", "Bias", "Lengths")}
    inputs.update({s: g.output(s) for s in _INTERNAL})
    if dh is not None:
        inputs["Hidden@GRAD"] = [dh]
    if dc is not None:
        inputs["Cell@GRAD"] = [dc]
    g.emit("lstm_grad", inputs, {s + "@GRAD": [n for n in g.in_grad(s) if n] for s in wanted},
           g.attrs)


def _grad_infer(ctx: InferContext) -> None:
    t, b, g = ctx.input("BatchGate").shape
    dtype = ctx.input("BatchGate").dtype
    ctx.set_output("Input@GRAD", (b, t, g), dtype)
    for slot in ("H0", "C0", "Weight", "Bias"):
        if ctx.has_output(slot + "@GRAD"):
            src = ctx.input(slot)
            ctx.set_output(slot + "@GRAD", src.shape, src.dtype)


class _Backward:
    def __init__(self, ctx: KernelContext):
        xp = self.xp = ctx.xp
        self.T, self.B, g = ctx.input("BatchGate").shape
        T, B, H = self.T, self.B, g // 4
        self.H = H
        dt = self.dtype = ctx.input("BatchGate").dtype
        a = ctx.attrs
        self.peep = a["use_peepholes"]
        self.acts = (a["gate_activation"], a["cell_activation"], a["candidate_activation"])
        self.steps = Steps(xp, B, T, a["is_reverse"])
        self.unpack = Unpack(ctx, ("H0", "C0", "Weight", "Bias", "Lengths") + _INTERNAL
                              + ("Hidden@GRAD", "Cell@GRAD"))
        self.wants = {s: ctx.has_output(s + "@GRAD")
                      for s in ("Input", "H0", "C0", "Weight", "Bias")}
        self.bufs = {s: ctx.buffer(s + "@GRAD") for s in self.wants}
        # The steps write their gate gradients straight into Input@GRAD through a
        # processing-order view, except for a reversed op with lengths (a gather).
        self.direct = self.wants["Input"] and not (a["is_reverse"] and
                                                   ctx.has_input("Lengths"))
        # T-sized arrays of one call: P (dG = P * (dc, dc, dc, dh)), K (dc += K * dh), ...
        per_call = {"factors": (T, B, 4 * H), "k": (T, B, H), "act_c": (T, B, H)}
        per_call.update({"h_prev": (B, T, H)} if self.direct else {"dgates": (T, B, 4 * H)})
        if ctx.has_input("Lengths"):
            per_call.update(dh_seq=(T, B, H), dc_seq=(T, B, H))
        self.per_call = ctx.scratch_arrays("BatchGate", dt, per_call)
        # bound by per_call for the duration of a call (arrays then), None between calls
        self.factors: Any = None
        self.k: Any = None
        self.act_c: Any = None
        self.dgates: Any = None
        self.h_prev: Any = None
        self.dh_seq: Any = None
        self.dc_seq: Any = None
        self.dh, self.dc, self.carry = (xp.empty((B, H), dt) for _ in range(3))
        self.tmp = xp.empty((B, H), dt)
        self.pf = xp.empty((B, 2, H), dt)
        self.zeros = xp.zeros((B, H), dt)
        gate, cell, cand = self.acts
        self.seq = sequence_kernel(ctx, dt, "lstm_backward", {
            "gate": gate, "cand": cand, "cell": cell}, {"PEEP": self.peep, "CLIP": True})
        self.none = xp.zeros((0, 0, 0), dt)    # no gradient flows in there
        # the exact passes, where the whole sequence's kernel is not allowed
        self.factors_pass = self.step_pass = None
        if self.seq is None:
            self.factors_pass = compiled_kernel(ctx, dt, lambda: rnn_source("lstm_factors",
                                                                             dt))
            self.step_pass = compiled_kernel(ctx, dt, lambda: rnn_source("lstm_grad_step",
                                                                          dt))
            self.acts_code = 100 * ACT_CODES[gate] + 10 * ACT_CODES[cell] + ACT_CODES[cand]
            self.no_peep_o, self.no_peep_if = xp.zeros(H, dt), xp.zeros((2, H), dt)
        if self.seq is not None:
            self.no_peep = xp.zeros((3, H), dt)
            self.dgc = xp.empty((B, 4 * H), dt)
            self.tc, self.xs = xp.empty((B, H), dt), xp.empty((B, H), dt)

    def __call__(self, *args):
        return self.per_call.run(self, self._run, args)

    def _run(self, args: tuple) -> Any:
        v = self.unpack(args)
        T = self.T
        st = self.steps
        st.begin(v.get("Lengths"))
        c0 = v.get("C0", self.zeros)
        w_t = v["Weight"].T
        dx = self._input_grad()
        dg = self.dgates if dx is None else st.time_view(dx)
        if self._sequence(v, c0, w_t, dx):
            return self._results(v, dg, dx, c0)
        self._factors(v["BatchGate"], v["BatchCellPreAct"], c0)
        dh_in = self._time_major(v.get("Hidden@GRAD"), self.dh_seq)
        dc_in = self._time_major(v.get("Cell@GRAD"), self.dc_seq)
        peep = self._peepholes(v.get("Bias"))
        exact = self._step_pass_args(v, dx, peep)
        for t in range(T - 1, -1, -1):
            self._step(t, dg, w_t, dh_in, dc_in, v["BatchGate"][t], peep, exact)
        return self._results(v, dg, dx, c0)

    def _step_pass_args(self, v: dict, dx: Any, peep: tuple | None) -> tuple | None:
        """What the compiled step (kernels/rnn_passes.py's lstm_grad_step) takes besides
        the step and its flags: (flags of every step, whether dh_in flows, the layouts,
        the arrays); None where it does not run."""
        if self.step_pass is None or self.step_pass.fn is None:
            return None
        st = self.steps

        def source(d: Any, buf: Any) -> tuple[Any, int]:   # as `_time_major` reads it
            if d is None:
                return self.none, TIME_MAJOR
            return time_source(st, d) if st.valid is None else (buf, TIME_MAJOR)
        dh_in, dh_order = source(v.get("Hidden@GRAD"), self.dh_seq)
        dc_in, dc_order = source(v.get("Cell@GRAD"), self.dc_seq)
        # Input@GRAD is written in place where no gather is needed (`direct`)
        dg, dg_order = (self.dgates, TIME_MAJOR) if dx is None else time_source(st, dx)
        peep_o, peep_if = (self.no_peep_o, self.no_peep_if) if peep is None else \
            (peep[1], peep[0])
        if not all(a.flags.c_contiguous for a in (dh_in, dc_in, dg, peep_o, peep_if)):
            return None   # the compiled step takes C-contiguous arrays only
        flags = 4 * int(v.get("Cell@GRAD") is not None) | 8 * int(peep is not None)
        return (flags, int(v.get("Hidden@GRAD") is not None),
                dh_order | dc_order << 3 | dg_order << 6,
                (self.dh, dh_in, dc_in, self.k, self.factors, v["BatchGate"], self.carry,
                 peep_o, peep_if, self.dc, dg))

    def _sequence(self, v: dict, c0: Any, w_t: Any, dx: Any) -> bool:
        """Every step in one compiled call, once the plan switched to it (True: it ran).
        It reads the output gradients and writes Input@GRAD in the op's [B, T, K] order
        where no gather is needed (flags: kernels/recurrent.py's lstm_backward)."""
        xp, H, st = self.xp, self.H, self.steps

        def args() -> tuple:
            w = v["Bias"][0, 4 * H:].reshape(3, H) if self.peep else self.no_peep
            flags = 16 * int(dx is not None) | 32 * int(st.reverse and st.valid is None)
            ins = []
            for k, (slot, buf) in enumerate((("Hidden@GRAD", self.dh_seq),
                                             ("Cell@GRAD", self.dc_seq))):
                d = v.get(slot)
                if d is not None:
                    flags |= (1 << k) | (4 << k) * int(st.valid is None)
                    d = xp.ascontiguousarray(d) if st.valid is None else \
                        self._time_major(d, buf)
                ins.append(self.none if d is None else d)
            return (*ins, v["BatchCellPreAct"], xp.ascontiguousarray(c0), v["BatchGate"],
                    xp.ascontiguousarray(w_t), w, flags, self.dh, self.carry, self.dgc,
                    self.tc, self.xs, self.dgates if dx is None else dx)
        return run_compiled(self.seq, args)

    def _input_grad(self) -> Any:
        """Input@GRAD [B, T, 4H] when the steps write into it (`direct`), else None."""
        if not self.direct:
            return None
        return new_or(self.bufs["Input"], self.xp, (self.B, self.T, 4 * self.H), self.dtype)

    def _time_major(self, d: Any, buf: Any) -> Any:
        """An output gradient in processing order, zero at padding (None stays None)."""
        if d is None:
            return None
        view = self.steps.time_view(d)
        if self.steps.valid is None:
            return view
        return self.xp.multiply(view, self.steps.valid, out=buf)

    def _peepholes(self, bias: Any) -> tuple[Any, Any] | None:
        if not self.peep:
            return None
        H = self.H
        return bias[0, 4 * H:6 * H].reshape(2, H), bias[0, 6 * H:7 * H]

    def _factors(self, gates: Any, cells: Any, c0: Any) -> None:
        """P = [i * cand'(c~), c~ * g'(i), c_prev * g'(f), act_cell(c) * g'(o)] and
        K = o * act_cell'(c), for every step at once."""
        xp, H = self.xp, self.H
        gate, cell, cand = self.acts
        p, k = self.factors, self.k
        act_c = _cell_fn(xp, cell)(cells, self.act_c)
        if run_compiled(self.factors_pass, lambda: (gates, cells, c0, act_c, self.acts_code,
                                                    p, k)):
            return
        derivative(xp, gates[..., :H], cand, p[..., :H])
        derivative(xp, gates[..., H:], gate, p[..., H:])
        xp.multiply(p[..., :H], gates[..., H:2 * H], out=p[..., :H])
        xp.multiply(p[..., H:2 * H], gates[..., :H], out=p[..., H:2 * H])
        if self.T:
            xp.multiply(p[0, :, 2 * H:3 * H], c0, out=p[0, :, 2 * H:3 * H])
            xp.multiply(p[1:, :, 2 * H:3 * H], cells[:-1], out=p[1:, :, 2 * H:3 * H])
        xp.multiply(p[..., 3 * H:], act_c, out=p[..., 3 * H:])
        derivative(xp, act_c, cell, k)
        xp.multiply(k, gates[..., 3 * H:], out=k)

    def _step(self, t, dg, w_t, dh_in, dc_in, gates_t, peep, exact) -> None:
        xp, B, H, T = self.xp, self.B, self.H, self.T
        dh, dc, p = self.dh, self.dc, self.factors[t]
        if t == T - 1:
            self._first(dh, dh_in, t)
        else:
            xp.matmul(dg[t + 1], w_t, out=dh)
        if exact is not None and run_compiled(self.step_pass, lambda: (
                t, exact[0] | ((exact[1] | 2) if t < T - 1 else 0), exact[2], *exact[3])):
            return
        if t < T - 1 and dh_in is not None:
            xp.add(dh, dh_in[t], out=dh)
        xp.multiply(dh, self.k[t], out=dc)
        if t < T - 1:
            xp.add(dc, self.carry, out=dc)
        if dc_in is not None:
            xp.add(dc, dc_in[t], out=dc)
        d_o = xp.multiply(dh, p[:, 3 * H:], out=dg[t][:, 3 * H:])
        if peep is not None:
            xp.add(dc, xp.multiply(d_o, peep[1], out=self.tmp), out=dc)
        xp.multiply(p[:, :3 * H].reshape(B, 3, H), dc.reshape(B, 1, H),
                    out=dg[t][:, :3 * H].reshape(B, 3, H))
        xp.multiply(dc, gates_t[:, 2 * H:3 * H], out=self.carry)
        if peep is not None:
            xp.multiply(dg[t][:, H:3 * H].reshape(B, 2, H), peep[0], out=self.pf)
            xp.add(self.carry, self.pf[:, 0], out=self.carry)
            xp.add(self.carry, self.pf[:, 1], out=self.carry)

    def _first(self, dh: Any, dh_in: Any, t: int) -> None:
        if dh_in is None:
            dh.fill(0)
        else:
            self.xp.copyto(dh, dh_in[t])

    def _results(self, v: dict, dg: Any, dx: Any, c0: Any) -> tuple:
        xp, T, B, H, dt = self.xp, self.T, self.B, self.H, self.dtype
        out = []
        if self.wants["Input"]:
            out.append(self.steps.to_batch(dg, self.bufs["Input"]) if dx is None else dx)
        if self.wants["H0"]:
            dh0 = new_or(self.bufs["H0"], xp, (B, H), dt)
            out.append(xp.matmul(dg[0], v["Weight"].T, out=dh0) if T else zero(dh0))
        if self.wants["C0"]:
            dc0 = new_or(self.bufs["C0"], xp, (B, H), dt)
            out.append(copy_into(xp, dc0, self.carry) if T else zero(dc0))
        if self.wants["Weight"]:
            out.append(self._dweight(v, dg, dx))
        if self.wants["Bias"]:
            out.append(self._dbias(v, dg, c0))
        return out[0] if len(out) == 1 else tuple(out)

    def _dweight(self, v: dict, dg: Any, dx: Any) -> Any:
        """dW = sum over steps of h_prev^T dG: one GEMM over the gate gradients as they lie
        (in Input@GRAD, batch-major, with h_prev laid out to match), or in processing
        order."""
        xp, T, H = self.xp, self.T, self.H
        dw = new_or(self.bufs["Weight"], xp, (H, 4 * H), self.dtype)
        hids = v["BatchHidden"]
        if dx is not None:
            h_prev: Any = self.h_prev                 # [B, T, H], as Input@GRAD lies
            in_steps = self.steps.time_view(h_prev)
            if T:
                xp.copyto(in_steps[0], v.get("H0", self.zeros))
                xp.copyto(in_steps[1:], hids[:-1])
            return xp.matmul(h_prev.reshape(-1, H).T, dx.reshape(-1, 4 * H), out=dw)
        xp.matmul(hids[:-1].reshape(-1, H).T, dg[1:].reshape(-1, 4 * H), out=dw)
        if "H0" in v and T:
            dw += xp.matmul(v["H0"].T, dg[0])
        return dw

    def _dbias(self, v: dict, dg: Any, c0: Any) -> Any:
        xp, H = self.xp, self.H
        db = new_or(self.bufs["Bias"], xp, v["Bias"].shape, self.dtype)
        dg.sum(axis=(0, 1), out=db[0, :4 * H])
        if self.peep:
            cells = v["BatchCellPreAct"]
            c_prev = xp.concatenate([c0.reshape(1, *c0.shape), cells[:-1]])
            for k, (gate, c) in enumerate(((1, c_prev), (2, c_prev), (3, cells))):
                d = xp.multiply(dg[..., gate * H:(gate + 1) * H], c)
                d.reshape(-1, H).sum(axis=0, out=db[0, (4 + k) * H:(5 + k) * H])
        return db


def _grad_kernel(ctx: KernelContext):
    return _Backward(ctx)


register(OpSpec(
    "lstm", slots("Input", "H0?", "C0?", "Weight", "Bias?", "Lengths?"),
    slots("Hidden", "Cell", *_INTERNAL), _infer, _kernel, _grad, attrs=_ATTRS,
    doc="An LSTM over a padded batch Input [B, T, 4H] (projected; gates c~, i, f, o) with "
        "optional Lengths [B]: Hidden and Cell [B, T, H], zero past each row's length."))
register(OpSpec(
    "lstm_grad",
    slots("H0?", "C0?", "Weight", "Bias?", "Lengths?", *_INTERNAL, "Hidden@GRAD?",
          "Cell@GRAD?"),
    slots("Input@GRAD?", "H0@GRAD?", "C0@GRAD?", "Weight@GRAD?", "Bias@GRAD?"),
    _grad_infer, _grad_kernel, attrs=_ATTRS))
