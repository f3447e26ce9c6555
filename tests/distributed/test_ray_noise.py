"""Ray's own output kept out of what `fluid run` shows (`ray_noise`), without Ray: its log
lines by their format, its reports of results nobody read by their logger."""
import io
import logging
import subprocess
import sys

from fluid_interactive.distributed.launcher import Launcher, _Role
from fluid_interactive.distributed.ray_noise import UNREAD, is_ray_log, quiet_unread_results

# Lines as Ray 2.60 wrote them in the role processes and the cluster's logs of the tests.
RAY_LINES = [
    "[2026-12-02 08:15:07,141 W 1023 1023] task_receiver.cc:109: Actor creation task "
    "finished with errors",
    "[2026-12-02 08:15:07,149 I 1023 1023] raylet_ipc_client.cc:133: "
    "RayletIpcClient::Disconnect, exit_type=USER_ERROR",
    "2026-12-02 07:33:03,124\tINFO usage_lib.py:448 -- Usage stats collection is disabled.",
    "2026-12-02 07:33:32,843\tWARNING worker.py:2070 -- A worker died or was killed",
]
OURS = [
    "step 10 loss 10.88526",
    "pserver 0: stopping: trainer 1 is missing (its process ended without finishing: "
    "killed, or it crashed)",
    "[2026-12-02] a user's own line with a date",
    "Traceback (most recent call last):",
    "2026-12-02 07:33:03,124 INFO a user's logging, in another format",
]


def test_ray_log_lines_are_told_from_the_roles_own():
    assert [is_ray_log(line) for line in RAY_LINES] == [True] * len(RAY_LINES)
    assert [is_ray_log(line) for line in OURS] == [False] * len(OURS)


def test_the_launcher_leaves_ray_lines_out_and_says_how_many():
    launcher = Launcher("main.py", [], trainers=1, pservers=1)
    shown = io.StringIO()
    launcher.say = lambda line: shown.write(line + "\n")
    with subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read())"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as out:
        role = _Role("trainer 0", out)
        out.stdin.write("\n".join([OURS[0], RAY_LINES[0], RAY_LINES[2], OURS[1]]) + "\n")
        out.stdin.close()
        launcher._relay(role)
    assert shown.getvalue() == f"[trainer 0] {OURS[0]}\n[trainer 0] {OURS[1]}\n"
    assert role.ray_lines == 2 and list(role.last_words) == [OURS[0], OURS[1]]
    assert "(2 lines of Ray's own logging left out)" in role.how()


def test_reports_of_results_nobody_read_are_dropped_and_nothing_else(caplog):
    logger = logging.getLogger("ray._private.worker")
    quiet_unread_results()
    quiet_unread_results()                       # once is enough; twice changes nothing
    with caplog.at_level(logging.ERROR, logger="ray._private.worker"):
        logger.error(f"{UNREAD}: ray::ParameterServer.exchange() (pid=1)\n  File ...\n"
                     f"ActorDiedError: The actor died")
        logger.error("Ray's other errors still show")
    assert [r.getMessage() for r in caplog.records] == ["Ray's other errors still show"]
    assert len(logger.filters) == 1
