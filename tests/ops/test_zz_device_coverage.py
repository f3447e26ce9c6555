"""Every op with a kernel ran on the device array module (tests/ops/device.py) during this
session's op tests: named last so that pytest runs it after them."""
import os

from fluid_interactive.ops.registry import get_spec, registered_ops
from tests.session_record import recorded, require_whole_folder

HERE = os.path.dirname(os.path.abspath(__file__))


def test_every_kernel_ran_on_the_device(request):
    require_whole_folder(request, HERE)
    # the harness may be imported as ops.harness or as tests.ops.harness: both record
    covered = recorded("ops.device", "COVERED")
    missing = sorted(t for t in registered_ops() if get_spec(t).kernel is not None
                     and get_spec(t).host_access != "io" and t not in covered)
    assert not missing, f"ops whose kernels never ran on the device: {missing}"
