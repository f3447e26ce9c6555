"""The recurrent cells' compiled sequences (fluid_interactive/kernels/recurrent.py): the
values of the NumPy steps within float rounding, for every activation, mode, direction,
dtype and lengths (zero included); directly (the ops run once with their compiled
sequences switched on, once without) and in training (a program with and without the
tier). Not bit for bit: float32's tanh is a rational approximation (within 4e-7 relative
of the true value) and the recurrent products run SciPy's BLAS (kernels/recurrent.py); so
a plan runs them only with ``FLUID_KERNELS=fast``."""
import numpy as np
import pytest
from kernels.test_tier import kernel_cache  # noqa: F401  (the same fixture)
from kernels.tier_runs import forward_and_grads, gru_inputs, lstm_inputs, switched_on

import fluid

numba = pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def tier_on(monkeypatch):
    """The tier, with the kernels that agree with NumPy's within rounding (an opt-in)."""
    monkeypatch.setenv("FLUID_KERNELS", "fast")


#: how far the compiled sequences may be from the NumPy steps (relative and absolute):
#: float32's tanh within 4e-7 relative, over a few steps; float64's is the C library's
TOLERANCE = {"float32": 2e-5, "float64": 1e-12}


def compare(op_type, inputs, attrs, through, monkeypatch):
    """The op and its gradient op with and without their compiled sequences: the same
    values within float rounding, NaN where NumPy has NaN, each sequence run once."""
    ref_outs, ref_grads = forward_and_grads(op_type, inputs, attrs, through)
    ran: list = []
    with monkeypatch.context() as m:
        switched_on(m, ran)
        outs, grads = forward_and_grads(op_type, inputs, attrs, through)
    assert sorted(ran) == [f"{op_type}_backward", f"{op_type}_forward"]
    for name, got, want in [*((k, outs[k], ref_outs[k]) for k in ref_outs),
                            *((k + "@GRAD", grads[k], ref_grads[k]) for k in ref_grads)]:
        assert got.dtype == want.dtype
        tol = TOLERANCE[str(want.dtype)]
        # absolute: of the array's scale (identity gates grow values to 1e5, whose rounding
        # reaches small elements through sums; a sigmoid clipped at 13 passes 2.3e-6 of it)
        scale = max(1.0, float(np.nanmax(np.abs(want), initial=0.0)))
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=name)


LSTM_CASES = [
    {"use_peepholes": False},
    {"use_peepholes": True},
    {"use_peepholes": True, "is_reverse": True},
    {"use_peepholes": False, "is_reverse": True, "gate_activation": "tanh",
     "cell_activation": "sigmoid", "candidate_activation": "relu"},
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("attrs", LSTM_CASES)
@pytest.mark.parametrize("lengths", [None, (5, 2, 0, 3)], ids=["full", "lengths"])
def test_lstm_sequences_are_numpys_steps(rng, dtype, attrs, lengths, monkeypatch):
    inputs = lstm_inputs(rng, dtype, peep=attrs["use_peepholes"], lengths=lengths)
    compare("lstm", inputs, attrs, ("Hidden", "Cell"), monkeypatch)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("peep", [False, True])
def test_lstm_relu_and_identity_keep_numpys_nan(rng, dtype, peep, monkeypatch):
    attrs = {"use_peepholes": peep, "gate_activation": "relu", "cell_activation": "identity",
             "candidate_activation": "relu", "is_reverse": peep}
    inputs = lstm_inputs(rng, dtype, peep=peep)
    inputs["Input"][0, 1, :3] = [np.nan, -0.0, 0.0]    # relu keeps NumPy's NaN
    compare("lstm", inputs, attrs, ("Hidden", "Cell"), monkeypatch)


def test_lstm_gradient_from_hidden_alone_and_from_cell_alone(rng, monkeypatch):
    inputs = lstm_inputs(rng, "float64", lengths=(5, 0, 1, 4))
    for through in (("Hidden",), ("Cell",)):
        compare("lstm", inputs, {}, through, monkeypatch)


GRU_CASES = [
    {},
    {"origin_mode": True, "is_reverse": True},
    {"linear_before_reset": True},
    {"linear_before_reset": True, "origin_mode": True, "is_reverse": True},
    {"gate_activation": "tanh", "activation": "relu"},
    {"gate_activation": "identity", "activation": "sigmoid", "linear_before_reset": True},
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("attrs", GRU_CASES)
@pytest.mark.parametrize("lengths", [None, (5, 2, 0, 3)], ids=["full", "lengths"])
def test_gru_sequences_are_numpys_steps(rng, dtype, attrs, lengths, monkeypatch):
    if dtype == "float32" and {"relu", "identity"} & set(attrs.values()):
        pytest.skip("float64 checks it: a float32 pre-activation within rounding of 0 may "
                    "take relu's other side, and its gradient with it; identity gates let "
                    "the state grow to 1e8, and float32's rounding differences with it")
    inputs = gru_inputs(rng, dtype, lengths=lengths)
    compare("gru", inputs, attrs, ("Hidden",), monkeypatch)


@pytest.mark.parametrize("attrs", [{}, {"linear_before_reset": True, "origin_mode": True},
                                   {"linear_before_reset": True, "is_reverse": True}])
@pytest.mark.parametrize("bias", [True, False])
def test_gru_relu_and_identity_keep_numpys_nan(rng, attrs, bias, monkeypatch):
    attrs = dict(attrs, gate_activation="relu", activation="identity")
    inputs = gru_inputs(rng, "float32", bias=bias)
    inputs["Weight"] *= 0.2                           # relu's state stays finite
    inputs["Input"][1, 0, :2] = [np.nan, -0.0]
    compare("gru", inputs, attrs, ("Hidden",), monkeypatch)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sigmoids_clip_their_input_as_numpys(rng, dtype, monkeypatch):
    """Gates, candidates and cells driven past 13 in some columns: the compiled sequences
    clip a sigmoid's input there as the NumPy kernels do (Paddle's [-40, 13]); in float64
    an unclipped sigmoid would be off by 2.3e-6."""
    g = gru_inputs(rng, dtype)
    g["Input"][..., 0:16:3] += 30.0                # some u, r and candidate columns
    g["Input"][..., 17:24:2] -= 50.0
    compare("gru", g, {"activation": "sigmoid"}, ("Hidden",), monkeypatch)
    x = lstm_inputs(rng, dtype)
    x["Input"][..., 0:32:3] += 30.0                # some c~, i, f, o columns
    x["Input"][..., 1:32:5] -= 50.0
    compare("lstm", x, {"cell_activation": "sigmoid", "candidate_activation": "sigmoid"},
            ("Hidden", "Cell"), monkeypatch)


def lstm_program(size=16, reverse=False):
    class Net(fluid.Program):
        @fluid.network("x", "y")
        def train(self, x, y):
            x = fluid.layers.data(name="x", shape=[7, 3], dtype="float32")
            y = fluid.layers.data(name="y", shape=[1], dtype="float32")
            proj = fluid.layers.fc(input=x, size=4 * size, num_flatten_dims=2)
            hidden, _ = fluid.layers.dynamic_lstm(input=proj, size=4 * size,
                                                  is_reverse=reverse)
            out = fluid.layers.fc(input=fluid.layers.sequence_last_step(hidden), size=1)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(out, y))
            fluid.optimizer.Adam(learning_rate=1e-2).minimize(loss)
            return loss
    return Net


def train(cls, compiled, monkeypatch, steps=6):
    monkeypatch.setenv("FLUID_KERNELS", "fast" if compiled else "numpy")
    prog = cls().Compile(seed=3)
    rng = np.random.default_rng(5)
    losses, tiers = [], []
    for i in range(steps):
        x = rng.standard_normal((8, 7, 3)).astype(np.float32)
        losses.append(prog.train(x, x[:, :, :1].sum(axis=1)))
        tiers.append(prog.train.tier)
        if i == 0 and compiled and tiers[0] == "compiling":
            assert prog.train.runner.plan_tier().wait(300)
    return losses, prog.parameters(), tiers, prog.train.source


@pytest.mark.parametrize("reverse", [False, True])
def test_training_with_the_compiled_cells_agrees(reverse, monkeypatch):
    cls = lstm_program(reverse=reverse)
    ref_losses, ref, ref_tiers, _ = train(cls, False, monkeypatch)
    losses, got, tiers, source = train(cls, True, monkeypatch)
    assert set(ref_tiers) == {"numpy"} and tiers[-1] == "compiled", tiers
    assert ".py:lstm_forward" in source and ".py:lstm_backward" in source
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    for k in ref:   # Adam divides by the roots of small moments: 1e-4 of a step's size
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-3, atol=1e-5, err_msg=k)


def test_by_default_a_plan_leaves_the_cells_to_numpy(monkeypatch):
    """Their values are NumPy's within rounding only: a plan that switched to them when
    their build ended would train to other bits than one that found them built."""
    monkeypatch.setenv("FLUID_KERNELS", "auto")
    prog = lstm_program()().Compile(seed=3)
    x = np.random.default_rng(5).standard_normal((8, 7, 3)).astype(np.float32)
    prog.train(x, x[:, :, :1].sum(axis=1))
    assert "lstm_forward" not in prog.train.source and "lstm_backward" not in prog.train.source
