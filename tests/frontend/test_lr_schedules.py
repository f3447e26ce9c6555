"""Learning-rate schedules end to end: a tiny fc trained under each schedule against a
NumPy re-computation (float64) of the optimizer with the scheduled rate; the step counter
(one per program, int64, advanced once per call, committed with the parameters); roles;
argument errors at the user's line; save/load; and the transpiler placing the schedule on
every parameter server, where sync training matches one process."""
import math
import os
import re

import numpy as np
import pytest

import fluid
from fluid_interactive.frontend.layers.lr import LR_COUNTER
from fluid_interactive.ir.records import OpRole

THIS_FILE = os.path.basename(__file__)
STEPS = 12
SCHEDULE_OPS = ("exponential_decay", "piecewise_decay", "cosine_decay", "noam_decay",
                "polynomial_decay", "inverse_time_decay", "natural_exp_decay",
                "linear_lr_warmup")

# name -> (the layer call, the rate at step k by Paddle's formula)
SCHEDULES = {
    "exponential": (lambda: fluid.layers.exponential_decay(0.2, 4, 0.5),
                    lambda k: 0.2 * 0.5 ** (k / 4)),
    "exponential_staircase": (lambda: fluid.layers.exponential_decay(
        learning_rate=0.2, decay_steps=3, decay_rate=0.5, staircase=True),
        lambda k: 0.2 * 0.5 ** math.floor(k / 3)),
    "piecewise": (lambda: fluid.layers.piecewise_decay(boundaries=[3, 7, 10],
                                                       values=[0.3, 0.1, 0.05, 0.01]),
                  lambda k: [0.3, 0.1, 0.05, 0.01][sum(k >= b for b in (3, 7, 10))]),
    "cosine": (lambda: fluid.layers.cosine_decay(learning_rate=0.25, step_each_epoch=2,
                                                 epochs=5),
               lambda k: 0.25 * 0.5 * (math.cos(math.pi * math.floor(k / 2) / 5) + 1)),
    "noam": (lambda: fluid.layers.noam_decay(d_model=16, warmup_steps=4, learning_rate=0.5),
             lambda k: 0.5 * 16 ** -0.5 * min((k + 1) ** -0.5, 4 ** -1.5 * (k + 1))),
    "polynomial": (lambda: fluid.layers.polynomial_decay(0.3, 5, end_learning_rate=0.01,
                                                         power=2.0),
                   lambda k: (0.3 - 0.01) * (1 - min(k, 5) / 5) ** 2.0 + 0.01),
    "polynomial_cycle": (lambda: fluid.layers.polynomial_decay(0.3, 4, 0.01, 1.0, cycle=True),
                         lambda k: (0.3 - 0.01) * (1 - k / (4 * max(math.ceil(k / 4), 1)))
                         + 0.01),
    "inverse_time": (lambda: fluid.layers.inverse_time_decay(0.2, 3, 0.5),
                     lambda k: 0.2 / (1 + 0.5 * k / 3)),
    "inverse_time_staircase": (lambda: fluid.layers.inverse_time_decay(0.2, 3, 0.5, True),
                               lambda k: 0.2 / (1 + 0.5 * math.floor(k / 3))),
    "natural_exp": (lambda: fluid.layers.natural_exp_decay(0.2, 4, 0.3),
                    lambda k: 0.2 * math.exp(-0.3 * k / 4)),
    "natural_exp_staircase": (lambda: fluid.layers.natural_exp_decay(0.2, 4, 0.3, True),
                              lambda k: 0.2 * math.exp(-0.3 * math.floor(k / 4))),
    "warmup": (lambda: fluid.layers.linear_lr_warmup(0.2, 5, 0.0, 0.1),
               lambda k: 0.1 * k / 5 if k < 5 else 0.2),
    "warmup_of_a_schedule": (
        lambda: fluid.layers.linear_lr_warmup(fluid.layers.piecewise_decay([7], [0.3, 0.1]),
                                              warmup_steps=4, start_lr=0.05, end_lr=0.25),
        lambda k: 0.05 + 0.2 * k / 4 if k < 4 else (0.3 if k < 7 else 0.1)),
}


def make_optimizer(kind, lr):
    if kind == "sgd":
        return fluid.optimizer.SGD(learning_rate=lr)
    if kind == "momentum":
        return fluid.optimizer.Momentum(learning_rate=lr, momentum=0.9)
    return fluid.optimizer.Adam(learning_rate=lr)


class Linear(fluid.Program):
    """x[?,3] -> fc(1) -> mean squared error, under a learning-rate schedule."""
    schedule = "exponential"
    optimizer = "sgd"

    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[3])
        y = fluid.layers.data(name="y", shape=[1])
        pred = fluid.layers.fc(input=x, size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        lr = SCHEDULES[self.schedule][0]()
        make_optimizer(self.optimizer, lr).minimize(loss)
        return {"loss": loss, "lr": lr}


def data(seed=3, n=STEPS, batch=8):
    rng = np.random.default_rng(seed)
    true_w = np.array([[1.0], [-2.0], [0.5]])
    for _ in range(n):
        x = rng.standard_normal((batch, 3))
        y = x @ true_w + 0.3 + 0.1 * rng.standard_normal((batch, 1))
        yield x.astype(np.float32), y.astype(np.float32)


class Reference:
    """SGD / Momentum / Adam of notes §5.2 in float64, at a rate given per step."""

    def __init__(self, kind, params):
        self.kind = kind
        self.p = {k: v.astype(np.float64) for k, v in params.items()}
        self.state = {}

    def step(self, x, y, lr):
        w, b = self.p["fc_0.w_0"], self.p["fc_0.b_0"]
        pred = x @ w + b
        dpred = 2.0 * (pred - y) / pred.size
        grads = {"fc_0.w_0": x.T @ dpred, "fc_0.b_0": dpred.sum(0)}
        for name, g in grads.items():
            if self.kind == "sgd":
                delta = lr * g
            elif self.kind == "momentum":
                v = 0.9 * self.state.get(name, 0.0) + g
                self.state[name] = v
                delta = lr * v
            else:
                # The beta powers are float32 state in the program: 1 - 0.999 loses five
                # digits there, so the reference keeps them in float32 too.
                m1, m2, b1p, b2p = self.state.get(
                    name, (0.0, 0.0, np.float32(0.9), np.float32(0.999)))
                m1, m2 = 0.9 * m1 + 0.1 * g, 0.999 * m2 + 0.001 * g * g
                delta = lr * math.sqrt(1 - float(b2p)) / (1 - float(b1p)) * m1 / (
                    np.sqrt(m2) + 1e-8)
                self.state[name] = (m1, m2, b1p * np.float32(0.9), b2p * np.float32(0.999))
            self.p[name] = self.p[name] - delta
        return float(np.mean((pred - y) ** 2))


def check_training(prog, kind, rate, first_step=0, steps=STEPS, batches=None):
    """Train ``prog`` and the reference side by side; after every step the returned rate
    is the schedule's at that step and the parameters match."""
    ref = Reference(kind, prog.parameters())
    for i, (x, y) in enumerate(batches if batches is not None else data(n=steps)):
        k = first_step + i
        out = prog.train(x, y)
        assert out["lr"] == pytest.approx(rate(k), rel=1e-6), k
        loss = ref.step(x.astype(np.float64), y.astype(np.float64), rate(k))
        assert out["loss"] == pytest.approx(loss, rel=1e-5, abs=1e-6), k
        for name, value in prog.parameters().items():
            np.testing.assert_allclose(value, ref.p[name], rtol=1e-5, atol=1e-6,
                                       err_msg=f"{name} after step {k}")
        assert prog.get_var(LR_COUNTER).tolist() == [k + 1]


# --- training under each schedule -------------------------------------------------------------

@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_sgd_under_each_schedule_matches_numpy(schedule):
    prog = Linear(schedule=schedule).Compile(seed=0)
    rates = [SCHEDULES[schedule][1](k) for k in range(STEPS)]
    assert len(set(rates)) > 2          # the schedule really changes over these steps
    check_training(prog, "sgd", SCHEDULES[schedule][1])


@pytest.mark.parametrize("kind", ["momentum", "adam"])
@pytest.mark.parametrize("schedule", ["piecewise", "cosine"])
def test_momentum_and_adam_take_a_scheduled_rate(kind, schedule):
    prog = Linear(schedule=schedule, optimizer=kind).Compile(seed=1)
    check_training(prog, kind, SCHEDULES[schedule][1])


@pytest.mark.parametrize("schedule", ["polynomial_cycle", "noam", "warmup_of_a_schedule"])
def test_rewind_takes_the_schedule_back(schedule):
    """Rewinding calls rewinds the step counter with them: the calls after it see the rates
    of the steps they replay."""
    prog = Linear(schedule=schedule).Compile(seed=0)
    prog.keep_history()
    batches = list(data(n=6))
    first = [prog.train(x, y)["lr"] for x, y in batches]
    prog.rewind(4)
    again = [prog.train(x, y)["lr"] for x, y in batches[2:]]
    assert again == first[2:]
    rate = SCHEDULES[schedule][1]
    assert again == pytest.approx([rate(k) for k in range(2, 6)], rel=1e-6)


def test_step_zero_uses_the_initial_rate():
    for name, (_, rate) in SCHEDULES.items():
        prog = Linear(schedule=name).Compile(seed=0)
        x, y = next(data())
        assert prog.train(x, y)["lr"] == pytest.approx(rate(0), rel=1e-7)
        first = {"cosine": 0.25, "piecewise": 0.3, "noam": 0.5 * 16 ** -0.5 * 4 ** -1.5,
                 "polynomial": 0.3, "polynomial_cycle": 0.3, "warmup": 0.0,
                 "warmup_of_a_schedule": 0.05}
        assert rate(0) == pytest.approx(first.get(name, 0.2), rel=1e-12)


# --- the counter and roles ------------------------------------------------------------------------

class TwoSchedules(fluid.Program):
    """Two schedules in one method (one increment), a third in another method."""

    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[3])
        y = fluid.layers.data(name="y", shape=[1])
        pred = fluid.layers.fc(input=x, size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        lr = fluid.layers.exponential_decay(0.1, 2, 0.5)
        fluid.optimizer.SGD(learning_rate=lr).minimize(loss)
        pw = fluid.layers.piecewise_decay([1, 2], [3.0, 2.0, 1.0])
        return lr, pw

    @fluid.network()
    def rate(self):
        return fluid.layers.cosine_decay(1.0, 1, 4)


def test_counter_is_one_int64_state_var_and_every_schedule_op_is_lrsched():
    prog = TwoSchedules().Compile(seed=0)
    g0 = prog.program.global_block()
    counter = g0.vars[LR_COUNTER]
    assert counter.persistable and not counter.is_parameter
    assert (counter.dtype, counter.shape) == ("int64", (1,))
    inits = [op for op in g0.ops if LR_COUNTER in op.output_names()]
    assert len(inits) == 1 and inits[0].type == "fill_constant"
    assert inits[0].attrs["value"] == 0 and inits[0].role == OpRole.LRSCHED
    assert LR_COUNTER in prog.var_names() and prog.get_var(LR_COUNTER).dtype == np.int64
    for method, schedules in (("train", ["exponential_decay", "piecewise_decay"]),
                              ("rate", ["cosine_decay"])):
        ops = prog.program.block(method).ops
        lr_ops = [op for op in ops if op.type in SCHEDULE_OPS + ("increment",)]
        assert [op.type for op in lr_ops] == schedules + ["increment"]
        assert all(op.role == OpRole.LRSCHED for op in lr_ops)
        assert [op for op in ops if op.role & OpRole.LRSCHED] == lr_ops
        inc = lr_ops[-1]
        assert inc.inputs == {"X": [LR_COUNTER]} and inc.outputs == {"Out": [LR_COUNTER]}
        assert inc.attrs == {"step": 1.0}
        for op in lr_ops[:-1]:
            assert op.inputs == {"Step": [LR_COUNTER]}
            out = prog.program.find_var(prog.program.block(method), op.outputs["Out"][0])
            assert (out.shape, out.dtype, out.persistable) == ((1,), "float32", False)
            assert out.stop_gradient
        # the increment is the last LR op: every schedule of a call reads the same step
        assert ops.index(inc) > max(ops.index(op) for op in lr_ops[:-1])
    # no gradient flows into a schedule
    assert not any(op.type.endswith("_decay_grad") for b in prog.program.blocks for op in b.ops)


def test_schedules_of_a_call_share_its_step_and_methods_share_the_counter():
    prog = TwoSchedules().Compile(seed=0)
    x, y = next(data())
    assert prog.train(x, y) == pytest.approx((0.1, 3.0))       # k = 0 for both schedules
    assert prog.train(x, y) == pytest.approx((0.1 * 0.5 ** 0.5, 2.0))   # k = 1
    assert prog.get_var(LR_COUNTER).tolist() == [2]
    assert prog.rate() == pytest.approx(0.5 * (math.cos(math.pi * 2 / 4) + 1))  # k = 2
    assert prog.get_var(LR_COUNTER).tolist() == [3]
    assert prog.train(x, y) == pytest.approx((0.1 * 0.5 ** 1.5, 1.0))   # k = 3


def test_counter_can_be_set_to_resume_at_a_step():
    prog = Linear(schedule="piecewise").Compile(seed=0)
    prog.set_var(LR_COUNTER, np.array([7]))
    x, y = next(data())
    assert prog.train(x, y)["lr"] == pytest.approx(0.05)
    assert prog.get_var(LR_COUNTER).tolist() == [8]


def test_each_compile_has_its_own_counter():
    a, b = Linear().Compile(seed=0), Linear().Compile(seed=0)
    x, y = next(data())
    a.train(x, y)
    a.train(x, y)
    assert a.get_var(LR_COUNTER).tolist() == [2] and b.get_var(LR_COUNTER).tolist() == [0]


# --- a failing step does not advance the counter ---------------------------------------------

def _break_sgd(prog):
    """Make the last sgd kernel of the plan raise: it runs after the increment."""
    code = list(prog.train._runner.plans.values())[0]
    ns = code.code.fn.__globals__
    sgd = sorted(k for k in ns if k.endswith("_sgd"))[-1]
    inc = [k for k in ns if k.endswith("_increment")]
    assert len(inc) == 1
    lines = code.code.source.splitlines()
    assert min(i for i, s in enumerate(lines) if sgd in s) > min(
        i for i, s in enumerate(lines) if inc[0] in s)
    original = ns[sgd]

    def boom(*args):
        raise FloatingPointError("injected failure")
    ns[sgd] = boom
    return lambda: ns.__setitem__(sgd, original)


def test_a_failing_step_leaves_the_counter_and_parameters_alone():
    prog = Linear(schedule="exponential_staircase").Compile(seed=0)
    batches = list(data())
    rate = SCHEDULES["exponential_staircase"][1]
    for x, y in batches[:3]:
        prog.train(x, y)
    before = {k: prog.get_var(k) for k in prog.var_names()}
    assert before[LR_COUNTER].tolist() == [3]
    restore = _break_sgd(prog)
    for _ in range(2):
        with pytest.raises(fluid.KernelError, match="injected failure"):
            prog.train(*batches[3])
        for k, v in before.items():
            np.testing.assert_array_equal(prog.get_var(k), v)
    restore()
    # the next call is step 3, not 5, and training goes on exactly as if nothing failed
    check_training(prog, "sgd", rate, first_step=3, batches=batches[3:])


# --- save / load ------------------------------------------------------------------------------

def test_counter_survives_save_and_load(tmp_path):
    rate = SCHEDULES["cosine"][1]
    batches = list(data())
    straight = Linear(schedule="cosine").Compile(seed=0)
    check_training(straight, "sgd", rate, batches=batches)

    prog = Linear(schedule="cosine").Compile(seed=0)
    check_training(prog, "sgd", rate, batches=batches[:5])
    prog.save(str(tmp_path / "ckpt"))
    loaded = fluid.load(str(tmp_path / "ckpt"))
    assert loaded.get_var(LR_COUNTER).tolist() == [5]
    assert loaded.get_var(LR_COUNTER).dtype == np.int64
    check_training(loaded, "sgd", rate, first_step=5, batches=batches[5:])
    for name, value in straight.parameters().items():
        np.testing.assert_array_equal(loaded.parameters()[name], value)
    assert loaded.get_var(LR_COUNTER).tolist() == [STEPS]


# --- argument errors at the user's line -------------------------------------------------------

def _line_of(marker):
    with open(__file__) as f:
        hits = [i for i, line in enumerate(f, 1) if line.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, marker
    return hits[0]


def _schedule_program(call):
    class Bad(fluid.Program):
        @fluid.network("x")
        def train(self, x):
            x = fluid.layers.data(name="x", shape=[3])
            call()
            return fluid.layers.fc(input=x, size=1)
    return Bad


BAD_CALLS = [
    (lambda: fluid.layers.exponential_decay(0.1, 0, 0.5),  # e-steps
     "e-steps", r"exponential_decay: decay_steps must be a positive number, got 0"),
    (lambda: fluid.layers.exponential_decay(0.1, -10, 0.5),  # e-neg
     "e-neg", r"decay_steps must be a positive number, got -10"),
    (lambda: fluid.layers.exponential_decay(0.1, 10, 0.0),  # e-rate
     "e-rate", r"decay_rate must be a positive number, got 0.0"),
    (lambda: fluid.layers.exponential_decay("0.1", 10, 0.5),  # e-lr
     "e-lr", r"learning_rate must be a positive number, got '0.1'"),
    (lambda: fluid.layers.piecewise_decay([10, 5], [0.1, 0.01, 0.001]),  # p-sorted
     "p-sorted", r"piecewise_decay: boundaries must be sorted in strictly increasing order, "
                 r"but 10 is followed by 5 in \[10, 5\]"),
    (lambda: fluid.layers.piecewise_decay([5, 10], [0.1, 0.01]),  # p-len
     "p-len", r"len\(values\) must be len\(boundaries\) \+ 1 .*got 2 boundaries and 2 values"),
    (lambda: fluid.layers.piecewise_decay([2.5], [0.1, 0.01]),  # p-int
     "p-int", r"boundaries must be integer step numbers, got 2.5"),
    (lambda: fluid.layers.piecewise_decay([2], [0.1, -1.0]),  # p-neg
     "p-neg", r"values must be non-negative numbers, got -1.0"),
    (lambda: fluid.layers.piecewise_decay(5, [0.1]),  # p-list
     "p-list", r"boundaries must be a list, got 5"),
    (lambda: fluid.layers.cosine_decay(0.1, 0, 10),  # c-steps
     "c-steps", r"cosine_decay: step_each_epoch must be a positive integer .*got 0"),
    (lambda: fluid.layers.cosine_decay(0.1, 100, -1),  # c-epochs
     "c-epochs", r"epochs must be a positive integer .*got -1"),
    (lambda: fluid.layers.cosine_decay(0.1, 1.5, 3),  # c-float
     "c-float", r"step_each_epoch must be a positive integer .*got 1.5"),
]


@pytest.mark.parametrize("call,marker,message", BAD_CALLS, ids=[m for _, m, _ in BAD_CALLS])
def test_bad_arguments_name_the_users_line(call, marker, message):
    with pytest.raises(fluid.OpArgumentError) as info:
        _schedule_program(call)().Compile()
    text = str(info.value)
    assert re.search(message, text), text
    assert re.search(rf"{THIS_FILE}:{_line_of(marker)}\b", text), text
    assert "(in train())" in text


def test_a_variable_learning_rate_is_refused_by_the_schedule():
    class VarRate(fluid.Program):
        @fluid.network("x")
        def train(self, x):
            x = fluid.layers.data(name="x", shape=[1], append_batch_size=False)
            fluid.layers.exponential_decay(x, 10, 0.5)  # var-lr
            return x
    with pytest.raises(fluid.OpArgumentError, match=r"learning_rate must be a Python number; "
                                                    r"a Variable \(x\)") as info:
        VarRate().Compile()
    assert f"{THIS_FILE}:{_line_of('var-lr')}" in str(info.value)


def test_schedules_need_a_traced_method():
    with pytest.raises(fluid.FluidError, match="exponential_decay can only be used inside"):
        fluid.layers.exponential_decay(0.1, 10, 0.5)


# --- distributed: the schedule runs on every parameter server --------------------------------

class TwoLayers(fluid.Program):
    """x[?,13] -> fc(8, tanh) -> fc(1); Momentum under a schedule; returns the loss only
    (the rate is computed on the servers once transpiled)."""
    schedule = "piecewise"

    @fluid.network("x", "y")
    def train(self, x, y):
        x = fluid.layers.data(name="x", shape=[13])
        y = fluid.layers.data(name="y", shape=[1])
        h = fluid.layers.fc(input=x, size=8, act="tanh")
        pred = fluid.layers.fc(input=h, size=1)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        fluid.optimizer.Momentum(learning_rate=SCHEDULES[self.schedule][0](),
                                 momentum=0.5).minimize(loss)
        return loss


def regression(n=16, steps=10, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((13, 1))
    for _ in range(steps):
        x = rng.standard_normal((n, 13))
        yield x.astype(np.float32), (x @ w + 0.5).astype(np.float32)


@pytest.mark.parametrize("schedule", ["exponential_staircase", "piecewise", "cosine"])
def test_transpiled_schedule_runs_on_every_pserver_and_matches_one_process(schedule):
    single = TwoLayers(schedule=schedule).Compile(seed=0)
    plan = fluid.transpile(TwoLayers(schedule=schedule).Compile(seed=0), main="train",
                           trainers=2, pservers=2, min_block_size=4)
    op_type = {"exponential_staircase": "exponential_decay", "piecewise": "piecewise_decay",
               "cosine": "cosine_decay"}[schedule]
    for ep in plan.endpoints:
        prog = plan.pserver_program(ep)
        lr_block = prog.blocks[plan.pserver_info(ep).lr_blocks["train"]]
        assert [op.type for op in lr_block.ops] == [op_type, "increment"]
        assert all(op.role == OpRole.LRSCHED for op in lr_block.ops)
        assert prog.global_block().vars[LR_COUNTER].persistable
        startup = plan.startup_program(ep).global_block()
        assert any(LR_COUNTER in op.output_names() for op in startup.ops)
        assert plan.pserver_info(ep).optimize_blocks        # each server updates something
    for t in range(2):
        trainer = plan.trainer_program(t)
        assert not any(op.role & OpRole.LRSCHED for b in trainer.blocks for op in b.ops)
        assert LR_COUNTER not in trainer.global_block().vars

    with fluid.distributed.launch(plan) as dist:
        for k, (x, y) in enumerate(regression()):
            a, b = single.train(x, y), dist.train(x, y)
            assert b == pytest.approx(a, rel=1e-5, abs=1e-6), k
        sp, dp = single.parameters(), dist.parameters()
        assert sorted(sp) == sorted(dp)
        for name in sp:
            np.testing.assert_allclose(dp[name], sp[name], rtol=0, atol=1e-5, err_msg=name)
        assert single.get_var(LR_COUNTER).tolist() == [10]
        for ps in dist.pservers.values():
            assert ps.get([LR_COUNTER])[0].tolist() == [10]
        assert dist.get_var(LR_COUNTER).tolist() == [10]
