"""Proxies for the Ray engine's actors: `RayPServer` for a server actor (a
`ParameterServer` run by Ray), `RayTrainer` for a trainer actor.

`RayPServer`'s methods are made from the protocol's list, `PServer.REMOTE_METHODS`: each
sends its call to the actor and waits, bounded, for the answer; a call that meets a
restarting actor is sent again until ``restart_timeout``. Only ``exchange`` is written out,
since a trainer starts it on every server before waiting for any.
"""
from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from ..errors import FluidError
from .errors import DistributedTimeout, ServerUnreachable
from .interface import CallResult, Pending, PServer, Trainer
from .ray_cluster import import_ray

#: How long a caller keeps retrying a server that is restarting.
RESTART_TIMEOUT = 60.0
NAMESPACE = "fluid"


def actor_name(endpoint: str) -> str:
    return f"pserver:{endpoint}"


def read_when_done(ref: Any) -> None:
    """Read ``ref``'s outcome whenever it arrives. Ray reports the error of a result
    nobody read when its ref is freed ("Unhandled error (suppress with
    'RAY_IGNORE_UNHANDLED_ERRORS=1'): ..." on the process's stderr), and a wait that
    gives up (a timeout, a signal ending the process mid-call) leaves its result unread:
    the call's own failure is reported already, so its late outcome is read here and
    dropped."""
    try:
        ref.future().add_done_callback(lambda done: done.exception())
    except Exception:   # Ray is shutting down: it reports nothing either
        pass


def get_or_leave(ray: Any, ref: Any, timeout: float | None) -> Any:
    """``ray.get(ref, timeout)``; a wait that ends otherwise than with the outcome (a
    timeout, an interrupt) leaves the outcome to `read_when_done`."""
    try:
        return ray.get(ref, timeout=timeout)
    except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError):
        raise                       # the outcome, read
    except BaseException:
        read_when_done(ref)
        raise


def _remote_method(name: str, waits_for: str) -> Callable[..., Any]:
    """``PServer.<name>`` sent to the actor (`RayPServer.call`)."""
    declared = getattr(PServer, name)
    signature = inspect.signature(declared)

    def method(self: RayPServer, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        values = list(bound.arguments.values())[1:]
        return self.call(name, *values, what=waits_for.format(**bound.arguments))

    method.__name__ = method.__qualname__ = name
    method.__doc__ = declared.__doc__
    return method


#: `PServer` with every method of the protocol sent to an actor, except ``exchange``.
_RemotePServer: Any = type("_RemotePServer", (PServer,), {
    name: _remote_method(name, what) for name, what in PServer.REMOTE_METHODS.items()
    if name != "exchange"})


class _RayPending(Pending):
    def __init__(self, proxy: RayPServer, submit: Callable[[], Any], what: str):
        self._proxy, self._submit, self._what = proxy, submit, what
        self._ref = submit()

    def result(self, timeout: float | None = None) -> Any:
        return self._proxy.wait(self._ref, self._submit, self._what, timeout)

    def failed(self) -> bool:
        return False


class RayPServer(_RemotePServer):
    """A `PServer` proxy for a server actor (see the module docstring); every wait is
    bounded. ``owned``: this process created the actor, and `close` ends it."""

    def __init__(self, handle: Any, endpoint: str, index: int, *, timeout: float,
                 restart_timeout: float = RESTART_TIMEOUT, who: str = "driver",
                 owned: bool = False, namespace: str = NAMESPACE):
        self.handle = handle
        self.endpoint = endpoint
        self.index = index
        self.timeout = timeout
        self.restart_timeout = restart_timeout
        self.who = who
        self.owned = owned
        self.namespace = namespace

    @property
    def role(self) -> str:
        return f"pserver {self.index} ({self.endpoint})"

    @classmethod
    def lookup(cls, endpoint: str, index: int, namespace: str, *, timeout: float,
               restart_timeout: float = RESTART_TIMEOUT, who: str = "driver",
               wait: float = 0.0, deadline: float | None = None) -> RayPServer:
        """The proxy of the server actor for ``endpoint``, waiting up to ``wait`` seconds
        (or until ``deadline``, a `time.monotonic` time) for it to be registered."""
        ray = import_ray()
        deadline = time.monotonic() + wait if deadline is None else deadline
        while True:
            try:
                handle = ray.get_actor(actor_name(endpoint), namespace=namespace)
                return cls(handle, endpoint, index, timeout=timeout,
                           restart_timeout=restart_timeout, who=who, namespace=namespace)
            except ValueError:
                if time.monotonic() >= deadline:
                    raise ServerUnreachable(
                        f"{who}: waited {wait:g}s for parameter server {index} ({endpoint}) "
                        f"in the Ray namespace {namespace!r}, and it never appeared; start it "
                        f"with TRAINING_ROLE=PSERVER (same script, same --distributed) or "
                        f"check RAY_ADDRESS and FLUID_JOB") from None
                time.sleep(0.2)

    def call(self, method: str, *args: Any, timeout: float | None = None,
             what: str = "") -> Any:
        """``method(*args)`` on the actor; waits at most ``timeout`` (default: the job's)."""
        submit = lambda: getattr(self.handle, method).remote(*args)  # noqa: E731
        return self.wait(submit(), submit, what or method, timeout)

    def wait(self, ref: Any, submit: Callable[[], Any], what: str,
             timeout: float | None) -> Any:
        """The answer of ``ref``; a call that met a restarting actor is submitted again."""
        ray = import_ray()
        timeout = self.timeout if timeout is None else timeout
        restart_deadline = None
        while True:
            try:
                return get_or_leave(ray, ref, timeout)
            except ray.exceptions.RayTaskError as e:
                cause = e.cause
                if isinstance(cause, (FluidError, KeyError, ValueError, RuntimeError)):
                    raise cause from None
                raise
            except ray.exceptions.GetTimeoutError:
                raise DistributedTimeout(f"{self.who}: no answer from {self.role} within "
                                         f"{timeout:g}s while waiting for {what}") from None
            except ray.exceptions.RayActorError as e:
                now = time.monotonic()
                if restart_deadline is None:
                    restart_deadline = now + self.restart_timeout
                late = now >= restart_deadline
                if late or self._gone_for_good():
                    # A server gone for good is reported at once: nothing waited for it.
                    how = (f"waited {self.restart_timeout:g}s for it to restart" if late
                           else "it is gone and Ray will not restart it")
                    raise ServerUnreachable(
                        f"{self.who}: {self.role} is unreachable ({how}) while waiting for "
                        f"{what}: {type(e).__name__}: {str(e).strip().splitlines()[0]}"
                    ) from None
                time.sleep(0.2)
                ref = submit()

    def _gone_for_good(self) -> bool:
        """A dead actor that Ray will not restart is no longer registered by name."""
        ray = import_ray()
        try:
            ray.get_actor(actor_name(self.endpoint), namespace=self.namespace)
            return False
        except ValueError:
            return True
        except Exception:  # cannot tell: keep trying until the deadline
            return False

    def submit_exchange(self, trainer_id: int, step: int, committed: int | None,
                        blocks: Mapping[str, Any], names: Sequence[str]) -> Pending:
        handle = self.handle
        return _RayPending(
            self, lambda: handle.exchange.remote(trainer_id, step, committed, blocks, names),
            f"step {step} (trainer {trainer_id})")

    def exchange(self, trainer_id: int, step: int, committed: int | None,
                 blocks: Mapping[str, Any], names: Sequence[str]) -> list[Any]:
        return self.submit_exchange(trainer_id, step, committed, blocks, names).result()

    def submit(self, method: str, *args: Any) -> Pending:
        handle = self.handle
        return _RayPending(self, lambda: getattr(handle, method).remote(*args), method)

    def close(self) -> None:
        if self.owned:
            shut_down_actor(self.handle, remove_state=True)


def shut_down_actor(handle: Any, remove_state: bool, wait: float = 10.0) -> None:
    """Let the server actor remove its state, then end it."""
    ray = import_ray()
    try:
        get_or_leave(ray, handle.shut_down.remote(remove_state), wait)
    except Exception:   # dead already, or stuck: it is killed below either way
        pass
    try:
        ray.kill(handle, no_restart=True)
    except Exception:
        pass


class RayTrainer(Trainer):
    """A proxy for a trainer actor. Its calls run in order (the actor runs one at a time)."""

    def __init__(self, handle: Any, trainer_id: int, timeout: float):
        self.handle = handle
        self.trainer_id = trainer_id
        self.timeout = timeout

    def call(self, method: str, args: Sequence[Any], step: int | None
             ) -> Future[CallResult]:
        return self.handle.call.remote(method, list(args), step).future()

    def _get(self, ref: Any, what: str) -> Any:
        ray = import_ray()
        try:
            return get_or_leave(ray, ref, self.timeout)
        except ray.exceptions.GetTimeoutError:
            raise DistributedTimeout(f"driver: trainer {self.trainer_id} did not answer "
                                     f"within {self.timeout:g}s ({what})") from None
        except ray.exceptions.RayTaskError as e:
            raise e.cause from None

    def get_var(self, name: str) -> np.ndarray:
        return self._get(self.handle.get_var.remote(name), f"reading {name}")

    def set_vars(self, values: Mapping[str, np.ndarray]) -> Future[None]:
        return self.handle.set_vars.remote(dict(values)).future()

    def tensor_state(self) -> dict[str, np.ndarray]:
        return self._get(self.handle.tensor_state.remote(), "reading its state")

    def pid(self) -> int:
        return self._get(self.handle.pid.remote(), "its process id")

    def close(self) -> None:
        ray = import_ray()
        try:
            ray.kill(self.handle, no_restart=True)
        except Exception:
            pass
