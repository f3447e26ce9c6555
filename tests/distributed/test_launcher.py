"""`fluid run main.py --distributed main=train_step --trainers 2 --pservers 2`: the local
launcher starts its own private Ray, the servers as actors and the trainers as processes;
the test kills pserver 0 by the PID the launcher printed, and the job still ends with the
parameters of an uninterrupted run, exit status 0, and no process left behind."""
import os
import re

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

needs_ray()
__all__ = ["processes"]   # a fixture


def _cluster_processes(temp_dir):
    import psutil
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(temp_dir in a for a in (p.info["cmdline"] or [])):
                out.append(p.pid)
        except psutil.Error:
            pass
    return out


def test_launcher_survives_a_killed_server_and_leaves_nothing_behind(tmp_path, processes):
    data = write_fit_data(str(tmp_path / "fit.recordio"))
    env = job_env({}, "unused", FIT_DATA=data, FIT_OUT=tmp_path / "out", FIT_STEP_SLEEP=0.05,
                  FLUID_TIMEOUT=60)
    for var in ("RAY_ADDRESS", "FLUID_JOB"):       # a private cluster, a job of its own
        env.pop(var, None)
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
    head = re.search(r"^ray: private cluster at 127\.0\.0\.1:\d+ \(pid (\d+), (\S+)\)", text,
                     re.M)
    assert sorted(servers) == [0, 1] and len(trainers) == 2 and head, text
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
    assert_gone(list(servers.values()) + trainers + [int(head.group(1)), job.pid])
    assert _cluster_processes(head.group(2)) == []
    assert not os.path.exists(head.group(2))
