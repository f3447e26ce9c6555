"""A requested stop (SIGINT, SIGTERM) of a role process or the launcher, as an exception
that unwinds to the code that cleans up.

Ray installs its own handler for SIGTERM (which prints a C++ stack trace), and Python's
default for SIGINT raises KeyboardInterrupt wherever the process is; both skip the clean-up
of a server's state and of the processes a launcher started. Within `stop_on_signals` the
first of these signals raises `Stopped` in the main thread; later ones are ignored, so the
clean-up runs once, undisturbed.
"""
from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(BaseException):
    """A stop was requested by a signal (a BaseException, so that no ``except Exception``
    on the way swallows it)."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def status(self) -> int:
        """The exit status a shell reports for a process ended by this signal."""
        return 128 + self.signum


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within: SIGINT or SIGTERM raises `Stopped` (once; see the module docstring). The
    previous handlers come back afterwards."""
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    raised: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if not raised:
            raised.append(signum)
            raise Stopped(signum)

    for s in STOP_SIGNALS:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def exit_status(returncode: int | None) -> int:
    """A child's ``returncode`` as an exit status: ``-N`` (killed by signal N) becomes
    ``128 + N``, as a shell reports it (``sys.exit(-9)`` would exit with 247)."""
    if returncode is None:
        return 1
    return 128 - returncode if returncode < 0 else returncode


def describe_exit(returncode: int) -> str:
    """``'exited with status 1'`` or ``'was killed by SIGKILL'``."""
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"
