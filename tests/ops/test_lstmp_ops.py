"""``lstmp`` (an LSTM with a recurrent projection, `fluid.layers.dynamic_lstmp`) against a
NumPy reference written row by row and step by step, its gradients against float64
finite differences, and against PyTorch's ``nn.LSTM(proj_size=P)`` in float64; padding
never matters."""
import numpy as np
import pytest
import torch
from ops.harness import analytic_grads, build_op, check_grad, check_op, run_forward
from ops.test_rnn_ops import ACT, row_order

from fluid_interactive.errors import ShapeError
from fluid_interactive.ops.interpret import run_ops


def ref_lstmp(Input, Weight, ProjWeight, Bias=None, H0=None, C0=None, Lengths=None,
              use_peepholes=True, is_reverse=False, gate_activation="sigmoid",
              cell_activation="tanh", candidate_activation="tanh", proj_activation="tanh",
              cell_clip=0.0, proj_clip=0.0, **_):
    b, t, g = Input.shape
    h, p = g // 4, ProjWeight.shape[1]
    gate, cell, cand, proj = (ACT[a] for a in (gate_activation, cell_activation,
                                               candidate_activation, proj_activation))
    bias = np.zeros(7 * h) if Bias is None else Bias[0]
    projs, cells = np.zeros((b, t, p)), np.zeros((b, t, h))
    for row in range(b):
        n = t if Lengths is None else int(Lengths[row])
        r = np.zeros(p) if H0 is None else H0[row]
        c = np.zeros(h) if C0 is None else C0[row]
        for pos in row_order(n, t, is_reverse):
            zc, zi, zf, zo = np.split(Input[row, pos] + r @ Weight + bias[:4 * h], 4)
            if use_peepholes:
                zi, zf = zi + bias[4 * h:5 * h] * c, zf + bias[5 * h:6 * h] * c
            c = gate(zf) * c + gate(zi) * cand(zc)
            if cell_clip > 0:
                c = np.clip(c, -cell_clip, cell_clip)
            if use_peepholes:
                zo = zo + bias[6 * h:] * c
            r = proj((gate(zo) * cell(c)) @ ProjWeight)
            if proj_clip > 0:
                r = np.clip(r, -proj_clip, proj_clip)
            projs[row, pos], cells[row, pos] = r, c
    return {"Projection": projs, "Cell": cells}


def lstmp_inputs(rng, b=3, t=4, h=3, p=2, peep=True, lengths=(4, 1, 0)):
    out = {"Input": rng.standard_normal((b, t, 4 * h)),
           "Weight": 0.5 * rng.standard_normal((p, 4 * h)),
           "ProjWeight": 0.5 * rng.standard_normal((h, p)),
           "Bias": 0.5 * rng.standard_normal((1, (7 if peep else 4) * h)),
           "H0": rng.standard_normal((b, p)), "C0": rng.standard_normal((b, h))}
    if lengths is not None:
        out["Lengths"] = np.asarray(lengths, np.int64)
        pad = np.arange(t)[None, :] >= out["Lengths"][:, None]
        out["Input"][pad] = 7.5
    return out


CASES = [{}, {"is_reverse": True}, {"use_peepholes": False},
         {"cell_clip": 0.8, "proj_clip": 0.6}, {"proj_activation": "identity",
                                                  "gate_activation": "tanh"},
         {"cell_activation": "relu", "candidate_activation": "identity", "is_reverse": True}]


@pytest.mark.parametrize("attrs", CASES)
@pytest.mark.parametrize("lengths", [(4, 1, 0), None])
def test_lstmp_against_the_reference_and_finite_differences(rng, attrs, lengths):
    inputs = lstmp_inputs(rng, peep=attrs.get("use_peepholes", True), lengths=lengths)
    check_op("lstmp", inputs, attrs, reference=ref_lstmp, rtol=1e-10, atol=1e-12)
    check_grad("lstmp", inputs, attrs, through=["Projection", "Cell"],
               wrt=["Input", "Weight", "ProjWeight", "Bias", "H0", "C0"])


@pytest.mark.parametrize("reverse", [False, True])
def test_lstmp_is_torch_lstm_with_proj_size(rng, reverse):
    """nn.LSTM(proj_size=P): gates i, f, g, o (ours c~, i, f, o), no peepholes, an identity
    projection; forward and every gradient in float64."""
    b, t, d, h, p = 3, 5, 4, 6, 2
    lstm = torch.nn.LSTM(d, h, proj_size=p, batch_first=True).double()
    x = rng.standard_normal((b, t, d))
    w_ih, w_hh = lstm.weight_ih_l0.detach().numpy(), lstm.weight_hh_l0.detach().numpy()
    bias = (lstm.bias_ih_l0 + lstm.bias_hh_l0).detach().numpy()
    perm = np.concatenate([np.arange(2 * h, 3 * h), np.arange(0, 2 * h), np.arange(3 * h, 4 * h)])
    inputs = {"Input": x @ w_ih[perm].T, "Weight": w_hh[perm].T.copy(),
              "ProjWeight": lstm.weight_hr_l0.detach().numpy().T.copy(),
              "Bias": bias[perm].reshape(1, -1)}
    attrs = {"use_peepholes": False, "proj_activation": "identity", "is_reverse": reverse}
    got = run_forward("lstmp", inputs, attrs)
    xt = torch.from_numpy(x[:, ::-1].copy() if reverse else x).requires_grad_()
    out, (hn, cn) = lstm(xt)
    want = out.detach().numpy()
    np.testing.assert_allclose(got["Projection"][0], want[:, ::-1] if reverse else want,
                               rtol=1e-10, atol=1e-12)
    cot = rng.standard_normal(want.shape)
    (out * torch.from_numpy(cot[:, ::-1].copy() if reverse else cot)).sum().backward()
    op, env = build_op("lstmp", inputs, attrs)
    run_ops([op], env)
    cots = {n: np.zeros(np.shape(env[n])) for n in op.output_names()}
    cots[op.outputs["Projection"][0]] = cot
    grads = analytic_grads(op, env, cots, ["Input", "ProjWeight"])
    dx = grads["Input"][0] @ w_ih[perm]
    np.testing.assert_allclose(dx[:, ::-1] if reverse else dx, xt.grad.numpy(), rtol=1e-9)
    np.testing.assert_allclose(grads["ProjWeight"][0].T, lstm.weight_hr_l0.grad.numpy(),
                               rtol=1e-9)
    check_grad("lstmp", inputs, attrs, through=["Projection"],
               wrt=["Input", "Weight", "ProjWeight", "Bias"])


def test_lstmp_shape_errors(rng):
    inputs = lstmp_inputs(rng, lengths=None)
    with pytest.raises(ShapeError, match=r"ProjWeight must have shape \[3, 2\]"):
        run_forward("lstmp", dict(inputs, ProjWeight=np.zeros((3, 3))))
    with pytest.raises(ShapeError, match="use_peepholes=True needs Bias"):
        run_forward("lstmp", {k: v for k, v in inputs.items() if k != "Bias"})


# --- the layers: dynamic_lstmp and the cuDNN-style lstm, in compiled programs ------------------

def _torch_to_ours(w_ih, w_hh, b_ih, b_hh, h):
    perm = np.concatenate([np.arange(2 * h, 3 * h), np.arange(0, 2 * h),
                           np.arange(3 * h, 4 * h)])
    return w_ih[perm].T.copy(), w_hh[perm].T.copy(), (b_ih + b_hh)[perm].copy()


@pytest.mark.parametrize("bidirec", [False, True])
def test_lstm_layer_is_torch_lstm(rng, bidirec):
    """fluid.layers.lstm with two layers against nn.LSTM(num_layers=2) in float64: the
    outputs, the last states and the gradient of the input."""
    import fluid
    t, b, d, h, layers_n = 4, 3, 5, 6, 2
    dirs = 2 if bidirec else 1

    class Net(fluid.Program):
        @fluid.network("x", "h0", "c0")
        def f(self, x, h0, c0):
            x = fluid.data("x", [t, None, d], "float64")
            x.stop_gradient = False
            h0 = fluid.data("h0", [layers_n * dirs, None, h], "float64")
            c0 = fluid.data("c0", [layers_n * dirs, None, h], "float64")
            out, last_h, last_c = fluid.layers.lstm(x, h0, c0, t, h, layers_n,
                                                    is_bidirec=bidirec, name="rnn")
            loss = fluid.layers.reduce_sum(out * out)
            return out, last_h, last_c, fluid.gradients(loss, [x])[0]
    prog = Net().Compile(seed=0)
    torch_lstm = torch.nn.LSTM(d, h, num_layers=layers_n, bidirectional=bidirec).double()
    for k in range(layers_n):
        for sfx in ["", "_reverse"][:dirs]:
            ps = [getattr(torch_lstm, f"{w}_l{k}{sfx}").detach().numpy()
                  for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            w_ih, w_hh, bias = _torch_to_ours(*ps, h)
            tag = f"l{k}{sfx}"
            prog.set_var(f"rnn.w_ih_{tag}", w_ih)
            prog.set_var(f"rnn.w_hh_{tag}", w_hh)
            prog.set_var(f"rnn.b_{tag}", bias)
    x = rng.standard_normal((t, b, d))
    h0, c0 = rng.standard_normal((2, layers_n * dirs, b, h))
    out, last_h, last_c, dx = prog.f(x, h0, c0)
    xt = torch.from_numpy(x).requires_grad_()
    want, (hn, cn) = torch_lstm(xt, (torch.from_numpy(h0), torch.from_numpy(c0)))
    (want * want).sum().backward()
    np.testing.assert_allclose(out, want.detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(last_h, hn.detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(last_c, cn.detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_dynamic_lstmp_layer_trains_and_ignores_padding(rng):
    import fluid

    class Net(fluid.Program):
        @fluid.network("x", "lengths")
        def step(self, x, lengths):
            x = fluid.data("x", [None, None, 3], "float32")
            n = fluid.data("lengths", [None], "int64")
            proj = fluid.layers.fc(x, 4 * 8, num_flatten_dims=2)
            r, c = fluid.layers.dynamic_lstmp(proj, 4 * 8, 2, cell_clip=3.0, lengths=n)
            last = fluid.layers.sequence_last_step(r, lengths=n)
            loss = fluid.layers.mean(fluid.layers.square(last - 0.5))
            fluid.optimizer.Adam(0.05).minimize(loss)
            return loss, r
    x, n = rng.standard_normal((4, 6, 3)).astype(np.float32), np.array([6, 3, 1, 4])
    dirty = x.copy()
    dirty[np.arange(6)[None, :] >= n[:, None]] = 1e30
    a, b = Net().Compile(seed=0), Net().Compile(seed=0)
    la, ra = a.step(x, n)
    lb, rb = b.step(dirty, n)
    assert la == lb and np.array_equal(ra, rb) and ra.shape == (4, 6, 2)
    losses = [a.step(x, n)[0] for _ in range(30)]
    assert losses[-1] < 0.2 * la


def test_lstm_layer_errors():
    import fluid

    class Bad(fluid.Program):
        @fluid.network("x")
        def f(self, x):
            x = fluid.data("x", [4, None, 3], "float32")
            h0 = fluid.data("h0", [3, None, 5], "float32")
            return fluid.layers.lstm(x, h0, h0, 4, 5, 1)[0]
    with pytest.raises(ShapeError, match=r"init_h .* must be \[num_layers \* directions, B, "
                                         r"hidden_size\] = \[1, B, 5\]"):
        Bad().Compile()
