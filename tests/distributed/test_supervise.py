"""How a PSERVER process decides its job is over (`supervise`), on a real server object:
every wait ends within the job's timeout, naming whom it waited for."""
import threading
import time

import numpy as np
from distributed.nets import FitALine

from fluid_interactive.distributed import ParameterServer, fingerprint, pserver_spec, transpile
from fluid_interactive.distributed.supervise import _learn, _Trainers, supervise

TIMEOUT = 0.4


def _server(trainers, mode="sync", timeout=TIMEOUT):
    plan = transpile(FitALine().Compile(seed=0), trainers=trainers, pservers=1, mode=mode)
    ep = plan.endpoints[0]
    server = ParameterServer(pserver_spec(plan, ep), timeout=timeout)
    return server, lambda t: server.connect(t, fingerprint(plan, ep))


def _supervised(server, trainers, sync=True, watch=None, timeout=TIMEOUT):
    said = []
    started = time.monotonic()
    status, message = supervise(server, trainers, sync, timeout, say=said.append, watch=watch)
    return status, message, time.monotonic() - started, said


class _Ended:
    """A watch (as `liveness.TrainerWatch` is) that reports the processes of ``ended``
    gone from ``after`` seconds on."""

    def __init__(self, ended, after=0.0):
        self.ended, self.at = set(ended), time.monotonic() + after
        self.asked = []

    def gone(self, among):
        among = list(among)
        self.asked.append(among)
        return [t for t in among if t in self.ended and time.monotonic() >= self.at]


def _step(server, trainer, step=1):
    """Trainer ``trainer``'s exchange of ``step`` (zero gradients), in a thread; its outcome
    lands in the returned list."""
    feeds = [f for b in server.spec.info.optimize_blocks for f in b.feeds
             if f.endswith(f".trainer_{trainer}")]
    shapes = {n: v.shape for n, v in server.spec.program.global_block().vars.items()}
    blocks = {f: np.zeros(shapes[f.split("@GRAD")[0]], "float32") for f in feeds}
    outcome = []

    def run():
        try:
            outcome.append(server.exchange(trainer, step, None, blocks, []))
        except Exception as e:  # the test reads it
            outcome.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return outcome, thread


def test_a_trainer_whose_process_ended_is_named_at_once_and_fails_the_step():
    """Trainer 1's process ended (its token gone) while trainer 0 waits in a sync step:
    the supervisor names trainer 1 at once, the server fails the step for trainer 0 saying
    why, long before the step's timeout."""
    server, connect = _server(trainers=2, timeout=60)
    connect(0)
    connect(1)
    outcome, waiting = _step(server, 0)
    time.sleep(0.2)
    ended = _Ended([1])
    threading.Timer(0.5, lambda: server.finish(0, "StepFailed: ...")).start()
    status, message, took, said = _supervised(server, 2, watch=ended, timeout=60)
    waiting.join(5)
    assert status == 1 and took < 5, (took, message)
    assert message == ("stopping: trainer 1 is missing (its process ended without finishing: "
                       "killed, or it crashed)")
    assert said == ["trainer 1 is gone: its process ended without finishing: killed, or it "
                    "crashed"]
    (error,) = outcome
    assert "step 1 cannot complete: trainer 1 stopped (its process ended without " \
           "finishing" in str(error), error


def test_a_trainer_that_finished_before_its_process_ended_is_not_lost():
    server, connect = _server(trainers=2)
    for t in range(2):
        connect(t)
        server.finish(t)
    status, message, _, said = _supervised(server, 2, watch=_Ended([0, 1]))
    assert (status, said) == (0, []) and message.startswith("every trainer finished")


def test_in_async_mode_the_job_goes_on_without_a_trainer_whose_process_ended():
    server, connect = _server(trainers=2, mode="async", timeout=60)
    connect(0)
    connect(1)
    threading.Timer(0.5, lambda: server.finish(0)).start()
    status, message, took, said = _supervised(server, 2, sync=False, watch=_Ended([1]),
                                              timeout=60)
    assert status == 0 and took < 5
    assert "trainer 1 is missing (its process ended" in message and "async mode" in message
    assert said[0].endswith("the job goes on without it (async mode)")


def test_a_trainer_waiting_inside_the_open_step_is_not_silent():
    """Trainer 0 waits in a sync step for trainer 1, which says nothing. Neither the wait
    nor the moment the step fails makes trainer 0 silent (the supervisor named the live
    trainer first when a poll fell there); the step's failure names trainer 1."""
    server, connect = _server(trainers=2, timeout=1.0)
    connect(0)
    connect(1)
    known, supervisor_timeout = _Trainers(2), 0.4
    outcome, waiting = _step(server, 0)
    time.sleep(0.6)                       # both idle longer than the supervisor's timeout
    status = server.status()
    assert status.waiting_for == [1] and min(status.idle_s.values()) > supervisor_timeout
    _learn(known, status, sync=True, timeout=supervisor_timeout)
    assert known.lost == {}               # trainer 0 is inside the step: alive
    waiting.join(5)                       # the step fails after the server's 1 s
    _learn(known, server.status(), sync=True, timeout=supervisor_timeout)
    assert known.lost == {1: "step 1 waited 1s for it"}, known.lost


def test_a_server_whose_trainers_never_connect_stops_within_the_timeout():
    server, connect = _server(trainers=2)
    connect(0)
    server.finish(0)
    status, message, took, _ = _supervised(server, 2)
    assert status == 1 and took < TIMEOUT + 2
    assert message == (f"stopping: trainer 1 is missing (trainer 1 never connected within "
                       f"{TIMEOUT:g}s)")


def test_a_trainer_silent_after_the_others_finished_is_lost():
    """A trainer hung outside a step: it connected, the other finished, it says nothing."""
    for mode, expected in (("sync", 1), ("async", 0)):
        server, connect = _server(trainers=2, mode=mode)
        connect(0)
        connect(1)
        server.finish(0)
        status, message, took, _ = _supervised(server, 2, sync=mode == "sync")
        assert status == expected and took < TIMEOUT + 2, message
        assert "trainer 1 is missing (trainer 1 sent nothing for" in message
        assert "never finished" in message


def test_a_refused_trainer_is_named_with_the_refusal():
    server, _ = _server(trainers=1)
    other = transpile(FitALine(learning_rate=0.5).Compile(seed=0), trainers=1, pservers=1)
    try:
        server.connect(0, fingerprint(other, other.endpoints[0]))
    except Exception:
        pass
    status, message, _, said = _supervised(server, 1)
    assert status == 1 and "never connected within" in message and "refused" in message
    assert said and "refuses trainer 0" in said[0]          # said once, when it happened


def test_a_job_whose_trainers_finish_ends_with_status_0():
    server, connect = _server(trainers=2)
    for t in range(2):
        connect(t)
    threading.Timer(0.2, lambda: [server.finish(t) for t in range(2)]).start()
    status, message, took, _ = _supervised(server, 2)
    assert (status, message) == (0, "every trainer finished (step 0, 0 block updates)")
