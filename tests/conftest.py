import os
import sys

# The compiled kernel tier builds kernels in the background and caches them on disk: the
# suite runs NumPy kernels, and tests/kernels turns the tier on where it checks it.
os.environ.setdefault("FLUID_KERNELS", "numpy")

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (ROOT, os.path.join(ROOT, "extension"), os.path.join(ROOT, "tests")):
    if path not in sys.path:
        sys.path.insert(0, path)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def one_blas_thread(request):
    """Each test runs BLAS on one thread, so that a program's values are the same bits on
    every machine (a GEMM's last bits depend on the thread count, and plans from 65K
    elements up run on every core: backend/threads.py). A test of the policy itself asks
    for `thread_policy`."""
    from fluid_interactive.backend import threads
    threads.set_threads("measure" if "thread_policy" in request.fixturenames else 1)


@pytest.fixture
def thread_policy():
    """The measuring thread policy chooses the count (``set_threads("measure")``: large
    plans time one thread against every core)."""
