"""The Ray engine and the TRAINING_ROLE processes, on one private `ray start --head` cluster
for the module (127.0.0.1 only, its own temporary directory, token authentication, stopped
by PID).

Exactness: the Ray engine and the role processes run the same kernels on the same arrays in
the same order as the in-process engine (the servers sum the trainers' gradients in trainer
order), so their parameters are compared bit for bit."""
import os

import numpy as np
import pytest
from distributed.nets import MLP, batches, linear_data
from distributed.ray_support import (
    JOB_SCRIPT,
    assert_gone,
    assert_same,
    finish,
    fit_reference,
    job_env,
    kill,
    needs_ray,
    params_of_checkpoint,
    processes,
    read_until,
    spawn,
    sys,
    write_fit_data,
)

import fluid
from fluid_interactive.distributed import launch, transpile
from fluid_interactive.distributed.ray_cluster import RayHead

ray = needs_ray()
__all__ = ["processes"]   # a fixture


@pytest.fixture(scope="module")
def cluster():
    head = RayHead(num_cpus=2, token=os.environ["RAY_AUTH_TOKEN"]).start()
    ray.init(address=head.address, namespace="tests", log_to_driver=False,
             configure_logging=False)
    try:
        yield head
    finally:
        pids = head.pids()
        ray.shutdown()
        head.stop()
        assert_gone(pids)


@pytest.fixture(scope="module")
def fit_data(tmp_path_factory):
    return write_fit_data(str(tmp_path_factory.mktemp("data") / "fit.recordio"))


# --- the engine -----------------------------------------------------------------------------------

def test_sync_on_ray_equals_the_in_process_engine_bit_for_bit(cluster):
    """The MLP (Adam with L2 decay, its weights and accumulators cut into row blocks over
    both servers): 12 steps; losses, parameters, accumulators and predictions identical.
    (fit_a_line is compared the same way in the tests below.)"""
    plan = transpile(MLP().Compile(seed=1), trainers=2, pservers=2, min_block_size=4)
    assert len(plan.param_blocks("mlp/fc_0.w_0")) == 2
    data = linear_data(seed=3)
    with launch(plan, engine="ray", timeout=60) as on_ray, launch(plan) as local:
        assert on_ray.engine == "ray" and type(on_ray) is type(local)
        assert_same(on_ray.parameters(), local.parameters())
        for xb, yb in batches(*data, 16, 12):
            assert on_ray.train_step(xb, yb) == local.train_step(xb, yb)
        assert_same(on_ray.parameters(), local.parameters())
        state = [n for n in plan.program.global_block().vars if plan.locate(n) is not None]
        assert any("moment" in n for n in state)
        for name in state:
            np.testing.assert_array_equal(on_ray.get_var(name), local.get_var(name))
        x = data[0][:4]
        np.testing.assert_array_equal(on_ray.predict(x), local.predict(x))


def test_a_killed_server_restarts_and_the_run_ends_exactly(cluster, fit_data, tmp_path):
    """SIGKILL pserver 0's actor process mid-training: Ray restarts it, it resumes from its
    last prepared step, the trainers retry their exchanges, and after 30 steps every
    parameter equals the uninterrupted in-process run's. Then dist.save writes a checkpoint
    that fluid.load opens as a single-process program."""
    from distributed.fit_job import FitALine as FileFit
    plan = transpile(FileFit(DEFAULT_READER_FILE_PATH=fit_data).Compile(seed=0),
                     trainers=2, pservers=2, min_block_size=4)
    expected, _ = fit_reference(fit_data, trainers=2, pservers=2, steps=30)
    with launch(plan, engine="ray", timeout=60) as dist:
        first = dist.pservers[plan.endpoints[0]]
        victim = first.pid()
        for step in range(30):
            dist.train_step()
            if step == 12:
                kill(victim)
        assert first.pid() != victim
        assert first.status().restored
        assert_same(dist.parameters(), expected)
        dist.save(str(tmp_path / "ckpt"))
        actors = [ps.pid() for ps in dist.pservers.values()] + \
            [t.pid() for t in dist.trainers]
        y = dist.infer(np.ones((2, 13), np.float32))
    assert_gone(actors + [victim])
    single = fluid.load(str(tmp_path / "ckpt"))
    assert_same(single.parameters(), expected)
    np.testing.assert_array_equal(single.infer(np.ones((2, 13), np.float32)), y)


# --- the TRAINING_ROLE processes ------------------------------------------------------------

def _roles(cluster, tmp_path, processes, job, trainers, mode="sync", timeout=60, pause=0.0):
    """One PSERVER (`fluid run`) and ``trainers`` TRAINER (`python`) processes of
    fit_job.py, as separate OS processes."""
    data = write_fit_data(str(tmp_path / "fit.recordio"))
    flag = ["--distributed", f"main=train_step,mode={mode}"]
    env = job_env(cluster.env(), job, PADDLE_TRAINERS_NUM=trainers, FIT_DATA=data,
                  FIT_OUT=tmp_path / "out", FLUID_TIMEOUT=timeout, FIT_STEP_SLEEP=pause,
                  FLUID_STATE_DIR=tmp_path / "state")
    fluid_cli = [os.path.join(os.path.dirname(sys.executable), "fluid"), "run"]
    server = spawn(fluid_cli + [JOB_SCRIPT] + flag, dict(env, TRAINING_ROLE="PSERVER"),
                   str(tmp_path))
    workers = [spawn([sys.executable, JOB_SCRIPT] + flag,
                     dict(env, TRAINING_ROLE="TRAINER", PADDLE_TRAINER_ID=str(k)),
                     str(tmp_path)) for k in range(trainers)]
    processes += [server] + workers
    return data, server, workers


def test_the_two_role_commands_as_separate_processes(cluster, tmp_path, processes):
    data, server, workers = _roles(cluster, tmp_path, processes, "roles-sync", trainers=2)
    outs = finish(workers + [server], timeout=240)
    report = "\n---\n".join(outs)
    assert [p.returncode for p in workers + [server]] == [0, 0, 0], report
    assert "pserver 0 pid " in outs[2] and "every trainer finished (step 40" in outs[2]
    for out in outs[:2]:
        assert "trained 40 steps" in out        # 1280 samples, 16 per trainer and step
    expected, steps = fit_reference(data, trainers=2, pservers=1)
    assert steps == 40
    assert_same(params_of_checkpoint(str(tmp_path / "out")), expected)


def test_sync_job_reports_a_dead_trainer_and_stops_cleanly(cluster, tmp_path, processes):
    data, server, workers = _roles(cluster, tmp_path, processes, "roles-dead", trainers=2,
                                   timeout=4, pause=0.05)
    seen = []
    read_until(workers[1], "step 10", timeout=120, seen=seen)
    kill(workers[1].pid)
    outs = finish([workers[0], server, workers[1]], timeout=120)
    assert workers[0].returncode != 0 and server.returncode == 1, outs
    assert "trainer(s) 1 never sent their gradients" in outs[0]
    assert "stopping: trainer 1 is missing" in outs[1]
    assert_gone([workers[0].pid, workers[1].pid, server.pid])


def test_async_job_carries_on_without_a_dead_trainer(cluster, tmp_path, processes):
    data, server, workers = _roles(cluster, tmp_path, processes, "roles-async", trainers=2,
                                   mode="async", timeout=4, pause=0.05)
    seen = []
    read_until(workers[1], "step 10", timeout=120, seen=seen)
    kill(workers[1].pid)
    outs = finish([workers[0], server, workers[1]], timeout=120)
    assert workers[0].returncode == 0 and server.returncode == 0, outs
    assert "trained 40 steps" in outs[0]
    assert "the job went on without it (async mode)" in outs[1]
    assert_gone([workers[0].pid, workers[1].pid, server.pid])
