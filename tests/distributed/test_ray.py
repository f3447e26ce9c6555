"""The Ray engine and the TRAINING_ROLE processes, on one private `ray start --head` cluster
for the module (127.0.0.1 only, its own temporary directory, token authentication, stopped
by PID).

Exactness: the Ray engine and the role processes run the same kernels on the same arrays in
the same order as the in-process engine (the servers sum the trainers' gradients in trainer
order), so their parameters are compared bit for bit."""
import gc
import logging
import os
import re
import shutil
import signal
import socket
import time

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
    private_cluster,
    processes,
    read_until,
    spawn,
    sys,
    write_fit_data,
)

import fluid
from fluid_interactive.distributed import launch, transpile
from fluid_interactive.distributed.ray_cluster import free_port

ray = needs_ray()
__all__ = ["processes"]   # a fixture


@pytest.fixture(scope="module")
def cluster():
    with private_cluster() as head:
        yield head


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


def test_an_lstm_on_ray_equals_the_in_process_engine(cluster):
    """The fused lstm op and its Adam state, cut over two servers: 5 steps of padded
    sequences with lengths, bit for bit (tests/distributed/test_sequence_models.py checks
    the in-process engine against one process)."""
    from distributed.test_sequence_models import SequenceClassifier, sequence_batches
    plan = transpile(SequenceClassifier().Compile(seed=0), trainers=2, pservers=2,
                     min_block_size=64)
    with launch(plan, engine="ray", timeout=60) as on_ray, launch(plan) as local:
        for x, n, y in sequence_batches(5):
            assert on_ray.train_step(x, n, y) == local.train_step(x, n, y)
        assert_same(on_ray.parameters(), local.parameters())


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
    """The documented role commands as separate OS processes, run from another working
    directory than the script's: one PSERVER (`fluid run main.py`, a relative path) and
    ``trainers`` TRAINERs (`python main.py`, absolute and relative paths in turn), each
    reading its own copy of the data (the same samples under another path)."""
    data = write_fit_data(str(tmp_path / "fit.recordio"))
    script_dir, cwd = tmp_path / "job", tmp_path / "elsewhere"
    script_dir.mkdir()
    cwd.mkdir()
    shutil.copy(JOB_SCRIPT, script_dir / "main.py")
    relative = os.path.join("..", "job", "main.py")
    absolute = str(script_dir / "main.py")
    flag = ["--distributed", f"main=train_step,mode={mode}"]
    env = job_env(cluster.env(), job, PADDLE_TRAINERS_NUM=trainers, FIT_OUT=tmp_path / "out",
                  FLUID_TIMEOUT=timeout, FIT_STEP_SLEEP=pause,
                  FLUID_STATE_DIR=tmp_path / "state")

    def own_data(name):
        path = str(tmp_path / f"{name}.recordio")
        shutil.copy(data, path)
        return path

    fluid_cli = [os.path.join(os.path.dirname(sys.executable), "fluid"), "run"]
    server = spawn(fluid_cli + [relative] + flag,
                   dict(env, TRAINING_ROLE="PSERVER", FIT_DATA=own_data("server")), str(cwd))
    if timeout <= 30:
        # A short timeout bounds finding the servers too: start the trainers once the
        # server is up (a busy machine takes longer than that to start it).
        read_until(server, "pserver 0 pid", timeout=180, seen=[])
    workers = [spawn([sys.executable, absolute if k % 2 == 0 else relative] + flag,
                     dict(env, TRAINING_ROLE="TRAINER", PADDLE_TRAINER_ID=str(k),
                          FIT_DATA=own_data(f"trainer-{k}")), str(cwd))
               for k in range(trainers)]
    processes += [server] + workers
    return data, server, workers


def test_the_role_commands_from_another_directory_by_relative_and_absolute_paths(
        cluster, tmp_path, processes):
    """Issue 19: the ops of `python /abs/main.py` record another path than those of
    `fluid run ../job/main.py`, and each role reads its data from another path; the server
    still accepts both trainers, and the job ends as one process would."""
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


def test_sync_job_names_a_dead_trainer_at_once_and_stops_cleanly(cluster, tmp_path, processes):
    """The role commands by hand (no launcher): trainer 1 is killed mid-training. Its
    process owned its token (`liveness`), which Ray ends with it, so the server names it
    within seconds, not after FLUID_TIMEOUT (120 s here, as by default), and fails the step
    trainer 0 waits in, saying why; trainer 0 is never named."""
    data, server, workers = _roles(cluster, tmp_path, processes, "roles-dead", trainers=2,
                                   timeout=120, pause=0.05)
    seen = []
    read_until(workers[1], "step 10", timeout=240, seen=seen)
    kill(workers[1].pid)
    killed = time.monotonic()
    said = read_until(server, "stopping:", timeout=60, seen=[])
    named_after = time.monotonic() - killed
    outs = finish([workers[0], server, workers[1]], timeout=120)
    assert workers[0].returncode != 0 and server.returncode == 1, outs
    assert named_after < 20, (named_after, outs)
    assert said.endswith("pserver 0: stopping: trainer 1 is missing (its process ended "
                         "without finishing: killed, or it crashed)"), said
    assert "cannot complete: trainer 1 stopped (its process ended without finishing" in outs[0]
    assert "trainer 0 is missing" not in outs[1] + said
    for noise in ("Unhandled error", "RAY_IGNORE_UNHANDLED_ERRORS"):
        assert noise not in outs[0] + outs[1], outs
    assert_gone([workers[0].pid, workers[1].pid, server.pid])


def test_async_job_carries_on_without_a_dead_trainer(cluster, tmp_path, processes):
    data, server, workers = _roles(cluster, tmp_path, processes, "roles-async", trainers=2,
                                   mode="async", timeout=20, pause=0.05)
    seen = []
    read_until(workers[1], "step 10", timeout=120, seen=seen)
    kill(workers[1].pid)
    outs = finish([workers[0], server, workers[1]], timeout=120)
    assert workers[0].returncode == 0 and server.returncode == 0, outs
    assert "trained 40 steps" in outs[0]
    assert "pserver 0: trainer 1 is gone: its process ended without finishing" in outs[1]
    assert "the job went on without it (async mode)" in outs[1]
    assert_gone([workers[0].pid, workers[1].pid, server.pid])


def test_a_trainer_id_runs_once_and_its_token_is_seen():
    """A second process taking a running trainer's id is refused; a watch sees the token."""
    from fluid_interactive.distributed.errors import DistributedError
    from fluid_interactive.distributed.liveness import TrainerWatch, hold_token
    hold_token(7, "tests")
    with pytest.raises(DistributedError, match="another process already runs as trainer 7"):
        hold_token(7, "tests")
    watch = TrainerWatch(8)
    assert watch.gone([6, 7]) == [] and watch.seen == {7}


def test_a_wait_that_gives_up_reads_the_late_outcome(cluster, caplog):
    """A call abandoned at its timeout whose result arrives later as an error: Ray
    reports nothing ("Unhandled error ...") when its ref is freed, since it was read."""
    from fluid_interactive.distributed.errors import DistributedTimeout
    from fluid_interactive.distributed.ray_proxy import RayPServer

    @ray.remote(num_cpus=0)
    class Late:
        def fail_after(self, seconds):
            time.sleep(seconds)
            raise ValueError("too late")

    proxy = RayPServer(Late.remote(), "late:1", 0, timeout=0.3)
    with caplog.at_level(logging.ERROR, logger="ray._private.worker"):
        try:
            proxy.call("fail_after", 1.5)
        except DistributedTimeout as e:
            kept = e            # its traceback holds the call's frames, and the ref
        time.sleep(4)           # the call fails meanwhile
        del kept
        gc.collect()
        time.sleep(1)
    assert not [r for r in caplog.records if "Unhandled error" in r.getMessage()]


# --- nothing waits for ever ---------------------------------------------------------------------

WAIT = 6      # FLUID_TIMEOUT of the tests below
FLAG = ["--distributed", "main=train_step"]


def _fluid_run():
    return [os.path.join(os.path.dirname(sys.executable), "fluid"), "run"]


def _lifetimes(procs, timeout):
    """Wait for every process (bounded); (their outputs, how long each ran)."""
    started = time.monotonic()
    ended = {}
    while len(ended) < len(procs) and time.monotonic() - started < timeout:
        for p in procs:
            if p.pid not in ended and p.poll() is not None:
                ended[p.pid] = time.monotonic() - started
        time.sleep(0.1)
    return finish(procs, timeout=10), [ended.get(p.pid, float("inf")) for p in procs]


def test_every_wait_ends_within_the_jobs_timeout(cluster, tmp_path, processes):
    """With FLUID_TIMEOUT=6 each of these ends by itself, non-zero, saying what it waited
    for: a server whose trainer never connects, a trainer whose servers never appear, a
    trainer whose RAY_ADDRESS has nothing listening, one whose RAY_ADDRESS listens but never
    answers (Ray itself would retry both for ever)."""
    data = write_fit_data(str(tmp_path / "fit.recordio"))
    env = job_env(cluster.env(), "lonely", FIT_DATA=data, FLUID_TIMEOUT=WAIT)
    mute = socket.socket()
    mute.bind(("127.0.0.1", 0))
    mute.listen()                 # accepts connections (the kernel does) and answers nothing
    with mute:
        procs = [
            spawn(_fluid_run() + [JOB_SCRIPT] + FLAG,
                  dict(env, TRAINING_ROLE="PSERVER", FLUID_JOB="lonely-server"), str(tmp_path)),
            spawn([sys.executable, JOB_SCRIPT] + FLAG,
                  dict(env, TRAINING_ROLE="TRAINER", FLUID_JOB="lonely-trainer"), str(tmp_path)),
            spawn([sys.executable, JOB_SCRIPT] + FLAG,
                  dict(env, TRAINING_ROLE="TRAINER", RAY_ADDRESS=f"127.0.0.1:{free_port()}"),
                  str(tmp_path)),
            spawn([sys.executable, JOB_SCRIPT] + FLAG,
                  dict(env, TRAINING_ROLE="TRAINER",
                       RAY_ADDRESS=f"127.0.0.1:{mute.getsockname()[1]}"), str(tmp_path))]
        processes += procs
        outs, took = _lifetimes(procs, timeout=180)
    report = "\n---\n".join(outs)
    assert all(p.returncode not in (0, None) for p in procs), report
    # Starting a process (imports, transpiling) on a busy machine takes a while; the wait
    # itself is the timeout.
    assert max(took) < WAIT + 60, (took, report)
    assert "trainer 0 is missing (trainer 0 never connected within 6s)" in outs[0]
    assert "waited 6s for parameter server 0 (127.0.0.1:6174) in the Ray namespace " \
           "'lonely-trainer', and it never appeared" in outs[1]
    assert "no Ray cluster answers at 127.0.0.1:" in outs[2] and "waited 6s" in outs[2]
    assert "did not finish within 6s (FLUID_TIMEOUT)" in outs[3]
    assert not os.path.exists("/dev/shm/fluid-state-lonely-server")


def test_a_server_stops_cleanly_on_sigterm_and_sigint(cluster, tmp_path, processes):
    """No Ray stack trace, its actor gone, its state folder removed, status 128 + N."""
    data = write_fit_data(str(tmp_path / "fit.recordio"))
    servers = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        env = job_env(cluster.env(), f"stop-{sig.name}", FIT_DATA=data, FLUID_TIMEOUT=120)
        servers[sig] = spawn(_fluid_run() + [JOB_SCRIPT] + FLAG,
                             dict(env, TRAINING_ROLE="PSERVER"), str(tmp_path))
    processes += list(servers.values())
    actors = {}
    for sig, proc in servers.items():
        line = read_until(proc, "pserver 0 pid", timeout=180, seen=[])
        actors[sig] = int(line.split()[3])
        assert os.path.isdir(f"/dev/shm/fluid-state-stop-{sig.name}/pserver-127_0_0_1_6174")
    for sig, proc in servers.items():
        os.kill(proc.pid, sig)
    outs = finish(list(servers.values()), timeout=60)
    for (sig, proc), out in zip(servers.items(), outs):
        assert proc.returncode == 128 + sig, out
        assert f"pserver 0: stopped by {sig.name}; its state is removed" in out
        for noise in ("Traceback", "SIGTERM received", "Stack trace", "*** "):
            assert noise not in out, out
        assert not os.path.exists(f"/dev/shm/fluid-state-stop-{sig.name}")
    assert_gone(list(actors.values()) + [p.pid for p in servers.values()])


# --- the launcher on this cluster (RAY_ADDRESS set: it joins instead of starting one) ---------

def _launch(cluster, tmp_path, job, **env):
    data = write_fit_data(str(tmp_path / "fit.recordio"))
    env.setdefault("FIT_STEP_SLEEP", 0.05)
    full = job_env(cluster.env(), job, FIT_DATA=data, **env)
    full.pop("FLUID_JOB")
    return spawn(_fluid_run() + [JOB_SCRIPT] + FLAG + ["--trainers", "2", "--pservers", "1"],
                 full, str(tmp_path))


def _pids(text, role):
    return [int(p) for p in re.findall(rf"^{role} \d+ pid (\d+)$", text, re.M)]


def test_the_launcher_says_at_once_that_a_trainer_died_and_stops_the_sync_job(
        cluster, tmp_path, processes):
    job = _launch(cluster, tmp_path, "unused", FLUID_TIMEOUT=120)
    processes.append(job)
    seen = []
    read_until(job, "[trainer 1] step 10", timeout=240, seen=seen)
    victim = _pids("".join(seen), "trainer")[1]
    kill(victim)
    killed = time.monotonic()
    read_until(job, "trainer 1 was killed by SIGKILL", timeout=30, seen=seen)
    assert time.monotonic() - killed < 10, "".join(seen)
    (rest,) = finish([job], timeout=60)
    out = "".join(seen) + rest
    assert job.returncode == 137, out
    assert "fluid run: trainer 1 was killed by SIGKILL: a sync job cannot go on without it; " \
           "stopping pserver 0, trainer 0" in out, out
    # the server names the dead trainer itself, or is stopped first; either way it ends
    # by itself (its status, not a signal's during its exit) and removes its state
    assert "[pserver 0] pserver 0: stopped by SIGTERM; its state is removed" in out or \
        "[pserver 0] pserver 0: stopping: trainer 1 is missing (its process ended" in out, out
    assert re.search(r"^pserver 0 exited with status (1|143) after", out, re.M), out
    assert "Unhandled error" not in out and "trainer 0 is missing" not in out, out
    assert_gone(_pids(out, "trainer") + _pids(out, "pserver") + [job.pid])


def test_the_launcher_ends_a_job_whose_trainer_hangs_outside_a_step(
        cluster, tmp_path, processes):
    """Trainer 1 hangs after training: the server counts it lost once it has said nothing
    for the timeout after trainer 0 finished, and the launcher stops it."""
    wait = 20     # long enough for the trainers to start and connect on a busy machine
    job = _launch(cluster, tmp_path, "unused", FLUID_TIMEOUT=wait, FIT_HANG=1,
                  FIT_STEP_SLEEP=0)
    processes.append(job)
    seen = []
    read_until(job, "[trainer 1] hanging", timeout=240, seen=seen)
    hung = time.monotonic()
    (rest,) = finish([job], timeout=120)
    out = "".join(seen) + rest
    assert job.returncode not in (0, None) and time.monotonic() - hung < wait + 30, out
    assert "trainer 1 is missing (trainer 1 sent nothing for" in out
    assert "pserver 0 exited with status 1" in out and "stopping trainer 1" in out
    assert_gone(_pids(out, "trainer") + _pids(out, "pserver") + [job.pid])


def test_a_private_cluster_listens_on_no_fixed_port(cluster):
    """Ray's defaults: 6379 (GCS), 8265 (dashboard), 10001 (client server), 44217 and 44227
    (metrics): a second private cluster on the machine would collide on any of them."""
    psutil = pytest.importorskip("psutil")
    listening = set()
    for pid in cluster.pids():
        try:
            listening |= {c.laddr.port for c in psutil.Process(pid).net_connections("tcp")
                          if c.status == psutil.CONN_LISTEN}
        except psutil.Error:
            pass
    assert listening and cluster.port in listening
    assert not listening & {6379, 8265, 10001, 44217, 44227}, sorted(listening)
