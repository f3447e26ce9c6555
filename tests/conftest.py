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
