"""The recurrent ops: ``lstm``, ``gru``, ``lstm_unit`` and ``gru_unit`` against a NumPy
reference written row by row and step by step (the GRU weight in Paddle's layout, the
fused ops' sigmoids clipped as Paddle's), every gradient against finite differences,
``lstm``/``gru`` against PyTorch's ``nn.LSTM``/``nn.GRU`` with the same weights (gate
orders mapped) in float64, and padding that never matters."""
import numpy as np
import pytest
from ops.harness import analytic_grads, build_op, check_grad, check_op

from fluid_interactive.errors import DTypeError, ShapeError
from fluid_interactive.ops.interpret import run_ops

ACT = {"sigmoid": lambda v: np.exp(-np.logaddexp(0, -v)), "tanh": np.tanh,
       "relu": lambda v: np.maximum(v, 0), "identity": lambda v: v}
#: The activations of Paddle's fused RNN kernels (gru, lstm): a sigmoid's input is
#: clipped to [-40, 13] first.
FUSED_ACT = dict(ACT, sigmoid=lambda v: ACT["sigmoid"](np.clip(v, -40.0, 13.0)))


def gru_weight(w_ur, w_c):
    """A gru Weight [D, 3D] in Paddle's layout from W_ur [D, 2D] (u, r) and W_c [D, D]:
    their values one after the other, read as [D, 3D]."""
    d = w_c.shape[0]
    return np.concatenate([w_ur.reshape(-1), w_c.reshape(-1)]).reshape(d, 3 * d)


def gru_weight_parts(w):
    """W_ur [D, 2D] and W_c [D, D] of a gru Weight, as Paddle reads them: the first 2*D*D
    values, then the last D*D."""
    d = w.shape[0]
    return w.reshape(-1)[:2 * d * d].reshape(d, 2 * d), w.reshape(-1)[2 * d * d:].reshape(d, d)


def row_order(n, t_len, reverse):
    """The positions a row of length n visits, in order."""
    order = list(range(n))
    return order[::-1] if reverse else order


# --- NumPy references: one row at a time, one step at a time ----------------------------------

def ref_lstm(Input, Weight, Bias=None, H0=None, C0=None, Lengths=None, use_peepholes=True,
             is_reverse=False, gate_activation="sigmoid", cell_activation="tanh",
             candidate_activation="tanh", **_):
    b, t, g = Input.shape
    h_size = g // 4
    gate, cell, cand = (FUSED_ACT[gate_activation], FUSED_ACT[cell_activation],
                        FUSED_ACT[candidate_activation])
    bias = np.zeros(7 * h_size) if Bias is None else Bias[0]
    hidden, cells = np.zeros((b, t, h_size)), np.zeros((b, t, h_size))
    for row in range(b):
        n = t if Lengths is None else int(Lengths[row])
        h = np.zeros(h_size) if H0 is None else H0[row]
        c = np.zeros(h_size) if C0 is None else C0[row]
        for pos in row_order(n, t, is_reverse):
            z = Input[row, pos] + h @ Weight + bias[:4 * h_size]
            zc, zi, zf, zo = np.split(z, 4)
            if use_peepholes:
                w_ic, w_fc, w_oc = np.split(bias[4 * h_size:], 3)
                zi, zf = zi + w_ic * c, zf + w_fc * c
            c = gate(zf) * c + gate(zi) * cand(zc)
            if use_peepholes:
                zo = zo + w_oc * c
            h = gate(zo) * cell(c)
            hidden[row, pos], cells[row, pos] = h, c
    return {"Hidden": hidden, "Cell": cells}


def ref_gru(Input, Weight, Bias=None, H0=None, Lengths=None, is_reverse=False,
            gate_activation="sigmoid", activation="tanh", origin_mode=False,
            linear_before_reset=False, clip=True, **_):
    """``clip=False``: sigmoids unclipped (gru_unit's step)."""
    b, t, g = Input.shape
    d = g // 3
    acts = FUSED_ACT if clip else ACT
    gate, cand = acts[gate_activation], acts[activation]
    w_ur, w_c = gru_weight_parts(Weight)
    bias = np.zeros(3 * d) if Bias is None else Bias[0]
    hidden = np.zeros((b, t, d))
    for row in range(b):
        n = t if Lengths is None else int(Lengths[row])
        h = np.zeros(d) if H0 is None else H0[row]
        for pos in row_order(n, t, is_reverse):
            x = Input[row, pos]
            u = gate(x[:d] + h @ w_ur[:, :d] + bias[:d])
            r = gate(x[d:2 * d] + h @ w_ur[:, d:] + bias[d:2 * d])
            if linear_before_reset:
                c = cand(x[2 * d:] + r * (h @ w_c + bias[2 * d:]))
            else:
                c = cand(x[2 * d:] + (r * h) @ w_c + bias[2 * d:])
            h = u * h + (1 - u) * c if origin_mode else (1 - u) * h + u * c
            hidden[row, pos] = h
    return {"Hidden": hidden}


def lstm_inputs(rng, b=3, t=5, h=4, peep=True, lengths=(5, 2, 0), states=True, bias=True):
    out = {"Input": rng.standard_normal((b, t, 4 * h)),
           "Weight": 0.5 * rng.standard_normal((h, 4 * h))}
    if bias:
        out["Bias"] = 0.5 * rng.standard_normal((1, (7 if peep else 4) * h))
    if states:
        out["H0"], out["C0"] = rng.standard_normal((b, h)), rng.standard_normal((b, h))
    if lengths is not None:
        out["Lengths"] = np.array(lengths, np.int64)
    return out


def gru_inputs(rng, b=3, t=5, d=4, lengths=(5, 2, 0), h0=True, bias=True):
    out = {"Input": rng.standard_normal((b, t, 3 * d)),
           "Weight": 0.5 * rng.standard_normal((d, 3 * d))}
    if bias:
        out["Bias"] = 0.5 * rng.standard_normal((1, 3 * d))
    if h0:
        out["H0"] = rng.standard_normal((b, d))
    if lengths is not None:
        out["Lengths"] = np.array(lengths, np.int64)
    return out


LSTM_CASES = [
    {"use_peepholes": True},
    {"use_peepholes": False},
    {"use_peepholes": True, "is_reverse": True},
    {"use_peepholes": False, "is_reverse": True},
    {"use_peepholes": False, "gate_activation": "tanh", "cell_activation": "relu",
         "candidate_activation": "identity"},
    {"use_peepholes": True, "gate_activation": "relu", "cell_activation": "sigmoid",
         "candidate_activation": "sigmoid", "is_reverse": True},
]
GRU_CASES = [
    {},
    {"origin_mode": True},
    {"is_reverse": True},
    {"linear_before_reset": True},
    {"linear_before_reset": True, "origin_mode": True, "is_reverse": True},
    {"gate_activation": "tanh", "activation": "relu"},
    {"gate_activation": "identity", "activation": "sigmoid", "linear_before_reset": True},
]


@pytest.mark.parametrize("attrs", LSTM_CASES)
@pytest.mark.parametrize("lengths", [None, (5, 2, 0)], ids=["full", "lengths"])
def test_lstm_matches_reference(rng, attrs, lengths):
    inputs = lstm_inputs(rng, peep=attrs["use_peepholes"], lengths=lengths)
    check_op("lstm", inputs, attrs, reference=ref_lstm, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("attrs", GRU_CASES)
@pytest.mark.parametrize("lengths", [None, (5, 2, 0)], ids=["full", "lengths"])
def test_gru_matches_reference(rng, attrs, lengths):
    check_op("gru", gru_inputs(rng, lengths=lengths), attrs, reference=ref_gru, rtol=1e-10,
             atol=1e-12)


def test_lstm_and_gru_in_float32_match_float64(rng):
    inputs = lstm_inputs(rng, lengths=(5, 3, 4))
    want = ref_lstm(**inputs)
    f32 = {k: (v.astype(np.float32) if v.dtype.kind == "f" else v) for k, v in inputs.items()}
    got = check_op("lstm", f32)
    assert got["Hidden"][0].dtype == np.float32
    np.testing.assert_allclose(got["Hidden"][0], want["Hidden"], rtol=1e-4, atol=1e-5)
    g = gru_inputs(rng)
    got = check_op("gru", {k: (v.astype(np.float32) if v.dtype.kind == "f" else v)
                           for k, v in g.items()})
    np.testing.assert_allclose(got["Hidden"][0], ref_gru(**g)["Hidden"], rtol=1e-4, atol=1e-5)


def test_optional_inputs_default_to_zero(rng):
    inputs = lstm_inputs(rng, peep=False, lengths=None, states=False, bias=False)
    check_op("lstm", inputs, {"use_peepholes": False}, reference=ref_lstm, rtol=1e-10,
             atol=1e-12)
    check_op("gru", gru_inputs(rng, lengths=None, h0=False, bias=False), {},
             reference=ref_gru, rtol=1e-10, atol=1e-12)


# --- gradients against finite differences ---------------------------------------------------

@pytest.mark.parametrize("attrs", LSTM_CASES[:4] + LSTM_CASES[5:])
@pytest.mark.parametrize("lengths", [None, (4, 2, 1)], ids=["full", "lengths"])
def test_lstm_gradients(rng, attrs, lengths):
    inputs = lstm_inputs(rng, b=3, t=4, h=3, peep=attrs["use_peepholes"], lengths=lengths)
    check_grad("lstm", inputs, attrs, wrt=["Input", "H0", "C0", "Weight", "Bias"],
               through=["Hidden", "Cell"], max_elements=30)


def test_lstm_gradient_from_hidden_alone(rng):
    inputs = lstm_inputs(rng, b=2, t=4, h=3, lengths=(4, 3))
    check_grad("lstm", inputs, {}, wrt=["Input", "Weight", "Bias"], through=["Hidden"],
               max_elements=30)
    check_grad("lstm", inputs, {}, wrt=["Input", "C0"], through=["Cell"], max_elements=30)


@pytest.mark.parametrize("attrs", GRU_CASES)
@pytest.mark.parametrize("lengths", [None, (4, 2, 1)], ids=["full", "lengths"])
def test_gru_gradients(rng, attrs, lengths):
    inputs = gru_inputs(rng, b=3, t=4, d=3, lengths=lengths)
    if attrs.get("gate_activation") == "identity":
        # Unbounded gates drive the sigmoid candidate past 13, where the clip makes the
        # function flat but the gradient (Paddle's, from the sigmoid's value) is not 0.
        inputs["Input"] *= 0.3
        inputs["H0"] *= 0.3
    check_grad("gru", inputs, attrs, wrt=["Input", "H0", "Weight", "Bias"],
               through=["Hidden"], max_elements=30)


# --- padding never matters ----------------------------------------------------------------------

def _run(op_type, inputs, attrs, through, seed=0):
    op, env = build_op(op_type, inputs, attrs)
    run_ops([op], env)
    rng = np.random.default_rng(seed)
    cot = {n: (rng.standard_normal(np.shape(env[n])) if slot in through
               else np.zeros(np.shape(env[n])))
           for slot, names in op.outputs.items() for n in names}
    wrt = [s for s in inputs if s != "Lengths"]
    grads = analytic_grads(op, env, cot, wrt)
    outs = {slot: env[names[0]] for slot, names in op.outputs.items() if slot in through}
    return outs, {s: grads[s][0] for s in wrt}


@pytest.mark.parametrize("op_type,reverse", [("lstm", False), ("lstm", True), ("gru", False),
                                             ("gru", True)])
def test_padding_never_changes_state_outputs_or_gradients(rng, op_type, reverse):
    lengths = np.array([5, 2, 0, 3])
    if op_type == "lstm":
        inputs, through = lstm_inputs(rng, b=4, lengths=lengths), ("Hidden", "Cell")
    else:
        inputs, through = gru_inputs(rng, b=4, lengths=lengths), ("Hidden",)
    attrs = {"is_reverse": reverse}
    clean, clean_grads = _run(op_type, inputs, attrs, through)
    dirty = dict(inputs)
    x = inputs["Input"].copy()
    pad = np.arange(x.shape[1])[None, :] >= lengths[:, None]
    x[pad] = 1e30          # huge values where no row has data
    dirty["Input"] = x
    got, grads = _run(op_type, dirty, attrs, through)
    for slot in through:
        np.testing.assert_array_equal(got[slot], clean[slot])
        assert not got[slot][pad].any()                 # outputs are zero at padding
    for slot, g in grads.items():
        np.testing.assert_array_equal(g, clean_grads[slot], err_msg=slot)
    assert not clean_grads["Input"][pad].any()          # no gradient reaches padding


def test_length_zero_rows_keep_their_initial_state_gradient(rng):
    inputs = lstm_inputs(rng, b=2, lengths=(0, 0))
    outs, grads = _run("lstm", inputs, {}, ("Hidden", "Cell"))
    assert not outs["Hidden"].any() and not outs["Cell"].any()
    assert not grads["H0"].any() and not grads["Weight"].any()


def test_lengths_out_of_range_are_an_error(rng):
    inputs = lstm_inputs(rng, lengths=(6, 1, 1))
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 5\]"):
        check_op("lstm", inputs)


# --- the same weights as PyTorch ---------------------------------------------------------------

torch = pytest.importorskip("torch")


def _torch_run(module, x, lengths, states):
    tx = torch.tensor(x, requires_grad=True)
    if lengths is None:
        out, _ = module(tx, states)
    else:
        packed = torch.nn.utils.rnn.pack_padded_sequence(
            tx, torch.tensor(lengths), batch_first=True, enforce_sorted=False)
        out, _ = module(packed, states)
        out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True,
                                                        total_length=x.shape[1])
    return tx, out


def _same_as_torch(rng, op_type, inputs, attrs, lengths, out):
    """Our op's Hidden equals PyTorch's ``out``; then both backpropagate one random
    cotangent of it, and our gradients (by input slot) come back."""
    if lengths is not None:
        inputs = dict(inputs, Lengths=np.array(lengths, np.int64))
    op, env = build_op(op_type, inputs, attrs)
    run_ops([op], env)
    hidden = op.outputs["Hidden"][0]
    np.testing.assert_allclose(env[hidden], out.detach().numpy(), rtol=1e-10, atol=1e-12)
    cots = {n: np.zeros(np.shape(env[n])) for n in op.output_names()}
    cots[hidden] = rng.standard_normal(np.shape(env[hidden]))
    (out * torch.tensor(cots[hidden])).sum().backward()
    grads = analytic_grads(op, env, cots, [s for s in inputs if s != "Lengths"])
    return {s: v[0] for s, v in grads.items() if v and v[0] is not None}


def _torch_lstm_weights(m, suffix, h):
    """PyTorch's gates i, f, g, o -> ours c~, i, f, o: input projection, Weight, Bias."""
    perm = np.r_[2 * h:3 * h, 0:h, h:2 * h, 3 * h:4 * h]
    w_ih = getattr(m, "weight_ih" + suffix).detach().numpy()[perm]
    w_hh = getattr(m, "weight_hh" + suffix).detach().numpy()[perm]
    b = (getattr(m, "bias_ih" + suffix) + getattr(m, "bias_hh" + suffix)).detach().numpy()
    return perm, w_ih, w_hh.T.copy(), b[perm].reshape(1, -1)


@pytest.mark.parametrize("lengths", [None, [7, 3, 5, 1]], ids=["full", "lengths"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_lstm_equals_torch(rng, lengths, reverse):
    torch.manual_seed(0)
    b, t, d, h = 4, 7, 5, 6
    m = torch.nn.LSTM(d, h, batch_first=True, bidirectional=reverse).double()
    suffix = "_l0_reverse" if reverse else "_l0"
    perm, w_ih, w, bias = _torch_lstm_weights(m, suffix, h)
    x, h0, c0 = (rng.standard_normal(s) for s in ((b, t, d), (b, h), (b, h)))
    dirs = 2 if reverse else 1
    th0 = torch.tensor(np.repeat(h0[None], dirs, 0), requires_grad=True)
    tc0 = torch.tensor(np.repeat(c0[None], dirs, 0), requires_grad=True)
    tx, out = _torch_run(m, x, lengths, (th0, tc0))
    out = out[..., h:] if reverse else out
    inputs = {"Input": x @ w_ih.T, "H0": h0, "C0": c0, "Weight": w, "Bias": bias}
    g = _same_as_torch(rng, "lstm", inputs, {"use_peepholes": False, "is_reverse": reverse},
                       lengths, out)
    k = 1 if reverse else 0
    close = {"rtol": 1e-9, "atol": 1e-11}
    np.testing.assert_allclose(g["Input"] @ w_ih, tx.grad.numpy(), **close)
    np.testing.assert_allclose(g["H0"], th0.grad.numpy()[k], **close)
    np.testing.assert_allclose(g["C0"], tc0.grad.numpy()[k], **close)
    w_grad = getattr(m, "weight_hh" + suffix).grad.numpy()[perm].T
    np.testing.assert_allclose(g["Weight"], w_grad, **close)
    np.testing.assert_allclose(g["Bias"][0], getattr(m, "bias_hh" + suffix).grad.numpy()[perm],
                               **close)


@pytest.mark.parametrize("lengths", [None, [7, 3, 5, 1]], ids=["full", "lengths"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_gru_equals_torch(rng, lengths, reverse):
    """PyTorch's GRU is origin_mode=True with linear_before_reset=True; its gates r, z, n
    map to our u (= z), r, c~ (= n); b_ih and the gate part of b_hh go into the input
    projection, b_hn into Bias (inside the reset)."""
    torch.manual_seed(0)
    b, t, d, h = 4, 7, 5, 6
    m = torch.nn.GRU(d, h, batch_first=True, bidirectional=reverse).double()
    suffix = "_l0_reverse" if reverse else "_l0"
    perm = np.r_[h:2 * h, 0:h, 2 * h:3 * h]
    w_ih = getattr(m, "weight_ih" + suffix).detach().numpy()[perm]
    w_hh = getattr(m, "weight_hh" + suffix).detach().numpy()[perm]
    w = gru_weight(w_hh[:2 * h].T, w_hh[2 * h:].T)
    b_ih = getattr(m, "bias_ih" + suffix).detach().numpy()[perm]
    b_hh = getattr(m, "bias_hh" + suffix).detach().numpy()[perm]
    x, h0 = rng.standard_normal((b, t, d)), rng.standard_normal((b, h))
    dirs = 2 if reverse else 1
    th0 = torch.tensor(np.repeat(h0[None], dirs, 0), requires_grad=True)
    tx, out = _torch_run(m, x, lengths, th0)
    out = out[..., h:] if reverse else out
    shift = b_ih + np.r_[b_hh[:2 * h], np.zeros(h)]
    inputs = {"Input": x @ w_ih.T + shift, "H0": h0, "Weight": w,
              "Bias": np.r_[np.zeros(2 * h), b_hh[2 * h:]].reshape(1, -1)}
    g = _same_as_torch(rng, "gru", inputs, {"origin_mode": True, "linear_before_reset": True,
                                            "is_reverse": reverse}, lengths, out)
    close = {"rtol": 1e-9, "atol": 1e-11}
    np.testing.assert_allclose(g["Input"] @ w_ih, tx.grad.numpy(), **close)
    np.testing.assert_allclose(g["H0"], th0.grad.numpy()[1 if reverse else 0], **close)
    dw_hh = getattr(m, "weight_hh" + suffix).grad.numpy()[perm]
    np.testing.assert_allclose(g["Weight"], gru_weight(dw_hh[:2 * h].T, dw_hh[2 * h:].T),
                               **close)
    np.testing.assert_allclose(g["Bias"][0][2 * h:],
                               getattr(m, "bias_hh" + suffix).grad.numpy()[perm][2 * h:], **close)


# --- lstm_unit and gru_unit -----------------------------------------------------------------------

def ref_lstm_unit(X, C_prev, forget_bias=0.0, **_):
    i, f, o, g = np.split(X, 4, axis=1)
    s = ACT["sigmoid"]
    c = s(f + forget_bias) * C_prev + s(i) * np.tanh(g)
    return {"C": c, "H": s(o) * np.tanh(c)}


@pytest.mark.parametrize("forget_bias", [0.0, 1.0])
def test_lstm_unit(rng, forget_bias):
    inputs = {"X": rng.standard_normal((3, 8)), "C_prev": rng.standard_normal((3, 2))}
    attrs = {"forget_bias": forget_bias}
    check_op("lstm_unit", inputs, attrs, reference=ref_lstm_unit, rtol=1e-12, atol=1e-12)
    check_grad("lstm_unit", inputs, attrs, wrt=["X", "C_prev"])
    check_grad("lstm_unit", inputs, attrs, wrt=["X", "C_prev"], through=["H"])
    check_grad("lstm_unit", inputs, attrs, wrt=["X"], through=["C"])


@pytest.mark.parametrize("attrs", [{}, {"origin_mode": True},
                                   {"gate_activation": "tanh", "activation": "relu"}])
def test_gru_unit_is_one_step_of_gru(rng, attrs):
    g = gru_inputs(rng, b=3, t=1, d=4, lengths=None)
    inputs = {"Input": g["Input"][:, 0], "HiddenPrev": g["H0"], "Weight": g["Weight"],
              "Bias": g["Bias"]}
    want = ref_gru(**g, **attrs, clip=False)["Hidden"][:, 0]
    got = check_op("gru_unit", inputs, attrs)
    np.testing.assert_allclose(got["Hidden"][0], want, rtol=1e-12, atol=1e-12)
    d = 4
    np.testing.assert_allclose(got["ResetHiddenPrev"][0],
                               got["Gate"][0][:, d:2 * d] * g["H0"], rtol=1e-12)
    check_grad("gru_unit", inputs, attrs, wrt=["Input", "HiddenPrev", "Weight", "Bias"],
               through=["Hidden"])


# --- Paddle's sigmoid clip ------------------------------------------------------------------------

SIGMOID_13 = 1.0 / (1.0 + np.exp(-13.0))    # 1 - 2.3e-6


def test_fused_ops_clip_sigmoid_inputs_at_13_and_unit_ops_do_not(rng):
    """As Paddle's kernels: gru and lstm clip a sigmoid's input to [-40, 13], gru_unit and
    lstm_unit do not (a gate driven to 43 is sigmoid(13) in the former, 1 in the latter)."""
    g = gru_inputs(rng, b=3, t=1, d=4, lengths=None)
    g["Input"][..., :4] += 43.0                    # the update gate
    fused = check_op("gru", g, {}, reference=ref_gru, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(fused["BatchGate"][0][0, :, :4], SIGMOID_13, rtol=1e-15)
    unit = check_op("gru_unit", {"Input": g["Input"][:, 0], "HiddenPrev": g["H0"],
                                 "Weight": g["Weight"], "Bias": g["Bias"]}, {})
    np.testing.assert_array_equal(unit["Gate"][0][:, :4], 1.0)
    x = lstm_inputs(rng, b=3, t=1, h=4, peep=False, lengths=None)
    x["Input"][..., 4:8] += 43.0                   # the input gate
    fused = check_op("lstm", x, {"use_peepholes": False}, reference=ref_lstm, rtol=1e-12,
                     atol=1e-14)
    np.testing.assert_allclose(fused["BatchGate"][0][0, :, 4:8], SIGMOID_13, rtol=1e-15)
    i_big = {"X": np.concatenate([np.full((3, 4), 43.0), np.zeros((3, 8)), np.ones((3, 4))],
                                 axis=1), "C_prev": np.zeros((3, 4))}   # gates i, f, o, g
    np.testing.assert_array_equal(check_op("lstm_unit", i_big, {})["C"][0],
                                  np.full((3, 4), np.tanh(1.0)))        # i = 1: unclipped


# --- shape rules -------------------------------------------------------------------------------

def test_shape_errors_name_what_to_fix(rng):
    bad = lstm_inputs(rng, h=4)
    bad["Input"] = bad["Input"][..., :-1]
    with pytest.raises(ShapeError, match=r"4H = 16 columns.*fc\(size=16, num_flatten_dims=2\)"):
        check_op("lstm", bad)
    no_bias = lstm_inputs(rng, bias=False)
    with pytest.raises(ShapeError, match="use_peepholes=True needs Bias"):
        check_op("lstm", no_bias)
    lengths = gru_inputs(rng)
    lengths["Lengths"] = lengths["Lengths"].astype(np.float32)
    with pytest.raises(DTypeError, match="Lengths must be int64"):
        check_op("gru", lengths)
    with pytest.raises(ShapeError, match="gate_activation='softmax' is not one of"):
        check_op("gru", gru_inputs(rng), {"gate_activation": "softmax"})
    with pytest.raises(ShapeError, match=r"padded batch \[B, T, K\]"):
        check_op("gru", dict(gru_inputs(rng, lengths=None), Input=rng.standard_normal((3, 12))))
