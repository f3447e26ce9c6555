"""What the Ray tests share: the environment every process needs (set here, before anything
imports Ray), a private cluster per test module, role processes and their clean-up.

Everything stays on 127.0.0.1, in temporary directories of the test, and is stopped by PID
(never ``ray stop``, which would stop every Ray on the machine)."""
import os
import secrets

# Before anything imports Ray: loopback only, and the token of the clusters the tests
# start (Ray reads the auth mode once, on import).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_AUTH_MODE", "token")
os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))

import contextlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from distributed.nets import linear_data

import fluid
from fluid_interactive.distributed import launch, transpile
from fluid_interactive.distributed.ray_cluster import alive, stop_pids

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
JOB_SCRIPT = os.path.join(HERE, "fit_job.py")
FIT_SAMPLES = 1280          # 40 steps of 2 trainers x 16 samples


def needs_ray():
    return pytest.importorskip("ray", reason="the distributed extra (ray) is not installed")


def write_fit_data(path, n=FIT_SAMPLES, seed=1):
    x, y = linear_data(n=n, seed=seed)
    fluid.recordio.write_arrays(path, (x, y))
    return path


def fit_reference(data, trainers, pservers, mode="sync", steps=None):
    """The parameters the in-process engine reaches with fit_job's program on ``data``
    (every step until the data ends, or ``steps``)."""
    from distributed.fit_job import FitALine
    plan = transpile(FitALine(DEFAULT_READER_FILE_PATH=data).Compile(seed=0),
                     trainers=trainers, pservers=pservers, mode=mode)
    with launch(plan) as dist:
        done = 0
        while steps is None or done < steps:
            try:
                dist.train_step()
            except fluid.EOFException:
                break
            done += 1
        return dist.parameters(), done


def job_env(cluster_env, job, **extra):
    env = dict(os.environ, PYTHONUNBUFFERED="1", FLUID_JOB=job,
               PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "extension")]))
    env.update(cluster_env)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def spawn(cmd, env, cwd):
    return subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)


def finish(procs, timeout):
    """Wait (bounded) for every process; stop any still running by PID; their outputs."""
    deadline = time.monotonic() + timeout
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            stop_pids([p.pid])
            out, _ = p.communicate(timeout=10)
            out += "\n<stopped by the test: it did not finish in time>"
        outs.append(getattr(p, "unread", "") + out)
    return outs


@pytest.fixture
def processes():
    """Processes a test starts; any still running at its end are stopped by PID."""
    started = []
    yield started
    stop_pids([p.pid for p in started if p.poll() is None])
    for p in started:
        p.wait(timeout=10)
        if p.stdout is not None:
            p.stdout.close()


def read_until(proc, pattern, timeout, seen):
    """Lines of ``proc`` until one contains ``pattern`` (bounded); appended to ``seen``.

    Reads the pipe itself (os.read), never through the file object's buffer: `finish`
    (Popen.communicate) reads the pipe the same way, and would not see lines left in that
    buffer. What was read past the line is kept for `finish` in ``proc.unread``."""
    import codecs
    import selectors
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    fd = proc.stdout.fileno()
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    pending = getattr(proc, "unread", "")
    try:
        while True:
            while "\n" in pending:
                line, pending = pending.split("\n", 1)
                seen.append(line + "\n")
                if pattern in line:
                    proc.unread = pending
                    return line
            if time.monotonic() >= deadline:
                break
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            pending += decoder.decode(chunk)
    finally:
        sel.unregister(fd)
    proc.unread = pending
    raise AssertionError(f"{pattern!r} not seen within {timeout}s; output so far:\n"
                         + "".join(seen[-60:]) + pending)


def kill(pid):
    os.kill(pid, signal.SIGKILL)


def assert_gone(pids, within=10.0):
    deadline = time.monotonic() + within
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pids), f"processes left behind: {alive(pids)}"


@contextlib.contextmanager
def private_cluster():
    """A `ray start --head` cluster of this test's own (2 CPUs, token authentication) that
    this process joins; stopped by PID, every process of it gone, at the end."""
    ray = needs_ray()
    from fluid_interactive.distributed.ray_cluster import RayHead
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


def params_of_checkpoint(path):
    return fluid.load(path).parameters()


def assert_same(a, b):
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


__all__ = ["needs_ray", "write_fit_data", "fit_reference", "job_env", "spawn", "finish",
           "read_until", "kill", "assert_gone", "params_of_checkpoint", "assert_same",
           "private_cluster",
           "JOB_SCRIPT", "ROOT", "sys"]
