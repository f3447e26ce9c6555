"""Starting, joining and stopping Ray, the way a shared machine needs it.

Three facts about Ray 2.60 shape this module (docs/distributed.md, "Ray"):

* On Linux Ray replaces 127.0.0.1 by the machine's routable address and listens on every
  interface; only ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, set before ``import ray``, keeps
  a single-machine cluster on the loopback interface. `prepare_env` sets it for local
  clusters (never when joining another machine's cluster).
* A cluster started with ``ray start --head`` turns token authentication on, and a process
  joining it must say so: every process needs ``RAY_AUTH_MODE=token`` and the cluster's
  ``RAY_AUTH_TOKEN``. `RayHead` makes a fresh token for each private cluster and hands the
  variables to the processes it starts (`RayHead.env`).
* ``ray stop`` stops every Ray on the machine, including other people's. A private cluster
  here is one ``ray start --head --block`` process and its descendants, in a session of
  their own and their own temporary directory; `RayHead.stop` ends exactly those, by PID,
  and a `watchdog.Watchdog` does the same if the process that started them dies first.
  Every port it listens on is chosen free (two of Ray's metrics ports and its client
  server's are fixed numbers unless set), so private clusters run side by side.

Starting is bounded, and says how it goes: ``ray start --head`` may take minutes on a
busy machine, so the wait scales with the machine's load (`start_timeout`, or
``FLUID_RAY_START_TIMEOUT`` seconds), progress is reported every few seconds, and a start
that fails or runs out of time reports the last lines of Ray's own log and leaves no
process behind.

Joining a cluster is bounded too: Ray retries an address where nothing answers for ever,
so `connect` first waits (up to the job's timeout) for the address to accept connections,
then gives ``ray.init`` what is left of it.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, NoReturn

from .errors import DistributedError
from .server_spec import DEFAULT_TIMEOUT
from .watchdog import GRACE, Watchdog, alive, psutil_or_none, stop_pids

#: Environment variables every process of a private local cluster needs.
LOOPBACK_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
DEFAULT_OBJECT_STORE = 256 << 20
#: Seconds a private cluster may take to start on a quiet machine (`start_timeout`).
START_TIMEOUT = 120.0
#: The most `start_timeout` grows to on a busy machine.
MAX_START_TIMEOUT = 900.0
START_TIMEOUT_VAR = "FLUID_RAY_START_TIMEOUT"
#: Seconds between progress reports while Ray starts.
PROGRESS_S = 10.0
#: Lines of Ray's log a failed start reports.
LOG_TAIL = 25


def start_timeout(environ: Mapping[str, str] | None = None) -> float:
    """Seconds to wait for ``ray start --head``: ``FLUID_RAY_START_TIMEOUT`` when set, else
    `START_TIMEOUT` times the machine's load per CPU (the last minute's) when above 1, at
    most `MAX_START_TIMEOUT`: at load 9 on 2 CPUs Ray's head takes several times as long."""
    env = os.environ if environ is None else environ
    raw = env.get(START_TIMEOUT_VAR)
    if raw:
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not value > 0:
            raise DistributedError(f"{START_TIMEOUT_VAR}={raw!r} is not a positive number of "
                                   f"seconds")
        return value
    try:
        busy = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        busy = 0.0
    return min(MAX_START_TIMEOUT, START_TIMEOUT * max(1.0, busy))


def import_ray() -> Any:
    """``ray``, or an error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise DistributedError("the Ray engine needs Ray: pip install "
                               "'fluid_interactive[distributed]' (ray==2.60.0)") from None
    return ray


def prepare_env(local: bool, environ: MutableMapping[str, str] | None = None) -> None:
    """Before ``import ray``: pin a local cluster to 127.0.0.1 and make the auth mode
    explicit (Ray clients otherwise do not send the token a cluster asks for)."""
    env = os.environ if environ is None else environ
    if local:
        env.setdefault(LOOPBACK_VAR, "0")
    if env.get("RAY_AUTH_TOKEN"):
        env.setdefault("RAY_AUTH_MODE", "token")


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _short_dir(root: str | None) -> str | None:
    """Ray puts Unix sockets under its temporary directory, and their paths may not exceed
    107 bytes: a long temporary root falls back to /tmp."""
    root = root or tempfile.gettempdir()
    if len(root) > 40 and os.path.isdir("/tmp"):
        return "/tmp"
    return root


def _ray_executable() -> str:
    exe = os.path.join(os.path.dirname(sys.executable), "ray")
    return exe if os.path.exists(exe) else (shutil.which("ray") or "ray")


class RayHead:
    """A private single-machine Ray cluster: 127.0.0.1 only, its own temporary directory
    (``name`` in its name), a bounded object store, token authentication, free ports,
    stopped by PID, and cleaned up by a watchdog if this process dies first (pass the
    owner's ``watchdog`` to share one).

    Ray reads ``RAY_AUTH_MODE`` when it is imported: a process that joins the cluster
    itself must have ``RAY_AUTH_MODE=token`` in its environment before ``import ray``
    (pass ``token`` to use a token chosen before then)."""

    def __init__(self, *, num_cpus: int | None = None,
                 object_store_bytes: int = DEFAULT_OBJECT_STORE,
                 temp_root: str | None = None, token: str | None = None, name: str = "",
                 watchdog: Watchdog | None = None):
        self.num_cpus = num_cpus if num_cpus is not None else max(2, os.cpu_count() or 2)
        self.object_store_bytes = object_store_bytes
        self.temp_dir = tempfile.mkdtemp(prefix=f"fluid-ray-{name + '-' if name else ''}",
                                         dir=_short_dir(temp_root))
        self.token = token or secrets.token_hex(32)
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._proc: subprocess.Popen | None = None
        self._pids: set[int] = set()
        self._own_watchdog = watchdog is None
        self._watchdog = watchdog

    def env(self) -> dict[str, str]:
        """What a process joining this cluster needs in its environment."""
        return {"RAY_ADDRESS": self.address, "RAY_AUTH_MODE": "token",
                "RAY_AUTH_TOKEN": self.token, LOOPBACK_VAR: "0"}

    def _command(self) -> list[str]:
        ports = {f"--{name}": free_port() for name in (
            "node-manager-port", "object-manager-port", "dashboard-agent-listen-port",
            "dashboard-agent-grpc-port", "runtime-env-agent-port", "metrics-export-port")}
        if importlib.util.find_spec("grpc") is not None:
            # With grpc installed `ray start` runs its client server, on 10001 unless told.
            ports["--ray-client-server-port"] = free_port()
        return [_ray_executable(), "start", "--head", "--block", f"--port={self.port}",
                "--node-ip-address=127.0.0.1", f"--num-cpus={self.num_cpus}",
                f"--object-store-memory={self.object_store_bytes}",
                "--include-dashboard=false", "--include-log-monitor=false",
                "--disable-usage-stats",
                f"--temp-dir={self.temp_dir}"] + [f"{k}={v}" for k, v in ports.items()]

    def _environment(self, timeout: float) -> dict[str, str]:
        env = dict(os.environ, **self.env())
        env.pop("RAY_ADDRESS")
        # Ray gives its raylet 10 s to register, and the raylet gives the dashboard agent
        # 30 s to write its port file (then it aborts: "Timed out waiting for file
        # .../dashboard_agent_listen_port"); a busy machine may need longer for both.
        env.setdefault("RAY_raylet_start_wait_time_s", str(int(timeout)))
        env.setdefault("RAY_agent_register_timeout_ms", str(int(timeout * 1000)))
        # The autoscaler's and the dashboard's metrics servers listen on fixed ports
        # (44217, 44227) unless these say otherwise.
        env["AUTOSCALER_METRIC_PORT"] = str(free_port())
        env["DASHBOARD_METRIC_PORT"] = str(free_port())
        return env

    def start(self, timeout: float | None = None,
              progress: Callable[[str], None] | None = None) -> RayHead:
        """Start the cluster within ``timeout`` seconds (default: `start_timeout`),
        telling ``progress`` every `PROGRESS_S` seconds how long it has waited. On
        failure every process it started is stopped and the error quotes Ray's log."""
        timeout = start_timeout() if timeout is None else timeout
        if self._watchdog is None:
            self._watchdog = Watchdog()
        self._watchdog.guard_dir(self.temp_dir)
        log = open(os.path.join(self.temp_dir, "head.log"), "w+")  # noqa: SIM115 (the child keeps it)
        self._proc = subprocess.Popen(self._command(), env=self._environment(timeout),
                                      stdout=log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        self._watchdog.guard_session(self._proc.pid)
        self._pids.add(self._proc.pid)
        try:
            self._await_start(log, timeout, progress)
        finally:
            log.close()
        self._remember_children()
        return self

    def _await_start(self, log: Any, timeout: float,
                     progress: Callable[[str], None] | None) -> None:
        assert self._proc is not None
        started = time.monotonic()
        reported = started
        while (waited := time.monotonic() - started) < timeout:
            log.seek(0)
            text = log.read()
            if "Ray runtime started" in text:
                return
            if self._proc.poll() is not None:
                self._fail(f"ray start --head exited with status {self._proc.returncode}",
                           text)
            if progress is not None and time.monotonic() - reported >= PROGRESS_S:
                reported = time.monotonic()
                progress(f"ray: still starting after {waited:.0f}s (waiting up to "
                         f"{timeout:.0f}s; {START_TIMEOUT_VAR} sets the limit)")
            time.sleep(0.1)
        log.seek(0)
        self._fail(f"Ray did not start within {timeout:g}s (set {START_TIMEOUT_VAR} to "
                   f"wait longer on a busy machine)", log.read())

    def _fail(self, what: str, log_text: str) -> NoReturn:
        """Stop every process of the cluster (its log goes with its directory), then
        raise ``what`` with the log's last lines."""
        self.stop()
        tail = "\n".join(log_text.rstrip().splitlines()[-LOG_TAIL:]) or "(Ray wrote nothing)"
        raise DistributedError(f"{what}; no process of it is left. The last lines of its "
                               f"log:\n{tail}")

    def _remember_children(self) -> None:
        """Add the head's descendants and the other processes of its session (Ray's
        workers), and those that name this cluster's own temporary directory (a failed
        `ray start` leaves its servers behind, re-parented)."""
        psutil = psutil_or_none()
        if psutil is None or self._proc is None:
            return
        head, me = self._proc.pid, os.getpid()
        for p in psutil.process_iter(["cmdline"]):
            try:
                if p.pid != me and (os.getsid(p.pid) == head or any(
                        self.temp_dir in a for a in p.info["cmdline"] or ())):
                    self._pids.add(p.pid)
                    self._pids.update(c.pid for c in p.children(recursive=True))
            except (psutil.Error, OSError):
                pass

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def pids(self) -> set[int]:
        """Every process of this cluster known now (the head and its descendants)."""
        self._remember_children()
        return set(self._pids)

    def stop(self, grace: float = GRACE) -> None:
        """Stop this cluster's processes, by PID: SIGTERM, then SIGKILL after ``grace``
        seconds (some of Ray's servers ignore SIGTERM for longer); then remove its
        temporary directory."""
        if self._proc is not None:
            self._remember_children()
            stop_pids(self._pids, grace)
            try:
                self._proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
            self._proc = None
        _remove_tree(self.temp_dir, grace)
        if self._own_watchdog and self._watchdog is not None:
            self._watchdog.dismiss()
            self._watchdog = None

    def __enter__(self) -> RayHead:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def connect(address: str | None, namespace: str, environ: Mapping[str, str] | None = None,
            timeout: float = DEFAULT_TIMEOUT) -> Any:
    """``ray`` connected to the cluster at ``address`` (``RAY_ADDRESS`` when None) in
    ``namespace``, within ``timeout`` seconds; an already connected process keeps its
    connection."""
    env = os.environ if environ is None else environ
    address = address or env.get("RAY_ADDRESS")
    if not address:
        raise DistributedError("no Ray cluster to join: set RAY_ADDRESS=host:port (and "
                               "RAY_AUTH_TOKEN for a cluster with token authentication)")
    prepare_env(local=address.split(":")[0] in ("127.0.0.1", "localhost"))
    ray = import_ray()
    if ray.is_initialized():
        return ray
    deadline = time.monotonic() + timeout
    _await_listener(address, deadline, timeout)
    _init_within(ray, address, namespace, deadline, timeout)
    return ray


def _await_listener(address: str, deadline: float, timeout: float) -> None:
    """Wait until something accepts connections at ``host:port`` (Ray would retry an
    address where nothing listens for ever)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return   # not host:port (a ray:// address): leave it to Ray
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=1.0):
                return
        except OSError as e:
            if time.monotonic() >= deadline:
                raise DistributedError(
                    f"no Ray cluster answers at {address} (RAY_ADDRESS): waited {timeout:g}s "
                    f"(FLUID_TIMEOUT), last error: {e}; start the cluster first (ray start "
                    f"--head) or correct the address") from None
            time.sleep(0.2)


def _remove_tree(path: str, grace: float) -> None:
    """Remove a folder that a process that is just exiting may still write to (Ray's
    servers flush their logs as they go)."""
    deadline = time.monotonic() + grace
    shutil.rmtree(path, ignore_errors=True)
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.1)
        shutil.rmtree(path, ignore_errors=True)


class _Without(logging.Filter):
    """Drops log records that start with ``prefix``."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefix)


def _init_within(ray: Any, address: str, namespace: str, deadline: float,
                 timeout: float) -> None:
    """``ray.init`` on a thread, waited for until ``deadline``: Ray's own retries are
    longer than any job's timeout."""
    outcome: list[BaseException | None] = []

    def join() -> None:
        try:
            ray.init(address=address, namespace=namespace, log_to_driver=False,
                     configure_logging=False)
            outcome.append(None)
        except BaseException as e:  # handed to the waiting thread
            outcome.append(e)

    # Ray warns that it sets no SIGTERM handler off the main thread: the role processes
    # install their own (`stopping`).
    quiet = _Without("SIGTERM handler is not set")
    logging.getLogger("ray._private.worker").addFilter(quiet)
    thread = threading.Thread(target=join, name="fluid-ray-init", daemon=True)
    thread.start()
    thread.join(max(0.1, deadline - time.monotonic()))
    logging.getLogger("ray._private.worker").removeFilter(quiet)
    hint = ("a cluster started with `ray start --head` wants RAY_AUTH_MODE=token and its "
            "RAY_AUTH_TOKEN in this process's environment")
    if not outcome:
        raise DistributedError(f"joining the Ray cluster at {address} did not finish within "
                               f"{timeout:g}s (FLUID_TIMEOUT); is it a Ray cluster? {hint}")
    error = outcome[0]
    if error is not None:
        raise DistributedError(f"cannot join the Ray cluster at {address}: "
                               f"{type(error).__name__}: {error}\n  {hint}") from error
    _restore_python_sigterm()


def _restore_python_sigterm() -> None:
    """Ray's core worker installs a C-level SIGTERM handler that prints a C++ stack trace
    and aborts, under the handler Python believes it has: put Python's back (the default
    ends the process quietly; the role processes install their own, `stopping`)."""
    if threading.current_thread() is not threading.main_thread():
        return
    handler = signal.getsignal(signal.SIGTERM)
    if handler is not None:
        signal.signal(signal.SIGTERM, handler)


__all__ = ["RayHead", "connect", "import_ray", "prepare_env", "free_port", "alive",
           "stop_pids", "LOOPBACK_VAR"]
