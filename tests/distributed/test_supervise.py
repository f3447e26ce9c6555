"""How a PSERVER process decides its job is over (`supervise`), on a real server object:
every wait ends within the job's timeout, naming whom it waited for."""
import threading
import time

from distributed.nets import FitALine

from fluid_interactive.distributed import ParameterServer, fingerprint, pserver_spec, transpile
from fluid_interactive.distributed.supervise import supervise

TIMEOUT = 0.4


def _server(trainers, mode="sync"):
    plan = transpile(FitALine().Compile(seed=0), trainers=trainers, pservers=1, mode=mode)
    ep = plan.endpoints[0]
    server = ParameterServer(pserver_spec(plan, ep), timeout=TIMEOUT)
    return server, lambda t: server.connect(t, fingerprint(plan, ep))


def _supervised(server, trainers, sync=True):
    said = []
    started = time.monotonic()
    status, message = supervise(server, trainers, sync, TIMEOUT, say=said.append)
    return status, message, time.monotonic() - started, said


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
