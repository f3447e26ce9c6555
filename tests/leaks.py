"""Leak checks for threads and file descriptors.

A reader's thread is stopped by its finalizer, and a finalizer runs wherever the garbage
collector happens to run: possibly inside another reader's thread, in which case a
``gc.collect()`` from the test returns at once while that collection is still stopping
threads. So the check polls until the counts are back to the baseline, with a generous
deadline: a thread that really leaked never ends and still fails the test."""
import gc
import os
import threading
import time


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def settles(threads: int, fds: int, timeout: float = 20.0) -> tuple[int, int]:
    """Collect garbage until no more than ``threads`` threads and ``fds`` descriptors are
    open, or ``timeout`` seconds pass; returns the last counts seen."""
    deadline = time.monotonic() + timeout
    while True:
        gc.collect()
        now = threading.active_count(), open_fds()
        if (now[0] <= threads and now[1] <= fds) or time.monotonic() > deadline:
            return now
        time.sleep(0.02)
