"""Running a call that might block for ever (a named pipe), or a child process, with a
deadline."""
import os
import subprocess
import threading


def call_within(seconds: float, fn, *args):
    """``fn(*args)``'s result or exception, or AssertionError when it is still running
    after ``seconds`` (the call is left on a daemon thread)."""
    outcome = {}

    def run():
        try:
            outcome["value"] = fn(*args)
        except BaseException as e:
            outcome["error"] = e
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise AssertionError(f"{getattr(fn, '__name__', fn)} still blocked after {seconds} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def release_fifo(path) -> None:
    """Open a named pipe for writing once, so a reader blocked on it wakes up."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
    except OSError:
        pass


def finish(proc: subprocess.Popen, timeout: float = 600) -> str:
    """The standard output of the child ``proc`` once it exited with 0 (its standard
    error in the failure otherwise); it is killed after ``timeout`` seconds."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode == 0, err[-3000:]
    return out
