"""Records the ONNX node types of every model the ONNX tests export (into
`helpers.WRITTEN`), for test_zz_import_coverage.py."""
import pytest

from .helpers import record_written


@pytest.fixture(autouse=True, scope="session")
def _record_written_node_types():
    from fluid_interactive.onnx import export as module
    build = module.build_model

    def recording(*args, **kwargs):
        model = build(*args, **kwargs)
        record_written(model.graph)
        return model
    module.build_model = recording
    yield
    module.build_model = build
