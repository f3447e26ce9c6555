"""fluid.layers.GRUCell, LSTMCell and rnn/birnn over padded batches with lengths: the cells
through `rnn` give what `dynamic_gru`/`dynamic_lstm` give with the same weights, and what
PyTorch's nn.GRU / nn.LSTM give, forward and gradients (float64); a finished row keeps its
states and gives zeros; reversing, time-major layouts and birnn agree with each other;
gradients agree with finite differences; parameters are shared as a layer's are; mistakes
are errors at the user's line."""
import numpy as np
import pytest
from ops.harness import check_block

import fluid

L = fluid.layers
IN, H = 3, 4
LENGTHS = np.array([5, 2, 0, 3], np.int64)


def _data(name, shape, dtype="float64", grad=False):
    return L.data(name=name, shape=shape, dtype=dtype, append_batch_size=False,
                  stop_gradient=not grad)


def _padded(x, lengths, value):
    x = x.copy()
    x[np.arange(x.shape[1])[None, :] >= lengths[:, None]] = value
    return x


def _sequences():
    return _data("x", [-1, -1, IN], grad=True), _data("n", [-1], "int64")


# --- the cells against the fused layers ---------------------------------------------------

def dynamic_gru_weights(gate_w, cand_w, gate_b, cand_b):
    """GRUCell's weights as fc + dynamic_gru(origin_mode=True) take them: the input's
    projection [IN, 3H] and bias [3H] in the gru op's order u, r, c~, and the recurrent
    weight in Paddle's layout (ops/gru.py: W_ur [H, 2H], the gates', is its first 2H*H
    values, W_c [H, H], the candidate's, the last H*H). The one place here that knows the
    gru op's weight layout."""
    r, u = slice(0, H), slice(H, 2 * H)
    proj = np.concatenate([gate_w[:IN, u], gate_w[:IN, r], cand_w[:IN]], axis=1)
    bias = np.concatenate([gate_b[u], gate_b[r], cand_b])
    w_ur = np.concatenate([gate_w[IN:, u], gate_w[IN:, r]], axis=1)
    recurrent = np.concatenate([w_ur.reshape(-1), cand_w[IN:].reshape(-1)]).reshape(H, 3 * H)
    return proj, bias, recurrent


def dynamic_lstm_weights(w, b, forget_bias):
    """LSTMCell's weights (gates i, j, f, o) as fc + dynamic_lstm take them (c~, i, f, o:
    ops/lstm.py), the forget bias folded into the projection's bias."""
    i, j, f, o = (slice(k * H, (k + 1) * H) for k in range(4))
    order = [j, i, f, o]
    bias = np.concatenate([b[j], b[i], b[f] + forget_bias, b[o]])
    return (np.concatenate([w[:IN, s] for s in order], axis=1), bias,
            np.concatenate([w[IN:, s] for s in order], axis=1))


class Grus(fluid.Program):
    @fluid.network("x", "n")
    def cell(self, x, n):
        x, n = _sequences()
        out, last = L.rnn(L.GRUCell(H, dtype="float64", name="gru"), x, sequence_length=n)
        return out, last

    @fluid.network("x", "n")
    def fused(self, x, n):
        x, n = _sequences()
        proj = L.fc(x, 3 * H, num_flatten_dims=2, param_attr="proj.w", bias_attr="proj.b")
        return L.dynamic_gru(proj, H, param_attr="gru.w", bias_attr=False, origin_mode=True,
                             lengths=n)


class Lstms(fluid.Program):
    @fluid.network("x", "n")
    def cell(self, x, n):
        x, n = _sequences()
        out, (h, c) = L.rnn(L.LSTMCell(H, dtype="float64", name="lstm", forget_bias=0.7), x,
                            sequence_length=n)
        return out, h, c

    @fluid.network("x", "n")
    def fused(self, x, n):
        x, n = _sequences()
        proj = L.fc(x, 4 * H, num_flatten_dims=2, param_attr="proj.w", bias_attr="proj.b")
        return L.dynamic_lstm(proj, 4 * H, param_attr="lstm.w", bias_attr=False,
                              use_peepholes=False, lengths=n)


def _last(out, lengths):
    """Each row's output at its last step (zeros for an empty row)."""
    return np.stack([out[b, n - 1] if n else np.zeros(out.shape[2])
                     for b, n in enumerate(lengths)])


def test_gru_cell_through_rnn_is_dynamic_gru(rng):
    prog = Grus().Compile(seed=0)
    p = {k: v + rng.uniform(-0.3, 0.3, v.shape) for k, v in prog.parameters().items()
         if k.startswith("gru_0")}   # biases too, so that every weight matters
    for k, v in p.items():
        prog.set_var(k, v)
    proj, bias, recurrent = dynamic_gru_weights(p["gru_0.w_0"], p["gru_0.w_1"],
                                                p["gru_0.b_0"], p["gru_0.b_1"])
    prog.set_var("proj.w", proj)
    prog.set_var("proj.b", bias)
    prog.set_var("gru.w", recurrent)
    x = rng.standard_normal((4, 5, IN))
    out, last = prog.cell(x, LENGTHS)
    want = prog.fused(x, LENGTHS)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(last, _last(want, LENGTHS), rtol=1e-12, atol=1e-12)


def test_lstm_cell_through_rnn_is_dynamic_lstm(rng):
    prog = Lstms().Compile(seed=0)
    w = prog.get_var("lstm_0.w_0")
    b = rng.uniform(-0.5, 0.5, 4 * H)
    prog.set_var("lstm_0.b_0", b)
    proj, bias, recurrent = dynamic_lstm_weights(w, b, 0.7)
    prog.set_var("proj.w", proj)
    prog.set_var("proj.b", bias)
    prog.set_var("lstm.w", recurrent)
    x = rng.standard_normal((4, 5, IN))
    out, h, c = prog.cell(x, LENGTHS)
    hidden, cell = prog.fused(x, LENGTHS)
    np.testing.assert_allclose(out, hidden, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h, _last(hidden, LENGTHS), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(c, _last(cell, LENGTHS), rtol=1e-12, atol=1e-12)


# --- against PyTorch, forward and gradients ----------------------------------------------

def _torch_run(module, x, h0, lengths, cot_out, cot_last):
    """module over the rows with their lengths; returns outputs, final states and the
    gradients of sum(out * cot_out) + sum(final * cot_last) for x, h0 and the weights."""
    torch = pytest.importorskip("torch")
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    xt = torch.tensor(x, requires_grad=True)
    states = tuple(torch.tensor(s[None], requires_grad=True) for s in h0)
    packed = pack_padded_sequence(xt, torch.tensor(lengths), batch_first=True,
                                  enforce_sorted=False)
    out, final = module(packed, states if len(states) > 1 else states[0])
    out = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0]
    final = final if isinstance(final, tuple) else (final,)
    loss = (out * torch.tensor(cot_out)).sum() + (final[0][0] * torch.tensor(cot_last)).sum()
    loss.backward()
    grads = {n: p.grad.numpy() for n, p in module.named_parameters()}
    return out.detach().numpy(), final[0][0].detach().numpy(), xt.grad.numpy(), \
        [s.grad[0].numpy() for s in states], grads


GRU_PARAMS = {"g.w_gate": [IN + H, 2 * H], "g.w_candidate": [IN + H, H], "g.b_gate": [2 * H],
              "g.b_candidate": [H]}
LSTM_PARAMS = {"l.w": [IN + H, 4 * H], "l.b": [4 * H]}


def _with_gradients(cell_run, params):
    """A method running ``cell_run(x, n, h0, c0)`` -> (outputs, last hidden), returning
    them and the gradients of sum(out * cot) + sum(last * cot_last) for x, h0, c0 and
    ``params`` (name -> shape)."""
    def grads(self, x, n, h0, c0, cot, cot_last):
        x, n = _sequences()
        h0, c0 = _data("h0", [-1, H], grad=True), _data("c0", [-1, H], grad=True)
        cot, cot_last = _data("cot", [-1, -1, H]), _data("cot_last", [-1, H])
        out, last = cell_run(x, n, h0, c0)
        loss = L.reduce_sum(out * cot) + L.reduce_sum(last * cot_last)
        weights = [L.create_parameter(shape, "float64", name=k) for k, shape in params.items()]
        grads = fluid.gradients(loss, [x, h0, c0] + weights)
        return [out, last] + grads
    return type("WithGradients", (fluid.Program,),
                {"grads": fluid.network("x", "n", "h0", "c0", "cot", "cot_last")(grads)})


def _gru_run(x, n, h0, c0):
    cell = L.GRUCell(H, param_attr=fluid.ParamAttr(name="g.w"),
                     bias_attr=fluid.ParamAttr(name="g.b"), dtype="float64",
                     linear_before_reset=True)
    return L.rnn(cell, x, h0, sequence_length=n)


def _lstm_run(x, n, h0, c0):
    cell = L.LSTMCell(H, param_attr="l.w", bias_attr="l.b", dtype="float64")
    out, (last, _) = L.rnn(cell, x, [h0, c0], sequence_length=n)
    return out, last


def _feeds(rng, lengths):
    b, t = len(lengths), int(lengths.max())
    return {"x": _padded(rng.standard_normal((b, t, IN)), lengths, 7.0), "n": lengths,
            "h0": rng.standard_normal((b, H)), "c0": rng.standard_normal((b, H)),
            "cot": rng.standard_normal((b, t, H)), "cot_last": rng.standard_normal((b, H))}


def _check_against_torch(ours, theirs, torch_to_ours):
    out, last, dx, dh0, dc0, *dparams = ours
    t_out, t_last, t_dx, t_dstates, t_grads = theirs
    np.testing.assert_allclose(out, t_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(last, t_last, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dx, t_dx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dh0, t_dstates[0], rtol=1e-10, atol=1e-12)
    if len(t_dstates) > 1:
        np.testing.assert_allclose(dc0, t_dstates[1], rtol=1e-10, atol=1e-12)
    for got, want in zip(dparams, torch_to_ours(t_grads)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_gru_cell_matches_torch_gru_forward_and_gradients(rng):
    """GRUCell(linear_before_reset=True) is nn.GRU with b_hn = 0 (one candidate bias)."""
    torch = pytest.importorskip("torch")
    lengths = np.array([5, 2, 1, 3], np.int64)   # packed sequences need a step each
    prog = _with_gradients(_gru_run, GRU_PARAMS)().Compile(seed=0)
    p = {k: prog.get_var(k) + rng.uniform(-0.3, 0.3, s) for k, s in GRU_PARAMS.items()}
    for k, v in p.items():
        prog.set_var(k, v)
    gw, cw, gb, cb = p["g.w_gate"], p["g.w_candidate"], p["g.b_gate"], p["g.b_candidate"]
    gru = torch.nn.GRU(IN, H, batch_first=True, dtype=torch.float64)
    with torch.no_grad():   # torch's rows r, z, n; ours r, u (= z) | c~
        gru.weight_ih_l0.copy_(torch.tensor(np.concatenate([gw[:IN].T, cw[:IN].T])))
        gru.weight_hh_l0.copy_(torch.tensor(np.concatenate([gw[IN:].T, cw[IN:].T])))
        gru.bias_ih_l0.copy_(torch.tensor(np.concatenate([gb, cb])))
        gru.bias_hh_l0.zero_()
    feeds = _feeds(rng, lengths)
    ours = prog.grads(**feeds)
    theirs = _torch_run(gru, feeds["x"], [feeds["h0"]], lengths, feeds["cot"],
                        feeds["cot_last"])

    def ours_from(g):    # torch's gradients in GRU_PARAMS' order
        wi, wh, bi = g["weight_ih_l0"], g["weight_hh_l0"], g["bias_ih_l0"]
        w_gate = np.concatenate([wi[:2 * H].T, wh[:2 * H].T])
        w_cand = np.concatenate([wi[2 * H:].T, wh[2 * H:].T])
        return [w_gate, w_cand, bi[:2 * H], bi[2 * H:]]
    _check_against_torch(ours, theirs, ours_from)


def test_lstm_cell_matches_torch_lstm_forward_and_gradients(rng):
    """LSTMCell (gates i, j, f, o; forget_bias 1) is nn.LSTM (i, f, g, o) with the forget
    bias folded into torch's."""
    torch = pytest.importorskip("torch")
    lengths = np.array([5, 2, 1, 3], np.int64)
    prog = _with_gradients(_lstm_run, LSTM_PARAMS)().Compile(seed=0)
    b = rng.uniform(-0.5, 0.5, 4 * H)
    prog.set_var("l.b", b)
    w = prog.get_var("l.w")
    i, j, f, o = (slice(k * H, (k + 1) * H) for k in range(4))
    lstm = torch.nn.LSTM(IN, H, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(torch.tensor(np.concatenate([w[:IN, s].T for s in (i, f, j, o)])))
        lstm.weight_hh_l0.copy_(torch.tensor(np.concatenate([w[IN:, s].T for s in (i, f, j, o)])))
        lstm.bias_ih_l0.copy_(torch.tensor(np.concatenate([b[i], b[f] + 1.0, b[j], b[o]])))
        lstm.bias_hh_l0.zero_()
    feeds = _feeds(rng, lengths)
    ours = prog.grads(**feeds)
    theirs = _torch_run(lstm, feeds["x"], [feeds["h0"], feeds["c0"]], lengths, feeds["cot"],
                        feeds["cot_last"])

    def ours_from(g):    # torch's (i, f, g, o) rows back to our (i, j, f, o) columns
        def cols(m):
            gi, gf, gg, go = np.split(m, 4)
            return np.concatenate([gi, gg, gf, go]).T
        return [np.concatenate([cols(g["weight_ih_l0"]), cols(g["weight_hh_l0"])]),
                cols(g["bias_ih_l0"][:, None])[0]]
    _check_against_torch(ours, theirs, ours_from)


# --- rnn's own rules ---------------------------------------------------------------------

class Nested(L.RNNCell):
    """A cell written by hand with a dict of states of two ranks and a keyword input."""

    def call(self, inputs, states, scale):
        h = L.tanh(L.fc([inputs, states["h"]], H, param_attr=["nw.x", "nw.h"],
                        bias_attr="nw.b") * scale)
        acc = states["acc"] * 0.5 + L.reshape(h, [-1, 2, 2])
        return [h, L.reduce_sum(acc, dim=1)], {"h": h, "acc": acc}

    @property
    def state_shape(self):
        return {"h": [H], "acc": [2, 2]}


def _nested(time_major=False, reverse=False):
    x, n = _sequences()
    scale = _data("scale", [1], grad=True)
    seq = L.transpose(x, [1, 0, 2]) if time_major else x
    (out, acc), final = L.rnn(Nested(), seq, sequence_length=n, time_major=time_major,
                              is_reverse=reverse, scale=scale)
    if time_major:
        out, acc = L.transpose(out, [1, 0, 2]), L.transpose(acc, [1, 0, 2])
    return [out, acc, final["h"], final["acc"]]


def _nested_feeds(rng):
    return {"x": _padded(rng.standard_normal((4, 5, IN)), LENGTHS, 0.0), "n": LENGTHS,
            "scale": np.array([0.9])}


def test_rnn_gradients_agree_with_finite_differences(rng):
    """Nested states of two ranks, a keyword input read at every step, lengths with an
    empty row: plan, interpreter, device stand-in and finite differences agree."""
    out, acc, h, a = check_block(_nested, _nested_feeds(rng), wrt=["x", "scale"],
                                 max_elements=30)
    padded = np.arange(5)[None, :] >= LENGTHS[:, None]
    assert not out[padded].any() and not acc[padded].any()   # zeros past each length
    np.testing.assert_array_equal(h[2], 0.0)                  # an empty row keeps its start
    np.testing.assert_allclose(h, _last(out, LENGTHS))


def test_padding_never_matters_and_the_layouts_agree(rng):
    feeds = _nested_feeds(rng)
    prog = type("P", (fluid.Program,), {
        "batch": fluid.network("x", "n", "scale")(lambda self, x, n, scale: _nested()),
        "time": fluid.network("x", "n", "scale")(lambda self, x, n, scale: _nested(True)),
    })().Compile(seed=0)
    want = prog.batch(**feeds)
    for junk in (1e30, np.nan):
        got = prog.batch(**{**feeds, "x": _padded(feeds["x"], LENGTHS, junk)})
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    for g, w in zip(prog.time(**feeds), want):
        np.testing.assert_allclose(g, w, rtol=1e-14, atol=1e-14)


def test_reverse_runs_each_row_from_its_last_step(rng):
    """is_reverse equals reversing each row within its length, running forwards and
    reversing the outputs back."""
    def both(self, x, n, scale):
        reverse = _nested(reverse=True)
        x, n = _sequences()
        scale = _data("scale", [1])
        flipped = L.sequence_reverse(x, lengths=n)
        (out, acc), final = L.rnn(Nested(), flipped, sequence_length=n, scale=scale)
        return reverse + [L.sequence_reverse(out, lengths=n),
                          L.sequence_reverse(acc, lengths=n), final["h"], final["acc"]]
    prog = type("P", (fluid.Program,), {
        "both": fluid.network("x", "n", "scale")(both)})().Compile(seed=0)
    got = prog.both(**_nested_feeds(rng))
    for g, w in zip(got[:4], got[4:]):
        np.testing.assert_allclose(g, w, rtol=1e-14, atol=1e-14)


def test_birnn_joins_a_forward_and_a_backward_run(rng):
    class Bi(fluid.Program):
        @fluid.network("x", "n")
        def f(self, x, n):
            x, n = _sequences()
            fw, bw = L.GRUCell(H, dtype="float64"), L.GRUCell(H, dtype="float64")
            out, (h_fw, h_bw) = L.birnn(fw, bw, x, sequence_length=n)
            out_fw, last_fw = L.rnn(fw, x, sequence_length=n)
            out_bw, last_bw = L.rnn(bw, x, sequence_length=n, is_reverse=True)
            return out, h_fw, h_bw, out_fw, last_fw, out_bw, last_bw
    out, h_fw, h_bw, out_fw, last_fw, out_bw, last_bw = Bi().Compile(seed=0).f(
        rng.standard_normal((4, 5, IN)), LENGTHS)
    assert out.shape == (4, 5, 2 * H)
    np.testing.assert_array_equal(out, np.concatenate([out_fw, out_bw], axis=-1))
    np.testing.assert_array_equal(h_fw, last_fw)
    np.testing.assert_array_equal(h_bw, last_bw)
    assert not np.array_equal(out_fw, out_bw)


def test_a_cell_shares_its_parameters_as_a_layer_does(rng):
    """One cell object in two methods, and a new cell in each method under one
    var_scope, each use one set of parameters."""
    shared = L.GRUCell(H, dtype="float64")

    class Sharing(fluid.Program):
        @fluid.network("x", "n")
        def one(self, x, n):
            x, n = _sequences()
            with fluid.var_scope("enc"):
                made_here = L.rnn(L.LSTMCell(H, dtype="float64"), x, sequence_length=n)[0]
            return L.rnn(shared, x, sequence_length=n)[0], made_here

        @fluid.network("x", "n")
        def two(self, x, n):
            x, n = _sequences()
            with fluid.var_scope("enc"):
                made_here = L.rnn(L.LSTMCell(H, dtype="float64"), x, sequence_length=n)[0]
            return L.rnn(shared, x, sequence_length=n)[0], made_here

    prog = Sharing().Compile(seed=0)
    assert sorted(prog.parameters()) == ["GRUCell_0.b_0", "GRUCell_0.b_1", "GRUCell_0.w_0",
                                         "GRUCell_0.w_1", "enc/LSTMCell_0.b_0",
                                         "enc/LSTMCell_0.w_0"]
    x = rng.standard_normal((4, 5, IN))
    for a, b in zip(prog.one(x, LENGTHS), prog.two(x, LENGTHS)):
        np.testing.assert_array_equal(a, b)


# --- errors --------------------------------------------------------------------------------

class Wrong(L.RNNCell):
    def __init__(self, mistake):
        self.mistake = mistake

    def call(self, inputs, states):
        h = L.fc([inputs, states[0]], H, act="tanh")
        if self.mistake == "structure":
            return h, h                        # one var for a list of one
        return h, [L.fc(h, H + 1)]             # another shape


def _traced(build):
    def f(self, x, n):
        x, n = _sequences()
        return build(x, n)
    return type("P", (fluid.Program,), {"f": fluid.network("x", "n")(f)})()


@pytest.mark.parametrize("mistake,match", [
    ("structure", r"cell.call returns new states of another structure than the states it "
                  r"was given \(1 var\(s\) for 1; given \[f64\[\?,4\]\], returned f64\[\?,4\]\)"),
    ("shape", r"cell.call turns the state .*f64\[\?,4\] into .*f64\[\?,5\]; a state keeps "
              r"its shape and dtype"),
])
def test_a_cell_returning_other_states_is_an_error_at_the_users_line(mistake, match):
    prog = _traced(lambda x, n: L.rnn(Wrong(mistake), x, [L.fill_constant_batch_size_like(
        x, [-1, H], "float64", 0.0)], sequence_length=n)[0])
    with pytest.raises((fluid.OpArgumentError, fluid.ShapeError),
                       match=rf"(?s){match}.*test_rnn_cells.py:\d+"):
        prog.Compile()


@pytest.mark.parametrize("build,error,match", [
    (lambda x, n: L.rnn(L.GRUCell(H, dtype="float64"), np.zeros((2, 5, IN))),
     TypeError, r"rnn: inputs must be a Variable"),
    (lambda x, n: L.rnn(L.GRUCell(H), L.cast(x, "int32")), TypeError,
     r"rnn: inputs .*i32\[\?,\?,3\] must be float32 or float64"),
    (lambda x, n: L.rnn(L.GRUCell(H, dtype="float64"), x, sequence_length=np.array([1])),
     TypeError, r"rnn: sequence_length must be a fluid Variable"),
    (lambda x, n: L.rnn(L.GRUCell(H, dtype="float64"), x,
                        initial_states=np.zeros((2, H))), TypeError,
     r"rnn: initial_states must be a Variable"),
    (lambda x, n: L.rnn(L.GRUCell(H, dtype="float64"), L.reduce_sum(x, dim=[1, 2])),
     fluid.ShapeError, r"rnn: input .* must be a padded batch \[batch, T, \.\.\.\]"),
    (lambda x, n: L.GRUCell(H, dtype="float64")(np.zeros((2, IN)), x[:, 0]), TypeError,
     r"GRUCell: inputs must be a fluid Variable"),
    (lambda x, n: L.LSTMCell(H, dtype="float64")(x[:, 0], x[:, 0]), TypeError,
     r"LSTMCell: states must be a list \[hidden, cell\]"),
    (lambda x, n: L.GRUCell(H, dtype="int32"), TypeError, r"GRUCell: dtype must be float32"),
    (lambda x, n: L.LSTMCell(2.5), TypeError, r"LSTMCell: hidden_size must be a positive int"),
    (lambda x, n: L.rnn(object(), x), TypeError, r"rnn: cell must be an RNNCell"),
])
def test_argument_errors_name_the_users_line(build, error, match):
    with pytest.raises(error, match=rf"(?s){match}.*test_rnn_cells.py:\d+"):
        _traced(build).Compile()


class Plain(L.RNNCell):
    def call(self, inputs, states):
        return inputs, states


class TwoOutputs(L.RNNCell):
    def __init__(self):
        self.gru = L.GRUCell(H, dtype="float64")

    def call(self, inputs, states):
        h, new = self.gru(inputs, states)
        return (h, h), new

    @property
    def state_shape(self):
        return [H]


@pytest.mark.parametrize("build,error,match", [
    (lambda x, n: L.GRUCell(H, name=""), TypeError, r"GRUCell: name must be a non-empty "
                                                    r"string"),
    (lambda x, n: L.GRUCell(H, dtype="float64", param_attr=False)(x[:, 0], x[:, 0, :1]),
     TypeError, r"GRUCell: states .* must be \[batch, 4\] \(hidden_size=4\)"),
    (lambda x, n: L.GRUCell(H, dtype="float64", param_attr=False)(
        x[:, 0], L.fill_constant_batch_size_like(x, [-1, H], "float64", 0.0)), TypeError,
     r"GRUCell needs its weights; param_attr=False is not allowed"),
    (lambda x, n: L.GRUCell(H, dtype="float64")(x[:, 0], x[:, 0], scale=2), TypeError,
     r"GRUCell.call takes inputs and states only, got scale besides"),
    (lambda x, n: L.GRUCell(H, gate_activation="relu"), TypeError,
     r"GRUCell: gate_activation must be a function of a Variable"),
    (lambda x, n: L.LSTMCell(H, forget_bias="1"), TypeError,
     r"LSTMCell: forget_bias must be a number"),
    (lambda x, n: L.rnn(L.GRUCell(H, dtype="float64"), x, sequence_length=L.cast(n, "float32")),
     TypeError, r"rnn: sequence_length .* must be an int64 vector \[batch\] of lengths"),
    (lambda x, n: L.rnn(L.GRUCell(H, dtype="float64"), [
        L.fill_constant([2, 3, IN], "float64", 0.0), L.fill_constant([2, 4, IN], "float64",
                                                                      0.0)]),
     fluid.ShapeError, r"rnn: inputs .*\[2,3,3\] and .*\[2,4,3\] must share their batch "
                       r"and time dims"),
    (lambda x, n: L.rnn(Plain(), x), NotImplementedError,
     r"Plain defines no state_shape; give get_initial_states a shape, or rnn "
     r"initial_states"),
    (lambda x, n: Plain().get_initial_states(x, shape=[[H], "big"]), TypeError,
     r"RNNCell.get_initial_states: a shape is a list of ints"),
    (lambda x, n: Plain().get_initial_states(x, shape=[H], dtype="int32"), TypeError,
     r"RNNCell.get_initial_states: dtype must be float32 or float64, got int32"),
    (lambda x, n: Plain().get_initial_states(L.cast(x, "bool"), shape=[H]), TypeError,
     r"RNNCell.get_initial_states: batch_ref .* must be float or int"),
    (lambda x, n: L.birnn(L.GRUCell(H), L.GRUCell(H), x, initial_states=x), TypeError,
     r"birnn: initial_states must be a pair \(states_fw, states_bw\), or None"),
    (lambda x, n: L.birnn(TwoOutputs(), L.GRUCell(H, dtype="float64"), x), TypeError,
     r"birnn: cell_fw and cell_bw must give outputs of one structure"),
])
def test_more_argument_errors_name_the_users_line(build, error, match):
    with pytest.raises(error, match=rf"(?s){match}"):
        _traced(build).Compile()
