"""`fluid run ... --trainers N --pservers M`: the launcher with its own private Ray.

The README's command as written, twice side by side (every port of a private cluster is
chosen free); a server killed mid-training; the launcher stopped by SIGINT and killed by
SIGKILL. After each, nothing of the job is left: no process (a role carries its job in
``FLUID_JOB``, Ray's processes are in the head's session or name its temporary directory)
and no folder in /dev/shm or the temporary directory."""
import glob
import os
import re
import shlex
import signal
import tempfile
import time

import pytest
from distributed.ray_support import (
    JOB_SCRIPT,
    ROOT,
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

needs_ray()
psutil = pytest.importorskip("psutil")
__all__ = ["processes"]   # a fixture

FOLDERS = sorted({"/dev/shm", tempfile.gettempdir(), "/tmp"} - {""})


def _launcher_env(**extra):
    env = job_env({}, "unused", **extra)
    for var in ("RAY_ADDRESS", "FLUID_JOB"):       # a private cluster, a job of its own
        env.pop(var, None)
    return env


def _job_of(text):
    """(job id, the cluster's head pid, its temporary directory) as the launcher said."""
    job = re.search(r"^fluid run: job (fluid-[0-9a-f]+), ", text, re.M)
    head = re.search(r"^ray: private cluster at 127\.0\.0\.1:\d+ \(pid (\d+), (\S+)\)", text,
                     re.M)
    assert job and head, text
    return job.group(1), int(head.group(1)), head.group(2)


def _leftovers(job, head_pid, temp_dir):
    """What is left of a job: its role processes, its cluster's processes, its folders."""
    procs = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if p.pid == os.getpid():
                continue
            if os.getsid(p.pid) == head_pid or any(temp_dir in a for a in p.info["cmdline"]
                                                   or ()) or p.environ().get("FLUID_JOB") == job:
                procs.append((p.pid, " ".join(p.info["cmdline"] or ())[:80]))
        except (psutil.Error, OSError):
            pass
    folders = [os.path.join(d, name) for d in FOLDERS if os.path.isdir(d)
               for name in os.listdir(d) if job in name]
    folders += [temp_dir] if os.path.exists(temp_dir) else []
    return procs, folders


def _assert_nothing_left(job, head_pid, temp_dir, within=30.0):
    deadline = time.monotonic() + within
    while any(_leftovers(job, head_pid, temp_dir)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _leftovers(job, head_pid, temp_dir) == ([], [])


def _example_data():
    """The data files examples/fit_a_line.py writes, one temporary folder per process."""
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "*", "data.recordio")))


def _readme_command():
    """The README's distributed command of the main demo, exactly as written (run from the
    checkout)."""
    with open(os.path.join(ROOT, "README.md")) as f:
        (line,) = [s for s in f if s.startswith(".venv/bin/fluid run examples/fit_a_line.py")]
    args = shlex.split(line)
    if not os.path.exists(os.path.join(ROOT, args[0])):      # a venv elsewhere
        args[0] = os.path.join(os.path.dirname(sys.executable), "fluid")
    return args


def test_the_readme_command_twice_side_by_side_leaves_nothing_behind(processes):
    """Issue 19: the README's third command, with the example as shipped (each process
    writes its data to a fresh temporary directory), as two jobs at once on one machine."""
    command = _readme_command()
    assert command[1:] == ["run", "examples/fit_a_line.py", "--distributed", "main=train_step",
                           "--trainers", "2", "--pservers", "2"]
    data_before = _example_data()
    jobs = [spawn(command, _launcher_env(), ROOT) for _ in range(2)]
    processes += jobs
    outs = finish(jobs, timeout=600)
    assert _example_data() <= data_before        # each role removed its data folder
    for job, out in zip(jobs, outs):
        assert job.returncode == 0, out
        for k in range(2):
            assert f"trainer {k} exited with status 0" in out
            assert f"[trainer {k}] step  999  loss" in out
        assert "[trainer 0]   bias +0.5" in out                       # it learned the line
        assert "every trainer finished (step 1000, 1000 block updates)" in out
        assert "runs a different program" not in out and "refuses" not in out
    ids = [_job_of(out) for out in outs]
    assert ids[0][0] != ids[1][0]
    for job_id, head_pid, temp_dir in ids:
        _assert_nothing_left(job_id, head_pid, temp_dir)


def test_launcher_survives_a_killed_server_and_leaves_nothing_behind(tmp_path, processes):
    """SIGKILL of pserver 0's actor process (by the PID the launcher printed): Ray restarts
    it from its state, and the job ends with the parameters of an uninterrupted run."""
    data = write_fit_data(str(tmp_path / "fit.recordio"))
    env = _launcher_env(FIT_DATA=data, FIT_OUT=tmp_path / "out", FIT_STEP_SLEEP=0.05,
                        FLUID_TIMEOUT=60)
    fluid_cli = os.path.join(os.path.dirname(sys.executable), "fluid")
    job = spawn([fluid_cli, "run", JOB_SCRIPT, "--distributed", "main=train_step",
                 "--trainers", "2", "--pservers", "2"], env, str(tmp_path))
    processes.append(job)
    seen = []
    read_until(job, "[trainer 0] step 10", timeout=240, seen=seen)
    text = "".join(seen)
    servers = {int(j): int(pid) for j, pid in re.findall(r"^pserver (\d+) pid (\d+)$", text,
                                                          re.M)}
    trainers = [int(pid) for pid in re.findall(r"^trainer \d+ pid (\d+)$", text, re.M)]
    assert sorted(servers) == [0, 1] and len(trainers) == 2, text
    kill(servers[0])
    (rest,) = finish([job], timeout=240)
    out = text + rest
    assert job.returncode == 0, out
    assert "[pserver 0] pserver 0: restarted (pid " in out
    for k in range(2):
        assert f"[trainer {k}] trained 40 steps" in out
        assert f"trainer {k} exited with status 0" in out
    assert "[pserver 0] pserver 0: every trainer finished (step 40" in out
    expected, _ = fit_reference(data, trainers=2, pservers=2)
    assert_same(params_of_checkpoint(str(tmp_path / "out")), expected)
    assert_gone(list(servers.values()) + trainers + [job.pid])
    _assert_nothing_left(*_job_of(out))


def test_sigint_stops_a_launcher_cleanly_and_sigkill_leaves_its_cleanup_to_the_watchdog(
        tmp_path, processes):
    """Two jobs side by side, stopped mid-training: the first by SIGINT (as Ctrl-C does),
    the second killed with SIGKILL, so nothing in it runs. Both leave nothing behind."""
    data = write_fit_data(str(tmp_path / "fit.recordio"))
    env = _launcher_env(FIT_DATA=data, FIT_STEP_SLEEP=0.5, FLUID_TIMEOUT=120)
    fluid_cli = os.path.join(os.path.dirname(sys.executable), "fluid")
    command = [fluid_cli, "run", JOB_SCRIPT, "--distributed", "main=train_step",
               "--trainers", "2", "--pservers", "1"]
    jobs = [spawn(command, env, str(tmp_path)) for _ in range(2)]
    processes += jobs
    seen = [[], []]
    for job, lines in zip(jobs, seen):
        read_until(job, "[trainer 0] step 10", timeout=300, seen=lines)
    interrupted, killed = jobs
    ids = [_job_of("".join(lines)) for lines in seen]
    os.kill(interrupted.pid, signal.SIGINT)
    kill(killed.pid)
    stopped = time.monotonic()
    (rest, _) = finish(jobs, timeout=60)
    out = "".join(seen[0]) + rest
    assert interrupted.returncode == 130 and time.monotonic() - stopped < 30, out
    assert "fluid run: stopped by SIGINT; stopping every process of the job" in out
    assert "[pserver 0] pserver 0: stopping: trainer 0 failed: stopped by SIGTERM" in out
    for role in ("trainer 0", "trainer 1", "pserver 0"):
        # every role's end is reported; one still cleaning up after the launcher's grace
        # (a loaded machine) is killed, and the report says so
        assert re.search(rf"\n{role} (exited with status \d+|was killed by SIG[A-Z]+) after",
                         out), (role, out)
    assert not [line for line in out.splitlines() if line.startswith("Traceback")]
    assert killed.returncode == -signal.SIGKILL
    for job_id, head_pid, temp_dir in ids:
        _assert_nothing_left(job_id, head_pid, temp_dir)
