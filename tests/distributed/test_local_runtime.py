"""The in-process runtime: sync training reproduces single-process training, async
converges, batches split evenly, failures stop the step cleanly, and nothing is left
running after close()."""
import threading
import time

import numpy as np
import pytest
from distributed.nets import (
    MLP,
    FedRate,
    FitALine,
    TwoHeads,
    batches,
    linear_data,
    max_diff,
    with_lr_schedule,
)
from frontend.test_gan import DATA, GAN, NOISE

from fluid_interactive.distributed import (
    DistributedProgram,
    LocalEngine,
    PServer,
    StepFailed,
    launch,
    transpile,
)
from fluid_interactive.distributed.engine import Engine
from fluid_interactive.distributed.interface import Communicator
from fluid_interactive.errors import FeedError, KernelError, ProgramDefinitionError

TOL = 1e-5


@pytest.fixture(autouse=True)
def no_threads_left_behind():
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        extra = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not extra:
            return
        time.sleep(0.01)
    pytest.fail(f"threads left running: {extra}")


def train_both(single, dist, method, data, steps, size):
    x, y = data
    out = []
    for xb, yb in batches(x, y, size, steps):
        out.append((getattr(single, method)(xb, yb), getattr(dist, method)(xb, yb)))
    return out


# --- sync mode equals one process --------------------------------------------------------------

@pytest.mark.parametrize("trainers,pservers,min_block", [(2, 2, 8192), (2, 2, 4), (4, 3, 2)])
def test_sync_fit_a_line_matches_single_process(trainers, pservers, min_block):
    single = FitALine().Compile(seed=0)
    plan = transpile(FitALine().Compile(seed=0), trainers=trainers, pservers=pservers,
                     min_block_size=min_block)
    with launch(plan) as dist:
        assert max_diff(dist.parameters(), single.parameters()) == 0.0  # same initial values
        losses = train_both(single, dist, "train_step", linear_data(), steps=20, size=16)
        assert max_diff(dist.parameters(), single.parameters()) <= TOL
        for a, b in losses:
            assert abs(a - b) <= 1e-5 * max(1.0, abs(a))
        assert isinstance(losses[-1][1], float)
        x = linear_data()[0][:5]
        np.testing.assert_allclose(dist.infer(x), single.infer(x), atol=TOL)


def test_sync_mlp_with_adam_matches_single_process():
    single = MLP().Compile(seed=1)
    plan = transpile(MLP().Compile(seed=1), trainers=2, pservers=2, min_block_size=16)
    assert len(plan.param_blocks("mlp/fc_0.w_0")) == 2     # the Adam state is sliced too
    with launch(plan) as dist:
        train_both(single, dist, "train_step", linear_data(seed=3), steps=20, size=8)
        assert max_diff(dist.parameters(), single.parameters()) <= TOL
        for name in single.var_names():
            np.testing.assert_allclose(dist.get_var(name), single.get_var(name), atol=TOL,
                                       err_msg=name)
        x = linear_data()[0][:4]
        np.testing.assert_allclose(dist.predict(x), single.predict(x), atol=TOL)


def test_sync_momentum_with_l1_decay_matches_single_process():
    single = MLP(optimizer="momentum").Compile(seed=2)
    plan = transpile(MLP(optimizer="momentum").Compile(seed=2), trainers=4, pservers=3,
                     split_method="hash", min_block_size=8)
    with launch(plan) as dist:
        train_both(single, dist, "train_step", linear_data(seed=4), steps=20, size=8)
        assert max_diff(dist.parameters(), single.parameters()) <= TOL


def test_sync_fed_learning_rate_matches_single_process():
    single = FedRate().Compile(seed=0)
    plan = transpile(FedRate().Compile(seed=0), main="train", trainers=3, pservers=2,
                     min_block_size=4)
    x, y = linear_data(n=60, seed=5)
    with launch(plan) as dist:
        for rate, (xb, yb) in zip([0.1, 0.05, 0.2, 0.0, 0.1], batches(x, y, 12, 5)):
            lr = np.array([rate], np.float32)
            a, b = single.train(xb, yb, lr), dist.train(xb, yb, lr)
            assert abs(a["loss"] - b["loss"]) < 1e-5
            np.testing.assert_allclose(b["pred"], a["pred"], atol=1e-5)   # rows in order
            assert b["pred"].shape == (12, 1)
        assert max_diff(dist.parameters(), single.parameters()) <= TOL


def test_two_optimizers_in_one_method():
    single = TwoHeads().Compile(seed=0)
    plan = transpile(TwoHeads().Compile(seed=0), trainers=2, pservers=2, min_block_size=4)
    with launch(plan) as dist:
        for a, b in train_both(single, dist, "train_step", linear_data(), steps=10, size=8):
            np.testing.assert_allclose(a, b, atol=1e-5)
            assert isinstance(b, tuple) and len(b) == 2
        assert max_diff(dist.parameters(), single.parameters()) <= TOL


def test_gan_with_two_distributed_methods():
    single = GAN().Compile(seed=3)
    plan = transpile(GAN().Compile(seed=3), main=("train_d", "train_g"), trainers=2,
                     pservers=3, min_block_size=4)
    rng = np.random.default_rng(5)
    real = (rng.standard_normal((16, DATA)) * 0.5 + [2.0, -1.0]).astype(np.float32)
    noise = rng.standard_normal((16, NOISE)).astype(np.float32)
    with launch(plan) as dist:
        for _ in range(8):
            assert abs(single.train_d(real, noise) - dist.train_d(real, noise)) < 1e-5
            assert abs(single.train_g(noise) - dist.train_g(noise)) < 1e-5
        assert max_diff(dist.parameters(), single.parameters()) <= TOL
        np.testing.assert_allclose(dist.generate(noise), single.generate(noise), atol=TOL)
        with pytest.raises(ProgramDefinitionError, match=r"train_d_real\(\) updates parameters"
                                                         r".*'train_d_real'"):
            dist.train_d_real(real)


def test_lr_schedule_runs_on_the_servers():
    single = with_lr_schedule(FitALine().Compile(seed=0))
    plan = transpile(with_lr_schedule(FitALine().Compile(seed=0)), trainers=2, pservers=2,
                     min_block_size=4)
    with launch(plan) as dist:
        train_both(single, dist, "train_step", linear_data(), steps=10, size=8)
        assert max_diff(dist.parameters(), single.parameters()) <= TOL
        np.testing.assert_allclose(dist.get_var("learning_rate_0"),
                                   single.get_var("learning_rate_0"), rtol=1e-6)
        np.testing.assert_allclose(dist.get_var("learning_rate_0"), 0.01 * 0.9 ** 10,
                                   rtol=1e-5)


# --- async ---------------------------------------------------------------------------------------

def test_async_fit_a_line_converges():
    plan = transpile(FitALine().Compile(seed=0), trainers=2, pservers=2, mode="async",
                     min_block_size=4)
    x, y = linear_data()
    with launch(plan) as dist:
        losses = [dist.train_step(xb, yb) for xb, yb in batches(x, y, 16, 300)]
        assert losses[-1] < 0.05 * losses[0]
        assert np.mean(losses[-20:]) < 0.1
        # every gradient of every trainer was applied on arrival
        assert sum(ps.updates for ps in dist.pservers.values()) == 300 * 2 * 3
        # other methods see the servers' latest parameters
        w = dist.parameters()
        pred = x[:4] @ w["prediction/fc_0.w_0"] + w["prediction/fc_0.b_0"]
        np.testing.assert_allclose(dist.infer(x[:4]), pred, rtol=1e-5, atol=1e-5)


# --- calls ---------------------------------------------------------------------------------------

@pytest.fixture
def fit_dist():
    plan = transpile(FitALine().Compile(seed=0), trainers=3, pservers=2)
    dist = launch(plan)
    yield dist
    dist.close()


def test_batch_must_split_evenly(fit_dist):
    x, y = linear_data(n=10)
    with pytest.raises(FeedError, match=r"batch of 10 rows cannot be split evenly across 3 "
                                        r"trainers \(x: 10 rows, y: 10 rows\)"):
        fit_dist.train_step(x, y)
    with pytest.raises(FeedError, match="different batch sizes: x has 9 rows, y has 6 rows"):
        fit_dist.train_step(x[:9], y[:6])
    with pytest.raises(FeedError, match="one sample"):
        fit_dist.train_step(x[0], y[0])
    with pytest.raises(TypeError, match="missing argument"):
        fit_dist.train_step(x[:9])
    fit_dist.train_step(x=x[:9], y=y[:9])     # keywords work
    assert isinstance(fit_dist.train_step(x[:9].tolist(), y[:9].tolist()), float)


def test_methods_and_repr(fit_dist):
    assert set(fit_dist.methods) == {"train_step", "infer"}
    assert fit_dist.methods["train_step"].distributed
    assert not fit_dist.methods["infer"].distributed
    assert "3 trainer(s), 2 pserver(s)" in repr(fit_dist)
    assert "send_barrier" in fit_dist.train_step.text
    assert isinstance(fit_dist, DistributedProgram)
    assert fit_dist.infer([1.0] * 13).shape == (1, 1)      # one sample: trainer 0 alone


def test_close_stops_everything():
    before = set(threading.enumerate())
    plan = transpile(FitALine().Compile(seed=0), trainers=4, pservers=2)
    dist = launch(plan)
    workers = [t for t in threading.enumerate() if t not in before]
    assert len(workers) == 4 and all(t.name.startswith("fluid-trainer-") for t in workers)
    dist.train_step(*linear_data(n=8))
    final = dist.parameters()
    dist.close()
    dist.close()                                  # twice is fine
    assert dist.closed and not any(t.is_alive() for t in workers)
    with pytest.raises(RuntimeError, match="closed"):
        dist.train_step(*linear_data(n=8))
    for name, value in dist.parameters().items():   # the final values stay readable
        np.testing.assert_array_equal(value, final[name])
    with launch(plan) as again:
        again.train_step(*linear_data(n=8))
    assert again.closed


def test_a_dropped_program_stops_its_threads():
    import gc
    plan = transpile(FitALine().Compile(seed=0), trainers=2, pservers=1)
    dist = launch(plan)
    workers = [t.thread for t in dist.trainers]
    dist.train_step(*linear_data(n=8))
    del dist
    gc.collect()
    for t in workers:
        t.join(timeout=5)
        assert not t.is_alive()


# --- failures ------------------------------------------------------------------------------------

def test_a_failing_trainer_stops_the_step_and_leaves_state_alone():
    single = FitALine().Compile(seed=0)
    plan = transpile(FitALine().Compile(seed=0), trainers=2, pservers=2, min_block_size=4)
    data = linear_data()
    with launch(plan, timeout=30) as dist:
        train_both(single, dist, "train_step", data, steps=3, size=8)
        comm = dist.trainers[1].comm
        real_send = comm.send

        def broken(*args):
            raise OSError("link down")
        comm.send = broken
        start = time.monotonic()
        with pytest.raises(KernelError, match="link down") as info:
            dist.train_step(*[a[:8] for a in data])
        assert time.monotonic() - start < 10          # aborted, not timed out
        assert any("trainer 1 of 2" in n for n in info.value.__notes__)
        assert max_diff(dist.parameters(), single.parameters()) <= TOL   # nothing applied
        comm.send = real_send
        train_both(single, dist, "train_step", data, steps=5, size=8)
        assert max_diff(dist.parameters(), single.parameters()) <= TOL


def test_a_server_lost_while_settling_a_failed_step_does_not_hide_the_step_error():
    """The step fails on a trainer; then aborting it on the servers fails too (a server
    exited meanwhile): the error raised is still the step's own, with the settling failure
    added as a note."""
    from fluid_interactive.distributed.errors import ServerUnreachable
    plan = transpile(FitALine().Compile(seed=0), trainers=2, pservers=2, min_block_size=4)
    data = linear_data()
    with launch(plan, timeout=30) as dist:
        dist.train_step(*[a[:8] for a in data])

        def broken(*args):
            raise OSError("link down")

        def gone(*args):
            raise ServerUnreachable("pserver 0 is unreachable")
        dist.trainers[1].comm.send = broken
        for server in dist.pservers.values():
            server.abort = gone
        with pytest.raises(KernelError, match="link down") as info:
            dist.train_step(*[a[:8] for a in data])
        assert any("settling step 2 on the servers failed too: ServerUnreachable: pserver 0 "
                   "is unreachable" in n for n in info.value.__notes__)


def test_a_failed_update_on_one_server_is_applied_on_none():
    """The weight's 13 rows are split 7 + 6 over two servers; the second server's update
    fails after the first computed its part: no row may change anywhere."""
    single = FitALine().Compile(seed=0)
    plan = transpile(FitALine().Compile(seed=0), trainers=2, pservers=2, min_block_size=4)
    assert [p.rows for p in plan.param_blocks("prediction/fc_0.w_0")] == [7, 6]
    data = linear_data()
    with launch(plan, timeout=30) as dist:
        train_both(single, dist, "train_step", data, steps=3, size=8)
        second = dist.pservers[plan.endpoints[1]]
        real_run = second._run

        def failing(arrived):
            raise FloatingPointError("injected overflow")
        second._run = failing
        before = dist.parameters()
        with pytest.raises(StepFailed, match=r"pserver 1 \(127.0.0.1:6175\): the update of "
                                             r"step 4 failed, so no server applies it") as info:
            dist.train_step(*[a[:8] for a in data])
        assert any("applied on no server" in n for n in info.value.__notes__)
        after = dist.parameters()
        for name in before:
            np.testing.assert_array_equal(after[name], before[name], err_msg=name)
        for t in dist.trainers:                       # trainers kept their values too
            for name, value in before.items():
                np.testing.assert_array_equal(t.get_var(name), value)
        second._run = real_run
        train_both(single, dist, "train_step", data, steps=5, size=8)
        assert max_diff(dist.parameters(), single.parameters()) <= TOL


def test_timeout_bounds_a_call_with_a_stalled_trainer():
    """Trainer 1 stalls for 4 s inside its step; with timeout=0.5 the call returns within
    about a second, naming the missing trainer, and training carries on afterwards."""
    single = FitALine().Compile(seed=0)
    plan = transpile(FitALine().Compile(seed=0), trainers=2, pservers=2, min_block_size=4)
    data = linear_data()
    with launch(plan, timeout=0.5) as dist:
        train_both(single, dist, "train_step", data, steps=2, size=8)
        comm = dist.trainers[1].comm
        real = comm.send_barrier
        stalled = threading.Event()

        def slow(*args):
            time.sleep(4.0)
            stalled.set()
            return real(*args)
        comm.send_barrier = slow
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=r"trainer 0 waited 0.5s for step 3; "
                                               r"trainer\(s\) 1 never sent") as info:
            dist.train_step(*[a[:8] for a in data])
        assert time.monotonic() - start < 2.5
        assert any("trainer(s) 1 still running the abandoned step 3" in n
                   for n in info.value.__notes__)
        comm.send_barrier = real
        assert stalled.wait(10)
        train_both(single, dist, "train_step", data, steps=3, size=8)
        assert max_diff(dist.parameters(), single.parameters()) <= TOL


# --- engines and interfaces ----------------------------------------------------------------------

def test_engines():
    plan = transpile(FitALine().Compile(seed=0), trainers=1, pservers=1)
    with pytest.raises(ValueError, match="no distributed engine named 'spark'; engines: local, "
                                         "ray"):
        launch(plan, "spark")
    with launch(plan, LocalEngine(), seed=0) as dist:
        assert dist.engine == "local"
    with pytest.raises(ValueError, match="timeout"):
        launch(plan, timeout=0)
    assert issubclass(LocalEngine, Engine)
    assert not hasattr(plan, "launch")      # running a plan is not the transpiler's business
    for cls in (PServer, Communicator, Engine):
        with pytest.raises(TypeError):
            cls()


def test_servers_start_from_the_seeded_initial_values():
    single = MLP().Compile(seed=7)
    plan = transpile(MLP().Compile(seed=7), trainers=2, pservers=2, min_block_size=16)
    with launch(plan) as dist:
        assert max_diff(dist.parameters(), single.parameters()) == 0.0
        for t in dist.trainers:           # and so do the trainers
            for name, value in single.parameters().items():
                np.testing.assert_array_equal(t.get_var(name), value)
    # another seed: the trainers still start from the servers' values
    with launch(plan, seed=8) as dist:
        params = dist.parameters()
        assert max_diff(params, single.parameters()) > 0
        for t in dist.trainers:
            for name, value in params.items():
                np.testing.assert_array_equal(t.get_var(name), value)
