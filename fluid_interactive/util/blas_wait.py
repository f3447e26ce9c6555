"""How long OpenBLAS's idle threads spin before they sleep: set before NumPy loads it.

After a threaded call, OpenBLAS's worker threads spin, waiting for the next one, for 2^28
cycles (about 0.1 s) before they sleep. A kernel that splits its rows over threads
(backend/rows.py) then shares the second core with a spinning thread and gains nothing:
W6's step took 29 ms so, 24 ms with a spin of 2^18 cycles (about 0.1 ms, still longer
than the gap between two products of a step), and no other workload changed
(docs/benchmarks.md, "Rows split over threads"). OpenBLAS reads the spin
(``OPENBLAS_THREAD_TIMEOUT``, a power of two) once, when it loads, which NumPy's import
does. So importing this module (the package's first import) sets it when NumPy is not
imported yet and the variable is not set; once NumPy is imported it is too late, and the
kernels keep their rows whole.
"""
from __future__ import annotations

import os
import sys

VARIABLE = "OPENBLAS_THREAD_TIMEOUT"
SPIN = 18   # 2^18 cycles


def shorten() -> None:
    """Set the spin for the OpenBLAS NumPy will load (and every child process's), unless
    NumPy has loaded one already or the variable is set."""
    if "numpy" not in sys.modules:
        os.environ.setdefault(VARIABLE, str(SPIN))


shorten()
