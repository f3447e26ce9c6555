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
  here is one ``ray start --head --block`` process and its descendants, in its own temporary
  directory; `RayHead.stop` ends exactly those, by PID.
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import DistributedError

#: Environment variables every process of a private local cluster needs.
LOOPBACK_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
DEFAULT_OBJECT_STORE = 256 << 20
START_TIMEOUT = 120.0
STOP_GRACE = 3.0


def import_ray() -> Any:
    """``ray``, or an error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise DistributedError("the Ray engine needs Ray: pip install "
                               "'fluid_interactive[distributed]' (ray==2.60.0)") from None
    return ray


def prepare_env(local: bool, environ: dict | None = None) -> None:
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
    """A private single-machine Ray cluster: 127.0.0.1 only, its own temporary directory,
    a bounded object store, token authentication, stopped by PID.

    Ray reads ``RAY_AUTH_MODE`` when it is imported: a process that joins the cluster
    itself must have ``RAY_AUTH_MODE=token`` in its environment before ``import ray``
    (pass ``token`` to use a token chosen before then)."""

    def __init__(self, *, num_cpus: int | None = None,
                 object_store_bytes: int = DEFAULT_OBJECT_STORE,
                 temp_root: str | None = None, token: str | None = None):
        self.num_cpus = num_cpus if num_cpus is not None else max(2, os.cpu_count() or 2)
        self.object_store_bytes = object_store_bytes
        self.temp_dir = tempfile.mkdtemp(prefix="fluid-ray-", dir=_short_dir(temp_root))
        self.token = token or secrets.token_hex(32)
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._proc: subprocess.Popen | None = None
        self._pids: set[int] = set()

    def env(self) -> dict[str, str]:
        """What a process joining this cluster needs in its environment."""
        return {"RAY_ADDRESS": self.address, "RAY_AUTH_MODE": "token",
                "RAY_AUTH_TOKEN": self.token, LOOPBACK_VAR: "0"}

    def start(self, timeout: float = START_TIMEOUT) -> RayHead:
        ports = {f"--{name}": free_port() for name in (
            "node-manager-port", "object-manager-port", "dashboard-agent-listen-port",
            "dashboard-agent-grpc-port", "runtime-env-agent-port", "metrics-export-port")}
        args = [_ray_executable(), "start", "--head", "--block", f"--port={self.port}",
                "--node-ip-address=127.0.0.1", f"--num-cpus={self.num_cpus}",
                f"--object-store-memory={self.object_store_bytes}",
                "--include-dashboard=false", "--include-log-monitor=false",
                "--disable-usage-stats",
                f"--temp-dir={self.temp_dir}"] + [f"{k}={v}" for k, v in ports.items()]
        env = dict(os.environ, **self.env())
        env.pop("RAY_ADDRESS")
        # Ray gives its raylet 10 s to register; a busy machine may need longer.
        env.setdefault("RAY_raylet_start_wait_time_s", str(int(timeout)))
        log = open(os.path.join(self.temp_dir, "head.log"), "w+")  # noqa: SIM115 (the child keeps it)
        self._proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        self._pids.add(self._proc.pid)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            log.seek(0)
            text = log.read()
            if "Ray runtime started" in text:
                log.close()
                self._remember_children()
                return self
            if self._proc.poll() is not None:
                log.close()
                status = self._proc.returncode
                self.stop()
                raise DistributedError(f"ray start --head exited with status {status}:\n"
                                       f"{text[-2000:]}")
            time.sleep(0.1)
        log.close()
        self.stop()
        raise DistributedError(f"Ray did not start within {timeout:g}s (log in "
                               f"{self.temp_dir}/head.log)")

    def _remember_children(self) -> None:
        """Add the head's descendants, and the processes that name this cluster's own
        temporary directory (a failed `ray start` leaves its servers behind, re-parented)."""
        psutil = _psutil()
        if psutil is None or self._proc is None:
            return
        try:
            self._pids.update(p.pid for p in psutil.Process(self._proc.pid).children(
                recursive=True))
        except psutil.Error:
            pass
        me = os.getpid()
        for p in psutil.process_iter(["cmdline"]):
            try:
                if p.pid != me and any(self.temp_dir in a for a in p.info["cmdline"] or ()):
                    self._pids.add(p.pid)
                    self._pids.update(c.pid for c in p.children(recursive=True))
            except psutil.Error:
                pass

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def pids(self) -> set[int]:
        """Every process of this cluster known now (the head and its descendants)."""
        self._remember_children()
        return set(self._pids)

    def stop(self, grace: float = STOP_GRACE) -> None:
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
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> RayHead:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _psutil() -> Any:
    try:
        import psutil
    except ImportError:
        return None
    return psutil


def alive(pids: Iterable[int]) -> list[int]:
    """The processes among ``pids`` still running (zombies count as gone)."""
    psutil = _psutil()
    out = []
    for pid in pids:
        if psutil is not None:
            try:
                p = psutil.Process(pid)
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(pid)
            except psutil.Error:
                pass
        else:
            try:
                os.kill(pid, 0)
                out.append(pid)
            except OSError:
                pass
    return out


def stop_pids(pids: Iterable[int], grace: float = STOP_GRACE) -> list[int]:
    """SIGTERM each process, wait up to ``grace`` seconds, SIGKILL what is left. Returns
    the PIDs that needed SIGKILL."""
    pids = [p for p in set(pids) if p != os.getpid()]
    for pid in alive(pids):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    left = alive(pids)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = alive(left)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    while alive(left) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def connect(address: str | None, namespace: str, environ: Mapping | None = None) -> Any:
    """``ray`` connected to the cluster at ``address`` (``RAY_ADDRESS`` when None) in
    ``namespace``; an already connected process keeps its connection."""
    env = os.environ if environ is None else environ
    address = address or env.get("RAY_ADDRESS")
    if not address:
        raise DistributedError("no Ray cluster to join: set RAY_ADDRESS=host:port (and "
                               "RAY_AUTH_TOKEN for a cluster with token authentication)")
    prepare_env(local=address.split(":")[0] in ("127.0.0.1", "localhost"))
    ray = import_ray()
    if not ray.is_initialized():
        try:
            ray.init(address=address, namespace=namespace, log_to_driver=False,
                     configure_logging=False)
        except Exception as e:
            raise DistributedError(
                f"cannot join the Ray cluster at {address}: {type(e).__name__}: {e}\n  A "
                f"cluster started with `ray start --head` wants RAY_AUTH_MODE=token and its "
                f"RAY_AUTH_TOKEN in this process's environment") from e
    return ray
