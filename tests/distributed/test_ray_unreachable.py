"""A Ray parameter server that is gone for good is reported at once, and the message does
not claim a wait that did not happen."""
import pytest

from fluid_interactive.distributed.errors import ServerUnreachable

ray = pytest.importorskip("ray")
ray_proxy = pytest.importorskip("fluid_interactive.distributed.ray_proxy")


def test_a_server_gone_for_good_is_not_said_to_have_been_waited_for(monkeypatch):
    def dead(ref, timeout=None):
        raise ray.exceptions.RayActorError()

    def unregistered(name, namespace=None):
        raise ValueError(f"no actor {name}")
    monkeypatch.setattr(ray, "get", dead)
    monkeypatch.setattr(ray, "get_actor", unregistered)
    server = ray_proxy.RayPServer(None, "127.0.0.1:6174", 0, timeout=5.0,
                                   restart_timeout=60.0, who="trainer 0",
                                   namespace="test")
    with pytest.raises(ServerUnreachable) as info:
        server.wait(object(), object, "its parameters", None)
    message = str(info.value)
    assert "gone and Ray will not restart it" in message and "waited" not in message
