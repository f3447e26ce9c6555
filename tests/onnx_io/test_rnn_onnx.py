"""lstm and gru as ONNX LSTM and GRU: onnxruntime gives what ``infer`` gives at several
batch sizes, sequence lengths and lengths vectors, and the file imports back as the same
ops; PyTorch's torch.onnx.export of nn.LSTM
and nn.GRU models imports, gives PyTorch's outputs, and fine-tunes."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import fluid
from fluid_interactive.errors import OnnxError
from fluid_interactive.onnx import export_onnx
from tests.onnx_io.helpers import canonical_ops, check_exported, onnx

torch = pytest.importorskip("torch")

H, D = 5, 3


def seq_program(kind: str, attrs: dict, with_lengths: bool):
    class Net(fluid.Program):
        @fluid.network("x", "n")
        def infer(self, x, n):
            x = fluid.layers.data("x", shape=[-1, -1, D], dtype="float32",
                                  append_batch_size=False)
            n = fluid.layers.data("n", shape=[-1], dtype="int64", append_batch_size=False)
            lengths = n if with_lengths else None
            if kind == "lstm":
                proj = fluid.layers.fc(x, 4 * H, num_flatten_dims=2)
                return fluid.layers.dynamic_lstm(proj, 4 * H, lengths=lengths, **attrs)[0]
            proj = fluid.layers.fc(x, 3 * H, num_flatten_dims=2)
            return fluid.layers.dynamic_gru(proj, H, lengths=lengths, **attrs)
    prog = Net().Compile(seed=1)
    rng = np.random.default_rng(2)
    prog.set_parameters({k: (0.6 * rng.standard_normal(v.shape)).astype(np.float32)
                         for k, v in prog.parameters().items()})
    return prog


CASES = [("lstm", {}), ("lstm", {"is_reverse": True}), ("lstm", {"use_peepholes": False}),
         ("lstm", {"gate_activation": "tanh", "cell_activation": "relu"}),
         ("gru", {}), ("gru", {"origin_mode": True}), ("gru", {"is_reverse": True}),
         ("gru", {"candidate_activation": "relu"})]


@pytest.mark.parametrize("kind,attrs", CASES)
@pytest.mark.parametrize("with_lengths", [False, True], ids=["full", "lengths"])
def test_onnxruntime_equals_infer(kind, attrs, with_lengths, tmp_path):
    prog = seq_program(kind, attrs, with_lengths)
    path = str(tmp_path / "rnn.onnx")
    rng = np.random.default_rng(3)
    back = check_exported(prog, path, [
        {"x": rng.standard_normal((batch, time, D)).astype(np.float32),
         "n": rng.integers(0, time + 1, batch).astype(np.int64)}
        for batch, time in ((1, 4), (3, 7), (8, 2))], atol=1e-6)
    types = [node.op_type for node in onnx.load(path).graph.node]
    assert types.count(kind.upper()) == 1
    def ops(compiled, op_type):   # the ops' text, their vars' numbers left out
        return [re.sub(r"\b(v|in)\d+", "v", op) for op in canonical_ops(compiled)
                if f"= {op_type}(" in op]
    assert ops(back, kind) == ops(prog, kind)   # the op as it was, attrs and slots
    assert ops(back, "mul") == ops(prog, "mul")   # fc's projection, and no other one


def test_the_cell_sequence_does_not_export():
    class Cells(fluid.Program):
        @fluid.network("x")
        def infer(self, x):
            x = fluid.layers.data("x", shape=[4, D], dtype="float32")
            return fluid.layers.dynamic_lstm(fluid.layers.fc(x, 4 * H, num_flatten_dims=2),
                                             4 * H)[1]
    with pytest.raises(OnnxError, match=r"no ONNX counterpart for its output .*Cell|"
                                         r"output 'lstm_0.tmp_1'"):
        export_onnx(Cells().Compile(seed=0), None)


def test_gru_with_tanh_gates_in_paddles_mode_says_why_it_does_not_export():
    prog = seq_program("gru", {"gate_activation": "tanh"}, False)
    with pytest.raises(OnnxError, match="origin_mode=False with a gate activation"):
        export_onnx(prog, None)


# --- PyTorch's exports in ---------------------------------------------------------------------

T = 6


class TorchRNN(torch.nn.Module):
    """nn.LSTM or nn.GRU, batch-first, then a linear head on the last step (``last``: on
    the final state PyTorch returns)."""

    def __init__(self, kind: str, bidirectional: bool, last: bool):
        super().__init__()
        self.rnn = getattr(torch.nn, kind)(D, H, batch_first=True, bidirectional=bidirectional)
        self.head = torch.nn.Linear(H * (2 if bidirectional else 1), 2)
        self.last = last

    def forward(self, x):
        y, state = self.rnn(x)
        if self.last:
            h = state[0] if isinstance(state, tuple) else state
            return self.head(h.permute(1, 0, 2).flatten(1))
        return self.head(y[:, -1:].squeeze(1))


def torch_file(tmp_path, kind, bidirectional=False, last=False, seed=0):
    torch.manual_seed(seed)
    model = TorchRNN(kind, bidirectional, last).eval()
    path = str(tmp_path / f"{kind}.onnx")
    with warnings.catch_warnings():
        # the legacy (TorchScript) exporter is deprecated, traces with TracerWarnings, and
        # notes that an RNN exported with a batch of 2 needs its initial state as an input
        # to run other batch sizes in onnxruntime; the import reads PyTorch's zero state as
        # ours, so any batch size runs
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(2, T, D),), path, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}},
                          opset_version=17, dynamo=False)
    return model, path


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("bidirectional,last", [(False, False), (False, True), (True, False),
                                                (True, True)])
def test_torch_exports_import_with_torchs_outputs(tmp_path, kind, bidirectional, last):
    model, path = torch_file(tmp_path, kind, bidirectional, last)
    prog = fluid.import_onnx(path)
    assert kind.lower() in {op.type for op in prog.methods["infer"].block.ops}
    for batch in (1, 5):
        x = np.random.default_rng(batch).standard_normal((batch, T, D)).astype(np.float32)
        with torch.no_grad():
            want = model(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(prog.infer(x), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_an_imported_torch_rnn_fine_tunes(tmp_path, kind):
    _, path = torch_file(tmp_path, kind)
    Base = fluid.onnx_program(path)

    class FineTune(Base):
        @fluid.network("x", "y")
        def train_step(self, x, y):
            x = fluid.layers.data("x", shape=[T, D], dtype="float32")
            y = fluid.layers.data("y", shape=[2], dtype="float32")
            loss = fluid.layers.mean(fluid.layers.square_error_cost(self.onnx_graph(x), y))
            fluid.optimizer.Adam(learning_rate=0.02).minimize(loss)
            return loss

    prog = FineTune().Compile(seed=0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, T, D)).astype(np.float32)
    y = np.stack([x[:, :, 0].sum(1), x[:, -1, 1]], 1).astype(np.float32)
    before = {k: v.copy() for k, v in prog.parameters().items()}
    losses = [prog.train_step(x, y) for _ in range(60)]
    assert losses[-1] < 0.5 * losses[0]
    recurrent = [k for k in before if k.endswith(".fw") and
                 before[k].shape[0] == H and before[k].shape[1] in (3 * H, 4 * H)]
    assert recurrent and not np.allclose(prog.parameters()[recurrent[0]], before[recurrent[0]])
    np.testing.assert_allclose(prog.infer(x), prog.infer(x))   # infer shares the tuned weights
