"""Ray's own output in the role processes, kept out of what `fluid run` shows.

Where it can, the code stops the noise at its source: every result of a call to an actor
is read, including the late outcome of a call whose wait gave up (`ray_proxy.
read_when_done`), so Ray has no "Unhandled error" to report for it. What cannot be stopped
there is left out here:

* `quiet_unread_results`: in a role process, Ray's report of a result nobody read
  (``Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): ...``, a log record
  of several lines) is dropped: a role reads what it needs, so such a result belongs to a
  call it abandoned when it failed or was told to stop, and that failure is reported
  already;
* `is_ray_log`: lines in the format of Ray's own logging (its C++ core's
  ``[2026-12-02 08:15:07,141 W 1023 1023] core_worker.cc:451: ...`` and its Python
  loggers' ``2026-12-02 08:15:07,141<TAB>WARNING worker.py:1234 -- ...``) are left out
  of the launcher's relay and counted; the end of the role's report says how many.
"""
from __future__ import annotations

import logging
import re

__all__ = ["is_ray_log", "quiet_unread_results", "UNREAD"]

_CPP = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [DIWEF] \d+ \d+\] \S+:\d+: ")
_PYTHON = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\t(DEBUG|INFO|WARNING|ERROR|"
                     r"CRITICAL) \S+\.py:\d+ -- ")
#: How Ray's report of a result nobody read starts.
UNREAD = "Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1')"


def is_ray_log(line: str) -> bool:
    """Whether ``line`` is one of Ray's own log lines (see the module docstring)."""
    return bool(_CPP.match(line) or _PYTHON.match(line))


class _DropUnread(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(UNREAD)


_DROP = _DropUnread()


def quiet_unread_results() -> None:
    """Drop Ray's reports of results nobody read in this process (idempotent)."""
    logging.getLogger("ray._private.worker").addFilter(_DROP)
