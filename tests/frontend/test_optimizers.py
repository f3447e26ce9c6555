"""Optimizers end to end: N training steps of a small fc model against a NumPy reference
(float64) started from the same initial parameters; accumulators; roles and op_role_var."""
import numpy as np
import pytest

import fluid
from fluid_interactive.ir.records import OpRole

STEPS = 6
LR = 0.1


def make_net(optimizer, w0_attr=None, w1_attr=None, dtype="float32"):
    """x[?,3] -> fc(4, tanh) -> fc(1) -> mean squared error, minimized by ``optimizer()``."""
    class Net(fluid.Program):
        @fluid.network("x", "y")
        def train(self, x, y):
            x = fluid.layers.data(name="x", shape=[3], dtype=dtype)
            y = fluid.layers.data(name="y", shape=[1], dtype=dtype)
            h = fluid.layers.fc(input=x, size=4, act="tanh", param_attr=w0_attr)
            pred = fluid.layers.fc(input=h, size=1, param_attr=w1_attr)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
            optimizer().minimize(loss)
            return loss
    return Net


def forward_backward(p, x, y):
    """Loss and gradients of the model above, by hand."""
    h = np.tanh(x @ p["fc_0.w_0"] + p["fc_0.b_0"])
    pred = h @ p["fc_1.w_0"] + p["fc_1.b_0"]
    loss = np.mean((pred - y) ** 2)
    dpred = 2.0 * (pred - y) / pred.size
    dh = (dpred @ p["fc_1.w_0"].T) * (1.0 - h * h)
    grads = {"fc_1.w_0": h.T @ dpred, "fc_1.b_0": dpred.sum(0),
             "fc_0.w_0": x.T @ dh, "fc_0.b_0": dh.sum(0)}
    return loss, grads


class Reference:
    """The update rules of notes §5.2, in float64."""

    def __init__(self, kind, lr=LR, decay=None, lr_scale=None, **hyper):
        self.kind, self.lr, self.hyper = kind, lr, hyper
        self.decay = decay or {}          # param -> ("l1" | "l2", coeff)
        self.lr_scale = lr_scale or {}    # param -> factor
        self.state = {}

    def step(self, params, grads):
        for name, g in grads.items():
            p = params[name]
            kind, coeff = self.decay.get(name, (None, 0.0))
            if kind == "l2":
                g = g + coeff * p
            elif kind == "l1":
                g = g + coeff * np.sign(p)
            lr = self.lr * self.lr_scale.get(name, 1.0)
            params[name] = p - getattr(self, self.kind)(name, g, lr)

    def sgd(self, name, g, lr):
        return lr * g

    def momentum(self, name, g, lr):
        mu = self.hyper["momentum"]
        v = mu * self.state.get(name, 0.0) + g
        self.state[name] = v
        return lr * (g + mu * v) if self.hyper.get("use_nesterov") else lr * v

    def adam(self, name, g, lr):
        b1, b2, eps = self.hyper.get("beta1", 0.9), self.hyper.get("beta2", 0.999), 1e-8
        m1, m2, t = self.state.get(name, (0.0, 0.0, 0))
        m1, m2, t = b1 * m1 + (1 - b1) * g, b2 * m2 + (1 - b2) * g * g, t + 1
        self.state[name] = (m1, m2, t)
        lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        return lr_t * m1 / (np.sqrt(m2) + eps)


def batches(seed=7, n=STEPS, dtype=np.float32):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        x = rng.standard_normal((8, 3)).astype(dtype)
        yield x, (x @ np.array([[0.5], [-1.0], [2.0]]) + 0.3).astype(dtype)


def check_against_reference(net, ref, rtol=1e-5, atol=1e-5, seed=3):
    compiled = net().Compile(seed=seed)
    params = {k: v.astype(np.float64) for k, v in compiled.parameters().items()}
    assert sorted(params) == ["fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0"]
    for x, y in batches():
        expected_loss, grads = forward_backward(params, x.astype(np.float64), y)
        loss = compiled.train(x, y)
        np.testing.assert_allclose(loss, expected_loss, rtol=rtol, atol=atol)
        ref.step(params, grads)
    got = compiled.parameters()
    for name, value in params.items():
        np.testing.assert_allclose(got[name], value, rtol=rtol, atol=atol, err_msg=name)
    return compiled


# --- N steps against the reference ----------------------------------------------------------

L2, L1 = fluid.regularizer.L2Decay, fluid.regularizer.L1Decay
ALL = ("fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0")

CASES = {
    "sgd": (lambda: fluid.optimizer.SGD(LR), None, None, Reference("sgd")),
    "momentum": (lambda: fluid.optimizer.Momentum(LR, momentum=0.9), None, None,
                 Reference("momentum", momentum=0.9)),
    "nesterov": (lambda: fluid.optimizer.Momentum(LR, 0.8, use_nesterov=True), None, None,
                 Reference("momentum", momentum=0.8, use_nesterov=True)),
    "adam": (lambda: fluid.optimizer.Adam(0.05), None, None, Reference("adam", lr=0.05)),
    "adam_betas": (lambda: fluid.optimizer.AdamOptimizer(0.02, beta1=0.5, beta2=0.9), None,
                   None, Reference("adam", lr=0.02, beta1=0.5, beta2=0.9)),
    "sgd_l2": (lambda: fluid.optimizer.SGD(LR, regularization=L2(0.05)), None, None,
               Reference("sgd", decay=dict.fromkeys(ALL, ("l2", 0.05)))),
    "sgd_l1": (lambda: fluid.optimizer.SGD(LR, regularization=L1(0.05)), None, None,
               Reference("sgd", decay=dict.fromkeys(ALL, ("l1", 0.05)))),
    "param_l2": (lambda: fluid.optimizer.SGD(LR), fluid.ParamAttr(regularizer=L2(0.2)), None,
                 Reference("sgd", decay={"fc_0.w_0": ("l2", 0.2)})),
    "param_l1": (lambda: fluid.optimizer.SGD(LR), None, fluid.ParamAttr(regularizer=L1(0.1)),
                 Reference("sgd", decay={"fc_1.w_0": ("l1", 0.1)})),
    # The parameter's own regularizer wins over the optimizer's.
    "param_wins": (lambda: fluid.optimizer.SGD(LR, regularization=L2(0.05)),
                   fluid.ParamAttr(regularizer=L1(0.1)), None,
                   Reference("sgd", decay={"fc_0.w_0": ("l1", 0.1), "fc_0.b_0": ("l2", 0.05),
                                           "fc_1.w_0": ("l2", 0.05),
                                           "fc_1.b_0": ("l2", 0.05)})),
    "param_lr": (lambda: fluid.optimizer.SGD(LR), None, fluid.ParamAttr(learning_rate=0.5),
                 Reference("sgd", lr_scale={"fc_1.w_0": 0.5})),
    "momentum_l2_lr": (lambda: fluid.optimizer.MomentumOptimizer(LR, 0.9,
                                                                 regularization=L2(0.05)),
                       fluid.ParamAttr(learning_rate=0.5), None,
                       Reference("momentum", momentum=0.9, lr_scale={"fc_0.w_0": 0.5},
                                 decay=dict.fromkeys(ALL, ("l2", 0.05)))),
    "adam_l1_lr": (lambda: fluid.optimizer.Adam(0.05),
                   fluid.ParamAttr(regularizer=L1(0.01), learning_rate=2.0), None,
                   Reference("adam", lr=0.05, lr_scale={"fc_0.w_0": 2.0},
                             decay={"fc_0.w_0": ("l1", 0.01)})),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_steps_match_numpy_reference(case):
    optimizer, w0_attr, w1_attr, ref = CASES[case]
    check_against_reference(make_net(optimizer, w0_attr, w1_attr), ref)


def test_the_loss_goes_down_with_every_optimizer():
    for make in (lambda: fluid.optimizer.SGD(0.05), lambda: fluid.optimizer.Adam(0.05),
                 lambda: fluid.optimizer.Momentum(0.02, 0.9, use_nesterov=True)):
        compiled = make_net(make)().Compile(seed=1)
        data = list(batches(n=1))[0]
        losses = [compiled.train(*data) for _ in range(40)]
        assert losses[-1] < 0.5 * losses[0]


def test_float64_model_gets_float64_state():
    net = make_net(lambda: fluid.optimizer.Adam(0.05), dtype="float64")
    compiled = net().Compile(seed=3)
    params = compiled.parameters()
    ref = Reference("adam", lr=0.05)
    for x, y in batches(dtype=np.float64):
        _, grads = forward_backward(params, x, y)
        compiled.train(x, y)
        ref.step(params, grads)
    for name, value in compiled.parameters().items():
        assert value.dtype == np.float64
        np.testing.assert_allclose(value, params[name], rtol=1e-10, atol=1e-12)
    block0 = compiled.program.global_block()
    assert block0.vars["learning_rate_0"].dtype == "float64"
    assert block0.vars["fc_0.w_0_moment1_0"].dtype == "float64"


def test_learning_rate_may_be_a_fed_variable():
    class Net(fluid.Program):
        @fluid.network("x", "y", "lr")
        def train(self, x, y, lr):
            x = fluid.layers.data(name="x", shape=[3])
            y = fluid.layers.data(name="y", shape=[1])
            lr = fluid.layers.data(name="lr", shape=[1], append_batch_size=False)
            h = fluid.layers.fc(input=x, size=4, act="tanh")
            pred = fluid.layers.fc(input=h, size=1)
            loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
            fluid.optimizer.Momentum(learning_rate=lr, momentum=0.5).minimize(loss)
            return loss

    compiled = Net().Compile(seed=0)
    params = {k: v.astype(np.float64) for k, v in compiled.parameters().items()}
    assert not any(n.startswith("learning_rate") for n in compiled.var_names())
    rates = [0.1, 0.05, 0.2, 0.0, 0.1, 0.01]
    v = {}
    for rate, (x, y) in zip(rates, batches()):
        _, grads = forward_backward(params, x, y)
        compiled.train(x, y, np.array([rate], np.float32))
        for name, g in grads.items():
            v[name] = 0.5 * v.get(name, 0.0) + g
            params[name] = params[name] - rate * v[name]
    for name, value in compiled.parameters().items():
        np.testing.assert_allclose(value, params[name], rtol=1e-5, atol=1e-5)


# --- accumulators ---------------------------------------------------------------------------

ACCUMULATORS = {
    "sgd": (lambda: fluid.optimizer.SGD(LR), []),
    "momentum": (lambda: fluid.optimizer.Momentum(LR, 0.9), ["velocity"]),
    "adam": (lambda: fluid.optimizer.Adam(0.01, beta1=0.8, beta2=0.95),
             ["moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc"]),
}


@pytest.mark.parametrize("case", sorted(ACCUMULATORS))
def test_accumulators_are_persistable_block0_state(case):
    optimizer, keys = ACCUMULATORS[case]
    compiled = make_net(optimizer)().Compile(seed=0)
    block0 = compiled.program.global_block()
    expected = sorted(f"{p}_{k}_0" for p in ALL for k in keys)
    state = sorted(n for n, v in block0.vars.items()
                   if v.persistable and not v.is_parameter and n != "learning_rate_0")
    assert state == expected
    assert block0.vars["learning_rate_0"].persistable
    for name in expected:
        var = block0.vars[name]
        assert var.persistable and not var.is_parameter
        # Initialised in block 0, by one op each.
        writers = [op for op in block0.ops if name in op.output_names()]
        assert [op.type for op in writers] == ["fill_constant"]
        # Not declared again in the method block.
        assert name not in compiled.program.block("train").vars
    assert sorted(compiled.parameters()) == sorted(ALL)
    assert set(expected) <= set(compiled.var_names())
    assert not set(expected) & set(compiled.parameters())


def test_accumulator_initial_values_and_shapes():
    compiled = make_net(lambda: fluid.optimizer.Adam(0.01, beta1=0.8, beta2=0.95))().Compile()
    np.testing.assert_array_equal(compiled.get_var("fc_0.w_0_moment1_0"), np.zeros((3, 4)))
    np.testing.assert_array_equal(compiled.get_var("fc_1.b_0_moment2_0"), np.zeros(1))
    b1 = compiled.get_var("fc_0.w_0_beta1_pow_acc_0")
    b2 = compiled.get_var("fc_0.w_0_beta2_pow_acc_0")
    assert b1.shape == b2.shape == (1,)
    np.testing.assert_allclose(b1, [0.8])
    np.testing.assert_allclose(b2, [0.95])
    for x, y in batches(n=3):
        compiled.train(x, y)
    np.testing.assert_allclose(compiled.get_var("fc_0.w_0_beta1_pow_acc_0"), [0.8 ** 4],
                               rtol=1e-6)
    np.testing.assert_allclose(compiled.get_var("fc_1.b_0_beta2_pow_acc_0"), [0.95 ** 4],
                               rtol=1e-6)
    assert np.any(compiled.get_var("fc_0.w_0_moment1_0") != 0)
    momentum = make_net(lambda: fluid.optimizer.Momentum(0.01, 0.9))().Compile()
    np.testing.assert_array_equal(momentum.get_var("fc_1.w_0_velocity_0"), np.zeros((4, 1)))


def test_adam_step_count_is_per_accumulator_and_survives_set_var():
    compiled = make_net(lambda: fluid.optimizer.Adam(0.01))().Compile(seed=0)
    compiled.set_var("fc_0.w_0_beta1_pow_acc_0", np.array([0.5], np.float32))
    x, y = next(batches())
    compiled.train(x, y)
    np.testing.assert_allclose(compiled.get_var("fc_0.w_0_beta1_pow_acc_0"), [0.45])
    np.testing.assert_allclose(compiled.get_var("fc_0.b_0_beta1_pow_acc_0"), [0.81])


# --- roles and op_role_var ------------------------------------------------------------------

def _optimize_ops(compiled):
    return [op for op in compiled.program.block("train").ops if op.role & OpRole.OPTIMIZE]


@pytest.mark.parametrize("case,update", [("sgd", "sgd"), ("momentum", "momentum"),
                                         ("nesterov", "momentum"), ("adam", "adam")])
def test_update_ops_have_role_optimize_and_role_var(case, update):
    optimizer, w0_attr, w1_attr, _ = CASES[case]
    compiled = make_net(optimizer, w0_attr, w1_attr)().Compile(seed=0)
    ops = compiled.program.block("train").ops
    first_opt = next(i for i, op in enumerate(ops) if op.role & OpRole.OPTIMIZE)
    # Forward, then backward, then every optimize op.
    assert all(op.role & OpRole.OPTIMIZE for op in ops[first_opt:])
    assert not any(op.role & OpRole.OPTIMIZE for op in ops[:first_opt])
    updates = [op for op in ops if op.type == update]
    # One per parameter, sorted by parameter name.
    assert [op.inputs["Param"][0] for op in updates] == sorted(ALL)
    for op in updates:
        p = op.inputs["Param"][0]
        assert op.role == OpRole.OPTIMIZE
        assert op.role_var == (p, p + "@GRAD")
        assert op.inputs["Grad"] == [p + "@GRAD"]
        assert op.outputs["ParamOut"] == [p]
        assert op.inputs["LearningRate"] == ["learning_rate_0"]
    # The backward op writing each gradient carries the same pair.
    for p in ALL:
        writer = next(op for op in ops if p + "@GRAD" in op.output_names())
        assert writer.role == OpRole.BACKWARD and writer.role_var == (p, p + "@GRAD")


def test_momentum_and_adam_ops_read_and_write_their_accumulators():
    compiled = make_net(lambda: fluid.optimizer.Momentum(LR, 0.7, use_nesterov=True))().Compile()
    op = next(op for op in _optimize_ops(compiled) if op.inputs["Param"] == ["fc_0.w_0"])
    assert op.inputs["Velocity"] == op.outputs["VelocityOut"] == ["fc_0.w_0_velocity_0"]
    assert op.attrs == {"mu": 0.7, "use_nesterov": True}
    compiled = make_net(lambda: fluid.optimizer.Adam(0.01, epsilon=1e-6))().Compile()
    op = next(op for op in _optimize_ops(compiled) if op.inputs["Param"] == ["fc_1.b_0"])
    for slot, key in [("Moment1", "moment1"), ("Moment2", "moment2"),
                      ("Beta1Pow", "beta1_pow_acc"), ("Beta2Pow", "beta2_pow_acc")]:
        assert op.inputs[slot] == op.outputs[slot + "Out"] == [f"fc_1.b_0_{key}_0"]
    assert op.attrs == {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-6}


def test_weight_decay_and_lr_scale_ops_are_tagged_with_the_backward_gradient():
    compiled = make_net(lambda: fluid.optimizer.SGD(LR, regularization=L2(0.05)),
                        fluid.ParamAttr(regularizer=L1(0.1), learning_rate=0.5))().Compile()
    ops = _optimize_ops(compiled)
    for op in ops:
        assert op.role == OpRole.OPTIMIZE
        p = op.role_var[0]
        assert op.role_var == (p, p + "@GRAD"), op
    w0 = [op.type for op in ops if op.role_var[0] == "fc_0.w_0"]
    assert w0 == ["sign", "scale", "elementwise_add", "scale", "sgd"]
    assert [op.type for op in ops if op.role_var[0] == "fc_1.w_0"] == [
        "scale", "elementwise_add", "sgd"]
    sgd = next(op for op in ops if op.type == "sgd" and op.role_var[0] == "fc_0.w_0")
    assert sgd.inputs["Grad"] == ["fc_0.w_0@GRAD@REG"]
    assert sgd.inputs["LearningRate"] != ["learning_rate_0"]
    fluid.check_program(compiled.program)


def test_text_form_shows_roles():
    compiled = make_net(lambda: fluid.optimizer.Adam(0.01))().Compile()
    text = compiled.train.text
    assert "adam(" in text and "<optimize; fc_0.w_0, fc_0.w_0@GRAD>" in text


# --- optimizer objects ----------------------------------------------------------------------

def test_one_optimizer_object_serves_several_compiles():
    opt = fluid.optimizer.Adam(0.05)
    net = make_net(lambda: opt)
    first = net().Compile(seed=3)
    second = net().Compile(seed=3)
    assert first.var_names() == second.var_names()
    x, y = next(batches())
    assert first.train(x, y) == second.train(x, y)
    for name, value in first.parameters().items():
        np.testing.assert_array_equal(value, second.parameters()[name])


def test_an_optimizer_shared_by_two_methods_shares_its_state():
    class Two(fluid.Program):
        opt = None

        def loss(self):
            x = fluid.layers.data(name="x", shape=[3])
            y = fluid.layers.data(name="y", shape=[1])
            pred = fluid.layers.fc(input=x, size=1, param_attr="w", bias_attr="b")
            return fluid.layers.mean(fluid.layers.square_error_cost(pred, y))

        @fluid.network("x", "y")
        def a(self, x, y):
            loss = self.loss()
            self.opt.minimize(loss)
            return loss

        @fluid.network("x", "y")
        def b(self, x, y):
            loss = self.loss()
            self.opt.minimize(loss)
            return loss

    compiled = Two(opt=fluid.optimizer.Momentum(0.1, 0.9)).Compile(seed=0)
    state = [n for n in compiled.var_names() if n not in ("w", "b")]
    assert sorted(state) == ["b_velocity_0", "learning_rate_0", "w_velocity_0"]
    separate = Two(opt=None)
    separate.opt = _FreshEachTime()
    names = separate.Compile(seed=0).var_names()
    assert "w_velocity_1" in names and "learning_rate_1" in names


class _FreshEachTime:
    def minimize(self, loss):
        return fluid.optimizer.Momentum(0.1, 0.9).minimize(loss)


def test_bad_arguments_fail_early():
    with pytest.raises(fluid.OpArgumentError, match="learning_rate"):
        fluid.optimizer.SGD(0)
    with pytest.raises(fluid.OpArgumentError, match="learning_rate"):
        fluid.optimizer.Adam(learning_rate=-1.0)
    with pytest.raises(TypeError):
        fluid.optimizer.Momentum(0.1)  # momentum is required, as in Paddle
    with pytest.raises(fluid.OpArgumentError, match="momentum"):
        fluid.optimizer.Momentum(0.1, momentum=-0.5)
    with pytest.raises(fluid.OpArgumentError, match="beta1"):
        fluid.optimizer.Adam(beta1=1.0)
    with pytest.raises(fluid.OpArgumentError, match="epsilon"):
        fluid.optimizer.Adam(epsilon=-1e-8)
    with pytest.raises(fluid.OpArgumentError, match="regularization"):
        fluid.optimizer.SGD(0.1, regularization=0.01)
    with pytest.raises(fluid.OpArgumentError, match="L2Decay coefficient"):
        fluid.regularizer.L2Decay(-1.0)
    with pytest.raises(fluid.OpArgumentError, match="L1Decay coefficient"):
        fluid.regularizer.L1Decay("0.1")


def test_regularizer_spellings():
    assert fluid.regularizer.L2Decay(0.1) == fluid.regularizer.L2Decay(coeff=0.1)
    assert fluid.regularizer.L2DecayRegularizer(regularization_coeff=0.1).coeff == 0.1
    assert fluid.regularizer.L1Decay(0.1) != fluid.regularizer.L2Decay(0.1)
    assert repr(fluid.regularizer.L1DecayRegularizer(0.5)) == "L1Decay(coeff=0.5)"


def test_minimize_outside_a_network_is_an_error():
    with pytest.raises(fluid.FluidError, match="minimize"):
        fluid.optimizer.SGD(0.1).minimize(None)


# --- state across steps ---------------------------------------------------------------------

def test_a_failing_step_changes_no_parameter_and_no_accumulator():
    compiled = make_net(lambda: fluid.optimizer.Adam(0.05))().Compile(seed=0)
    x, y = next(batches())
    compiled.train(x, y)
    # A degenerate power makes the *last* update op (fc_1.w_0, sorted by name) fail after
    # the other three have computed their new values.
    compiled.set_var("fc_1.w_0_beta1_pow_acc_0", np.array([1.0], np.float32))
    before = {n: compiled.get_var(n) for n in compiled.var_names()}
    with pytest.raises(fluid.KernelError, match="adam"):
        compiled.train(x, y)
    for name, value in before.items():
        np.testing.assert_array_equal(compiled.get_var(name), value, err_msg=name)


def test_optimizer_state_survives_save_and_load(tmp_path):
    net = make_net(lambda: fluid.optimizer.Momentum(LR, 0.9, use_nesterov=True))
    a = net().Compile(seed=4)
    data = list(batches())
    for x, y in data[:3]:
        a.train(x, y)
    a.save(str(tmp_path / "ckpt"))
    b = fluid.load(str(tmp_path / "ckpt"))
    assert sorted(b.var_names()) == sorted(a.var_names())
    for x, y in data[3:]:
        assert a.train(x, y) == b.train(x, y)
    for name in a.var_names():
        np.testing.assert_array_equal(a.get_var(name), b.get_var(name), err_msg=name)
