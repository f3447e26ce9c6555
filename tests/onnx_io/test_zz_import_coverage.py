"""Every ONNX node type the export tests wrote has an import rule: what the exporter
writes imports back. Named last so that pytest runs it after the other ONNX tests (whose
exports conftest.py records)."""
import os

from fluid_interactive.onnx.import_program import import_onnx  # noqa: F401  (the rules)
from fluid_interactive.onnx.import_registry import IMPORT_RULES
from tests.session_record import recorded, require_whole_folder

HERE = os.path.dirname(os.path.abspath(__file__))


def test_every_node_type_an_export_wrote_imports(request):
    require_whole_folder(request, HERE)
    # the helpers may be imported as onnx_io.helpers or tests.onnx_io.helpers: both record
    written = recorded("onnx_io.helpers", "WRITTEN")
    assert {"Loop", "If", "SequenceInsert", "MatMul"} <= written   # the record is filled
    missing = sorted(written - set(IMPORT_RULES))
    assert not missing, f"node types the exporter writes that do not import: {missing}"
