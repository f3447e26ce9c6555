"""ONNX from PyTorch as docs/export.md writes it: ``torch.onnx.export(model, (x,), path)``
(the default exporter, which needs onnxscript, keeps most weights in a file beside the
model and fixes the example's batch size in reshapes) imports and matches PyTorch at any
batch size; the older exporter (``dynamo=False``) too."""
import warnings

import numpy as np
import pytest

import fluid
from tests.onnx_io.helpers import onnx  # noqa: F401  (skips without onnx)

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(4 * 4 * 4, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn(self.conv(x))))
        return torch.softmax(self.fc(torch.flatten(x, 1)), dim=-1)


@pytest.mark.parametrize("options", [{}, {"dynamo": False}], ids=["default", "dynamo=False"])
def test_a_pytorch_model_exported_as_the_docs_say_imports_and_matches(tmp_path, options):
    torch.manual_seed(0)
    model = SmallCNN().eval()
    path = str(tmp_path / "cnn.onnx")
    with warnings.catch_warnings():   # the exporters' own deprecation and progress notes
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(2, 1, 8, 8),), path, **options)
    net = fluid.import_onnx(path)
    for batch in (1, 2, 7):
        x = torch.randn(batch, 1, 8, 8)
        with torch.no_grad():
            want = model(x).numpy()
        np.testing.assert_allclose(net.infer(x.numpy()), want, rtol=1e-5, atol=1e-6)
