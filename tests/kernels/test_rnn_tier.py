"""The recurrent ops' compiled passes (kernels/rnn_passes.py): the LSTM's load, its forward
steps' gates around tanh, its backward's factors and each backward step, and the GRU's
forward steps (the reset before or after the hidden product) and backward factors give
the bits of ops/lstm.py's and ops/gru.py's NumPy kernels, for every
activation, direction, mode, dtype, lengths (zero included), peepholes or not, gradients
from Hidden, Cell or both, with NaN and infinite inputs; and an LSTM or a GRU trained
with the tier gives the bits of one trained without it. Unlike the whole-sequence
kernels (test_cells.py) these run by default."""
import numpy as np
import pytest
from kernels.test_cells import GRU_CASES  # every activation, direction and mode
from kernels.test_tier import kernel_cache  # noqa: F401  (a kernel cache of the module's own)
from kernels.tier_runs import forward_and_grads, gru_inputs, lstm_inputs, switched_on
from ops.test_rnn_ops import LSTM_CASES  # every activation, direction and peepholes

import fluid
from fluid_interactive.ops import gru, gru_exact, lstm, lstm_exact

numba = pytest.importorskip("numba")

PASSES = ["lstm_factors", "lstm_grad_step", "lstm_load"]


def passes(attrs):
    """The passes an op with these attrs runs: the steps' too where every gate is a
    sigmoid or a tanh (with peepholes, tanh over columns 0:3H and then the output gate)."""
    acts = (attrs.get("gate_activation", "sigmoid"),
            attrs.get("candidate_activation", "tanh"))
    if not set(acts) <= {"sigmoid", "tanh"}:
        return PASSES
    steps = ["lstm_peep_cell", "lstm_peep_gates_in", "lstm_peep_out"] \
        if attrs.get("use_peepholes", True) else ["gates_in", "lstm_cell"]
    return sorted(PASSES + steps)


def gru_passes(attrs):
    """The passes a GRU op with these attrs runs: the forward steps' where every
    activation is a sigmoid or a tanh (others with the reset after the product)."""
    acts = {attrs.get("gate_activation", "sigmoid"), attrs.get("activation", "tanh")}
    if not acts <= {"sigmoid", "tanh"}:
        return ["gru_factors"]
    steps = ["gru_lbr_candidate", "gru_lbr_gates_in", "gru_update"] \
        if attrs.get("linear_before_reset") else ["gates_in", "gru_reset", "gru_update"]
    return sorted(["gru_factors"] + steps)


@pytest.fixture(autouse=True)
def tier_on(monkeypatch):
    """The tier as it runs by default: exact kernels only."""
    monkeypatch.setenv("FLUID_KERNELS", "auto")


def bits(a):
    """The values' bits, every NaN as one (which NaN an operation on two keeps is the
    machine instruction's choice, which neither side fixes)."""
    a = np.where(np.isnan(a), np.nan, a).astype(a.dtype)
    return a.view(np.int32 if a.dtype == np.float32 else np.int64)


def same_bits(inputs, attrs, through, monkeypatch, op_type="lstm"):
    """The op and its gradient op without the tier (the kernels' NumPy code as a device
    runs it), with the passes' NumPy stand-ins (the plan before its compiled kernels are
    ready), and with the compiled passes: every output and gradient the same bits;
    returns the passes that ran."""
    with monkeypatch.context() as m:
        for module in (lstm, lstm_exact, gru, gru_exact):   # gru_unit's too
            m.setattr(module, "compiled_kernel", lambda *a, **k: None)
        ref_outs, ref_grads = forward_and_grads(op_type, inputs, attrs, through)
    runs = [forward_and_grads(op_type, inputs, attrs, through)]
    ran: list = []
    with monkeypatch.context() as m:
        switched_on(m, ran)
        runs.append(forward_and_grads(op_type, inputs, attrs, through))
    for outs, grads in runs:
        for name, got, want in [*((k, outs[k], ref_outs[k]) for k in ref_outs),
                                *((k + "@GRAD", grads[k], ref_grads[k]) for k in ref_grads)]:
            assert got.dtype == want.dtype, name
            assert np.array_equal(bits(got), bits(want)), name
    return sorted(set(ran))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("attrs", LSTM_CASES)
@pytest.mark.parametrize("lengths", [None, (5, 2, 0, 3)], ids=["full", "lengths"])
def test_the_passes_give_numpys_bits(dtype, attrs, lengths, monkeypatch):
    rng = np.random.default_rng(1)
    inputs = lstm_inputs(rng, dtype, peep=attrs["use_peepholes"], lengths=lengths)
    ran = same_bits(inputs, attrs, ("Hidden", "Cell"), monkeypatch)
    assert ran == passes(attrs)


@pytest.mark.parametrize("through", [("Hidden",), ("Cell",)])
@pytest.mark.parametrize("reverse", [False, True])
def test_a_gradient_from_hidden_alone_or_cell_alone(through, reverse, monkeypatch):
    rng = np.random.default_rng(2)
    inputs = lstm_inputs(rng, "float32", peep=False, lengths=(5, 0, 1, 4))
    attrs = {"is_reverse": reverse, "use_peepholes": False}
    assert same_bits(inputs, attrs, through, monkeypatch) == passes(attrs)


def test_without_initial_state_or_bias(monkeypatch):
    rng = np.random.default_rng(3)
    inputs = lstm_inputs(rng, "float32", peep=False, lengths=None)
    for slot in ("H0", "C0", "Bias"):
        del inputs[slot]
    attrs = {"use_peepholes": False}
    assert same_bits(inputs, attrs, ("Hidden", "Cell"), monkeypatch) == passes(attrs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("peep", [True, False])
def test_nan_infinite_and_saturated_values(dtype, peep, monkeypatch):
    rng = np.random.default_rng(4)
    inputs = lstm_inputs(rng, dtype, b=5, t=6, h=8, peep=peep, lengths=(6, 6, 3, 0, 5))
    x = inputs["Input"]
    x[0, 1, 3] = np.nan
    x[1, 2, 9] = np.inf
    x[2, 0, 17] = -np.inf
    x[..., 0:32:3] += 30.0          # saturated gates and candidates
    x[..., 1:32:5] -= 50.0
    x[3, :, :5] = -0.0
    inputs["C0"][4, 2] = np.nan
    attrs = {"use_peepholes": peep}
    assert same_bits(inputs, attrs, ("Hidden", "Cell"), monkeypatch) == passes(attrs)


def test_the_compiled_step_takes_any_row_count_and_width(monkeypatch):
    """Shapes unlike the compiling call's examples: one row, one step, a wide H."""
    rng = np.random.default_rng(5)
    for b, t, h in ((1, 1, 3), (3, 9, 40), (2, 2, 1)):
        for peep in (True, False):
            inputs = lstm_inputs(rng, "float32", b=b, t=t, h=h, peep=peep, lengths=None)
            attrs = {"use_peepholes": peep}
            assert same_bits(inputs, attrs, ("Hidden",), monkeypatch) == passes(attrs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("attrs", GRU_CASES)
@pytest.mark.parametrize("lengths", [None, (5, 2, 0, 3)], ids=["full", "lengths"])
def test_the_gru_passes_give_numpys_bits(dtype, attrs, lengths, monkeypatch):
    inputs = gru_inputs(np.random.default_rng(6), dtype, lengths=lengths)
    assert same_bits(inputs, attrs, ("Hidden",), monkeypatch, "gru") == gru_passes(attrs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("attrs", [
    {"gate_activation": "tanh", "activation": "sigmoid", "linear_before_reset": True},
    {"activation": "sigmoid", "linear_before_reset": True, "is_reverse": True}])
def test_the_passes_after_the_reset_product_with_a_sigmoid_candidate(dtype, attrs,
                                                                      monkeypatch):
    """With linear_before_reset a sigmoid candidate's pre-scale multiplies r * (h @ W_c +
    b_c), which the candidate pass does (a tanh candidate's is 1: no product)."""
    inputs = gru_inputs(np.random.default_rng(9), dtype, lengths=(5, 1, 4, 0))
    inputs["Input"][..., 16::2] += 40.0   # half the candidates past the sigmoid's clip
    assert same_bits(inputs, attrs, ("Hidden",), monkeypatch, "gru") == gru_passes(attrs)


@pytest.mark.parametrize("attrs", [{}, {"linear_before_reset": True, "origin_mode": True},
                                   {"activation": "sigmoid", "origin_mode": True}])
def test_the_gru_passes_with_nan_and_saturated_values_no_bias_or_state(attrs, monkeypatch):
    inputs = gru_inputs(np.random.default_rng(7), "float32", b=5, t=6, h=8, bias=False,
                        lengths=(6, 6, 3, 0, 5))
    del inputs["H0"]
    x = inputs["Input"]
    x[0, 1, 3], x[1, 2, 9], x[2, 0, 17] = np.nan, np.inf, -np.inf
    x[..., 0:24:3] += 30.0
    x[..., 1:24:5] -= 50.0
    assert same_bits(inputs, attrs, ("Hidden",), monkeypatch, "gru") == gru_passes(attrs)


@pytest.mark.parametrize("attrs", [{}, {"gate_activation": "tanh", "activation": "sigmoid",
                                        "origin_mode": True}])
def test_gru_unit_steps_unclipped_with_the_passes(attrs, monkeypatch):
    """gru_unit runs the gru kernels on one step without the sigmoid's clip."""
    rng = np.random.default_rng(8)
    inputs = {"Input": 8 * rng.standard_normal((5, 18)), "HiddenPrev": rng.standard_normal((5, 6)),
              "Weight": rng.standard_normal((6, 18)), "Bias": rng.standard_normal((1, 18))}
    inputs = {k: v.astype(np.float32) for k, v in inputs.items()}
    ran = same_bits(inputs, attrs, ("Hidden",), monkeypatch, "gru_unit")
    assert ran == gru_passes(attrs)


def lstm_program(peep, reverse, cell="lstm"):
    class Net(fluid.Program):
        @fluid.network("x", "y")
        def train(self, x, y):
            x = fluid.layers.data(name="x", shape=[9, 3], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="float32")
            if cell == "gru":
                proj = fluid.layers.fc(input=x, size=3 * 12, num_flatten_dims=2)
                hidden = fluid.layers.dynamic_gru(input=proj, size=12, is_reverse=reverse,
                                                  origin_mode=peep)
            else:
                proj = fluid.layers.fc(input=x, size=4 * 12, num_flatten_dims=2)
                hidden, _ = fluid.layers.dynamic_lstm(input=proj, size=4 * 12,
                                                      use_peepholes=peep, is_reverse=reverse)
            out = fluid.layers.fc(input=fluid.layers.reduce_mean(hidden, dim=1), size=1)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(out, y))
            fluid.optimizer.Adam(learning_rate=1e-2).minimize(loss)
            return loss
    return Net


def train(cls, mode, monkeypatch, steps=5):
    monkeypatch.setenv("FLUID_KERNELS", mode)
    prog = cls().Compile(seed=3)
    rng = np.random.default_rng(5)
    losses = []
    for i in range(steps):
        x = (3 * rng.standard_normal((16, 9, 3))).astype(np.float32)
        losses.append(prog.train(x, x[:, :, :1].sum(axis=1)))
        if i == 0 and mode == "auto":
            assert prog.train.runner.plan_tier().wait(300)
    return losses, prog.parameters(), prog.train


@pytest.mark.parametrize("peep", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_training_with_the_passes_gives_the_same_bits(peep, reverse, cell, monkeypatch):
    """``peep``: peepholes for the LSTM, origin mode for the GRU."""
    cls = lstm_program(peep, reverse, cell)
    ref_losses, ref, _ = train(cls, "numpy", monkeypatch)
    losses, got, method = train(cls, "auto", monkeypatch)
    assert method.tier == "compiled"
    for name in passes({"use_peepholes": peep}) if cell == "lstm" else \
            gru_passes({"origin_mode": peep}):
        assert f".py:{name}" in method.source, name
    assert losses == ref_losses
    for k in ref:
        assert np.array_equal(got[k], ref[k]), k
