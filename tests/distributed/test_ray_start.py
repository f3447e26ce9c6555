"""Starting a private Ray head on a busy machine: the wait scales with the load (or
``FLUID_RAY_START_TIMEOUT``), progress is reported while it lasts, and a start that fails
or runs out of time quotes the last lines of Ray's log and leaves no process behind.
A stand-in for the ``ray`` executable plays Ray's part, so these run without Ray."""
import os
import time

import pytest

from fluid_interactive.distributed import ray_cluster
from fluid_interactive.distributed.errors import DistributedError
from fluid_interactive.distributed.ray_cluster import RayHead, start_timeout
from fluid_interactive.distributed.watchdog import alive


def test_the_start_timeout_is_configurable_and_scales_with_the_load(monkeypatch):
    assert start_timeout({"FLUID_RAY_START_TIMEOUT": "300"}) == 300.0
    for bad in ("0", "-5", "soon"):
        with pytest.raises(DistributedError, match="is not a positive number of seconds"):
            start_timeout({"FLUID_RAY_START_TIMEOUT": bad})
    cpus = os.cpu_count() or 1
    monkeypatch.setattr(os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    assert start_timeout({}) == ray_cluster.START_TIMEOUT
    monkeypatch.setattr(os, "getloadavg", lambda: (4.5 * cpus, 0.0, 0.0))
    assert start_timeout({}) == pytest.approx(4.5 * ray_cluster.START_TIMEOUT)
    monkeypatch.setattr(os, "getloadavg", lambda: (1000.0 * cpus, 0.0, 0.0))
    assert start_timeout({}) == ray_cluster.MAX_START_TIMEOUT


def _fake_ray(tmp_path, monkeypatch, body: str) -> None:
    """``ray`` is a shell script running ``body``."""
    exe = tmp_path / "ray"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    monkeypatch.setattr(ray_cluster, "_ray_executable", lambda: str(exe))


def test_a_start_that_runs_out_of_time_reports_progress_and_ray_s_log(tmp_path, monkeypatch):
    _fake_ray(tmp_path, monkeypatch, "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 "
                                     "19 20 21 22 23 24 25 26 27 28 29 30; do echo line $i; "
                                     "done\nsleep 60 &\nwait\n")
    monkeypatch.setattr(ray_cluster, "PROGRESS_S", 0.3)
    head = RayHead(temp_root=str(tmp_path))
    said = []
    started = time.monotonic()
    with pytest.raises(DistributedError) as info:
        head.start(timeout=1.5, progress=said.append)
    assert time.monotonic() - started < 15
    message = str(info.value)
    assert message.startswith("Ray did not start within 1.5s (set FLUID_RAY_START_TIMEOUT")
    assert "no process of it is left" in message
    assert "line 30" in message and "line 6\n" in message and "line 5\n" not in message
    assert said and said[0].startswith("ray: still starting after ")
    assert not os.path.exists(head.temp_dir)
    assert head.pid is None and not alive(head.pids())


def test_a_start_that_fails_quotes_the_log_and_stops_what_it_started(tmp_path, monkeypatch):
    marker = tmp_path / "child.pid"
    _fake_ray(tmp_path, monkeypatch, f"sleep 60 &\necho $! > {marker}\n"
                                     "echo 'ValueError: port 6380 is in use' >&2\nexit 4\n")
    head = RayHead(temp_root=str(tmp_path))
    with pytest.raises(DistributedError, match=r"ray start --head exited with status 4; no "
                                               r"process of it is left\. The last lines of "
                                               r"its log:\nValueError: port 6380 is in use"):
        head.start(timeout=30)
    child = int(marker.read_text())
    deadline = time.monotonic() + 10
    while alive([child]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive([child]), "a process the failed start left behind is still running"
