"""A busy machine on demand: a second process that burns one core while a benchmark runs
(``with busy_core(): ...``), as another user's job would."""
from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

_BURN = "import time\nwhile True:\n    sum(range(10000))\n"


@contextlib.contextmanager
def busy_core(on: bool = True) -> Iterator[None]:
    """Run the body beside a process spinning on one core (nothing when ``on`` is False)."""
    if not on:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", _BURN])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()
