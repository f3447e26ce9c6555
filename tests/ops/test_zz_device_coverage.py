"""Every op with a kernel ran on the device array module (tests/ops/device.py) during this
session's op tests: named last so that pytest runs it after them."""
import os
import sys

import pytest

from fluid_interactive.ops.registry import get_spec, registered_ops

HERE = os.path.dirname(os.path.abspath(__file__))


def test_every_kernel_ran_on_the_device(request):
    ran = {os.path.basename(str(item.path)) for item in request.session.items}
    suites = {f for f in os.listdir(HERE) if f.startswith("test_") and f.endswith(".py")}
    if not suites <= ran:
        pytest.skip("runs with the whole tests/ops folder (the op tests fill the record)")
    # the harness may be imported as ops.harness or as tests.ops.harness: both record
    covered = set().union(*(m.COVERED for name, m in list(sys.modules.items())
                            if name.endswith("ops.device") and hasattr(m, "COVERED")))
    missing = sorted(t for t in registered_ops() if get_spec(t).kernel is not None
                     and get_spec(t).host_access != "io" and t not in covered)
    assert not missing, f"ops whose kernels never ran on the device: {missing}"
