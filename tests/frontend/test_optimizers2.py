"""The optimizers beyond SGD, Momentum and Adam, end to end.

Trajectories: 100 steps of a small fc model in float64 against ``torch.optim`` (Adagrad,
RMSprop centered and not, Adamax, Adadelta) and against NumPy transcriptions of Paddle
1.8's update ops (DecayedAdagrad, Ftrl, Lamb, LarsMomentum, Dpsgd, and the rest again);
where Paddle and PyTorch put epsilon in different places (RMSProp inside the square
root, Adamax on ``beta2 * u``), PyTorch's run is made to match with epsilon 0 and the
NumPy transcription checks the default epsilon. Then every optimizer feature for each
optimizer: weight decay, schedules, parameter_list, no_grad_set, Paddle's state names,
save/load and rewind; Lookahead, the averages and Recompute; and the errors."""
import numpy as np
import pytest
import torch
from frontend.test_optimizers import ALL, batches, forward_backward, make_net

import fluid

STEPS = 100


def assert_close(prog, expected):
    """Every parameter within 1e-5 relative of ``expected``."""
    for name, value in prog.parameters().items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-5, atol=1e-9, err_msg=name)


def float64(optimizer):
    return make_net(optimizer, dtype="float64")


def trained(net, steps=STEPS, seed=3, data=None):
    prog = net().Compile(seed=seed)
    start = {k: v.copy() for k, v in prog.parameters().items()}
    for x, y in data or batches(n=steps, dtype=np.float64):
        prog.train(x, y)
    return prog, start


# --- PyTorch -------------------------------------------------------------------------------

def torch_run(start, make, steps=STEPS):
    """The same model and data, trained by a torch.optim optimizer."""
    names = ["fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"]
    params = [torch.tensor(start[n], dtype=torch.float64, requires_grad=True) for n in names]
    opt = make(params)
    for x, y in batches(n=steps, dtype=np.float64):
        x, y = torch.tensor(x), torch.tensor(y)
        h = torch.tanh(x @ params[0] + params[1])
        loss = torch.mean((h @ params[2] + params[3] - y) ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {n: p.detach().numpy() for n, p in zip(names, params)}


TORCH = {
    "adagrad": (lambda: fluid.optimizer.Adagrad(0.1, epsilon=1e-6,
                                                initial_accumulator_value=0.1),
                lambda ps: torch.optim.Adagrad(ps, lr=0.1, eps=1e-6,
                                               initial_accumulator_value=0.1)),
    "rmsprop": (lambda: fluid.optimizer.RMSProp(0.01, rho=0.9, epsilon=0.0, momentum=0.5),
                lambda ps: torch.optim.RMSprop(ps, lr=0.01, alpha=0.9, eps=0.0, momentum=0.5)),
    "rmsprop_centered": (lambda: fluid.optimizer.RMSPropOptimizer(
        0.01, rho=0.9, epsilon=0.0, momentum=0.2, centered=True),
        lambda ps: torch.optim.RMSprop(ps, lr=0.01, alpha=0.9, eps=0.0, momentum=0.2,
                                       centered=True)),
    "adamax": (lambda: fluid.optimizer.Adamax(0.02, beta1=0.8, beta2=0.95, epsilon=0.0),
               lambda ps: torch.optim.Adamax(ps, lr=0.02, betas=(0.8, 0.95), eps=0.0)),
    # Paddle 1.8's Adadelta takes no learning-rate step: PyTorch's with lr=1
    "adadelta": (lambda: fluid.optimizer.Adadelta(0.5, epsilon=1e-6, rho=0.9),
                 lambda ps: torch.optim.Adadelta(ps, lr=1.0, rho=0.9, eps=1e-6)),
}


# --- NumPy transcriptions of Paddle 1.8's update ops ----------------------------------------

class Reference:
    """One optimizer's update of each parameter in float64, with weight decay and a
    per-step learning rate, as the ops of ops/optim_*.py compute it."""

    def __init__(self, kind, lr=0.1, reg=None, only=None, **hyper):
        self.kind, self.lr, self.hyper, self.reg = kind, lr, hyper, reg or {}
        self.only = only
        self.state, self.t = {}, 0

    def step(self, params, grads, lr=None):
        self.t += 1
        for name, g in grads.items():
            if self.only is not None and name not in self.only:
                continue
            kind, coeff = self.reg.get(name, (None, 0.0))
            if kind == "l2":
                g = g + coeff * params[name]
            params[name] = getattr(self, self.kind)(name, params[name], g,
                                                    self.lr if lr is None else lr)

    def get(self, name, *shapes, fill=0.0):
        return self.state.setdefault(name, [np.full(s, fill) for s in shapes])

    def adagrad(self, n, p, g, lr):
        (m,) = self.get(n, p.shape, fill=self.hyper.get("initial", 0.0))
        m += g * g
        return p - lr * g / (np.sqrt(m) + self.hyper["epsilon"])

    def decayed_adagrad(self, n, p, g, lr):
        (m,) = self.get(n, p.shape)
        d = self.hyper["decay"]
        m *= d
        m += (1 - d) * g * g
        return p - lr * g / (np.sqrt(m) + self.hyper["epsilon"])

    def rmsprop(self, n, p, g, lr):
        mom, ms, mg = self.get(n, p.shape, p.shape, p.shape)
        rho, eps = self.hyper["rho"], self.hyper["epsilon"]
        ms *= rho
        ms += (1 - rho) * g * g
        if self.hyper.get("centered"):
            mg *= rho
            mg += (1 - rho) * g
        d = ms - mg * mg if self.hyper.get("centered") else ms
        mom *= self.hyper["momentum"]
        mom += lr * g / np.sqrt(d + eps)
        return p - mom

    def adadelta(self, n, p, g, lr):
        a, u = self.get(n, p.shape, p.shape)
        rho, eps = self.hyper["rho"], self.hyper["epsilon"]
        a *= rho
        a += (1 - rho) * g * g
        update = -np.sqrt((u + eps) / (a + eps)) * g
        u *= rho
        u += (1 - rho) * update ** 2
        return p + update

    def adamax(self, n, p, g, lr):
        m, u = self.get(n, p.shape, p.shape)
        b1, b2, eps = self.hyper["beta1"], self.hyper["beta2"], self.hyper["epsilon"]
        m[...] = b1 * m + (1 - b1) * g
        u[...] = np.maximum(np.abs(g), b2 * u + eps)
        return p - lr / (1 - b1 ** self.t) * m / u

    def ftrl(self, n, p, g, lr):
        sq, lin = self.get(n, p.shape, p.shape)
        l1, l2, power = self.hyper["l1"], self.hyper["l2"], self.hyper.get("lr_power", -0.5)
        new = sq + g * g
        lin += g - (new ** -power - sq ** -power) / lr * p
        sq[...] = new
        y = new ** -power / lr + 2 * l2
        return np.where(np.abs(lin) > l1, (l1 * np.sign(lin) - lin) / y, 0.0)

    def lamb(self, n, p, g, lr):
        m1, m2 = self.get(n, p.shape, p.shape)
        b1, b2 = self.hyper["beta1"], self.hyper["beta2"]
        m1[...] = b1 * m1 + (1 - b1) * g
        m2[...] = b2 * m2 + (1 - b2) * g * g
        r = m1 / (np.sqrt(m2) + self.hyper["epsilon"]) + self.hyper["weight_decay"] * p
        pn, rn = np.linalg.norm(p), np.linalg.norm(r)
        return p - lr * (pn / rn if pn > 0 and rn > 0 else 1.0) * r

    def lars(self, n, p, g, lr):
        (v,) = self.get(n, p.shape)
        coeff, wd = self.hyper["lars_coeff"], self.hyper["lars_weight_decay"]
        pn, gn = np.linalg.norm(p), np.linalg.norm(g)
        local = lr * coeff * pn / (gn + wd * pn) if pn > 0 and gn > 0 else lr
        v[...] = self.hyper["momentum"] * v + local * (g + wd * p)
        return p - v

    def dpsgd(self, n, p, g, lr):
        gens = self.state.setdefault("@noise", {})
        rng = gens.setdefault(n, np.random.default_rng(self.hyper["seed"]))
        noise = self.hyper["sigma"] * rng.standard_normal()
        norm = np.linalg.norm(g)
        scale = norm / self.hyper["clip"] if norm > self.hyper["clip"] else 1.0
        return p - lr * (g / scale + noise / self.hyper["batch_size"])


def dpsgd(seed=5):
    opt = fluid.optimizer.Dpsgd(0.05, clip=0.5, batch_size=8.0, sigma=0.3)
    opt._seed = seed
    return opt


NUMPY = {
    "adagrad": (lambda: fluid.optimizer.Adagrad(0.1), Reference("adagrad", epsilon=1e-6)),
    "decayed_adagrad": (lambda: fluid.optimizer.DecayedAdagrad(0.1, decay=0.9),
                        Reference("decayed_adagrad", decay=0.9, epsilon=1e-6)),
    "rmsprop": (lambda: fluid.optimizer.RMSProp(0.01, momentum=0.3),
                Reference("rmsprop", lr=0.01, rho=0.95, epsilon=1e-6, momentum=0.3)),
    "rmsprop_centered": (lambda: fluid.optimizer.RMSProp(0.01, rho=0.9, epsilon=1e-4,
                                                         centered=True),
                         Reference("rmsprop", lr=0.01, rho=0.9, epsilon=1e-4, momentum=0.0,
                                   centered=True)),
    "adadelta": (lambda: fluid.optimizer.Adadelta(0.01),
                 Reference("adadelta", rho=0.95, epsilon=1e-6)),
    "adamax": (lambda: fluid.optimizer.Adamax(0.02),
               Reference("adamax", lr=0.02, beta1=0.9, beta2=0.999, epsilon=1e-8)),
    "ftrl": (lambda: fluid.optimizer.Ftrl(0.1, l1=0.001, l2=0.01),
             Reference("ftrl", l1=0.001, l2=0.01)),
    "ftrl_power": (lambda: fluid.optimizer.FtrlOptimizer(0.1, l1=0.001, l2=0.01,
                                                         lr_power=-0.3),
                   Reference("ftrl", l1=0.001, l2=0.01, lr_power=-0.3)),
    "lamb": (lambda: fluid.optimizer.LambOptimizer(0.01, lamb_weight_decay=0.01),
             Reference("lamb", lr=0.01, beta1=0.9, beta2=0.999, epsilon=1e-6,
                       weight_decay=0.01)),
    "lars": (lambda: fluid.optimizer.LarsMomentum(0.5, momentum=0.9, lars_coeff=0.01),
             Reference("lars", lr=0.5, momentum=0.9, lars_coeff=0.01,
                       lars_weight_decay=0.0005)),
    "dpsgd": (dpsgd, Reference("dpsgd", lr=0.05, clip=0.5, batch_size=8.0, sigma=0.3,
                               seed=5)),
}


def reference_run(ref, start, steps=STEPS, rates=None):
    params = {k: v.astype(np.float64) for k, v in start.items()}
    for i, (x, y) in enumerate(batches(n=steps, dtype=np.float64)):
        _, grads = forward_backward(params, x, y)
        ref.step(params, grads, None if rates is None else rates[i])
    return params


TRAJECTORIES = {**{f"torch-{k}": (ours, lambda start, t=theirs: torch_run(start, t))
                   for k, (ours, theirs) in TORCH.items()},
                **{f"numpy-{k}": (ours, lambda start, r=ref: reference_run(r, start))
                   for k, (ours, ref) in NUMPY.items()}}


@pytest.mark.parametrize("case", sorted(TRAJECTORIES))
def test_100_steps_equal_torch_optim_or_the_numpy_transcription(case):
    ours, expected = TRAJECTORIES[case]
    prog, start = trained(float64(ours))
    assert_close(prog, expected(start))


def test_dpsgd_noise_follows_the_program_seed():
    net = float64(lambda: fluid.optimizer.Dpsgd(0.05, clip=0.5, batch_size=8.0, sigma=0.3))
    first, _ = trained(net, steps=5, seed=11)
    again, _ = trained(net, steps=5, seed=11)
    other, _ = trained(net, steps=5, seed=12)
    noiseless, _ = trained(float64(lambda: fluid.optimizer.Dpsgd(0.05, 0.5, 8.0, 0.0)),
                           steps=5, seed=11)
    w = "fc_1.w_0"
    np.testing.assert_array_equal(first.get_var(w), again.get_var(w))
    assert not np.allclose(first.get_var(w), other.get_var(w))
    assert not np.allclose(first.get_var(w), noiseless.get_var(w))


# --- every feature, for every optimizer ----------------------------------------------------

def l2(coeff):
    return fluid.regularizer.L2Decay(coeff)


FEATURES = {  # make(**kwargs) -> optimizer, Reference, its accumulator keys
    "adagrad": (lambda lr=0.1, **k: fluid.optimizer.AdagradOptimizer(lr, **k),
                lambda **k: Reference("adagrad", epsilon=1e-6, **k), ["moment"]),
    "decayed_adagrad": (lambda lr=0.1, **k: fluid.optimizer.DecayedAdagradOptimizer(lr, **k),
                        lambda **k: Reference("decayed_adagrad", decay=0.95, epsilon=1e-6,
                                              **k), ["moment"]),
    "rmsprop": (lambda lr=0.1, **k: fluid.optimizer.RMSPropOptimizer(lr, centered=True, **k),
                lambda **k: Reference("rmsprop", rho=0.95, epsilon=1e-6, momentum=0.0,
                                      centered=True, **k),
                ["momentum", "mean_square", "mean_grad"]),
    "adamax": (lambda lr=0.1, **k: fluid.optimizer.AdamaxOptimizer(lr, **k),
               lambda **k: Reference("adamax", beta1=0.9, beta2=0.999, epsilon=1e-8, **k),
               ["moment", "inf_norm", "beta1_pow_acc"]),
    "ftrl": (lambda lr=0.1, **k: fluid.optimizer.FtrlOptimizer(lr, l1=0.001, **k),
             lambda **k: Reference("ftrl", l1=0.001, l2=0.0, **k), ["squared", "linear"]),
    "lamb": (lambda lr=0.1, **k: fluid.optimizer.LambOptimizer(lr, **k),
             lambda **k: Reference("lamb", beta1=0.9, beta2=0.999, epsilon=1e-6,
                                   weight_decay=0.01, **k),
             ["moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc"]),
    "lars": (lambda lr=0.1, **k: fluid.optimizer.LarsMomentumOptimizer(lr, 0.9, **k),
             lambda **k: Reference("lars", momentum=0.9, lars_coeff=0.001,
                                   lars_weight_decay=0.0005, **k), ["velocity"]),
    "adadelta": (lambda lr=0.1, **k: fluid.optimizer.AdadeltaOptimizer(lr, **k),
                 lambda **k: Reference("adadelta", rho=0.95, epsilon=1e-6, **k),
                 ["_avg_squared_grad", "_avg_squared_update"]),
}


class Minimizing:
    """An 'optimizer' for `make_net` that runs ``fn(loss)`` where the model minimizes."""

    def __init__(self, fn):
        self.fn = fn

    def minimize(self, loss):
        return self.fn(loss)


@pytest.mark.parametrize("case", sorted(FEATURES))
def test_weight_decay_and_a_schedule(case):
    make, ref, _ = FEATURES[case]

    def minimize(loss):
        rate = fluid.layers.exponential_decay(0.1, decay_steps=2, decay_rate=0.5)
        return make(rate, regularization=l2(0.05)).minimize(loss)

    prog, start = trained(float64(lambda: Minimizing(minimize)), steps=6)
    rates = [0.1 * 0.5 ** (k / 2) for k in range(6)]
    expected = reference_run(ref(reg=dict.fromkeys(ALL, ("l2", 0.05))), start, 6, rates)
    assert_close(prog, expected)


@pytest.mark.parametrize("case", sorted(FEATURES))
def test_parameter_list_and_no_grad_set(case):
    make, ref, _ = FEATURES[case]

    def minimize(loss):
        return make(parameter_list=["fc_1.w_0", "fc_1.b_0", "fc_0.w_0"]).minimize(
            loss, no_grad_set=["fc_0.w_0"])

    prog, start = trained(float64(lambda: Minimizing(minimize)), steps=4)
    expected = reference_run(ref(only={"fc_1.w_0", "fc_1.b_0"}), start, 4)
    assert_close(prog, expected)
    # no state for the parameters left out
    assert not [n for n in prog.var_names() if n.startswith("fc_0.") and n not in ALL]


@pytest.mark.parametrize("case", sorted(FEATURES))
def test_state_is_named_as_paddle_saved_loaded_and_rewound(case, tmp_path):
    make, _, keys = FEATURES[case]
    prog = float64(make)().Compile(seed=1)
    prog.keep_history()
    names = sorted(n for n in prog.var_names() if n not in ALL and n != "learning_rate_0")
    assert names == sorted(f"{p}_{k}_0" for p in ALL for k in keys)
    data = list(batches(n=5, dtype=np.float64))
    for x, y in data[:3]:
        prog.train(x, y)
    prog.save(str(tmp_path / "ckpt"))
    loaded = fluid.load(str(tmp_path / "ckpt"))
    before = {n: prog.get_var(n) for n in prog.var_names()}
    prog.train(*data[3])
    prog.rewind(1)
    for n, v in before.items():
        np.testing.assert_array_equal(prog.get_var(n), v, err_msg=n)
    for x, y in data[3:]:
        assert loaded.train(x, y) == prog.train(x, y)
    for n in prog.var_names():
        np.testing.assert_array_equal(prog.get_var(n), loaded.get_var(n), err_msg=n)


def test_a_named_optimizer_puts_its_name_in_its_state_names():
    prog = make_net(lambda: fluid.optimizer.Adagrad(0.1, name="ada"))().Compile()
    assert "fc_0.w_0_ada_moment_0" in prog.var_names()


def test_minimize_returns_paddles_pair_and_splits_in_two():
    seen = {}

    def minimize(loss):
        opt = fluid.optimizer.RMSProp(0.1)
        pairs = opt.backward(loss)
        seen["ops"] = opt.apply_gradients(pairs)
        seen["pairs"] = [(p.name, g.name) for p, g in pairs]
        seen["minimize"] = fluid.optimizer.Adagrad(0.1).minimize

    make_net(lambda: Minimizing(minimize))().Compile()
    assert seen["pairs"] == [(p, p + "@GRAD") for p in sorted(ALL)]
    assert [op.type for op in seen["ops"]] == ["rmsprop"] * 4


# --- Lookahead -----------------------------------------------------------------------------

def test_lookahead_blends_fast_and_slow_weights_every_k_steps():
    make = lambda: fluid.optimizer.LookaheadOptimizer(fluid.optimizer.SGD(0.1),  # noqa: E731
                                                      alpha=0.3, k=3)
    prog, start = trained(float64(make), steps=8)
    assert {"lookahead_step", "fc_0.w_0@SLOW"} <= set(prog.var_names())
    fast = {k: v.astype(np.float64) for k, v in start.items()}
    slow = {k: v.copy() for k, v in fast.items()}
    for step, (x, y) in enumerate(batches(n=8, dtype=np.float64), start=1):
        _, grads = forward_backward(fast, x, y)
        for n, g in grads.items():
            fast[n] = fast[n] - 0.1 * g
            if step % 3 == 0:
                slow[n] = fast[n] = 0.3 * fast[n] + 0.7 * slow[n]
    assert_close(prog, fast)
    np.testing.assert_allclose(prog.get_var("fc_1.w_0@SLOW"), slow["fc_1.w_0"], rtol=1e-6)
    assert int(prog.get_var("lookahead_step")[0]) == 8


# --- ModelAverage and ExponentialMovingAverage --------------------------------------------

class Averaged(fluid.Program):
    """The model of `make_net` with Momentum, and an average made after minimize."""
    average = "model"
    averager = None

    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[3], dtype="float64")
        y = fluid.layers.data(name="y", shape=[1], dtype="float64")
        h = fluid.layers.fc(input=x, size=4, act="tanh")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(
            fluid.layers.fc(input=h, size=1), y))
        fluid.optimizer.Momentum(0.1, 0.5).minimize(loss)
        if self.average == "model":
            self.averager = fluid.optimizer.ModelAverage(0.5, min_average_window=2,
                                                         max_average_window=3)
        else:
            self.averager.update()
        return loss


def momentum_trajectory(start, steps):
    params = {k: v.astype(np.float64) for k, v in start.items()}
    v = dict.fromkeys(params, 0.0)
    out = []
    for x, y in batches(n=steps, dtype=np.float64):
        _, grads = forward_backward(params, x, y)
        for n, g in grads.items():
            v[n] = 0.5 * v[n] + g
            params[n] = params[n] - 0.1 * v[n]
        out.append({k: a.copy() for k, a in params.items()})
    return out


def test_model_average_applies_paddles_window_average_and_restores():
    from ops.test_optim2_ops import average_ref
    net = Averaged()
    prog = net.Compile(seed=2)
    start = prog.parameters()
    for x, y in batches(n=7, dtype=np.float64):
        prog.train(x, y)
    trained_now = prog.parameters()
    expected = {}
    for name in ALL:
        state = [np.zeros_like(start[name]) for _ in range(3)] + [0, 0, 0]
        for params in momentum_trajectory(start, 7):
            state = list(average_ref(params[name], *state, 0.5, 2, 3))
        expected[name] = (state[0] + state[1] + state[2]) / (state[3] + state[4])
    assert sorted(n for n in prog.var_names() if n.startswith("fc_0.w_0_")) == sorted(
        f"fc_0.w_0_{k}_0" for k in ("velocity", "sum_1", "sum_2", "sum_3", "num_accumulates",
                                    "old_num_accumulates", "num_updates"))
    with net.averager.apply(prog):
        assert_close(prog, expected)
    for name, value in prog.parameters().items():
        np.testing.assert_array_equal(value, trained_now[name])
    with net.averager.apply(prog, need_restore=False):
        pass
    assert_close(prog, expected)
    net.averager.restore(prog)
    np.testing.assert_array_equal(prog.parameters()["fc_1.w_0"], trained_now["fc_1.w_0"])


def test_ema_applies_the_corrected_average():
    ema = fluid.optimizer.ExponentialMovingAverage(0.9)
    prog = Averaged(average="ema", averager=ema).Compile(seed=2)
    start = prog.parameters()
    for x, y in batches(n=5, dtype=np.float64):
        prog.train(x, y)
    averages = {k: np.zeros_like(v) for k, v in start.items()}
    for params in momentum_trajectory(start, 5):
        for n in ALL:
            averages[n] = 0.9 * averages[n] + 0.1 * params[n]
    assert int(prog.get_var("@EMA_STEP_COUNTER@")[0]) == 5
    with ema.apply(prog):
        assert_close(prog, {n: a / (1 - 0.9 ** 5) for n, a in averages.items()})
    np.testing.assert_allclose(prog.get_var("fc_0.w_0_ema_0"), averages["fc_0.w_0"], rtol=1e-6)


def test_ema_decay_follows_thres_steps():
    class Scheduled(fluid.Program):
        @fluid.network("x", "t")
        def train(self, x, t):
            x = fluid.layers.data(name="x", shape=[3])
            t = fluid.layers.data(name="t", shape=[1], dtype="int64", append_batch_size=False)
            loss = fluid.layers.mean(fluid.layers.fc(input=x, size=1))
            fluid.optimizer.SGD(0.1).minimize(loss)
            fluid.optimizer.ExponentialMovingAverage(0.9, thres_steps=t).update()
            return loss

    prog = Scheduled().Compile()
    for step, expected in [(0, 0.1), (5, 6 / 15), (100, 0.9)]:
        prog.train(np.ones((2, 3), np.float32), np.array([step], np.int64))
        np.testing.assert_allclose(prog.get_var("scheduled_ema_decay_rate"), [expected],
                                   rtol=1e-6)


# --- Recompute -----------------------------------------------------------------------------

def deep(recompute):
    """bench_recompute's deep MLP, small: 6 layers of 64."""
    from benchmarks.bench_recompute import deep_mlp
    return deep_mlp(recompute, depth=6, width=64)


def test_recompute_gives_bit_identical_parameters_and_recomputes_between_checkpoints():
    rng = np.random.default_rng(0)
    data = [(rng.standard_normal((256, 64)).astype(np.float32),
             rng.standard_normal((256, 1)).astype(np.float32)) for _ in range(4)]
    plain = deep(False)().Compile(seed=1)
    again = deep(True)().Compile(seed=1)
    for x, y in data:
        assert plain.train_step(x, y) == again.train_step(x, y)
    for name, value in plain.parameters().items():
        np.testing.assert_array_equal(again.parameters()[name], value, err_msg=name)
    ops = again.program.block("train_step").ops
    recomputed = [op for op in ops if any("@RECOMPUTE" in n for n in op.output_names())]
    assert recomputed and all(op.role == fluid.OpRole.BACKWARD for op in recomputed)
    # the forward values between checkpoints are read by forward ops only
    first_backward = next(i for i, op in enumerate(ops) if op.role & fluid.OpRole.BACKWARD)
    inner = {n for op in recomputed for n in op.output_names()}
    originals = {n.split("@RECOMPUTE")[0] for n in inner}
    assert not originals & {n for op in ops[first_backward:] for n in op.input_names()}
    # so the plan holds fewer buffers at once (benchmarks/bench_recompute.py: the peak)
    held = [p.train_step.runner.memory.nbytes for p in (plain, again)]
    assert held[1] < 0.9 * held[0], held


# --- errors at the user's line -------------------------------------------------------------

def test_a_clip_where_an_optimizer_belongs_is_named_at_the_users_line():
    clip = fluid.clip.GradientClipByGlobalNorm(1.0)
    with pytest.raises(TypeError, match="gradient clip: give it to the optimizer as "
                                        "grad_clip=") as e:
        fluid.optimizer.LookaheadOptimizer(clip)
    assert "test_optimizers2.py" in str(e.value)
    with pytest.raises(fluid.OpArgumentError, match="RecomputeOptimizer"):
        fluid.optimizer.RecomputeOptimizer(clip)
    with pytest.raises(fluid.OpArgumentError, match="learning_rate got a gradient clip"):
        fluid.optimizer.Adagrad(clip)
    with pytest.raises(fluid.OpArgumentError, match="grad_clip must be a fluid.clip.*an optimizer"):
        fluid.optimizer.SGD(0.1, grad_clip=fluid.optimizer.SGD(0.1))


def test_model_average_applied_before_any_step_says_train_first():
    net = Averaged()
    prog = net.Compile(seed=0)
    before = prog.parameters()
    with pytest.raises(fluid.FluidError, match="no step has been averaged yet") as e:
        with net.averager.apply(prog):
            pass
    assert "test_optimizers2.py" in str(e.value)
    for name, value in prog.parameters().items():
        np.testing.assert_array_equal(value, before[name])
    ema = fluid.optimizer.ExponentialMovingAverage(0.9)
    with pytest.raises(fluid.FluidError, match="no step has been averaged yet"):
        with ema.apply(Averaged(average="ema", averager=ema).Compile()):
            pass
    with pytest.raises(fluid.FluidError, match="recorded nothing yet"):
        with fluid.optimizer.ExponentialMovingAverage(0.9).apply(prog):
            pass
