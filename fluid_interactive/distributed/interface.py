"""What an engine provides, so the trainer side is written once.

`PServer`
    One parameter server, wherever it runs: the protocol of `pserver.ParameterServer`,
    listed once in `PServer.REMOTE_METHODS` (``exchange``, ``connect``, ``commit``,
    ``abort``, ``get``, ``set_values``, ``finish``, ``status``, ``pid``). The in-process
    engine uses `ParameterServer` itself; the Ray engine runs it as an actor and talks to
    it through a proxy whose methods are made from that list. ``submit_exchange`` starts an
    exchange and returns a `Pending`, so a trainer can talk to every server at once; the
    default runs it at once.

`Communicator`
    What the ``send`` / ``send_barrier`` / ``recv`` / ``fetch_barrier`` kernels of a trainer
    program call (it sits in the trainer's scope as ``@COMMUNICATOR@``).
    `communicator.StepCommunicator` implements it over any `PServer` objects.

`Trainer`
    An engine's handle on one trainer: runs a method of its compiled trainer program as
    step ``step`` and reads and writes that program's persistable vars. Its calls run in
    order, one at a time.

`Engine` (in `engine`, since it builds the `DistributedProgram`)
    ``start_pserver`` and ``start_trainer``; ``launch(plan)`` starts every server, then
    every trainer, and returns a `DistributedProgram` over them.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .errors import StepAborted

if TYPE_CHECKING:
    from .agreement import Fingerprint
    from .server_spec import ServerStatus

__all__ = ["PServer", "Pending", "Communicator", "Trainer", "CallResult", "StepAborted"]


class Pending:
    """An exchange under way; ``result(timeout)`` waits for its values."""

    def __init__(self, value: Any = None, error: BaseException | None = None):
        self._value, self._error = value, error

    def result(self, timeout: float | None = None) -> list[Any]:
        if self._error is not None:
            raise self._error
        return self._value

    def failed(self) -> bool:
        """Whether it is already known to have failed (then the step fails: there is no
        need to wait for other servers)."""
        return self._error is not None


class PServer(ABC):
    """One parameter server. Arrays cross this interface as NumPy arrays."""

    #: The protocol: the methods a server answers wherever it runs, each with what a
    #: caller waits for while it runs (for messages; formatted with the call's arguments).
    REMOTE_METHODS: ClassVar[dict[str, str]] = {
        "exchange": "step {step} (trainer {trainer_id})",
        "connect": "its answer to trainer {trainer_id} joining",
        "commit": "the commit of step {step}",
        "abort": "the abort of step {step}",
        "get": "parameter values",
        "set_values": "new values",
        "finish": "the end of trainer {trainer_id}",
        "status": "its status",
        "pid": "its process id",
        "prefetch": "table rows for trainer {trainer_id}",
        "table_rows": "the rows of its table shards",
        "set_table_rows": "new rows of table shard {name}",
        "table_stats": "the sizes of its table shards",
    }

    endpoint: str

    @property
    def role(self) -> str:
        return f"pserver {self.endpoint}"

    @abstractmethod
    def exchange(self, trainer_id: int, step: int, committed: int | None,
                 blocks: Mapping[str, Any], names: Sequence[str]) -> list[Any]:
        """Push a trainer's gradient blocks of ``step``; the values of ``names`` after it."""

    def submit_exchange(self, trainer_id: int, step: int, committed: int | None,
                        blocks: Mapping[str, Any], names: Sequence[str]) -> Pending:
        try:
            return Pending(self.exchange(trainer_id, step, committed, blocks, names))
        except Exception as e:  # handed to whoever waits for the result
            return Pending(error=e)

    def submit(self, method: str, *args: Any) -> Pending:
        """Start ``method(*args)`` of the protocol; the default runs it at once (a proxy
        sends it and returns, so a trainer can ask every server before waiting)."""
        try:
            return Pending(getattr(self, method)(*args))
        except Exception as e:  # handed to whoever waits for the result
            return Pending(error=e)

    @abstractmethod
    def prefetch(self, trainer_id: int, step: int | None, committed: int | None,
                 names: Sequence[str], ids: Sequence[Any], grow: bool) -> list[Any]:
        """The rows of ``ids[i]`` in table shard ``names[i]`` (see `ParameterServer`)."""

    @abstractmethod
    def table_rows(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """Each table shard's live ids and rows."""

    @abstractmethod
    def set_table_rows(self, name: str, rows: Mapping[str, Any]) -> None: ...

    @abstractmethod
    def table_stats(self) -> dict[str, tuple[int, int, int]]: ...

    @abstractmethod
    def connect(self, trainer_id: int, plan: Fingerprint) -> None:
        """A trainer joins; refused unless its plan of this server agrees."""

    @abstractmethod
    def commit(self, step: int) -> None: ...

    @abstractmethod
    def abort(self, step: int, reason: str) -> None: ...

    @abstractmethod
    def get(self, names: Sequence[str]) -> list[np.ndarray]:
        """Copies of committed values."""

    @abstractmethod
    def set_values(self, values: Mapping[str, Any]) -> None: ...

    @abstractmethod
    def finish(self, trainer_id: int, error: str | None = None) -> None: ...

    @abstractmethod
    def status(self) -> ServerStatus: ...

    @abstractmethod
    def pid(self) -> int:
        """The process the server's state lives in."""

    def close(self) -> None:  # noqa: B027 (optional: most servers hold nothing to release)
        """Release the server."""


class Communicator(ABC):
    """The trainer side of RPC, as the dist op kernels see it."""

    @abstractmethod
    def send(self, trainer_id: int, names: Sequence[str], arrays: Sequence[Any],
             epmap: Sequence[str], sync: bool) -> None:
        """Send ``arrays[i]`` to server ``epmap[i]`` under ``names[i]``."""

    @abstractmethod
    def send_barrier(self, trainer_id: int, endpoints: Sequence[str]) -> None:
        """This trainer has sent all of its gradients for the step to these servers."""

    @abstractmethod
    def recv(self, trainer_id: int, names: Sequence[str], epmap: Sequence[str]) -> list[Any]:
        """The value of ``names[i]`` on server ``epmap[i]`` after the step."""

    @abstractmethod
    def fetch_barrier(self, trainer_id: int, endpoints: Sequence[str]) -> None:
        """This trainer has fetched the step's parameters from these servers."""


@dataclass
class CallResult:
    """What a trainer's call ended with: its value, or its error; ``exchanged`` says whether
    the trainer received the step's values from every server (then the step must be
    committed, whatever happened after)."""
    value: Any = None
    error: BaseException | None = None
    exchanged: bool = False


class Trainer(ABC):
    """An engine's handle on one trainer (its compiled trainer program)."""

    trainer_id: int

    @abstractmethod
    def call(self, method: str, args: Sequence[Any], step: int | None
             ) -> Future[CallResult]:
        """Run ``method`` with its data-var values as step ``step`` (None: a method that
        talks to no server), after every call submitted before it."""

    @abstractmethod
    def get_var(self, name: str) -> np.ndarray: ...

    @abstractmethod
    def set_vars(self, values: Mapping[str, np.ndarray]) -> Future[None]:
        """Overwrite persistable vars once the calls submitted before have ended, and
        forget which step the trainer last saw committed."""

    @abstractmethod
    def tensor_state(self) -> dict[str, np.ndarray]:
        """Every initialised persistable array (not readers or the communicator)."""

    @abstractmethod
    def close(self) -> None: ...
